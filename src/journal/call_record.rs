//! SQLite's calls into the journal VFS as a replay makes them, kept compactly: each [`Call`]
//! with its [`Outcome`], a read's bytes as a digest and a write's bytes as the runs that differ
//! from a base in the database files. A [`super::vfs_tape::Tape`] is made of one.

use super::media::DbFile;
use super::vfs_call::{Call, Outcome, SUFFIX};
use std::os::raw::c_int;

/// A recorded call: [`Call`] with its buffers kept as a digest (reads) or in the tape's byte
/// buffer (writes, in call order), and names as an index into the tape's names.
#[derive(Clone, Copy, Debug)]
pub(super) enum Entry {
    Open {
        name: u32,
        flags: c_int,
    },
    Read {
        journal: bool,
        idx: u32,
        off: u64,
        len: u32,
        digest: u64,
    },
    /// `len` bytes: `base`'s bytes where the `runs` (the next bytes of the tape's byte buffer)
    /// do not say otherwise ([`encode`]).
    Write {
        journal: bool,
        idx: u32,
        off: u64,
        len: u32,
        base: Base,
        runs: u32,
    },
    Truncate {
        journal: bool,
        idx: u32,
        size: u64,
    },
    Sync {
        journal: bool,
        idx: u32,
    },
    FileSize {
        journal: bool,
        idx: u32,
    },
    Delete {
        name: u32,
    },
    Access {
        name: u32,
    },
}

/// What a recorded write's bytes are kept against: zeros, or the bytes of a database file at an
/// offset at the time of the write (past the file's end: zeros). The database files are the
/// same at every call of every replay of a tape (only the calls change them, and those are the
/// recorded ones), so a write's bytes come back exactly whatever base was chosen; a good base
/// makes the runs short: a database page written over its old version, a journal record's
/// page image read from the database.
#[derive(Clone, Copy, Debug)]
pub(super) enum Base {
    Zero,
    Db { db: u32, off: u64 },
}

/// `base`'s bytes (`len` of them) from the database files `dbs`, into `out`.
pub(super) fn base_bytes(base: Base, dbs: &[DbFile], len: usize, out: &mut Vec<u8>) {
    out.clear();
    if let Base::Db { db, off } = base {
        let cur = &dbs[db as usize].cur;
        let from = (off as usize).min(cur.len());
        out.extend_from_slice(&cur[from..(from + len).min(cur.len())]);
    }
    out.resize(len, 0);
}

/// Append to `out` the runs that turn `base` into `data` (same length): for each, the gap
/// since the last run's end and the run's length (LEB128), then its bytes. Differing bytes
/// fewer than [`RUN_GAP`] apart share a run.
fn encode(base: &[u8], data: &[u8], out: &mut Vec<u8>) {
    let mut at = 0;
    let mut i = 0;
    while i < data.len() {
        i = first_difference(base, data, i);
        if i == data.len() {
            break;
        }
        let start = i;
        let mut end = i + 1;
        let mut j = end;
        while j < data.len() && j < end + RUN_GAP {
            if data[j] != base[j] {
                end = j + 1;
            }
            j += 1;
        }
        leb128(out, (start - at) as u64);
        leb128(out, (end - start) as u64);
        out.extend_from_slice(&data[start..end]);
        at = end;
        i = end;
    }
}

/// The first index at or after `i` where `base` and `data` (same length) differ, or their
/// length. Eight bytes at a time: a database page written over its old version differs in a
/// few places, and the equal stretches between are most of what [`encode`] reads.
fn first_difference(base: &[u8], data: &[u8], mut i: usize) -> usize {
    let word = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
    while i + 8 <= data.len() {
        let x = word(base, i) ^ word(data, i);
        if x != 0 {
            return i + (x.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < data.len() && data[i] == base[i] {
        i += 1;
    }
    i
}

/// Equal bytes between two differing ones that [`encode`] keeps in one run (a run's header
/// costs two bytes or more).
const RUN_GAP: usize = 4;

/// Apply the runs [`encode`] made to `buf` (the base's bytes).
pub(super) fn decode(mut runs: &[u8], buf: &mut [u8]) {
    let mut at = 0;
    while !runs.is_empty() {
        let gap = read_leb128(&mut runs) as usize;
        let n = read_leb128(&mut runs) as usize;
        at += gap;
        buf[at..at + n].copy_from_slice(&runs[..n]);
        runs = &runs[n..];
        at += n;
    }
}

fn leb128(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn read_leb128(b: &mut &[u8]) -> u64 {
    let (mut v, mut shift) = (0u64, 0);
    loop {
        let x = b[0];
        *b = &b[1..];
        v |= ((x & 0x7f) as u64) << shift;
        if x < 0x80 {
            return v;
        }
        shift += 7;
    }
}

/// The calls of a replay in progress ([`super::vfs::World::recording`]).
#[derive(Default)]
pub struct Recording {
    pub(super) steps: Vec<(Entry, Outcome)>,
    pub(super) bytes: Vec<u8>,
    pub(super) names: Vec<String>,
    /// The database files (name, bytes) at the start of the measured part, where the steps
    /// begin ([`Recording::measured`]); none if the setup's calls cannot be left out.
    pub(super) start: Option<Vec<(String, Vec<u8>)>>,
    scratch: Vec<u8>,
}

/// A recorded write's entry, made by [`Recording::before`].
pub struct EntryOf(Entry);

impl Recording {
    fn name(&mut self, n: &str) -> u32 {
        let i = self.names.iter().position(|m| m == n).unwrap_or_else(|| {
            self.names.push(n.to_string());
            self.names.len() - 1
        });
        i as u32
    }

    /// Before `c` is carried out: a write's entry, its bytes kept against a base in the
    /// database files `dbs` as they are now (for a journal write, where `journal_source` says
    /// its bytes were likely read from: `World::journal_page_source`).
    pub fn before(
        &mut self,
        c: &Call<'_>,
        dbs: &[DbFile],
        journal_source: impl FnOnce(usize, u64, usize) -> Option<(usize, u64)>,
    ) -> Option<EntryOf> {
        let Call::Write { journal, idx, off, data } = *c else { return None };
        let base = if journal { journal_source(idx, off, data.len()) } else { Some((idx, off)) };
        let base = base.map_or(Base::Zero, |(db, off)| Base::Db { db: db as u32, off });
        base_bytes(base, dbs, data.len(), &mut self.scratch);
        let before = self.bytes.len();
        encode(&self.scratch, data, &mut self.bytes);
        let runs = (self.bytes.len() - before) as u32;
        Some(EntryOf(Entry::Write { journal, idx: idx as u32, off, len: data.len() as u32, base, runs }))
    }

    /// Keep `c`, carried out with `out` (`written`: what [`Recording::before`] made of it).
    pub fn push(&mut self, c: &Call<'_>, out: Outcome, written: Option<EntryOf>) {
        if let Some(EntryOf(e)) = written {
            self.steps.push((e, out));
            return;
        }
        let e = match c {
            Call::Open { name, flags } => Entry::Open { name: self.name(name), flags: *flags },
            Call::Read { journal, idx, off, buf } => Entry::Read {
                journal: *journal,
                idx: *idx as u32,
                off: *off,
                len: buf.len() as u32,
                digest: digest(buf),
            },
            Call::Write { .. } => unreachable!("a write's entry is made before it is carried out"),
            Call::Truncate { journal, idx, size } => {
                Entry::Truncate { journal: *journal, idx: *idx as u32, size: *size }
            }
            Call::Sync { journal, idx } => Entry::Sync { journal: *journal, idx: *idx as u32 },
            Call::FileSize { journal, idx } => Entry::FileSize { journal: *journal, idx: *idx as u32 },
            Call::Delete { name } => Entry::Delete { name: self.name(name) },
            Call::Access { name } => Entry::Access { name: self.name(name) },
        };
        self.steps.push((e, out));
    }

    /// Mark the start of the measured part, where the database files are `dbs` (settled). If no
    /// setup call touched a journal, the setup's calls changed nothing but the database files
    /// (every other effect of a database call is a statistic that the start of the measured
    /// part clears), so the tape keeps the files' bytes in place of those calls; if one did
    /// (no trace's setup does: it runs with `journal_mode=OFF`), nothing is taped.
    pub fn measured(&mut self, dbs: &[DbFile]) {
        let journal = |(e, _): &(Entry, Outcome)| match *e {
            Entry::Open { flags, .. } => flags & rusqlite::ffi::SQLITE_OPEN_MAIN_JOURNAL != 0,
            Entry::Read { journal, .. }
            | Entry::Write { journal, .. }
            | Entry::Truncate { journal, .. }
            | Entry::Sync { journal, .. }
            | Entry::FileSize { journal, .. } => journal,
            Entry::Delete { name } => self.names[name as usize].ends_with(SUFFIX),
            Entry::Access { .. } => false,
        };
        if !self.steps.iter().any(journal) {
            debug_assert!(dbs.iter().all(|d| d.durable == d.cur), "settled");
            self.start = Some(dbs.iter().map(|d| (d.name.clone(), d.cur.clone())).collect());
        }
        self.steps.clear();
        self.bytes.clear();
    }
}

/// A 64-bit digest of `b` (eight bytes at a time, then the tail and the length).
pub(super) fn digest(b: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mix = |h: u64, x: u64| (h ^ x).wrapping_mul(K).rotate_left(31);
    let words = b.chunks_exact(8);
    let mut tail = [0u8; 8];
    tail[..words.remainder().len()].copy_from_slice(words.remainder());
    let h = words.fold(0x243f_6a88_85a3_08d3, |h, w| mix(h, u64::from_le_bytes(w.try_into().expect("8"))));
    mix(mix(h, u64::from_le_bytes(tail)), b.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    #[test]
    fn runs_rebuild_any_bytes_from_any_base_and_few_changes_stay_small() {
        let mut rng = Rng::new(3);
        for len in [0usize, 1, 5, 28, 1024] {
            for changes in [0u64, 1, 3, 40, 2000] {
                let base: Vec<u8> = (0..len).map(|_| rng.below(256) as u8).collect();
                let mut data = base.clone();
                for _ in 0..changes.min(len as u64 * 2) {
                    let i = rng.below(len as u64) as usize;
                    data[i] = rng.below(256) as u8;
                }
                let mut runs = vec![];
                encode(&base, &data, &mut runs);
                let mut back = base.clone();
                decode(&runs, &mut back);
                assert_eq!(back, data, "len {len} changes {changes}");
                if changes <= 3 {
                    assert!(runs.len() <= 3 * (2 + 1 + RUN_GAP), "{} bytes of runs", runs.len());
                }
            }
        }
        // The word-wise skip finds what a byte-wise one finds: differences at every offset
        // within and across words, at the ends, and none.
        let bytewise = |base: &[u8], data: &[u8], i: usize| (i..data.len()).find(|&j| data[j] != base[j]);
        for len in [0usize, 1, 7, 8, 9, 16, 23, 64] {
            let base: Vec<u8> = (0..len).map(|_| rng.below(256) as u8).collect();
            for at in 0..=len {
                let mut data = base.clone();
                if let Some(x) = data.get_mut(at) {
                    *x ^= 1 << rng.below(8);
                }
                for from in 0..=len {
                    let want = bytewise(&base, &data, from).unwrap_or(len);
                    assert_eq!(first_difference(&base, &data, from), want, "len {len} at {at} from {from}");
                }
            }
        }
        let mut big = vec![];
        leb128(&mut big, 1 << 40);
        assert_eq!(read_leb128(&mut &big[..]), 1 << 40);
    }

    #[test]
    fn the_digest_tells_apart_bytes_lengths_and_positions() {
        let a = [1u8, 2, 3, 4, 5, 6, 7, 8, 9];
        assert_ne!(digest(&a), digest(&a[..8]));
        assert_ne!(digest(&[0; 8]), digest(&[0; 16]));
        let mut b = a;
        b.swap(0, 8);
        assert_ne!(digest(&a), digest(&b));
        assert_eq!(digest(&a), digest(&a.clone()));
    }
}
