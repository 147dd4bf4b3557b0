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
//! **LOC-Kiln** (`loose`): the same NV-LLC with speculation windows of SD committed
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

use super::group::{self, Group, GroupRing};
use super::window::{self, aux_of, Version, Versions, MAX_WINDOW_TXS};
use super::{Bug, Protocol};
use crate::cache::Slot;
use crate::log::ec::BlkTag;
use crate::log::head::{LogFormat, LogHead};
use crate::log::nvllc::{self, Register};
use crate::machine::Machine;
use crate::pmem::{Layout, WriteKind};
use crate::types::{blocks_of, Addr, BlockData, BlockId, Cycle};

/// LLC `aux` of a committed line whose transaction the register covers (a [`Version`]'s
/// `aux` may be this, or a window transaction's [`aux_of`]).
const REGISTERED: u32 = u32::MAX;

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

pub struct Kiln {
    bug: Option<Bug>,
    loose: bool,
    sd: u64,
    nv0: BlockId,
    ring: GroupRing,
    write_cycles: Cycle,
    /// Sequence number of the running (or next) transaction; the register's 0 means none.
    seq: u64,
    /// First sequence number of the window.
    win_start: u64,
    /// Committed, not yet registered transactions of the window: (seq, first index in `ws`).
    win_txs: Vec<(u64, usize)>,
    /// Blocks written by the window's committed transactions, then the running one's.
    ws: Vec<BlockId>,
    run_start: usize,
    /// Per LLC slot: until when its recorded committed data must stay (until its copy
    /// elsewhere is durable); a new record waits for it.
    slot_free_at: Vec<Cycle>,
    group: Option<Group>,
    trunc_sid: u64,
    /// `start_seq` of the durable log head.
    head_seq: u64,
    /// Fallback log entries since the last truncation: (home, log block, seq).
    fallback: Vec<(BlockId, BlockId, u64)>,
    fallback_durable: Cycle,
    /// The running transaction's older versions, and the registered ones it superseded at
    /// commit (dropped once the register covers it).
    versions: Versions,
    superseded: Vec<Version>,
    c: Counters,
}

impl Kiln {
    pub fn new(layout: &Layout, loose: bool, sd: u32, write_cycles: Cycle, llc_slots: usize, bug: Option<Bug>) -> Kiln {
        assert!(layout.nvllc_bytes >= nvllc::bytes(llc_slots), "layout built with with_nvllc");
        assert!(layout.total_bytes() / 64 < (1 << 31) - 1, "versioned LLC tags hold 31-bit block numbers");
        Kiln {
            bug,
            loose,
            sd: if loose { sd as u64 } else { 1 },
            nv0: layout.nvllc_block0(),
            ring: GroupRing::new(layout, "the fallback log"),
            write_cycles,
            seq: 1,
            win_start: 1,
            win_txs: Vec::with_capacity(64),
            ws: Vec::with_capacity(4096),
            run_start: 0,
            slot_free_at: vec![0; llc_slots],
            group: None,
            trunc_sid: 0,
            head_seq: 1,
            fallback: Vec::new(),
            fallback_durable: 0,
            versions: Versions::default(),
            superseded: Vec::new(),
            c: Counters::default(),
        }
    }

    fn tag_block(&self, s: Slot) -> BlockId {
        BlockId(self.nv0.0 + nvllc::tag_block(s.0))
    }

    fn data_block(&self, s: Slot) -> BlockId {
        BlockId(self.nv0.0 + nvllc::data_block(s.0))
    }

    /// Record slot `s` as holding committed data `data` of `home` by `seq`, durable now;
    /// first waits until the slot's previous committed data is durable elsewhere.
    fn record_line(&mut self, m: &mut Machine, s: Slot, home: BlockId, seq: u64, data: BlockData) {
        let before = m.now;
        m.wait_until(self.slot_free_at[s.0]);
        self.c.slot_reuse_stall_cycles += m.now - before;
        let now = m.now;
        m.nv_record(self.data_block(s), |_| data, now);
        m.nv_record(self.tag_block(s), |_| nvllc::encode_tag(Some((home.0, seq))), now);
    }

    /// From cycle `at`, slot `s` holds no committed data recovery should use.
    fn forget_line(&mut self, m: &mut Machine, s: Slot, at: Cycle) {
        self.slot_free_at[s.0] = self.slot_free_at[s.0].max(at);
        m.nv_record(self.tag_block(s), |_| nvllc::encode_tag(None), at);
    }

    fn seq_of(&self, aux: u32) -> u64 {
        self.win_start + (((aux - 1) as u64).wrapping_sub(self.win_start) & 0xFFFF)
    }

    /// Append a block to the fallback log; returns the cycle from which it counts (its group's
    /// META, written after it, is durable).
    fn log_fallback(&mut self, m: &mut Machine, home: BlockId, seq: u64, data: Option<&BlockData>) -> Cycle {
        if self.fallback.is_empty() && self.seq - self.head_seq >= MAX_WINDOW_TXS as u64 {
            // TxIDs are read relative to the head's start_seq: bring it up to this window first.
            self.write_head(m, self.win_start);
        }
        let mut g = match self.group.take() {
            Some(g) if !g.is_full() => g,
            _ => self.ring.open(m, self.trunc_sid, false),
        };
        let (_, at) = g.push(BlkTag { addr: home.0 as u32, tx_id: seq as u8, ..Default::default() });
        let t = group::write_data(m, at, home, data);
        g.note_data(t.done);
        self.c.fallback_log_blocks += 1;
        self.fallback.push((home, at, seq));
        // The META (rewritten as the group fills) completes after the group's data.
        let mt = g.write_meta(m, 0, self.write_cycles, None);
        self.fallback_durable = self.fallback_durable.max(mt.durable);
        self.group = Some(g);
        mt.durable
    }

    /// Truncate the fallback log past every group so far (durably); no transaction before
    /// `start_seq` logs after it.
    fn write_head(&mut self, m: &mut Machine, start_seq: u64) {
        self.group = None;
        self.trunc_sid = self.ring.next_sid;
        self.head_seq = start_seq;
        let head = LogHead { format: LogFormat::Kiln, start: self.ring.next_sid, start_seq: self.head_seq };
        let t = m.write_encoded(self.ring.log0, WriteKind::LogHead, || head.encode());
        m.wait_until(t.durable);
    }

    /// Write an older version where it is safe once it leaves the cache: home if its
    /// transaction is registered, else the fallback log; its slot is forgotten once that copy
    /// is durable.
    fn save_version(&mut self, m: &mut Machine, x: &Version) {
        let durable = if x.aux == REGISTERED {
            let t = m.write_encoded(x.block, WriteKind::Home, || x.data);
            m.wait_until(t.accepted);
            t.durable
        } else {
            let seq = self.seq_of(x.aux);
            self.log_fallback(m, x.block, seq, Some(&x.data))
        };
        self.forget_line(m, x.slot, durable);
    }

    /// Lines the last LLC insert pushed out; `s` is the slot it filled (the victim's).
    fn drain(&mut self, m: &mut Machine, s: Slot) {
        while let Some(v) = m.tx_victims.pop() {
            if v.version {
                self.c.version_overflows += 1;
                let from = |xs: &Vec<Version>| xs.iter().position(|x| x.block == v.block && x.slot == s);
                let x = match from(&self.versions.kept) {
                    Some(i) => self.versions.kept.swap_remove(i),
                    None => self.superseded.swap_remove(from(&self.superseded).expect("an evicted version is tracked")),
                };
                self.save_version(m, &x);
            } else if v.tag == REGISTERED {
                let t = m.write_from_arch(v.block, WriteKind::Home, v.block);
                m.wait_until(t.accepted);
                self.forget_line(m, s, t.durable);
            } else {
                let seq = self.seq_of(v.tag);
                if seq == self.seq && self.bug == Some(Bug::EvictUncommittedHome) {
                    let t = m.write_from_arch(v.block, WriteKind::Home, v.block);
                    m.wait_until(t.accepted);
                    continue;
                }
                let durable = self.log_fallback(m, v.block, seq, None);
                if seq != self.seq {
                    // Committed, not registered: recorded in the slot until the log copy counts.
                    self.forget_line(m, s, durable);
                }
            }
        }
    }

    /// The register moves to the window's last committed transaction (after the fallback log
    /// is durable) and the window is acknowledged; registered versions it superseded are
    /// dropped; the fallback log goes home and is truncated.
    fn close_window(&mut self, m: &mut Machine) {
        let before = m.now;
        m.wait_until(self.fallback_durable);
        let registered = self.win_txs.last().map(|&(s, _)| s);
        if let Some(r) = registered {
            let now = m.now;
            m.nv_record(self.nv0, |_| Register { committed: r, applied: 0 }.encode(), now);
            for x in std::mem::take(&mut self.superseded) {
                if m.hier.llc.is_version_of(x.slot, x.block) {
                    m.hier.llc.invalidate_slot(x.slot);
                    self.forget_line(m, x.slot, now);
                }
            }
        }
        self.c.window_stall_cycles += m.now - before;
        if self.bug != Some(Bug::AckBeforeDurable) {
            m.ack_through(m.txs_committed);
        }
        for (i, &(seq, start)) in self.win_txs.iter().enumerate() {
            let end = self.win_txs.get(i + 1).map_or(self.run_start, |w| w.1);
            for &b in &self.ws[start..end] {
                if let Some(s) = m.hier.llc.find(b).filter(|&s| m.hier.llc.aux(s) == aux_of(seq)) {
                    m.hier.llc.set_aux(s, REGISTERED);
                }
            }
        }
        if !self.fallback.is_empty() {
            let mut done = m.now;
            for &(home, at, seq) in &self.fallback {
                if registered.is_some_and(|r| seq <= r) {
                    m.background_read(at);
                    let t = m.write_from_arch(home, WriteKind::Home, home);
                    done = done.max(t.durable);
                }
            }
            m.wait_until(done);
            self.fallback.clear();
            self.write_head(m, self.seq);
        }
        self.ws.drain(..self.run_start);
        self.run_start = 0;
        self.win_txs.clear();
        self.win_start = self.seq;
        self.c.windows += 1;
    }
}

impl Protocol for Kiln {
    fn format(&self, layout: &Layout, image: &mut [u8]) {
        LogHead { format: LogFormat::Kiln, start: 0, start_seq: 1 }.write_initial(layout, image);
        image[layout.nvllc_block0().range()].copy_from_slice(&Register { committed: 0, applied: 0 }.encode());
    }

    fn begin(&mut self, _m: &mut Machine) {}

    fn load(&mut self, m: &mut Machine, addr: Addr, len: usize) {
        for b in blocks_of(addr, len) {
            let s = m.access_block(b, false).llc_slot;
            self.drain(m, s);
        }
    }

    fn before_store(&mut self, m: &mut Machine, addr: Addr, len: usize) {
        let mine = aux_of(self.seq);
        for b in blocks_of(addr, len) {
            let Some(s) = m.hier.llc.find(b) else { continue };
            let aux = m.hier.llc.aux(s);
            if aux == 0 || aux == mine {
                continue;
            }
            if self.loose {
                self.versions.snapshot(m, b);
            } else {
                // Kiln: the committed version goes home, durably, before the line changes.
                let before = m.now;
                let t = m.write_from_arch(b, WriteKind::Home, b);
                m.wait_until(t.durable);
                self.c.old_version_writebacks += 1;
                self.c.old_version_stall_cycles += m.now - before;
                let now = m.now;
                self.forget_line(m, s, now);
                m.hier.llc.set_aux(s, 0);
            }
        }
    }

    fn store(&mut self, m: &mut Machine, addr: Addr, len: usize) {
        let mine = aux_of(self.seq);
        for b in blocks_of(addr, len) {
            let s = m.access_block(b, true).llc_slot;
            self.drain(m, s);
            let aux = m.hier.llc.aux(s);
            if aux == mine {
                continue;
            }
            if aux != 0 {
                // LOC-Kiln: keep the committed version in another way; its record moves there.
                let data = self.versions.snapped(b);
                let vs = m.keep_version(b, s, aux);
                self.drain(m, vs);
                // (Payloads and records exist only when kept; the timing is the same either way.)
                let seq = match m.keep_bytes {
                    true => nvllc::decode_tag(&crate::pmem::read_block(&m.nvm, self.tag_block(s))).map_or(0, |t| t.1),
                    false => 0,
                };
                self.record_line(m, vs, b, seq, data);
                let now = m.now;
                self.forget_line(m, s, now);
                self.versions.kept.push(Version { block: b, aux, slot: vs, data });
                self.c.versions_kept += 1;
            }
            m.hier.llc.set_aux(s, mine);
            self.ws.push(b);
        }
    }

    fn commit(&mut self, m: &mut Machine) {
        if self.bug == Some(Bug::AckBeforeDurable) {
            // Injected: acknowledged as the commit starts, before its lines and the register.
            m.ack_through(m.txs_committed);
        }
        let mine = aux_of(self.seq);
        // Flush the transaction's L1/L2 copies into the NV-LLC and record its lines.
        for i in self.run_start..self.ws.len() {
            let b = self.ws[i];
            let Some(s) = m.hier.llc.find(b).filter(|&s| m.hier.llc.aux(s) == mine) else { continue };
            // Priced by the ordering model's flush cost (`ordering.flush_cost`).
            let cost = m.flush_cycles(s);
            if m.hier.flush_inner(s) {
                m.compute(cost);
                self.c.flushed_lines += 1;
            }
            let data = if m.keep_bytes { m.arch_block(b) } else { [0; 64] };
            self.record_line(m, s, b, self.seq, data);
        }
        // Older versions it overwrote: from this window, coalesced now; registered ones once
        // the register covers this transaction.
        for x in std::mem::take(&mut self.versions.kept) {
            if !x.present(m) {
                continue;
            }
            if x.aux == REGISTERED {
                self.superseded.push(x);
            } else {
                m.hier.llc.invalidate_slot(x.slot);
                let now = m.now;
                self.forget_line(m, x.slot, now);
                self.c.coalesced_blocks += 1;
            }
        }
        self.versions.clear();
        self.win_txs.push((self.seq, self.run_start));
        self.run_start = self.ws.len();
        self.seq += 1;
        let txs = (self.seq - self.win_start) as usize;
        if window::is_complete(self.win_txs.len(), txs, self.sd as usize) {
            self.close_window(m);
        }
    }

    fn abort(&mut self, m: &mut Machine, _written: &[(Addr, u32)]) {
        let mine = aux_of(self.seq);
        // Rescue: older versions of blocks this transaction wrote go where they are safe.
        for x in std::mem::take(&mut self.versions.kept) {
            if x.present(m) {
                m.hier.llc.invalidate_slot(x.slot);
                self.save_version(m, &x);
                self.c.rescued_blocks += 1;
            }
        }
        for i in self.run_start..self.ws.len() {
            let b = self.ws[i];
            if m.hier.llc.find(b).is_some_and(|s| m.hier.llc.aux(s) == mine) {
                m.hier.invalidate(b);
            }
        }
        self.ws.truncate(self.run_start);
        self.versions.clear();
        let logged_own = self.fallback.iter().any(|f| f.2 == self.seq);
        self.seq += 1;
        // Its fallback entries must be behind the head before the register can pass its seq.
        if logged_own || window::is_complete(self.win_txs.len(), (self.seq - self.win_start) as usize, self.sd as usize)
        {
            self.close_window(m);
        }
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        self.c.list()
    }
}
