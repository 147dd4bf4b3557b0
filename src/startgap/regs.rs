//! The persisted Start-Gap register block (one 64-byte block, after the `N + 1` physical lines),
//! little-endian; layout and crash argument in docs/formats/startgap.md.
//!
//! | bytes | field |
//! |---|---|
//! | 0..8 | magic `LOCSGAP1` (ASCII) |
//! | 8..16 | `lines`: N, must equal the configured geometry |
//! | 16..24 | `start`, in `0..N` |
//! | 24..32 | `gap`, in `0..=N` |
//! | 32..40 | `moves`: gap moves so far (informational) |
//! | 40..48 | FNV-1a of bytes 0..40 |
//! | 48..64 | zero |

use super::Geometry;
use crate::types::BlockData;

const MAGIC: &[u8; 8] = b"LOCSGAP1";

/// The Start and Gap registers (and a move count).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Registers {
    pub start: u64,
    pub gap: u64,
    pub moves: u64,
}

impl Registers {
    /// Before any move: start 0, the gap at line N.
    pub fn initial(geom: &Geometry) -> Registers {
        Registers { start: 0, gap: geom.lines, moves: 0 }
    }

    pub fn encode(&self, geom: &Geometry) -> BlockData {
        let mut b = [0u8; 64];
        b[0..8].copy_from_slice(MAGIC);
        b[8..16].copy_from_slice(&geom.lines.to_le_bytes());
        b[16..24].copy_from_slice(&self.start.to_le_bytes());
        b[24..32].copy_from_slice(&self.gap.to_le_bytes());
        b[32..40].copy_from_slice(&self.moves.to_le_bytes());
        let sum = fnv(&b[..40]);
        b[40..48].copy_from_slice(&sum.to_le_bytes());
        b
    }

    /// Decode and check a register block against the geometry.
    pub fn decode(b: &BlockData, geom: &Geometry) -> Result<Registers, String> {
        let u = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        if &b[0..8] != MAGIC {
            return Err("start-gap register block: bad magic".into());
        }
        if u(40) != fnv(&b[..40]) {
            return Err("start-gap register block: checksum mismatch".into());
        }
        if u(8) != geom.lines {
            return Err(format!("start-gap register block: {} lines, configured {}", u(8), geom.lines));
        }
        let r = Registers { start: u(16), gap: u(24), moves: u(32) };
        if r.start >= geom.lines || r.gap > geom.lines {
            return Err(format!("start-gap register block: start {} gap {} out of range", r.start, r.gap));
        }
        Ok(r)
    }
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &x| (h ^ x as u64).wrapping_mul(0x100_0000_01b3))
}
