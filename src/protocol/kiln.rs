//! `kiln` and `loc-kiln` (docs/protocols/kiln.md): a non-volatile LLC holds transactions' new
//! versions while NVM keeps the old ones (Zhao et al., MICRO 2013, as the LOC papers describe
//! it, `loc-extended.txt` 5.2), and LOC's loose ordering on top of it.
//!
//! **Kiln.** A transaction's stores tag its LLC lines pending. Commit flushes its dirty L1/L2
//! copies into the NV-LLC (one LLC write each), records each line as committed data in the
//! NV-LLC, and writes the LLC's commit register: the transaction is durable and acknowledged.
//! Its lines stay in the LLC, committed and dirty; NVM receives them only when they are
//! evicted. Uncommitted data never reaches a home location: a pending line evicted from the
//! LLC (the transaction does not fit) goes to a fallback log in the memory log area (Eager
//! Commit block groups), made durable before the register moves and written home after it.
//! A store to a line holding an earlier transaction's committed data first writes that data
//! home and waits until it is durable (NVM keeps the old version, the LLC the new one).
//!
//! **LOC-Kiln** (`loc_kiln`): the same NV-LLC with speculation windows of SD committed
//! transactions. Commit still flushes L1/L2 into the LLC and records the lines, but the
//! commit register moves, and transactions are acknowledged, once per window: no transaction
//! waits on another's persistence inside the window. A store to a committed line keeps the old
//! version in another way of the set (LOC's multi-versioned LLC) instead of writing it home;
//! an older version from the same window is dropped when the overwriting transaction commits
//! (write coalescing), one from an earlier window when the register passes the overwriting
//! transaction; an aborted transaction's older versions are rescued (written home when the
//! window completes). Committed lines of the window evicted before the register moves go to
//! the fallback log.
//!
//! What recovery needs (`src/recovery/kiln.rs`): the register; the NV-LLC's committed lines
//! (tag: home, seq), each valid until its data is durable elsewhere; the fallback log.
//!
//! **On N cores** (Kiln; docs/multicore.md): one shared NV-LLC and commit register; per core
//! the transaction state (its running transaction's write set, its window) and a fallback-log
//! region of its own (`Layout::log_region`), truncated only by its core. A transaction's
//! sequence number, which the register and the committed lines' tags carry, is global and
//! assigned at commit (the register covers a prefix of the global commit order); the fallback
//! log's TxIDs are core-local (a line is logged before its transaction has a global number),
//! and a Core Binding in the NV-LLC maps the core's last logged committed transaction to its
//! global number. An LLC line's transaction tag names its owner core ([`tx_aux`]): a victim is
//! logged into its owner's region. Each core's Core Binding moves with its register moves: a
//! committed line counts only once its owner's binding covers it.
//!
//! **LOC-Kiln on N cores** (docs/multicore.md, "LOC-Kiln on N cores"): per-core windows; a
//! window is registered (its core's binding moves past it) as a unit. A load or store of a line
//! tagged by another core's window transaction is a cross-core dependency ([`CrossDeps`]): that
//! window is registered first (a forced close, on the dependent's time). So is a window whose
//! committed line or older version leaves the LLC, and the running core's own window when an
//! abort rescues one of its versions: a fallback-log region then only ever holds its running
//! (or just committed) transaction's lines, which the single binding covers.

use super::group::{self, Group, GroupRing};
use super::window::{self, aux_of, CrossDeps, Version, Versions, MAX_WINDOW_TXS};
use super::{Bug, Protocol};
use crate::cache::Slot;
use crate::log::ec::BlkTag;
use crate::log::head::{LogFormat, LogHead};
use crate::log::nvllc::{self, Binding, Register};
use crate::machine::Machine;
use crate::pmem::{Layout, WriteKind};
use crate::types::{blocks_of, Addr, BlockData, BlockId, Cycle};

/// What `kiln` is and how it is built (its line in the table of `registry.rs`).
pub static KILN: super::Registration<Kiln> = super::Registration {
    desc: super::Descriptor {
        name: "kiln",
        log_format: Some(LogFormat::Kiln),
        stores_persist: false,
        speculates: false,
        bugs: &[Bug::AckBeforeDurable, Bug::EvictUncommittedHome],
        // Plain Kiln's window is one transaction, whatever the degree.
        reads: &[],
        layout: |layout, cfg| with_records(layout, cfg, "kiln"),
    },
    build: |b| build(b, false),
};

/// What `loc-kiln` is and how it is built (its line in the table of `registry.rs`).
pub static LOC_KILN: super::Registration<Kiln> = super::Registration {
    desc: super::Descriptor {
        name: "loc-kiln",
        log_format: Some(LogFormat::Kiln),
        stores_persist: false,
        speculates: true,
        bugs: &[Bug::AckBeforeDurable, Bug::EvictUncommittedHome, Bug::DependentBeforeSource],
        reads: &["loc.speculation_degree"],
        layout: |layout, cfg| {
            window::needs_two_ways(cfg, "loc-kiln").and_then(|()| with_records(layout, cfg, "loc-kiln"))
        },
    },
    build: |b| build(b, true),
};

/// The layout with the NV-LLC's records (one per LLC slot), or the one line saying the memory
/// is too large for their 31-bit block numbers.
fn with_records(layout: Layout, cfg: &crate::config::Config, name: &str) -> Result<Layout, String> {
    let layout = layout.with_nvllc(nvllc::bytes((cfg.llc_cache().size_bytes / 64) as usize, layout.cores));
    if layout.total_bytes() / 64 >= (1 << 31) - 1 {
        return Err(format!(
            "the simulated memory of {} bytes with {name}'s NV-LLC records (an LLC of {} bytes, log.size_bytes = \
             {}): the NV-LLC's tags hold 31-bit block numbers, allowed below 2^37 bytes",
            layout.total_bytes(),
            cfg.llc_cache().size_bytes,
            cfg.log.size_bytes
        ));
    }
    Ok(layout)
}

fn build(b: &super::Build<'_>, loc_kiln: bool) -> Kiln {
    let (sd, w, slots) = (b.cfg.loc.speculation_degree, b.cfg.min_write_cycles(), (b.cfg.llc_cache().size_bytes / 64) as usize);
    Kiln::new(b.layout, loc_kiln, sd, w, slots, b.bug)
}

/// LLC `aux` of a committed line whose transaction the register covers (a [`Version`]'s
/// `aux` may be this, or a window transaction's [`tx_aux`]).
const REGISTERED: u32 = u32::MAX;

/// LLC `aux` of the lines of core `c`'s transaction with core-local sequence number `seq`:
/// the owner core in bits 16..20, the number's low 16 bits below (plus one, so never 0). With
/// one core, [`aux_of`].
#[inline(always)]
pub fn tx_aux(c: usize, seq: u64) -> u32 {
    aux_of(seq) + ((c as u32) << 16)
}

/// The owner core of a transaction tag (not [`REGISTERED`]).
#[inline(always)]
fn owner(aux: u32) -> usize {
    ((aux - 1) >> 16) as usize
}

counters! {
    Counters {
        flushed_lines,
        fallback_log_blocks,
        old_version_writebacks,
        old_version_stall_cycles,
        versions_kept,
        coalesced_blocks,
        version_overflows,
        rescued_blocks,
        window_stall_cycles,
        slot_reuse_stall_cycles,
        windows,
    }
}

counters! {
    CrossCounters {
        cross_core_deps,
        forced_closes,
        forced_closes_mid_tx,
        forced_closes_evicted,
    }
}

/// One core's transaction state in the NV-LLC, and its fallback-log region.
struct CoreTx {
    /// Core-local sequence number of the running (or next) transaction.
    seq: u64,
    /// First local sequence number of the window.
    win_start: u64,
    /// Committed, not yet registered transactions of the window: (local seq, global seq,
    /// first index in `ws`).
    win_txs: Vec<(u64, u64, usize)>,
    /// Blocks written by the window's committed transactions, then the running one's.
    ws: Vec<BlockId>,
    run_start: usize,
    ring: GroupRing,
    group: Option<Group>,
    trunc_sid: u64,
    /// `start_seq` of the region's durable log head (core-local).
    head_seq: u64,
    /// Cycle at which the region's last head write is durable.
    head_at: Cycle,
    /// Fallback log entries since the last truncation: (home, log block, local seq).
    fallback: Vec<(BlockId, BlockId, u64)>,
    fallback_durable: Cycle,
    /// The running transaction's older versions, and the registered ones it superseded at
    /// commit (dropped once the register covers it).
    versions: Versions,
    superseded: Vec<Version>,
    /// Transactions committed on this core.
    committed: u64,
    /// Cycle by which the core's last commit recorded its lines.
    commit_at: Cycle,
    /// A transaction is running (begun, not yet committed or aborted).
    in_tx: bool,
    /// Number of the open window (from 1); every earlier window of the core is registered.
    number: u64,
}

pub struct Kiln {
    bug: Option<Bug>,
    loc_kiln: bool,
    /// More than one core.
    multi: bool,
    sd: u64,
    nv0: BlockId,
    slots: usize,
    write_cycles: Cycle,
    /// Global sequence number of the next commit (the register's 0 means none). An abort
    /// also takes one, so that with one core it equals the core's local number.
    next_seq: u64,
    /// Per core.
    cores: Vec<CoreTx>,
    /// Cycle of the latest register write: the register moves in global order, so a core
    /// whose clock is behind waits for it (with one core it is never ahead of the clock).
    reg_at: Cycle,
    /// Cycle by which every fallback-log truncation issued so far is durable (the latest
    /// head write of any core). A registered line's record is forgotten no earlier: until its
    /// owner's region is truncated, the region may hold an older copy of the line from the
    /// same transaction (logged before the transaction stored to it again), which recovery
    /// would replay over home without the record. With one core it never passes the clock.
    trunc_at: Cycle,
    /// Per LLC slot: until when its recorded committed data must stay (until its copy
    /// elsewhere is durable); a new record waits for it.
    slot_free_at: Vec<Cycle>,
    /// The register's `committed` (the largest global number any core registered).
    reg_committed: u64,
    /// LOC-Kiln on N cores: which windows each core's open window depends on.
    deps: CrossDeps,
    c: Counters,
    x: CrossCounters,
}

impl Kiln {
    pub fn new(layout: &Layout, loc_kiln: bool, sd: u32, write_cycles: Cycle, llc_slots: usize, bug: Option<Bug>) -> Kiln {
        let n = layout.cores as usize;
        assert!(layout.nvllc_bytes >= nvllc::bytes(llc_slots, layout.cores), "layout built with with_nvllc");
        assert!(layout.total_bytes() / 64 < (1 << 31) - 1, "versioned LLC tags hold 31-bit block numbers");
        let core = |c| CoreTx {
            seq: 1,
            win_start: 1,
            win_txs: Vec::with_capacity(64),
            ws: Vec::with_capacity(4096),
            run_start: 0,
            ring: GroupRing::region(layout, c, "the fallback log"),
            group: None,
            trunc_sid: 0,
            head_seq: 1,
            head_at: Cycle::ZERO,
            fallback: Vec::new(),
            fallback_durable: Cycle::ZERO,
            versions: Versions::default(),
            superseded: Vec::new(),
            committed: 0,
            commit_at: Cycle::ZERO,
            in_tx: false,
            number: 1,
        };
        Kiln {
            bug,
            loc_kiln,
            multi: n > 1,
            sd: if loc_kiln { sd as u64 } else { 1 },
            nv0: layout.nvllc_block0(),
            slots: llc_slots,
            write_cycles,
            next_seq: 1,
            cores: (0..n).map(core).collect(),
            reg_at: Cycle::ZERO,
            trunc_at: Cycle::ZERO,
            slot_free_at: vec![Cycle::ZERO; llc_slots],
            reg_committed: 0,
            deps: CrossDeps::new(n),
            c: Counters::default(),
            x: CrossCounters::default(),
        }
    }

    fn tag_block(&self, s: Slot) -> BlockId {
        BlockId(self.nv0.0 + nvllc::tag_block(s.0))
    }

    fn data_block(&self, s: Slot) -> BlockId {
        BlockId(self.nv0.0 + nvllc::data_block(s.0))
    }

    /// Record slot `s` as holding committed data `data` of `home` by global `seq` of core
    /// `cid`, durable now; first waits until the slot's previous committed data is durable
    /// elsewhere.
    fn record_line(&mut self, m: &mut Machine, s: Slot, home: BlockId, seq: u64, cid: usize, data: BlockData) {
        let before = m.now;
        m.wait_until(self.slot_free_at[s.0]);
        self.c.slot_reuse_stall_cycles += (m.now - before).get();
        let now = m.now;
        m.nv_record(self.data_block(s), |_| data, now);
        m.nv_record(self.tag_block(s), |_| nvllc::encode_owned_tag(Some((home.0, seq, cid as u8))), now);
    }

    /// From cycle `at`, slot `s` holds no committed data recovery should use.
    fn forget_line(&mut self, m: &mut Machine, s: Slot, at: Cycle) {
        self.slot_free_at[s.0] = self.slot_free_at[s.0].max(at);
        m.nv_record(self.tag_block(s), |_| nvllc::encode_tag(None), at);
    }

    /// (owner core, core-local sequence number) of a transaction tag.
    fn seq_of(&self, aux: u32) -> (usize, u64) {
        let c = owner(aux);
        let k = &self.cores[c];
        (c, k.win_start + (((aux - 1) as u64 & 0xFFFF).wrapping_sub(k.win_start) & 0xFFFF))
    }

    /// Append a block of core `c`'s transaction `seq` (local) to its fallback-log region;
    /// returns the cycle from which it counts (its group's META, written after it, is
    /// durable).
    fn log_fallback(&mut self, m: &mut Machine, c: usize, home: BlockId, seq: u64, data: Option<&BlockData>) -> Cycle {
        let k = &self.cores[c];
        if k.fallback.is_empty() && k.seq - k.head_seq >= MAX_WINDOW_TXS as u64 {
            // TxIDs are read relative to the head's start_seq: bring it up to this window first.
            self.write_head(m, c, k.win_start);
        }
        let k = &mut self.cores[c];
        let mut g = match k.group.take() {
            Some(g) if !g.is_full() => g,
            _ => {
                if k.ring.full() {
                    // A group is reused only behind the region's last truncation, durable by
                    // `head_at` (on N cores the placing core's clock may be behind it).
                    m.wait_until(k.head_at);
                }
                k.ring.open(m, k.trunc_sid, false)
            }
        };
        let tag = BlkTag { addr: home.0 as u32, tx_id: seq as u8, cid: c as u8, ..Default::default() };
        let (_, at) = g.push(tag);
        let t = group::write_data(m, at, home, data);
        g.note_data(t.done, t.durable);
        self.c.fallback_log_blocks += 1;
        k.fallback.push((home, at, seq));
        // The META (rewritten as the group fills) completes after the group's data.
        let mt = g.write_meta(m, self.write_cycles, None);
        k.fallback_durable = k.fallback_durable.max(mt.durable);
        k.group = Some(g);
        mt.durable
    }

    /// Truncate core `c`'s fallback-log region past every group so far (durably); no
    /// transaction of the core before `start_seq` logs after it.
    fn write_head(&mut self, m: &mut Machine, c: usize, start_seq: u64) {
        let k = &mut self.cores[c];
        k.group = None;
        k.trunc_sid = k.ring.next_sid;
        k.head_seq = start_seq;
        let head = LogHead { format: LogFormat::Kiln, start: k.ring.next_sid, start_seq };
        let t = m.write_encoded(k.ring.log0, WriteKind::LogHead, || head.encode());
        m.wait_until(t.durable);
        k.head_at = t.durable;
        self.trunc_at = self.trunc_at.max(t.durable);
    }

    /// Write an older version where it is safe once it leaves the cache: home if its
    /// transaction is registered, else the fallback log; its slot is forgotten once that copy
    /// is durable.
    fn save_version(&mut self, m: &mut Machine, x: &Version) {
        let durable = if x.aux == REGISTERED {
            m.wait_until(self.reg_at);
            let t = m.write_encoded(x.block, WriteKind::Home, || x.data);
            m.wait_until(t.accepted);
            t.durable
        } else {
            let (c, seq) = self.seq_of(x.aux);
            self.log_fallback(m, c, x.block, seq, Some(&x.data))
        };
        self.forget_line(m, x.slot, durable);
    }

    /// The tracked version of `b` in slot `s` that the LLC pushed out (whichever core's), or
    /// none if it is no longer needed: on N cores, a window registered while the version's
    /// victim waited in the queue (a forced close placing an earlier victim of the same
    /// access) drops the registered versions its transactions superseded, present or not.
    fn take_version(&mut self, b: BlockId, s: Slot) -> Option<Version> {
        let at = |xs: &Vec<Version>| xs.iter().position(|x| x.block == b && x.slot == s);
        for k in &mut self.cores {
            if let Some(i) = at(&k.versions.kept) {
                return Some(k.versions.kept.swap_remove(i));
            }
            if let Some(i) = at(&k.superseded) {
                return Some(k.superseded.swap_remove(i));
            }
        }
        assert!(self.multi, "an evicted version is tracked");
        None
    }

    /// Tagged lines pushed out of the LLC (each names the slot it left), by the protocol's
    /// last access or, with more than one core, by a lock access since. A tagged line is
    /// placed on behalf of its owner core (into its fallback-log region).
    fn drain(&mut self, m: &mut Machine) {
        while let Some(v) = m.tx_victims.pop() {
            let s = v.slot;
            if v.version {
                self.c.version_overflows += 1;
                let Some(mut x) = self.take_version(v.block, s) else {
                    // Superseded by a registered transaction: nothing to keep; its record
                    // goes now, before the slot's new line is recorded.
                    let now = m.now;
                    self.forget_line(m, s, now);
                    continue;
                };
                if self.multi && x.aux != REGISTERED {
                    // A committed window transaction's version: its window is registered
                    // first, so that no region holds a committed transaction's lines but the
                    // one its binding names.
                    let (c, _) = self.seq_of(x.aux);
                    self.force(m, c, true);
                    x.aux = REGISTERED;
                }
                self.save_version(m, &x);
            } else if v.tag == REGISTERED || self.committed_line_out(m, v.tag) {
                // Registered by a commit no later than the register's last move: a core whose
                // clock is behind it (another core's commit registered the line) writes the
                // line home only from then on, and forgets the record only once its owner's
                // fallback-log region is truncated (`trunc_at`).
                m.wait_until(self.reg_at);
                let t = m.write_from_arch(v.block, WriteKind::Home, v.block);
                m.wait_until(t.accepted);
                self.forget_line(m, s, t.durable.max(self.trunc_at));
            } else {
                let (c, seq) = self.seq_of(v.tag);
                let running = seq == self.cores[c].seq;
                if running && self.bug == Some(Bug::EvictUncommittedHome) {
                    let t = m.write_from_arch(v.block, WriteKind::Home, v.block);
                    m.wait_until(t.accepted);
                    continue;
                }
                let durable = self.log_fallback(m, c, v.block, seq, None);
                if !running {
                    // Committed, not registered: recorded in the slot until the log copy counts.
                    self.forget_line(m, s, durable);
                }
            }
        }
    }

    /// N cores: a line tagged `tag` (not registered) left the LLC. If it is a committed
    /// transaction's of a window (LOC-Kiln), that window is registered now (a forced close)
    /// and the line is placed as a registered one: true. The running transaction's: false.
    #[cold]
    fn committed_line_out(&mut self, m: &mut Machine, tag: u32) -> bool {
        if !self.multi {
            return false;
        }
        let (c, seq) = self.seq_of(tag);
        if seq == self.cores[c].seq {
            return false;
        }
        self.force(m, c, true);
        true
    }

    /// Register core `i`'s open window now (a forced close), for a dependent on another core
    /// or because a committed line of it left the LLC; on the running core's time.
    fn force(&mut self, m: &mut Machine, i: usize, evicted: bool) {
        self.x.forced_closes += 1;
        self.x.forced_closes_mid_tx += u64::from(self.cores[i].in_tx);
        self.x.forced_closes_evicted += u64::from(evicted);
        self.close_window(m, i);
    }

    /// LOC-Kiln on N cores, before a load or a store of the running core `c`: a line tagged by
    /// another core's window transaction makes `c`'s window depend on that window, which is
    /// registered now, before the access. Under the injected `dependent-before-source` it is
    /// not: a store keeps the other core's version as its own window's would be kept, and
    /// drops it at its commit (coalescing across cores).
    #[cold]
    fn cross(&mut self, m: &mut Machine, addr: Addr, len: usize) {
        let c = m.core();
        // Lines left by an access outside the protocol (a lock's) are placed first.
        self.drain(m);
        for b in blocks_of(addr, len) {
            let Some(s) = m.hier.llc.find(b) else { continue };
            let aux = m.hier.llc.aux(s);
            if aux == 0 || aux == REGISTERED || owner(aux) == c {
                continue;
            }
            let i = owner(aux);
            self.x.cross_core_deps += 1;
            self.deps.note(c, i, self.cores[i].number);
            if self.bug != Some(Bug::DependentBeforeSource) {
                self.force(m, i, false);
            }
        }
    }

    /// The register moves to core `c`'s window's last committed transaction (after the
    /// fallback log is durable) and the window is acknowledged; registered versions it
    /// superseded are dropped; the fallback log goes home and its region is truncated. On N
    /// cores the core's binding moves with it, and a window closed while its core runs a
    /// transaction (forced) leaves that transaction's fallback-log lines where they are.
    fn close_window(&mut self, m: &mut Machine, c: usize) {
        let before = m.now;
        let mid_tx = self.cores[c].in_tx;
        if self.multi && self.loc_kiln {
            // Every window it depends on is registered first (they are, unless the injected
            // `dependent-before-source` skipped that).
            for (i, w) in self.deps.sources(c) {
                if self.cores[i].number <= w && self.bug != Some(Bug::DependentBeforeSource) {
                    self.force(m, i, false);
                }
            }
            self.deps.clear(c);
        }
        if !mid_tx {
            m.wait_until(self.cores[c].fallback_durable);
        }
        if self.multi {
            // Its transactions recorded their lines on their core's time.
            m.wait_until(self.cores[c].commit_at);
        }
        let registered = self.cores[c].win_txs.last().map(|&(l, g, _)| (l, g));
        if let Some((local, seq)) = registered {
            self.register(m, c, local, seq);
        }
        self.c.window_stall_cycles += (m.now - before).get();
        if self.bug != Some(Bug::AckBeforeDurable) {
            if !self.multi {
                m.ack_through(m.txs_committed);
            } else if registered.is_some() {
                m.ack_core_through(c, self.cores[c].committed);
            }
        }
        self.mark_registered(m, c);
        let k = &self.cores[c];
        // A forced close inside a transaction: the region holds only that transaction's lines.
        debug_assert!(!mid_tx || k.fallback.iter().all(|f| f.2 == k.seq), "core {c}: committed lines in the region");
        if !k.fallback.is_empty() && !mid_tx {
            self.send_fallback_home(m, c, registered.map(|(r, _)| r));
        }
        let k = &mut self.cores[c];
        k.ws.drain(..k.run_start);
        k.run_start = 0;
        k.win_txs.clear();
        k.win_start = k.seq;
        k.number += 1;
        self.c.windows += 1;
    }

    /// The register moves to core `c`'s transaction `local` (global order `seq`), the last
    /// its window committed; the registered versions that window superseded are dropped.
    fn register(&mut self, m: &mut Machine, c: usize, local: u64, seq: u64) {
        m.wait_until(self.reg_at);
        let now = m.now;
        self.reg_at = now;
        self.reg_committed = self.reg_committed.max(seq);
        if self.multi {
            // The core's registered transactions, and which of its region's logged
            // transactions the register may cover.
            let b = BlockId(self.nv0.0 + nvllc::binding_block(self.slots, c));
            m.nv_record(b, |_| Binding { local, seq }.encode(), now);
        }
        let committed = self.reg_committed;
        m.nv_record(self.nv0, |_| Register { committed, applied: 0 }.encode(), now);
        for x in std::mem::take(&mut self.cores[c].superseded) {
            if m.hier.llc.is_version_of(x.slot, x.block) {
                m.hier.llc.invalidate_slot(x.slot);
                self.forget_line(m, x.slot, now);
            }
        }
    }

    /// The lines of core `c`'s closed window become registered ones: its committed
    /// transactions' and, on N cores, the running transaction's versions of them.
    fn mark_registered(&mut self, m: &mut Machine, c: usize) {
        let k = &mut self.cores[c];
        if self.multi {
            // The running transaction's versions of the window's lines are registered ones now.
            for x in &mut k.versions.kept {
                if x.aux != REGISTERED && x.present(m) {
                    m.hier.llc.set_aux(x.slot, REGISTERED);
                    x.aux = REGISTERED;
                }
            }
        }
        for (i, &(local, _, start)) in k.win_txs.iter().enumerate() {
            let end = k.win_txs.get(i + 1).map_or(k.run_start, |w| w.2);
            for &b in &k.ws[start..end] {
                if let Some(s) = m.hier.llc.find(b).filter(|&s| m.hier.llc.aux(s) == tx_aux(c, local)) {
                    m.hier.llc.set_aux(s, REGISTERED);
                }
            }
        }
    }

    /// Core `c`'s fallback log goes home (the lines of its transactions up to the registered
    /// `local` one) and its region is truncated.
    fn send_fallback_home(&mut self, m: &mut Machine, c: usize, registered: Option<u64>) {
        let k = &mut self.cores[c];
        let mut done = m.now;
        for &(home, at, local) in &k.fallback {
            if registered.is_some_and(|r| local <= r) {
                m.background_read(at);
                let t = m.write_from_arch(home, WriteKind::Home, home);
                done = done.max(t.durable);
            }
        }
        m.wait_until(done);
        k.fallback.clear();
        let next = k.seq;
        self.write_head(m, c, next);
    }
}

impl Protocol for Kiln {
    fn format(&self, layout: &Layout, image: &mut [u8]) {
        for c in 0..self.cores.len() {
            let (head, _) = layout.log_region(c);
            image[head.range()].copy_from_slice(&LogHead { format: LogFormat::Kiln, start: 0, start_seq: 1 }.encode());
            if self.cores.len() > 1 {
                let b = BlockId(self.nv0.0 + nvllc::binding_block(self.slots, c));
                image[b.range()].copy_from_slice(&Binding::default().encode());
            }
        }
        image[layout.nvllc_block0().range()].copy_from_slice(&Register { committed: 0, applied: 0 }.encode());
    }

    fn begin(&mut self, m: &mut Machine) {
        self.cores[m.core()].in_tx = true;
        m.begin_tx_order();
    }

    fn load(&mut self, m: &mut Machine, addr: Addr, len: usize) {
        if self.multi && self.loc_kiln {
            self.cross(m, addr, len);
        }
        for b in blocks_of(addr, len) {
            m.access_block(b, false);
            self.drain(m);
        }
    }

    fn before_store(&mut self, m: &mut Machine, addr: Addr, len: usize) {
        if self.multi && self.loc_kiln {
            self.cross(m, addr, len);
        }
        let c = m.core();
        let mine = tx_aux(c, self.cores[c].seq);
        for b in blocks_of(addr, len) {
            let Some(s) = m.hier.llc.find(b) else { continue };
            let aux = m.hier.llc.aux(s);
            if aux == 0 || aux == mine {
                continue;
            }
            if self.loc_kiln {
                self.cores[c].versions.snapshot(m, b);
            } else {
                // Isolation: no other core's running transaction wrote the line, and Kiln
                // registers at every commit, so it holds registered data.
                debug_assert_eq!(aux, REGISTERED, "block {} written by two transactions in flight", b.0);
                // Kiln: the committed version goes home, durably, before the line changes.
                let before = m.now;
                let t = m.write_from_arch(b, WriteKind::Home, b);
                m.wait_until(t.durable);
                self.c.old_version_writebacks += 1;
                self.c.old_version_stall_cycles += (m.now - before).get();
                let now = m.now;
                self.forget_line(m, s, now);
                m.hier.llc.set_aux(s, 0);
            }
        }
    }

    fn store(&mut self, m: &mut Machine, addr: Addr, len: usize) {
        let c = m.core();
        let mine = tx_aux(c, self.cores[c].seq);
        for b in blocks_of(addr, len) {
            let s = m.access_block(b, true).llc_slot;
            self.drain(m);
            let aux = m.hier.llc.aux(s);
            if aux == mine {
                continue;
            }
            if aux != 0 {
                // LOC-Kiln: keep the committed version in another way; its record moves there.
                let data = self.cores[c].versions.snapped(b);
                let window = (self.multi && aux != REGISTERED).then(|| self.cores[owner(aux)].number);
                let vs = m.keep_version(b, s, aux);
                self.drain(m);
                let mut aux = aux;
                if window.is_some_and(|w| w != self.cores[owner(aux)].number) {
                    // Placing a victim registered the version's window (a forced close).
                    m.hier.llc.set_aux(vs, REGISTERED);
                    aux = REGISTERED;
                }
                // (Payloads and records exist only when kept; the timing is the same either way.)
                // Its record keeps the committing transaction's number and core.
                let (seq, cid) = match m.keep_bytes {
                    true => {
                        let t = crate::pmem::read_block(&m.nvm, self.tag_block(s));
                        (nvllc::decode_tag(&t).map_or(0, |t| t.1), nvllc::tag_cid(&t) as usize)
                    }
                    false => (0, c),
                };
                self.record_line(m, vs, b, seq, cid, data);
                let now = m.now;
                self.forget_line(m, s, now);
                self.cores[c].versions.kept.push(Version { block: b, aux, slot: vs, data });
                self.c.versions_kept += 1;
            }
            m.hier.llc.set_aux(s, mine);
            self.cores[c].ws.push(b);
        }
    }

    fn commit(&mut self, m: &mut Machine) {
        if self.bug == Some(Bug::AckBeforeDurable) {
            // Injected: acknowledged as the commit starts, before its lines and the register.
            m.ack_through(m.txs_committed);
        }
        // Lines of this transaction a lock access evicted are logged before it registers.
        self.drain(m);
        let c = m.core();
        let (local, seq) = (self.cores[c].seq, self.next_seq);
        let mine = tx_aux(c, local);
        // Flush the transaction's L1/L2 copies into the NV-LLC and record its lines (under
        // isolation only this core's private caches can hold them dirty: docs/multicore.md).
        for i in self.cores[c].run_start..self.cores[c].ws.len() {
            let b = self.cores[c].ws[i];
            let Some(s) = m.hier.llc.find(b).filter(|&s| m.hier.llc.aux(s) == mine) else { continue };
            // Priced by the ordering model's flush cost (`ordering.flush_cost`).
            let cost = m.flush_cycles(s);
            if m.hier.flush_inner(s) {
                m.compute(cost);
                self.c.flushed_lines += 1;
            }
            let data = if m.keep_bytes { m.arch_block(b) } else { [0; 64] };
            self.record_line(m, s, b, seq, c, data);
        }
        // Older versions it overwrote: from this window, coalesced now; registered ones once
        // the register covers this transaction.
        for x in std::mem::take(&mut self.cores[c].versions.kept) {
            if !x.present(m) {
                continue;
            }
            if x.aux == REGISTERED {
                self.cores[c].superseded.push(x);
            } else {
                m.hier.llc.invalidate_slot(x.slot);
                let now = m.now;
                self.forget_line(m, x.slot, now);
                self.c.coalesced_blocks += 1;
            }
        }
        let k = &mut self.cores[c];
        k.versions.clear();
        k.win_txs.push((local, seq, k.run_start));
        k.run_start = k.ws.len();
        k.seq += 1;
        k.committed += 1;
        k.commit_at = m.now;
        k.in_tx = false;
        self.next_seq += 1;
        let txs = (k.seq - k.win_start) as usize;
        // On N cores a region holds at most one committed transaction's lines, the one its
        // binding names: a transaction that logged some closes its window.
        if window::is_complete(k.win_txs.len(), txs, self.sd as usize) || (self.multi && !k.fallback.is_empty()) {
            self.close_window(m, c);
        }
    }

    fn abort(&mut self, m: &mut Machine, _written: &[(Addr, u32)]) {
        let c = m.core();
        let mine = tx_aux(c, self.cores[c].seq);
        // Its own lines a lock access evicted are dropped, as its cached ones are; the others
        // are placed now.
        if !m.tx_victims.is_empty() {
            m.tx_victims.retain(|v| v.version || v.tag != mine);
            self.drain(m);
        }
        if self.multi && self.cores[c].versions.kept.iter().any(|x| x.aux != REGISTERED && x.present(m)) {
            // A rescued version of the core's own window goes home: the window is registered
            // first (no region holds a committed transaction's lines but the bound one).
            self.force(m, c, false);
        }
        // Rescue: older versions of blocks this transaction wrote go where they are safe.
        for x in std::mem::take(&mut self.cores[c].versions.kept) {
            if x.present(m) {
                m.hier.llc.invalidate_slot(x.slot);
                self.save_version(m, &x);
                self.c.rescued_blocks += 1;
            }
        }
        let k = &mut self.cores[c];
        for i in k.run_start..k.ws.len() {
            let b = k.ws[i];
            if m.hier.llc.find(b).is_some_and(|s| m.hier.llc.aux(s) == mine) {
                m.hier.invalidate(b);
            }
        }
        k.ws.truncate(k.run_start);
        k.versions.clear();
        let logged_own = k.fallback.iter().any(|f| f.2 == k.seq);
        k.seq += 1;
        k.in_tx = false;
        self.next_seq += 1;
        // Its fallback entries must be behind the head before the register can pass its seq.
        let txs = (k.seq - k.win_start) as usize;
        if logged_own || window::is_complete(k.win_txs.len(), txs, self.sd as usize) {
            self.close_window(m, c);
        }
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let mut list = self.c.list();
        if self.multi && self.loc_kiln {
            list.extend(self.x.list());
        }
        list
    }
}
