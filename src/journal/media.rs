//! What survives a crash: the PCM journal area (bytes, uncached, each 64-byte block write atomic
//! and durable when it returns) and the database files (ordinary files: a write is volatile
//! until the next sync of its file). Also the device time and the crash point.
//!
//! Every durable action is an *event*, numbered from 0 in the measured region: a PCM block
//! write, a database file write, a database file sync. A crash at event `k` keeps events
//! `0..k` and loses `k` and everything after; of the database writes not yet synced, each
//! 512-byte sector survives or not at random (seeded), as on a disk that reorders its cache.

use super::cpu::{CpuClock, CpuTime, BOARD_CORE_MHZ, HOST_CYCLES_PER_VM_STEP};
use super::format::PAGE_BYTES;
use crate::pcm::{Pcm, PcmConfig};
use crate::rng::Rng;
use serde::Serialize;

/// Bytes of the PCM write buffer and of an atomic PCM write (the paper's 64-byte software
/// write buffer, section 6 footnote 5).
pub const BLOCK: u64 = 64;
/// Sector of the database file device (survives a crash whole or not at all).
pub const SECTOR: u64 = 512;

/// Time to program one 32-byte chunk on one PCM chip of the board, ns: the chip the paper cites
/// (Chung et al., ISSCC 2011, "A 58nm 1.8V 1Gb PRAM with 6.4 MB/s program BW"; four x16 chips
/// on the board, Table I) programs 6.4 MB/s, so one 32-byte chunk takes 32 B / 6.4e6 B/s =
/// 5 us; the four chips program in parallel (a 128-byte step in 5 us, 25.6 MB/s for the DIMM;
/// the 2 KB program buffer, 512 B per chip, fills in 16 steps, 80 us). docs/journal.md gives
/// the derivation. The journal device's default; `--set pcm.chunk_program_ns=N` overrides it.
pub const CHUNK_PROGRAM_NS: u64 = 5_000;

/// Timing of the journal model besides the PCM device's writes (docs/journal.md gives the
/// sources; PCM write latency is the device's, `crate::pcm`).
#[derive(Clone, Debug, Serialize)]
pub struct Timing {
    /// Non-cacheable read of one 64-byte PCM block over the LPDDR2-N read path: pre-activation,
    /// activation, read latency (tRP 13 + tRCD 80 + tCL 40 ns, the board's Table I). Assumed:
    /// one access moves a whole 64-byte block (one burst).
    pub pcm_read_ns_per_block: u64,
    /// Copy of one 1 KiB page into the operating system's page cache (DRAM). Assumed.
    pub db_write_ns_per_page: u64,
    /// Flash program of one database page at a sync (the paper, section 4: "~1 ms per page
    /// write").
    pub db_sync_ns_per_page: u64,
    /// CPU time of SQLite itself per trace command as a constant, in place of the measured
    /// one (`--cpu-ns-per-command N`; `scripts/journal_eval.py` sweeps it). `None`: measured,
    /// from the virtual-machine instructions SQLite executed ([`Timing::cpu_time`]).
    pub cpu_ns_per_command: Option<u64>,
    /// CPU time of one SQLite virtual-machine instruction on the board's 667 MHz Cortex-A9
    /// (Table I) in the host-calibrated variant, ps: [`HOST_CYCLES_PER_VM_STEP`] cycles at
    /// 667 MHz.
    pub cpu_ps_per_vm_step: u64,
    /// Where SQLite's CPU time comes from when no constant is set: the ARM instructions
    /// measured on the board's ISA (the default) or the host-calibrated variant
    /// ([`super::cpu`]). Reported as `JournalResult::cpu_time_source`.
    #[serde(skip)]
    pub cpu_time: CpuTime,
}

impl Timing {
    /// The SQLite CPU clock of a replay of trace `trace` of application `app` with the journal
    /// (`journal`) or without it, under this timing ([`CpuClock::new`]).
    pub fn cpu_clock(&self, app: &str, trace: &str, journal: bool) -> CpuClock {
        CpuClock::new(self.cpu_ns_per_command, self.cpu_time, self.cpu_ps_per_vm_step, app, trace, journal)
    }
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            pcm_read_ns_per_block: 133,
            db_write_ns_per_page: 1_000,
            db_sync_ns_per_page: 1_000_000,
            cpu_ns_per_command: None,
            cpu_ps_per_vm_step: HOST_CYCLES_PER_VM_STEP * 1_000_000 / BOARD_CORE_MHZ,
            cpu_time: Default::default(),
        }
    }
}

/// What an event was, for choosing crash points.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum EventKind {
    /// A PCM write of page data into a portion.
    JournalData,
    /// A PCM write of journal metadata (flags, descriptors, headers, manager).
    JournalMeta,
    /// A PCM write made by garbage collection or a frame migration.
    Gc,
    /// A write to a database file.
    DbWrite,
    /// A sync of a database file.
    DbSync,
}

pub const EVENT_KINDS: [EventKind; 5] =
    [EventKind::JournalData, EventKind::JournalMeta, EventKind::Gc, EventKind::DbWrite, EventKind::DbSync];

enum Pending {
    Write(u64, Vec<u8>),
    Truncate(u64),
}

/// Bytes at which `a` and `b` (of one length) differ, eight at a time: a byte of `x = a ^ b` is
/// non-zero exactly when adding 0x7f to its low seven bits carries into, or it already has, its
/// top bit.
fn differing_bytes(a: &[u8], b: &[u8]) -> usize {
    const LOW: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail = ca.remainder().iter().zip(cb.remainder()).filter(|(x, y)| x != y).count();
    let words = ca.zip(cb).map(|(x, y)| {
        let x = u64::from_ne_bytes(x.try_into().expect("8")) ^ u64::from_ne_bytes(y.try_into().expect("8"));
        (((x & LOW) + LOW) | x) & !LOW
    });
    words.map(|t| t.count_ones() as usize).sum::<usize>() + tail
}

/// One database file.
pub struct DbFile {
    pub name: String,
    /// What reads see.
    pub cur: Vec<u8>,
    /// What a crash keeps for sure.
    pub durable: Vec<u8>,
    pending: Vec<Pending>,
    dirty_pages: Vec<u64>,
    /// Writes of each page (measured region).
    pub page_writes: Vec<u32>,
}

impl DbFile {
    pub fn new(name: &str, durable: Vec<u8>) -> DbFile {
        DbFile {
            name: name.into(),
            cur: durable.clone(),
            durable,
            pending: Vec::new(),
            dirty_pages: Vec::new(),
            page_writes: Vec::new(),
        }
    }
}

/// The durable state at a crash.
#[derive(Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub pcm: Vec<u8>,
    pub dbs: Vec<(String, Vec<u8>)>,
}

/// The media, with device time and energy.
pub struct Media {
    pub bytes: Vec<u8>,
    pub pcm: Pcm,
    pub dbs: Vec<DbFile>,
    pub timing: Timing,
    /// Device time of journal PCM accesses, ns.
    pub pcm_ns: u64,
    /// Device time of database file writes and syncs, ns.
    pub db_ns: u64,
    /// The syncs' part of `db_ns`: time the process is blocked on the flash device.
    pub db_sync_ns: u64,
    /// Context of the PCM writes being made (set by the allocator).
    pub ctx: EventKind,
    pub events: u64,
    /// Record the kind of each event (for choosing crash points).
    pub kinds: Option<Vec<EventKind>>,
    crash_at: Option<u64>,
    /// Seeds the generator of a crash snapshot's torn sectors, derived anew for each snapshot.
    crash_seed: u64,
    pub snapshot: Option<Snapshot>,
    /// Events at which to take the snapshot a crash would take, without crashing (sorted,
    /// distinct; [`Media::capture_at`]), the next of them, and the snapshots taken, each with
    /// its event, for the owner to take.
    capture: Vec<u64>,
    capture_next: usize,
    pub captured: Vec<(u64, Snapshot)>,
    pub pcm_block_writes: u64,
    /// Whole-page database writes over an existing page, and those changing at most 64 bytes.
    pub db_overwrites: u64,
    pub db_small_overwrites: u64,
    /// Addresses of the PCM blocks written since the owner last took them, when recorded (the
    /// loadable extension copies them into its PCM image file).
    pub written: Option<Vec<u64>>,
}

impl Media {
    pub fn new(cfg: &PcmConfig, frames: u64, timing: Timing) -> Media {
        Media::holding(cfg, vec![0; (frames * super::format::FRAME_BYTES) as usize], timing)
    }

    /// Media holding `bytes` in a new PCM device of that size.
    fn holding(cfg: &PcmConfig, bytes: Vec<u8>, timing: Timing) -> Media {
        let len = bytes.len() as u64;
        let regions = [("manager", 0, super::format::FRAME_BYTES), ("frames", super::format::FRAME_BYTES, len)];
        Media::with_pcm(Pcm::new(cfg, len, &regions), bytes, timing)
    }

    /// Media holding `bytes` in `pcm` (a device of that size), nothing else done yet.
    fn with_pcm(pcm: Pcm, bytes: Vec<u8>, timing: Timing) -> Media {
        Media {
            bytes,
            pcm,
            dbs: Vec::new(),
            timing,
            pcm_ns: 0,
            db_ns: 0,
            db_sync_ns: 0,
            ctx: EventKind::JournalMeta,
            events: 0,
            kinds: None,
            crash_at: None,
            crash_seed: 0,
            snapshot: None,
            capture: Vec::new(),
            capture_next: 0,
            captured: Vec::new(),
            pcm_block_writes: 0,
            db_overwrites: 0,
            db_small_overwrites: 0,
            written: None,
        }
    }

    /// Media holding a crash snapshot's durable state (fresh wear counters).
    pub fn from_snapshot(cfg: &PcmConfig, s: &Snapshot, timing: Timing) -> Media {
        let mut m = Media::holding(cfg, s.pcm.clone(), timing);
        m.dbs = s.dbs.iter().map(|(n, b)| DbFile::new(n, b.clone())).collect();
        m
    }

    /// [`Media::from_snapshot`] made from media done with (of the same configuration and size):
    /// its device renewed ([`Pcm::renew`]) rather than a new one built, whose wear counters
    /// (16 MiB for the paper's 2 MB journal area) cost more to provide than checking a state.
    pub fn from_snapshot_reusing(old: Media, s: &Snapshot, timing: Timing) -> Media {
        let (mut pcm, mut bytes) = (old.pcm, old.bytes);
        assert_eq!(bytes.len(), s.pcm.len(), "reused media of another size");
        pcm.renew();
        bytes.copy_from_slice(&s.pcm);
        let mut m = Media::with_pcm(pcm, bytes, timing);
        m.dbs = s.dbs.iter().map(|(n, b)| DbFile::new(n, b.clone())).collect();
        m
    }

    /// Start counting events from 0 and crash at event `at` (None: never).
    pub fn arm(&mut self, at: Option<u64>, seed: u64) {
        self.events = 0;
        self.crash_at = at;
        self.crash_seed = seed;
        self.capture_next = 0;
    }

    /// Before each of `events` (counted from [`Media::arm`]; sorted, distinct) take the snapshot
    /// that a crash there takes, and go on: each snapshot draws its torn sectors from a
    /// generator seeded as a crash run's, so it equals the snapshot of a run armed to crash there.
    pub fn capture_at(&mut self, events: Vec<u64>) {
        debug_assert!(events.windows(2).all(|p| p[0] < p[1]), "capture events sorted and distinct");
        self.capture = events;
        self.capture_next = 0;
    }

    /// Forget wear, energy and time so far (start of the measured region).
    pub fn reset_stats(&mut self) {
        self.pcm.reset_stats();
        self.pcm_ns = 0;
        self.db_ns = 0;
        self.db_sync_ns = 0;
        self.pcm_block_writes = 0;
        self.db_overwrites = 0;
        self.db_small_overwrites = 0;
        for f in &mut self.dbs {
            f.page_writes.clear();
        }
    }

    /// Mean writes per database page written, over the measured region.
    pub fn writes_per_page(&self) -> f64 {
        let (mut w, mut p) = (0u64, 0u64);
        for f in &self.dbs {
            w += f.page_writes.iter().map(|&x| x as u64).sum::<u64>();
            p += f.page_writes.iter().filter(|&&x| x > 0).count() as u64;
        }
        if p == 0 {
            0.0
        } else {
            w as f64 / p as f64
        }
    }

    pub fn crashed(&self) -> bool {
        self.snapshot.is_some()
    }

    /// Number the next event; false (and the crash taken) if it does not happen.
    fn event(&mut self, kind: EventKind) -> bool {
        if self.crashed() {
            return false;
        }
        if self.capture.get(self.capture_next) == Some(&self.events) {
            self.capture_next += 1;
            let s = self.take_snapshot();
            self.captured.push((self.events, s));
        }
        if self.crash_at == Some(self.events) {
            self.snapshot = Some(self.take_snapshot());
            return false;
        }
        if let Some(k) = &mut self.kinds {
            k.push(kind);
        }
        self.events += 1;
        true
    }

    fn take_snapshot(&self) -> Snapshot {
        let mut rng = Rng::derive(self.crash_seed, 0xC4A5);
        let mut dbs = Vec::with_capacity(self.dbs.len());
        for f in &self.dbs {
            let mut img = f.durable.clone();
            for p in &f.pending {
                match p {
                    Pending::Truncate(n) => {
                        if rng.chance(0.5) {
                            img.resize(*n as usize, 0);
                        }
                    }
                    Pending::Write(off, data) => {
                        let mut at = 0u64;
                        while at < data.len() as u64 {
                            let sector_end = ((off + at) / SECTOR + 1) * SECTOR;
                            let n = (sector_end - (off + at)).min(data.len() as u64 - at);
                            if rng.chance(0.5) {
                                let o = (off + at) as usize;
                                if img.len() < o + n as usize {
                                    img.resize(o + n as usize, 0);
                                }
                                img[o..o + n as usize].copy_from_slice(&data[at as usize..(at + n) as usize]);
                            }
                            at += n;
                        }
                    }
                }
            }
            dbs.push((f.name.clone(), img));
        }
        Snapshot { pcm: self.bytes.clone(), dbs }
    }

    /// Read PCM bytes (uncached: every block touched costs a device read).
    pub fn pcm_read(&mut self, addr: u64, buf: &mut [u8]) {
        let blocks = (addr + buf.len() as u64).div_ceil(BLOCK) - addr / BLOCK;
        self.pcm_ns += blocks * self.timing.pcm_read_ns_per_block;
        self.pcm.read(blocks * BLOCK);
        buf.copy_from_slice(&self.bytes[addr as usize..addr as usize + buf.len()]);
    }

    /// Write PCM bytes through the 64-byte write buffer: each block touched is read, and
    /// written (differentially, one event) only if its contents change. Returns false if the
    /// crash happened.
    pub fn pcm_write(&mut self, addr: u64, data: &[u8]) -> bool {
        let end = addr + data.len() as u64;
        let mut b = addr / BLOCK * BLOCK;
        while b < end {
            let lo = addr.max(b);
            let hi = end.min(b + BLOCK);
            let mut new = [0u8; BLOCK as usize];
            new.copy_from_slice(&self.bytes[b as usize..(b + BLOCK) as usize]);
            new[(lo - b) as usize..(hi - b) as usize]
                .copy_from_slice(&data[(lo - addr) as usize..(hi - addr) as usize]);
            self.pcm_ns += self.timing.pcm_read_ns_per_block;
            self.pcm.read(BLOCK);
            if new[..] != self.bytes[b as usize..(b + BLOCK) as usize] {
                if !self.event(self.ctx) {
                    return false;
                }
                let old = &self.bytes[b as usize..(b + BLOCK) as usize];
                let cost = self.pcm.write(b, old, &new);
                self.pcm_ns += cost.latency_ns;
                self.pcm_block_writes += 1;
                self.bytes[b as usize..(b + BLOCK) as usize].copy_from_slice(&new);
                if let Some(w) = &mut self.written {
                    w.push(b);
                }
            }
            b += BLOCK;
        }
        true
    }

    /// Write into database file `i` (volatile until synced).
    pub fn db_write(&mut self, i: usize, off: u64, data: &[u8]) -> bool {
        if !self.event(EventKind::DbWrite) {
            return false;
        }
        let f = &mut self.dbs[i];
        let end = off as usize + data.len();
        if data.len() as u64 == PAGE_BYTES && off.is_multiple_of(PAGE_BYTES) {
            let pg = (off / PAGE_BYTES) as usize;
            if f.page_writes.len() <= pg {
                f.page_writes.resize(pg + 1, 0);
            }
            f.page_writes[pg] += 1;
            if end <= f.cur.len() {
                let diff = differing_bytes(&f.cur[off as usize..end], data);
                self.db_overwrites += 1;
                self.db_small_overwrites += (diff <= 64) as u64;
            }
        }
        if f.cur.len() < end {
            f.cur.resize(end, 0);
        }
        f.cur[off as usize..end].copy_from_slice(data);
        f.pending.push(Pending::Write(off, data.to_vec()));
        for p in off / PAGE_BYTES..(end as u64).div_ceil(PAGE_BYTES) {
            if !f.dirty_pages.contains(&p) {
                f.dirty_pages.push(p);
            }
        }
        self.db_ns += (data.len() as u64).div_ceil(PAGE_BYTES) * self.timing.db_write_ns_per_page;
        true
    }

    pub fn db_truncate(&mut self, i: usize, size: u64) -> bool {
        if !self.event(EventKind::DbWrite) {
            return false;
        }
        let f = &mut self.dbs[i];
        f.cur.resize(size as usize, 0);
        f.pending.push(Pending::Truncate(size));
        true
    }

    /// Make database file `i` durable as it is.
    pub fn db_sync(&mut self, i: usize) -> bool {
        if self.dbs[i].pending.is_empty() {
            return true;
        }
        if !self.event(EventKind::DbSync) {
            return false;
        }
        let f = &mut self.dbs[i];
        // `durable` was `cur` at the last sync; the pending writes and truncations, in order,
        // make it `cur` again at the cost of the bytes written, not of the file.
        for p in f.pending.drain(..) {
            match p {
                Pending::Truncate(n) => f.durable.resize(n as usize, 0),
                Pending::Write(off, data) => {
                    let end = off as usize + data.len();
                    if f.durable.len() < end {
                        f.durable.resize(end, 0);
                    }
                    f.durable[off as usize..end].copy_from_slice(&data);
                }
            }
        }
        debug_assert!(f.durable == f.cur, "a sync leaves the durable file equal to what reads see");
        let wait = f.dirty_pages.len() as u64 * self.timing.db_sync_ns_per_page;
        self.db_ns += wait;
        self.db_sync_ns += wait;
        f.dirty_pages.clear();
        true
    }

    /// Make every database file durable without counting anything (end of the setup phase).
    pub fn settle(&mut self) {
        for f in &mut self.dbs {
            f.durable.clone_from(&f.cur);
            f.pending.clear();
            f.dirty_pages.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn media() -> Media {
        Media::new(&PcmConfig::default(), 2, Timing::default())
    }

    #[test]
    fn differing_bytes_counts_each_changed_byte() {
        let mut rng = Rng::new(7);
        for len in [0usize, 1, 7, 8, 9, 63, 1024] {
            for _ in 0..50 {
                let a: Vec<u8> = (0..len).map(|_| rng.below(4) as u8 * 0x41).collect();
                let b: Vec<u8> = (0..len).map(|_| rng.below(4) as u8 * 0x41).collect();
                let want = a.iter().zip(&b).filter(|(x, y)| x != y).count();
                assert_eq!(differing_bytes(&a, &b), want, "len {len}");
            }
        }
        assert_eq!(differing_bytes(&[0x80; 16], &[0; 16]), 16);
        assert_eq!(differing_bytes(&[0x01; 16], &[0; 16]), 16);
        assert_eq!(differing_bytes(&[0xff; 16], &[0xff; 16]), 0);
    }

    #[test]
    fn an_unchanged_block_is_read_but_not_written() {
        let mut m = media();
        assert!(m.pcm_write(100, &[0; 10]));
        assert_eq!((m.events, m.pcm_block_writes, m.pcm_ns), (0, 0, 133));
        assert!(m.pcm_write(60, &[1; 10]), "spans two blocks");
        assert_eq!((m.events, m.pcm_block_writes), (2, 2));
        assert_eq!(m.pcm.wear.total_bit_updates, 10, "one bit per byte of 0x01");
    }

    #[test]
    fn a_crash_keeps_events_before_it_and_synced_database_bytes() {
        let mut m = media();
        m.dbs.push(DbFile::new("a", vec![0; 1024]));
        m.arm(Some(2), 7);
        assert!(m.db_write(0, 0, &[5; 1024]));
        assert!(m.db_sync(0));
        assert!(!m.pcm_write(0, &[9; 8]), "event 2 is the crash");
        assert!(!m.db_write(0, 0, &[6; 8]));
        let s = m.snapshot.as_ref().unwrap();
        assert_eq!(s.dbs[0].1, vec![5; 1024]);
        assert!(s.pcm.iter().all(|&b| b == 0));
    }

    #[test]
    fn unsynced_sectors_survive_independently() {
        let mut kept = [0u32; 2];
        for seed in 0..64 {
            let mut m = media();
            m.dbs.push(DbFile::new("a", vec![0; 1024]));
            m.arm(Some(1), seed);
            m.db_write(0, 0, &[1; 1024]);
            m.db_sync(0);
            let img = &m.snapshot.as_ref().unwrap().dbs[0].1;
            kept[0] += (img[0] == 1) as u32;
            kept[1] += (img[512] == 1) as u32;
            assert!(img[..512].iter().all(|&b| b == img[0]) && img[512..].iter().all(|&b| b == img[512]));
        }
        assert!(kept.iter().all(|&k| k > 10 && k < 54), "{kept:?}");
    }
}
