//! Workloads and the interface they are written against.
//!
//! A workload touches persistent memory only through [`Pm`]: the papers' TxBegin, TxCommit,
//! TxAbort, loads and stores at persistent addresses, and CheckMaxCommit
//! ([`Pm::last_durable_tx`]). It charges its own non-memory work with [`Pm::compute`]. Two back
//! ends implement it: the simulator ([`crate::sim::Sim`]) and plain memory ([`native::Native`]).

pub mod btree;
pub mod follow;
pub mod hash;
pub mod keys;
pub mod kv;
pub mod native;
pub mod pm;
pub mod rbtree;
pub mod sdg;
pub mod slab;
pub mod sps;
pub mod sqlite;
pub mod tpcc;
pub mod trace_replay;
pub mod tx_tape;
pub mod user;
pub mod ycsb;

use crate::rng::Rng;
/// The key-value workloads' populate, run_tx and data_bytes come from this trait.
use kv::KvStore as _;
use serde::{Deserialize, Serialize};

/// The lock id a workload takes over its whole structure on several cores (the line of
/// address 0: its header or allocator metadata, which nearly every transaction writes).
pub const STRUCTURE_LOCK: u64 = 0;

/// The default of a count that a configuration file may leave out (`trees`).
pub(crate) fn one() -> u64 {
    1
}

/// `n` copies of one structure side by side in the data area, `stride` bytes apart (a multiple
/// of 64, so that each copy's lines and lock ids are its own): the partitioned trees of
/// docs/workloads.md, "Locking on several cores". Key `k` lives in copy `k % n` as key `k / n`.
#[derive(Clone, Copy, Debug)]
pub struct Partitions {
    pub n: u64,
    pub stride: u64,
}

impl Partitions {
    /// `n` copies of a structure of `bytes` bytes; with one copy, exactly `bytes` (the
    /// single-structure layout).
    pub fn new(n: u64, bytes: u64) -> Partitions {
        Partitions { n, stride: if n == 1 { bytes } else { bytes.div_ceil(64) * 64 } }
    }
    /// Bytes of data area.
    pub fn bytes(&self) -> u64 {
        self.n * self.stride
    }
    /// The copy holding key `k`, and `k`'s key inside it.
    #[inline]
    pub fn route(&self, k: u64) -> (u64, u64) {
        (k % self.n, k / self.n)
    }
    /// Keys a copy holds at most out of `key_space`.
    pub fn keys_per(n: u64, key_space: u64) -> u64 {
        key_space.div_ceil(n)
    }
    /// Copy `t` of the structure, as a back end of its own (addresses from 0).
    #[inline]
    pub fn at<'a, P: Pm>(&self, pm: &'a mut P, t: u64) -> Part<'a, P> {
        Part { pm, base: t * self.stride }
    }
    /// Copy `t`'s bytes of a data area.
    pub fn slice<'d>(&self, data: &'d [u8], t: u64) -> &'d [u8] {
        &data[(t * self.stride) as usize..((t + 1) * self.stride) as usize]
    }
    /// [`Partitions::slice`], writable.
    pub fn slice_mut<'d>(&self, data: &'d mut [u8], t: u64) -> &'d mut [u8] {
        &mut data[(t * self.stride) as usize..((t + 1) * self.stride) as usize]
    }
}

/// A structure at byte `base` of the data area (a multiple of 64), seen from address 0: every
/// address and lock id of the back end `pm`, shifted.
pub struct Part<'a, P: Pm> {
    pm: &'a mut P,
    base: u64,
}

impl<P: Pm> Pm for Part<'_, P> {
    fn begin(&mut self) {
        self.pm.begin()
    }
    fn commit(&mut self) {
        self.pm.commit()
    }
    fn abort(&mut self) {
        self.pm.abort()
    }
    #[inline]
    fn load(&mut self, addr: crate::types::Addr, buf: &mut [u8]) {
        self.pm.load(crate::types::Addr(addr.0 + self.base), buf)
    }
    #[inline]
    fn store(&mut self, addr: crate::types::Addr, data: &[u8]) {
        self.pm.store(crate::types::Addr(addr.0 + self.base), data)
    }
    #[inline]
    fn compute(&mut self, cycles: u64) {
        self.pm.compute(cycles)
    }
    fn last_durable_tx(&self) -> u64 {
        self.pm.last_durable_tx()
    }
    fn concurrent(&self) -> bool {
        self.pm.concurrent()
    }
    fn lock(&mut self, id: u64) {
        self.pm.lock(id + self.base / 64)
    }
    #[inline]
    fn will_access(&mut self, addr: crate::types::Addr) {
        self.pm.will_access(crate::types::Addr(addr.0 + self.base))
    }
    fn core(&self) -> usize {
        self.pm.core()
    }
}

/// The interface workloads are written against.
pub use pm::Pm;

/// Per-workload parameters (`--set workload.sps.entries=...`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct WorkloadConfig {
    /// Transactions run before the measured region to bring caches to a steady state; their
    /// cycles and writes are excluded from the figures (they still run through the protocol).
    pub warmup_txs: u64,
    /// After `warmup_txs`, go on warming up, [`crate::runner::STEADY_WINDOW_TXS`] transactions at
    /// a time, while the caches' dirty lines still grow (`runner::warm_to_steady`): a write-back
    /// cache's write traffic is that of steady state only once its dirty population has stopped
    /// growing, and a workload that dirties a few scattered lines per transaction (SPS: two)
    /// takes longer to get there than `warmup_txs` may allow. Built-in workloads only (a trace
    /// declares its own warm-up).
    pub warmup_to_steady: bool,
    pub sps: sps::SpsConfig,
    pub btree: btree::BTreeConfig,
    pub hash: hash::HashTableConfig,
    pub rbtree: rbtree::RbTreeConfig,
    pub sdg: sdg::SdgConfig,
    pub sqlite: sqlite::SqliteConfig,
    #[serde(default)]
    pub ycsb: ycsb::YcsbConfig,
    pub tpcc: tpcc::TpccConfig,
}

impl Default for WorkloadConfig {
    fn default() -> Self {
        WorkloadConfig {
            warmup_txs: 20_000,
            warmup_to_steady: false,
            sps: Default::default(),
            btree: Default::default(),
            hash: Default::default(),
            rbtree: Default::default(),
            sdg: Default::default(),
            sqlite: Default::default(),
            ycsb: Default::default(),
            tpcc: Default::default(),
        }
    }
}

impl WorkloadConfig {
    /// Range checks of every workload's parameters (called by `Config::validate`).
    pub fn validate(&self) -> Result<(), String> {
        self.sps.validate()?;
        self.btree.validate()?;
        self.hash.validate()?;
        self.rbtree.validate()?;
        self.sdg.validate()?;
        self.sqlite.validate()?;
        self.ycsb.validate()?;
        self.tpcc.validate()
    }
}

/// Declares the workloads: one line each (variant, command-line name, module, type, config
/// field), then the replayed trace, which is not built from a configuration and is not in
/// [`WorkloadKind::ALL`] (`--trace FILE` runs it). Generates [`WorkloadKind`], [`Workload`] and
/// their enum dispatch. A program written against [`Pm`] outside locsim is one more variant,
/// [`Workload::User`] ([`user::UserWorkload`]).
macro_rules! workloads {
    ($($variant:ident $name:literal $module:ident :: $ty:ident . $cfg:ident;)*
     @replayed $tvariant:ident $tname:literal $tty:ty;) => {
        /// The workloads locsim runs, as named on the command line.
        #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
        pub enum WorkloadKind {
            $($variant,)*
            $tvariant,
            /// A [`user::UserWorkload`].
            User,
        }

        impl WorkloadKind {
            /// The built-in workloads (the replayed trace is not one).
            pub const ALL: &'static [WorkloadKind] = &[$(WorkloadKind::$variant,)*];

            pub fn name(self) -> &'static str {
                match self {
                    $(WorkloadKind::$variant => $name,)*
                    WorkloadKind::$tvariant => $tname,
                    WorkloadKind::User => "user",
                }
            }

            /// The configuration section it reads (`workload.<section>`): the YCSB workloads
            /// share one.
            pub fn section(self) -> &'static str {
                match self {
                    $(WorkloadKind::$variant => stringify!($cfg),)*
                    WorkloadKind::$tvariant | WorkloadKind::User => "",
                }
            }

            /// The part of `cfg` that [`WorkloadKind::build`] reads (the workload's own section),
            /// as JSON: runs whose configurations differ elsewhere (another workload's section,
            /// the warm-up) build and populate the same workload. Empty for a trace or a user's
            /// workload, which are not built from `cfg`.
            pub fn build_key(self, cfg: &WorkloadConfig) -> String {
                match self {
                    $(WorkloadKind::$variant => serde_json::to_string(&cfg.$cfg).expect("serializable"),)*
                    WorkloadKind::$tvariant | WorkloadKind::User => String::new(),
                }
            }

            /// Build the workload from its configuration. A trace or a user's workload is not
            /// built from one: this gives the empty trace, which serves as their structural
            /// verifier (it accepts every image; the oracle checks their bytes).
            pub fn build(self, cfg: &WorkloadConfig) -> Workload {
                match self {
                    $(WorkloadKind::$variant => Workload::$variant($module::$ty::new(&cfg.$cfg)),)*
                    WorkloadKind::$tvariant | WorkloadKind::User => Workload::$tvariant(<$tty>::default()),
                }
            }
        }

        /// A built workload (enum dispatch: the transaction body is generic over the back end).
        pub enum Workload {
            $($variant($module::$ty),)*
            $tvariant($tty),
            /// A program written outside locsim against [`Pm`].
            User(Box<dyn user::UserWorkload>),
        }

        impl Workload {
            /// Its command-line name.
            pub fn name(&self) -> &'static str {
                match self {
                    $(Workload::$variant(_) => $name,)*
                    Workload::$tvariant(_) => $tname,
                    Workload::User(_) => "user",
                }
            }

            /// Bytes of data area it needs.
            pub fn data_bytes(&self) -> u64 {
                match self {
                    $(Workload::$variant(w) => w.data_bytes(),)*
                    Workload::$tvariant(w) => w.data_bytes(),
                    Workload::User(w) => w.data_bytes(),
                }
            }

            /// Write the initial data set straight into the data area (the populate phase);
            /// `data` is all zero bytes on entry (a fresh image).
            pub fn populate(&mut self, data: &mut [u8]) {
                match self {
                    $(Workload::$variant(w) => w.populate(data),)*
                    Workload::$tvariant(w) => w.populate(data),
                    Workload::User(w) => w.populate(data),
                }
            }

            /// A copy with the same driver state, for the built-in workloads; `None` for SQLite
            /// once it has opened its connection (whose page cache belongs to SQLite), a trace
            /// and a user's program.
            pub fn try_clone(&self) -> Option<Workload> {
                match self {
                    $(Workload::$variant(w) => Clonable::try_clone_as(w).map(Workload::$variant),)*
                    Workload::$tvariant(_) | Workload::User(_) => None,
                }
            }

            /// Run one transaction.
            #[inline]
            pub fn run_tx<P: Pm>(&mut self, pm: &mut P, rng: &mut Rng, abort: bool) {
                self.run_tx_inline(pm, rng, abort)
            }

            /// [`Workload::run_tx`], inlined into its caller: the multi-core scheduler's
            /// coroutine body, so that a core suspended inside the transaction resumes with no
            /// return across the suspension (`crate::sched`, "Balanced returns").
            #[inline(always)]
            pub fn run_tx_inline<P: Pm>(&mut self, pm: &mut P, rng: &mut Rng, abort: bool) {
                match self {
                    $(Workload::$variant(w) => w.run_tx(pm, rng, abort),)*
                    Workload::$tvariant(w) => w.run_tx(pm, rng, abort),
                    Workload::User(w) => w.run_tx(pm, rng, abort),
                }
            }

            /// Structural check of a data area (e.g. a recovered image): `Err` names what is broken.
            pub fn verify(&self, data: &[u8]) -> Result<(), String> {
                match self {
                    $(Workload::$variant(w) => w.verify(data),)*
                    Workload::$tvariant(w) => w.verify(data),
                    Workload::User(_) => Ok(()),
                }
            }

            /// After a transaction: `Ok(false)` once a replayed trace has ended, `Err` if it is
            /// bad; a built-in workload never ends.
            pub fn more(&mut self) -> Result<bool, String> {
                match self {
                    Workload::$tvariant(w) => w.more(),
                    _ => Ok(true),
                }
            }
        }
    };
}

impl Workload {
    /// Can it run on more than one core? Each core runs its transactions on its own copy of
    /// the driver state ([`Workload::try_clone`]), taking a lock on every line it writes
    /// ([`Pm::lock`]; docs/workloads.md says what each locks). `Err` is the one-line reason it
    /// cannot.
    pub fn multicore(&self) -> Result<(), String> {
        match self {
            Workload::Sps(_) | Workload::BTree(_) | Workload::Hash(_) | Workload::RbTree(_) | Workload::Sdg(_) => {
                Ok(())
            }
            Workload::Tpcc(_) => Ok(()),
            Workload::Sqlite(_) => Err("workload sqlite runs on one core: SQLite's own locking serialises \
                writers on one database file, so one connection per core would run one writer at a time"
                .into()),
            Workload::YcsbA(_)
            | Workload::YcsbB(_)
            | Workload::YcsbC(_)
            | Workload::YcsbD(_)
            | Workload::YcsbE(_)
            | Workload::YcsbF(_) => Ok(()),
            // Locked by its replayer ([`trace_replay::TraceWorkload::open_cores`]).
            Workload::Trace(_) => Ok(()),
            Workload::User(_) => {
                Err("workload user: runs on one core (a program from outside locsim takes no locks; docs/multicore.md)"
                    .into())
            }
        }
    }

    /// A replayed trace's own share of the warm-up per core (its transactions among the
    /// stream's first `warmup`); `None` for a workload whose warm-up is split evenly.
    pub fn warmup_cores(&self) -> Option<Vec<u64>> {
        match self {
            Workload::Trace(t) => t.warmup_cores().map(<[u64]>::to_vec),
            _ => None,
        }
    }

    /// The driver states of cores `0..cores` ([`Workload::for_core`]; a replayed trace's
    /// per-core replayers). `Err` is the one-line reason it cannot run on that many.
    pub fn into_cores(self, cores: usize) -> Result<Vec<Workload>, String> {
        let name = self.name();
        let why = || format!("machine.cores = {cores}: workload {name} runs on one core");
        match self {
            Workload::Trace(t) => Ok(t.into_cores(cores).ok_or_else(why)?.into_iter().map(Workload::Trace).collect()),
            _ => (0..cores).map(|c| self.for_core(c, cores)).collect::<Option<Vec<_>>>().ok_or_else(why),
        }
    }

    /// The driver state of core `core` of `cores`: a copy ([`Workload::try_clone`]), with what
    /// only one core may own split among them (SDG's list of live edges).
    pub fn for_core(&self, core: usize, cores: usize) -> Option<Workload> {
        let mut w = self.try_clone()?;
        match &mut w {
            Workload::Sdg(s) => s.for_core(core, cores),
            Workload::Hash(h) => h.for_core(core),
            Workload::Tpcc(t) => t.for_core(core, cores),
            _ => {}
        }
        Some(w)
    }

    /// An incremental structural verifier ([`follow`]), for the workloads that have one; the
    /// crash checker verifies whole images for the others.
    pub fn follower(&self) -> Option<Box<dyn follow::Follow>> {
        match self {
            Workload::Sps(w) => Some(Box::new(w.follower())),
            Workload::Sdg(w) => w.follower().map(|f| Box::new(f) as Box<dyn follow::Follow>),
            Workload::Hash(w) => w.follower().map(|f| Box::new(f) as Box<dyn follow::Follow>),
            Workload::RbTree(w) => Some(follow::parts(w.partitions(), || Box::new(w.follower()))),
            Workload::BTree(w) => Some(follow::parts(w.partitions(), || Box::new(w.follower()))),
            Workload::Sqlite(w) => Some(Box::new(w.follower())),
            Workload::YcsbA(w) => Some(Box::new(w.follower())),
            Workload::YcsbB(w) => Some(Box::new(w.follower())),
            Workload::YcsbC(w) => Some(Box::new(w.follower())),
            Workload::YcsbD(w) => Some(Box::new(w.follower())),
            Workload::YcsbE(w) => Some(Box::new(w.follower())),
            Workload::YcsbF(w) => Some(Box::new(w.follower())),
            _ => None,
        }
    }
}

workloads! {
    Sps "sps" sps::Sps.sps;
    BTree "btree" btree::BTree.btree;
    Hash "hash" hash::HashTable.hash;
    RbTree "rbtree" rbtree::RbTree.rbtree;
    Sdg "sdg" sdg::Sdg.sdg;
    Sqlite "sqlite" sqlite::Sqlite.sqlite;
    YcsbA "ycsb-a" ycsb::YcsbA.ycsb;
    YcsbB "ycsb-b" ycsb::YcsbB.ycsb;
    YcsbC "ycsb-c" ycsb::YcsbC.ycsb;
    YcsbD "ycsb-d" ycsb::YcsbD.ycsb;
    YcsbE "ycsb-e" ycsb::YcsbE.ycsb;
    YcsbF "ycsb-f" ycsb::YcsbF.ycsb;
    Tpcc "tpcc" tpcc::Tpcc.tpcc;
    @replayed Trace "trace" trace_replay::TraceWorkload;
}

/// What [`Workload::try_clone`] asks of each built-in workload.
trait Clonable: Sized {
    fn try_clone_as(&self) -> Option<Self>;
}

macro_rules! clonable {
    ($($ty:ty),*) => {
        $(impl Clonable for $ty {
            fn try_clone_as(&self) -> Option<Self> {
                Some(self.clone())
            }
        })*
    };
}
clonable!(sps::Sps, btree::BTree, hash::HashTable, rbtree::RbTree, sdg::Sdg);
clonable!(ycsb::YcsbA, ycsb::YcsbB, ycsb::YcsbC, ycsb::YcsbD, ycsb::YcsbE, ycsb::YcsbF);
clonable!(tpcc::Tpcc);

impl Clonable for sqlite::Sqlite {
    fn try_clone_as(&self) -> Option<Self> {
        self.without_connection()
    }
}

impl WorkloadKind {
    pub fn parse(s: &str) -> Result<WorkloadKind, String> {
        WorkloadKind::ALL
            .iter()
            .copied()
            .find(|w| w.name() == s)
            .ok_or_else(|| format!("unknown workload `{s}`: allowed {}", WorkloadKind::names().join(", ")))
    }

    /// Every workload's name.
    pub fn names() -> Vec<&'static str> {
        WorkloadKind::ALL.iter().map(|w| w.name()).collect()
    }
}
