//! Workloads and the interface they are written against.
//!
//! A workload touches persistent memory only through [`Pm`]: the papers' TxBegin, TxCommit,
//! TxAbort, loads and stores at persistent addresses, and CheckMaxCommit
//! ([`Pm::last_durable_tx`]). It charges its own non-memory work with [`Pm::compute`]. Two back
//! ends implement it: the simulator ([`crate::sim::Sim`]) and plain memory ([`native::Native`]).

pub mod btree;
pub mod hash;
pub mod kv;
pub mod native;
pub mod rbtree;
pub mod sdg;
pub mod slab;
pub mod sps;
pub mod sqlite;

use crate::config::Config;
use crate::rng::Rng;
use crate::types::Addr;

/// The workload interface (transactions on persistent memory).
pub trait Pm {
    /// TxBegin.
    fn begin(&mut self);
    /// TxCommit: returns when the protocol lets the program continue.
    fn commit(&mut self);
    /// TxAbort: the transaction's stores are undone.
    fn abort(&mut self);
    /// Load `buf.len()` bytes at `addr`.
    fn load(&mut self, addr: Addr, buf: &mut [u8]);
    /// Store `data` at `addr` (inside a transaction).
    fn store(&mut self, addr: Addr, data: &[u8]);
    /// Charge `cycles` of non-memory instructions.
    fn compute(&mut self, cycles: u64);
    /// CheckMaxCommit: how many transactions (in commit order) are guaranteed durable.
    fn last_durable_tx(&self) -> u64;
    /// The program will access the bytes at `addr` soon (a transaction or two ahead): a hint
    /// that lets the back end start fetching them into the host's caches. It changes no result
    /// and no simulated cycle; back ends may ignore it.
    #[inline]
    fn will_access(&mut self, addr: Addr) {
        let _ = addr;
    }

    fn load_u64(&mut self, addr: Addr) -> u64 {
        let mut b = [0u8; 8];
        self.load(addr, &mut b);
        u64::from_le_bytes(b)
    }
    fn store_u64(&mut self, addr: Addr, v: u64) {
        self.store(addr, &v.to_le_bytes());
    }
    fn load_u32(&mut self, addr: Addr) -> u32 {
        let mut b = [0u8; 4];
        self.load(addr, &mut b);
        u32::from_le_bytes(b)
    }
    fn store_u32(&mut self, addr: Addr, v: u32) {
        self.store(addr, &v.to_le_bytes());
    }
}

/// Declares the workloads: one line each (variant, command-line name, module, type, config
/// field). Generates [`WorkloadKind`], [`Workload`] and their enum dispatch.
macro_rules! workloads {
    ($($variant:ident $name:literal $module:ident :: $ty:ident . $cfg:ident;)*) => {
        /// The workloads locsim runs, as named on the command line.
        #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
        pub enum WorkloadKind {
            $($variant,)*
        }

        impl WorkloadKind {
            pub const ALL: &'static [WorkloadKind] = &[$(WorkloadKind::$variant,)*];

            pub fn name(self) -> &'static str {
                match self {
                    $(WorkloadKind::$variant => $name,)*
                }
            }

            /// Build the workload from its configuration.
            pub fn build(self, cfg: &Config) -> Workload {
                match self {
                    $(WorkloadKind::$variant => Workload::$variant($module::$ty::new(&cfg.workload.$cfg)),)*
                }
            }
        }

        /// A built workload (enum dispatch: the transaction body is generic over the back end).
        pub enum Workload {
            $($variant($module::$ty),)*
        }

        impl Workload {
            /// Bytes of data area it needs.
            pub fn data_bytes(&self) -> u64 {
                match self {
                    $(Workload::$variant(w) => w.data_bytes(),)*
                }
            }

            /// Write the initial data set straight into the data area (the populate phase).
            pub fn populate(&mut self, data: &mut [u8]) {
                match self {
                    $(Workload::$variant(w) => w.populate(data),)*
                }
            }

            /// Run one transaction.
            #[inline]
            pub fn run_tx<P: Pm>(&mut self, pm: &mut P, rng: &mut Rng, abort: bool) {
                match self {
                    $(Workload::$variant(w) => w.run_tx(pm, rng, abort),)*
                }
            }

            /// Structural check of a data area (e.g. a recovered image): `Err` names what is broken.
            pub fn verify(&self, data: &[u8]) -> Result<(), String> {
                match self {
                    $(Workload::$variant(w) => w.verify(data),)*
                }
            }
        }
    };
}

workloads! {
    Sps "sps" sps::Sps.sps;
    BTree "btree" btree::BTree.btree;
    Hash "hash" hash::HashTable.hash;
    RbTree "rbtree" rbtree::RbTree.rbtree;
    Sdg "sdg" sdg::Sdg.sdg;
    Sqlite "sqlite" sqlite::Sqlite.sqlite;
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
