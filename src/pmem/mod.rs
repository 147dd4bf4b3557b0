//! Persistent memory with real bytes: the physical layout (data area, memory log area), the
//! byte image, and the record of every write with the cycle it became durable.
//!
//! The durable image at a crash cycle `t` (docs/model.md section 2) is the initial image plus every
//! recorded write whose `durable` cycle is at or before `t`, applied in durability order; see
//! [`DurableRecord::image_at`]. The crash checker advances such an image incrementally.

use crate::types::{Addr, BlockData, BlockId, Cycle, BLOCK_BYTES};

/// Where the areas lie in the physical address space. Static: recovery may read it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Layout {
    /// First byte of the data area (always 0).
    pub data_base: u64,
    /// Bytes in the data area (multiple of 4096).
    pub data_bytes: u64,
    /// First byte of the memory log area (4096-aligned, right after the data area).
    pub log_base: u64,
    /// Bytes in the memory log area.
    pub log_bytes: u64,
    /// Bytes right after the log area reserved for Start-Gap's spare line and register block
    /// (`startgap::Geometry::EXTRA_BYTES` with Start-Gap on, else 0; docs/formats/startgap.md).
    pub startgap_bytes: u64,
    /// Bytes of the non-volatile LLC's persistent state, after the log area and the Start-Gap
    /// reserve (Kiln and LOC-Kiln; Proteus keeps its log pending queue there; 0 otherwise): not
    /// memory, but part of the durable image (docs/model.md section 2).
    pub nvllc_bytes: u64,
    /// Cores sharing the log area: it is split into this many equal regions, one per core,
    /// each laid out as a whole single-core log (its head block first; docs/multicore.md).
    pub cores: u32,
}

impl Layout {
    /// Data area of at least `data_bytes`, then a log area of `log_bytes`.
    pub fn new(data_bytes: u64, log_bytes: u64) -> Layout {
        let data_bytes = data_bytes.div_ceil(4096).max(1) * 4096;
        let l = Layout {
            data_base: 0,
            data_bytes,
            log_base: data_bytes,
            log_bytes,
            startgap_bytes: 0,
            nvllc_bytes: 0,
            cores: 1,
        };
        // Block numbers are 32-bit (the papers' ADDR field, and the caches' tags).
        assert!(l.total_bytes() / 64 < u32::MAX as u64, "persistent memory above 256 GB");
        l
    }
    /// The same layout followed by `bytes` of non-volatile LLC state.
    pub fn with_nvllc(self, bytes: u64) -> Layout {
        Layout { nvllc_bytes: bytes, ..self }
    }

    /// The same layout with `bytes` reserved after the log area (before any NV-LLC state):
    /// Start-Gap's spare line and register block (`startgap::Geometry::EXTRA_BYTES`).
    pub fn with_startgap(self, bytes: u64) -> Layout {
        Layout { startgap_bytes: bytes, ..self }
    }

    /// Total bytes of the durable image (persistent memory, the Start-Gap reserve if any, then
    /// the NV-LLC state if any).
    pub fn total_bytes(&self) -> u64 {
        self.log_base + self.log_bytes + self.startgap_bytes + self.nvllc_bytes
    }

    /// First block of the NV-LLC state.
    pub fn nvllc_block0(&self) -> BlockId {
        Addr(self.log_base + self.log_bytes + self.startgap_bytes).block()
    }
    /// The same layout with its log area split among `cores` cores.
    pub fn with_cores(self, cores: u32) -> Layout {
        assert!(cores >= 1 && self.log_blocks() / cores as u64 >= 2, "a log region per core");
        Layout { cores, ..self }
    }
    /// Core `c`'s log region: its first block (the region's head) and its number of blocks.
    /// With one core, the whole log area.
    pub fn log_region(&self, c: usize) -> (BlockId, u64) {
        let per = self.log_blocks() / self.cores as u64;
        (BlockId(self.log_block0().0 + c as u64 * per), per)
    }
    /// First block of the log area.
    pub fn log_block0(&self) -> BlockId {
        Addr(self.log_base).block()
    }
    /// Number of blocks in the log area.
    pub fn log_blocks(&self) -> u64 {
        self.log_bytes / BLOCK_BYTES as u64
    }
    /// Is this block in the data area?
    pub fn is_data(&self, b: BlockId) -> bool {
        b.addr().0 < self.data_bytes
    }
}

/// What a memory write is for; traffic is reported per kind.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum WriteKind {
    /// A data block written to its home location in the data area.
    Home = 0,
    /// A log data block (a copy of a data block in the memory log area).
    LogData = 1,
    /// Log metadata: descriptors, META blocks, dependency pairs.
    LogMeta = 2,
    /// A commit record.
    Commit = 3,
    /// The log head (start and end of the valid log).
    LogHead = 4,
    /// Start-Gap wear levelling of the log area: a gap-move line copy or a register write.
    WearLevel = 5,
    /// A change of the non-volatile LLC's persistent state (Kiln): not a memory write, never
    /// counted as traffic, not in [`WriteKind::ALL`].
    NvCache = 6,
}

impl WriteKind {
    pub const ALL: [WriteKind; 6] = [
        WriteKind::Home,
        WriteKind::LogData,
        WriteKind::LogMeta,
        WriteKind::Commit,
        WriteKind::LogHead,
        WriteKind::WearLevel,
    ];
    pub fn name(self) -> &'static str {
        match self {
            WriteKind::Home => "home",
            WriteKind::LogData => "log_data",
            WriteKind::LogMeta => "log_meta",
            WriteKind::Commit => "commit",
            WriteKind::LogHead => "log_head",
            WriteKind::NvCache => "nv_cache",
            WriteKind::WearLevel => "wear_level",
        }
    }
}

/// One block write as it reached the device.
#[derive(Clone, Debug)]
pub struct DurableWrite {
    /// Cycle at which the device started the write (`durable` for a change of the NV-LLC,
    /// which is never in flight). Between the two the write is in flight: a torn-write crash
    /// model lets part of it be durable (docs/faults.md).
    pub started: Cycle,
    /// Cycle at which the write became durable.
    pub durable: Cycle,
    pub block: BlockId,
    pub kind: WriteKind,
    pub data: BlockData,
}

/// Every write of a run, for the crash checker.
#[derive(Clone, Debug, Default)]
pub struct DurableRecord {
    pub writes: Vec<DurableWrite>,
}

impl DurableRecord {
    /// Sort writes by durability cycle, keeping issue order among equals (stable sort). Writes to
    /// one block are issued and completed in order (one bank, FCFS), so this order is the
    /// device's.
    ///
    /// The records are 96 bytes and arrive nearly in order (banks complete out of issue order
    /// by a few writes), so sorting them directly moved each record many times (a third of a
    /// B+tree `crashtest`'s time at 8 000 transactions): the 16-byte keys `(durable, issue
    /// index)` are sorted instead, and the records are moved once each, along the cycles of
    /// that permutation.
    pub fn finish(&mut self) {
        let w = &mut self.writes;
        if w.is_sorted_by_key(|x| x.durable) {
            return;
        }
        let mut keys: Vec<(Cycle, usize)> = w.iter().enumerate().map(|(i, x)| (x.durable, i)).collect();
        // The issue index breaks ties, so an unstable sort gives the stable order.
        keys.sort_unstable();
        // Position `i` takes the record now at `keys[i].1`. Follow each cycle once: hold the
        // first record, pull each next one into the hole, close with the held one; a visited
        // position is marked by pointing at itself.
        for start in 0..w.len() {
            if keys[start].1 == start {
                continue;
            }
            let held = w[start].clone();
            let mut hole = start;
            loop {
                let from = std::mem::replace(&mut keys[hole].1, hole);
                if from == start {
                    w[hole] = held;
                    break;
                }
                w[hole] = w[from].clone();
                hole = from;
            }
        }
    }

    /// The durable image at crash cycle `t`, built from scratch (tests; the checker advances
    /// one image incrementally instead).
    pub fn image_at(&self, initial: &[u8], t: Cycle) -> Vec<u8> {
        let mut img = initial.to_vec();
        for w in self.writes.iter().take_while(|w| w.durable <= t) {
            img[w.block.range()].copy_from_slice(&w.data);
        }
        img
    }
}

/// Read one block out of a flat image.
#[inline]
pub fn read_block(img: &[u8], b: BlockId) -> BlockData {
    img[b.range()].try_into().expect("64 bytes")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    /// `finish` orders the writes as a stable sort by durability cycle does: runs nearly in
    /// order (the simulator's case), in reverse, at random, with many equal cycles.
    #[test]
    fn finish_orders_writes_as_a_stable_sort_does() {
        for seed in 0..40u64 {
            let mut rng = Rng::new(seed);
            let n = rng.below(300) as usize;
            let spread = [1, 3, 50, 10_000][seed as usize % 4];
            let writes: Vec<DurableWrite> = (0..n)
                .map(|i| {
                    let durable = Cycle::new(match seed % 3 {
                        0 => i as u64 + rng.below(spread),
                        1 => (n - i) as u64 * 2 + rng.below(spread),
                        _ => rng.below(spread),
                    });
                    let mut data = [0u8; 64];
                    data[..8].copy_from_slice(&(i as u64).to_le_bytes());
                    DurableWrite {
                        started: durable,
                        durable,
                        block: BlockId(i as u64 % 7),
                        kind: WriteKind::Home,
                        data,
                    }
                })
                .collect();
            let mut expected = writes.clone();
            expected.sort_by_key(|w| w.durable);
            let mut rec = DurableRecord { writes };
            rec.finish();
            let order = |v: &[DurableWrite]| v.iter().map(|w| (w.durable, w.data)).collect::<Vec<_>>();
            assert_eq!(order(&rec.writes), order(&expected), "seed {seed}");
        }
    }
}
