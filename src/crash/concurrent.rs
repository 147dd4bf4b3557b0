//! The oracle for concurrent histories (docs/multicore.md, "The oracle for concurrent
//! histories"): is a recovered data area the image of a valid set of committed transactions?
//!
//! Transactions are numbered from 0 in commit-call order (the order of `OracleLog`). A set `S`
//! of them is *valid* at crash cycle `t` when
//! - every transaction acknowledged at `t` is in `S` and every member's commit was called by `t`;
//! - `S` is closed under each core's order and under dependence: `T` in `S` needs every earlier
//!   transaction whose written lines `T` read or wrote;
//! - (atomicity) `S` is a set of whole transactions, and its image is the initial data area
//!   with the stores of its members applied in commit order.
//!
//! The check works line by line. The committed writers of a line, in commit order, form its
//! *chain*; each writes the line after its predecessor did, so it depends on it, and in a
//! closed set the members writing a line are a prefix of its chain: the line then holds the
//! chain's *version* after that prefix (version 0: the initial bytes). The recovered bytes of a
//! line thus name the prefix lengths it may have (its *candidates*), and the question is
//! whether one closed set meets a candidate on every line at once.
//!
//! [`Closure`] answers it with a least fixpoint. `S` starts as the closure of the acknowledged
//! transactions (the *base*, which grows with `t`: the crash checker keeps the base's image as
//! its oracle image and hears only of the lines where the recovered area differs from it).
//! Then, while some line `L` holds a version other than the one `S` gives it, `S` takes the
//! writers of `L` up to its smallest candidate at or above the prefix `S` already has there,
//! and is closed again. Every step adds only transactions that every valid set containing `S`
//! must hold, so the fixpoint is the least valid set when one exists, and a line left without
//! a candidate (or a needed transaction not issued by `t`) proves that none does. The cost is
//! the lines that differ plus the transactions added, never the length of the run.
//!
//! [`History`] is the shared, read-only index of one recorded run (chains, versions, what each
//! transaction needs); [`Closure`] is one crash-checking worker's state. With one core, the
//! valid sets are the prefixes `0..k` with `A(t) <= k <= I(t)`: the prefix rule of
//! docs/model.md section 5 (tested against it here).
//!
//! Not checked here: anything outside the data area (recovery's own structures), and what
//! the structural verifiers check (the crash sweep runs them on the recovered image).

use crate::machine::Recorder;
use crate::sim::OracleLog;
use crate::types::{blocks_of, Addr, BlockData, Cycle, BLOCK_BYTES};

/// No chain (a line no committed transaction writes).
const NONE: u32 = u32::MAX;

/// One recorded concurrent history, indexed for [`Closure`]. Built once per crash check and
/// shared by its workers.
pub struct History {
    /// Per transaction: its core, the cycle its commit was called, its place in its core's order.
    core: Vec<u8>,
    called: Vec<Cycle>,
    core_pos: Vec<u32>,
    /// Per core: its transactions in its commit order.
    core_txs: Vec<Vec<u32>>,
    /// The commit-call cycles in increasing order (for `I(t)`).
    called_sorted: Vec<Cycle>,
    /// Per transaction `k`, `needs[need_end[k-1]..need_end[k]]`: the transactions it needs
    /// directly (its core's previous one, the previous writer of each line it writes, the last
    /// earlier writer of each line it reads).
    needs: Vec<u32>,
    need_end: Vec<u32>,
    /// Per transaction, the same way: the lines it writes as (chain, its 1-based position there).
    writes: Vec<(u32, u32)>,
    write_end: Vec<u32>,
    /// Per data block: its chain, or `NONE`.
    chain_of: Vec<u32>,
    /// Per chain `c`: its block, and where it starts: its writers are
    /// `writers[start[c]..start[c + 1]]`, its versions `versions[start[c] + c..=start[c + 1] + c]`.
    chain_block: Vec<u32>,
    start: Vec<u32>,
    writers: Vec<u32>,
    versions: Vec<BlockData>,
    /// The acknowledgements in cycle order (stable): (cycle, core, n) = from this cycle on, the
    /// first n transactions of the core are acknowledged.
    acks: Vec<(Cycle, u8, u64)>,
}

impl History {
    /// Index the committed transactions of `oracle` over the data area `initial` (its length is
    /// the data area's, a multiple of 64 bytes), with `record`'s commit calls and
    /// acknowledgements. Without `oracle.tx_core` every transaction is core 0's.
    pub fn new(oracle: &OracleLog, record: &Recorder, initial: &[u8]) -> History {
        let n = oracle.txs();
        assert!(n < NONE as usize && initial.len().is_multiple_of(BLOCK_BYTES), "history too large");
        let core: Vec<u8> = (0..n).map(|k| oracle.tx_core.get(k).copied().unwrap_or(0)).collect();
        let cores = core.iter().map(|&c| c as usize + 1).max().unwrap_or(1);
        let mut core_txs = vec![Vec::new(); cores];
        let mut core_pos = Vec::with_capacity(n);
        for (k, &c) in core.iter().enumerate() {
            core_pos.push(core_txs[c as usize].len() as u32);
            core_txs[c as usize].push(k as u32);
        }
        let called: Vec<Cycle> = (0..n).map(|k| record.commit_called.get(k).copied().unwrap_or(Cycle::ZERO)).collect();
        let mut called_sorted = called.clone();
        called_sorted.sort_unstable();
        let mut acks: Vec<(Cycle, u8, u64)> = (record.acks.iter().enumerate())
            .map(|(i, &(cycle, n))| (cycle, record.ack_cores.get(i).copied().unwrap_or(0), n))
            .collect();
        acks.sort_by_key(|a| a.0);
        let mut h = History {
            core,
            called,
            core_pos,
            core_txs,
            called_sorted,
            needs: Vec::new(),
            need_end: Vec::with_capacity(n),
            writes: Vec::new(),
            write_end: Vec::with_capacity(n),
            chain_of: vec![NONE; initial.len() / BLOCK_BYTES],
            chain_block: Vec::new(),
            start: vec![0],
            writers: Vec::new(),
            versions: Vec::new(),
            acks,
        };
        h.chains(oracle, initial);
        h.fill(oracle);
        h
    }

    /// First pass: which blocks have writers, and how many; the chains laid out in block order
    /// with their initial versions.
    fn chains(&mut self, oracle: &OracleLog, initial: &[u8]) {
        let blocks = self.chain_of.len();
        // Per block: the last transaction counted (stamp), its count of writers.
        let (mut seen, mut count) = (vec![NONE; blocks], vec![0u32; blocks]);
        for k in 0..oracle.txs() {
            for b in oracle.tx_blocks(k) {
                assert!(b < blocks, "a committed store past the data area");
                if seen[b] != k as u32 {
                    seen[b] = k as u32;
                    count[b] += 1;
                }
            }
        }
        for (b, &w) in count.iter().enumerate().filter(|(_, &w)| w > 0) {
            let c = self.chain_block.len();
            self.chain_of[b] = c as u32;
            self.chain_block.push(b as u32);
            let at = *self.start.last().expect("start has its first entry");
            self.start.push(at + w);
        }
        let pairs = *self.start.last().expect("start has its first entry") as usize;
        self.writers = vec![0; pairs];
        self.versions = vec![[0; BLOCK_BYTES]; pairs + self.chain_block.len()];
        for (c, &b) in self.chain_block.iter().enumerate() {
            let v = self.start[c] as usize + c;
            let r = b as usize * BLOCK_BYTES..(b as usize + 1) * BLOCK_BYTES;
            self.versions[v].copy_from_slice(&initial[r]);
        }
    }

    /// Second pass, in commit order: each chain's writers and versions, and what each
    /// transaction writes and needs.
    fn fill(&mut self, oracle: &OracleLog) {
        let chains = self.chain_block.len();
        // Per chain: writers so far, and the last transaction that wrote it (stamp).
        let (mut len, mut seen) = (vec![0u32; chains], vec![NONE; chains]);
        let mut last_of_core: Vec<Option<u32>> = vec![None; self.core_txs.len()];
        let mut need = Vec::new();
        for k in 0..oracle.txs() {
            let core = self.core[k] as usize;
            need.extend(last_of_core[core].replace(k as u32));
            // Reads first: the last writer before `k` (its own writes come after).
            let reads = match k {
                _ if oracle.tx_read_end.len() <= k => &[][..],
                0 => &oracle.reads[..oracle.tx_read_end[0]],
                _ => &oracle.reads[oracle.tx_read_end[k - 1]..oracle.tx_read_end[k]],
            };
            for &b in reads {
                let c = self.chain_of.get(b as usize).copied().unwrap_or(NONE);
                if c != NONE && len[c as usize] > 0 {
                    need.push(self.writer(c, len[c as usize]));
                }
            }
            for (addr, bytes) in oracle.tx_stores(k) {
                for b in blocks_of(Addr(addr), bytes.len()) {
                    let c = self.chain_of[b.0 as usize];
                    let (ci, first) = (c as usize, self.start[c as usize] as usize + c as usize);
                    if seen[ci] != k as u32 {
                        seen[ci] = k as u32;
                        let p = len[ci];
                        if p > 0 {
                            need.push(self.writer(c, p));
                        }
                        self.writers[self.start[ci] as usize + p as usize] = k as u32;
                        self.versions[first + p as usize + 1] = self.versions[first + p as usize];
                        len[ci] = p + 1;
                        self.writes.push((c, p + 1));
                    }
                    // The part of the store in block `b`, onto the version after `k`.
                    let lo = addr.max(b.0 * BLOCK_BYTES as u64);
                    let hi = (addr + bytes.len() as u64).min((b.0 + 1) * BLOCK_BYTES as u64);
                    let v = &mut self.versions[first + len[ci] as usize];
                    let off = (lo - b.0 * BLOCK_BYTES as u64) as usize;
                    v[off..off + (hi - lo) as usize]
                        .copy_from_slice(&bytes[(lo - addr) as usize..(hi - addr) as usize]);
                }
            }
            need.sort_unstable();
            need.dedup();
            self.needs.extend_from_slice(&need);
            need.clear();
            self.need_end.push(self.needs.len() as u32);
            self.write_end.push(self.writes.len() as u32);
        }
    }

    /// Committed transactions.
    pub fn txs(&self) -> usize {
        self.core.len()
    }

    /// Cores with at least one committed transaction (at least 1).
    pub fn cores(&self) -> usize {
        self.core_txs.len()
    }

    /// The core of transaction `k`.
    pub fn core(&self, k: u32) -> u8 {
        self.core[k as usize]
    }

    /// `I(t)`: transactions whose commit was called at or before `t`.
    pub fn issued(&self, t: Cycle) -> u64 {
        self.called_sorted.partition_point(|&c| c <= t) as u64
    }

    /// The writer at 1-based position `p` of chain `c`.
    fn writer(&self, c: u32, p: u32) -> u32 {
        self.writers[self.start[c as usize] as usize + p as usize - 1]
    }

    /// Chain `c`'s version after its first `p` writers.
    fn version(&self, c: u32, p: u32) -> &BlockData {
        &self.versions[self.start[c as usize] as usize + c as usize + p as usize]
    }

    fn chain_len(&self, c: u32) -> u32 {
        self.start[c as usize + 1] - self.start[c as usize]
    }

    fn tx_range(end: &[u32], k: u32) -> std::ops::Range<usize> {
        let k = k as usize;
        (if k == 0 { 0 } else { end[k - 1] as usize })..end[k] as usize
    }

    fn needs_of(&self, k: u32) -> &[u32] {
        &self.needs[Self::tx_range(&self.need_end, k)]
    }

    fn writes_of(&self, k: u32) -> &[(u32, u32)] {
        &self.writes[Self::tx_range(&self.write_end, k)]
    }
}

/// Why a recovered data area is the image of no valid set: a line, and the transaction that
/// decides it (numbered from 0 in commit-call order) with its core.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The data block (line) that cannot hold its recovered bytes.
    pub line: u64,
    pub tx: Option<u32>,
    pub core: Option<u8>,
    pub reason: Reason,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reason {
    /// No committed transaction writes the line and it differs from the initial image.
    Unwritten,
    /// The line holds none of its versions from the one after `tx` on (every valid set holds
    /// `tx`; `acknowledged`: it is acknowledged itself, else needed by what is). With `tx`
    /// `None`: none of its versions at all (`tx` is then the first writer).
    NoVersion { acknowledged: bool, at_least: bool },
    /// Its recovered bytes need `tx`, whose commit was not called by the crash.
    Unissued,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (line, tx, core) = (self.line, self.tx.unwrap_or(0), self.core.unwrap_or(0));
        match &self.reason {
            Reason::Unwritten => {
                write!(f, "line {line}: no committed transaction writes it, and it differs from the initial image")
            }
            Reason::NoVersion { at_least: false, .. } => write!(
                f,
                "line {line}: holds neither its initial bytes nor any committed writer's (the first, transaction {tx} of core {core})"
            ),
            Reason::NoVersion { acknowledged, .. } => write!(
                f,
                "line {line}: holds none of its versions from transaction {tx}'s (core {core}) on, and every valid set holds transaction {tx} ({})",
                if *acknowledged { "acknowledged" } else { "needed by the acknowledged transactions or by other lines' recovered bytes" }
            ),
            Reason::Unissued => write!(
                f,
                "line {line}: its recovered bytes need transaction {tx} (core {core}), whose commit had not been called"
            ),
        }
    }
}

/// One worker's state: the base (the closure of the transactions acknowledged so far, which
/// only grows as crash cycles increase) and the scratch of the fixpoint above it.
pub struct Closure {
    /// Per core: how many of its transactions are acknowledged; the next acknowledgement to take.
    acked: Vec<u64>,
    next_ack: usize,
    /// Base membership per transaction, base prefix length per chain, its size, the member
    /// whose commit was called last.
    in_base: Vec<bool>,
    base_pos: Vec<u32>,
    base_len: usize,
    base_latest: Option<u32>,
    /// The transactions the last [`Closure::advance`] added to the base, in commit order.
    joined: Vec<u32>,
    /// Above the base: per transaction a stamp (`== generation`: added), per chain `(stamp,
    /// prefix)`; the transactions added (in commit order after a success), lines to look at, a
    /// stack for closing.
    mark: Vec<u32>,
    pos: Vec<(u32, u32)>,
    generation: u32,
    added: Vec<u32>,
    work: Vec<u32>,
    stack: Vec<u32>,
}

impl Closure {
    pub fn new(h: &History) -> Closure {
        let chains = h.chain_block.len();
        Closure {
            acked: vec![0; h.cores()],
            next_ack: 0,
            in_base: vec![false; h.txs()],
            base_pos: vec![0; chains],
            base_len: 0,
            base_latest: None,
            joined: Vec::new(),
            mark: vec![0; h.txs()],
            pos: vec![(0, 0); chains],
            generation: 0,
            added: Vec::new(),
            work: Vec::new(),
            stack: Vec::new(),
        }
    }

    /// Move to crash cycle `t` (not below the previous one): every transaction acknowledged by
    /// `t` joins the base, closed. Returns `(A(t), I(t))`: transactions acknowledged (over all
    /// cores) and issued. The transactions that joined are [`Closure::joined`].
    pub fn advance(&mut self, h: &History, t: Cycle) -> (u64, u64) {
        self.joined.clear();
        while let Some(&(cycle, core, n)) = h.acks.get(self.next_ack).filter(|a| a.0 <= t) {
            let _ = cycle;
            let c = core as usize;
            let n = n.min(h.core_txs.get(c).map_or(0, |v| v.len()) as u64);
            while self.acked[c] < n {
                let k = h.core_txs[c][self.acked[c] as usize];
                self.join(h, k);
                self.acked[c] += 1;
            }
            self.next_ack += 1;
        }
        self.joined.sort_unstable();
        (self.acked.iter().sum(), h.issued(t))
    }

    /// Add `k` and what it needs, transitively, to the base.
    fn join(&mut self, h: &History, k: u32) {
        self.stack.push(k);
        while let Some(x) = self.stack.pop() {
            if std::mem::replace(&mut self.in_base[x as usize], true) {
                continue;
            }
            self.joined.push(x);
            self.base_len += 1;
            if self.base_latest.is_none_or(|l| h.called[x as usize] > h.called[l as usize]) {
                self.base_latest = Some(x);
            }
            for &(c, p) in h.writes_of(x) {
                let at = &mut self.base_pos[c as usize];
                *at = (*at).max(p);
            }
            self.stack.extend_from_slice(h.needs_of(x));
        }
    }

    /// The transactions the last [`Closure::advance`] added to the base, in commit order:
    /// the caller applies them to its image of the base.
    pub fn joined(&self) -> &[u32] {
        &self.joined
    }

    /// Transactions in the base.
    pub fn base_len(&self) -> usize {
        self.base_len
    }

    /// Transactions in the least valid set the last [`Closure::settle`] found above the base,
    /// in commit order (after a failure: those added when it failed).
    pub fn added(&self) -> &[u32] {
        &self.added
    }

    /// Is `recovered` (a whole data area, differing from the base's image at most in the blocks
    /// `differing`) the image of a valid set at crash cycle `t`? On success, the least valid
    /// set is the base and [`Closure::added`].
    pub fn settle(&mut self, h: &History, t: Cycle, recovered: &[u8], differing: &[u32]) -> Result<(), Failure> {
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            self.mark.fill(0);
            self.pos.fill((0, 0));
            self.generation = 1;
        }
        self.added.clear();
        self.work.clear();
        self.work.extend_from_slice(differing);
        let result = self.fixpoint(h, t, recovered);
        self.added.sort_unstable();
        result
    }

    fn fixpoint(&mut self, h: &History, t: Cycle, recovered: &[u8]) -> Result<(), Failure> {
        if let Some(x) = self.base_latest.filter(|&x| h.called[x as usize] > t) {
            // An acknowledged transaction (or one it needs) not issued: a recorder defect.
            let line = h.writes_of(x).first().map_or(0, |&(c, _)| h.chain_block[c as usize] as u64);
            return Err(self.failure(h, line, Some(x), Reason::Unissued));
        }
        while let Some(b) = self.work.pop() {
            let c = h.chain_of[b as usize];
            if c == NONE {
                return Err(Failure { line: b as u64, tx: None, core: None, reason: Reason::Unwritten });
            }
            let m = self.prefix(c);
            let got: &BlockData = recovered[b as usize * BLOCK_BYTES..][..BLOCK_BYTES].try_into().expect("a block");
            if h.version(c, m) == got {
                continue;
            }
            let Some(j) = (m + 1..=h.chain_len(c)).find(|&j| h.version(c, j) == got) else {
                let tx = h.writer(c, m.max(1));
                let acknowledged = self.acked[h.core(tx) as usize] > h.core_pos[tx as usize] as u64;
                return Err(self.failure(h, b as u64, Some(tx), Reason::NoVersion { acknowledged, at_least: m > 0 }));
            };
            for p in m + 1..=j {
                self.add(h, t, h.writer(c, p), b)?;
            }
        }
        Ok(())
    }

    /// The prefix of chain `c` in the set (the base with the transactions added).
    fn prefix(&self, c: u32) -> u32 {
        match self.pos[c as usize] {
            (g, p) if g == self.generation => p,
            _ => self.base_pos[c as usize],
        }
    }

    /// Add `k` and what it needs, transitively, above the base; each line they write is looked
    /// at again. `line`: the line whose recovered bytes need `k` (for a failure).
    fn add(&mut self, h: &History, t: Cycle, k: u32, line: u32) -> Result<(), Failure> {
        self.stack.clear();
        self.stack.push(k);
        while let Some(x) = self.stack.pop() {
            if self.in_base[x as usize] || self.mark[x as usize] == self.generation {
                continue;
            }
            if h.called[x as usize] > t {
                return Err(self.failure(h, line as u64, Some(x), Reason::Unissued));
            }
            self.mark[x as usize] = self.generation;
            self.added.push(x);
            for &(c, p) in h.writes_of(x) {
                if p > self.prefix(c) {
                    self.pos[c as usize] = (self.generation, p);
                    self.work.push(h.chain_block[c as usize]);
                }
            }
            self.stack.extend_from_slice(h.needs_of(x));
        }
        Ok(())
    }

    fn failure(&self, h: &History, line: u64, tx: Option<u32>, reason: Reason) -> Failure {
        Failure { line, tx, core: tx.map(|k| h.core(k)), reason }
    }
}

/// Check `recovered` against `h` at crash cycle `t` from nothing: the base's image is built
/// from `initial` and compared whole. Returns the least valid set in commit order. For tests
/// and reports; the crash sweep keeps the base's image up to date instead.
pub fn judge(h: &History, initial: &[u8], oracle: &OracleLog, recovered: &[u8], t: Cycle) -> Result<Vec<u32>, Failure> {
    let mut c = Closure::new(h);
    c.advance(h, t);
    let mut base: Vec<u32> = (0..h.txs() as u32).filter(|&k| c.in_base[k as usize]).collect();
    let mut image = initial.to_vec();
    for &k in &base {
        oracle.apply_tx(k as usize, &mut image);
    }
    let differing: Vec<u32> = (image.chunks(BLOCK_BYTES).zip(recovered.chunks(BLOCK_BYTES)).enumerate())
        .filter(|(_, (x, y))| x != y)
        .map(|(b, _)| b as u32)
        .collect();
    c.settle(h, t, recovered, &differing)?;
    base.extend_from_slice(c.added());
    base.sort_unstable();
    Ok(base)
}

#[cfg(test)]
mod tests;
