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
//!
//! With `startgap.two_register_copies` (`Geometry::two_copies`) the block holds two copies
//! instead, written alternately: copy `moves % 2` is the one a register write changes, and the
//! other keeps the previous registers, byte for byte.
//!
//! | bytes | field |
//! |---|---|
//! | 0..32 | copy 0 (even `moves`): `start`, `gap`, `moves`, check (u64 each) |
//! | 32..64 | copy 1 (odd `moves`): the same |
//!
//! A copy's check is FNV-1a of `LOCSGAP2`, `lines`, `start`, `gap`, `moves`; recovery takes the
//! valid copy (check and ranges) with the larger `moves`.

use super::Geometry;
use crate::types::BlockData;

const MAGIC: &[u8; 8] = b"LOCSGAP1";
/// Salt of a copy's check in the two-copy block.
const COPY_MAGIC: &[u8; 8] = b"LOCSGAP2";

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

    /// The register block after a register write of `self`, the registers before it being
    /// `prev`: [`Registers::encode`], or with two copies, `self` in copy `moves % 2` and `prev`
    /// in the other.
    pub fn encode_after(&self, geom: &Geometry, prev: &Registers) -> BlockData {
        if !geom.two_copies {
            return self.encode(geom);
        }
        let mut b = [0u8; 64];
        for r in [prev, self] {
            let at = (r.moves % 2) as usize * 32;
            for (i, v) in [r.start, r.gap, r.moves, r.copy_check(geom)].into_iter().enumerate() {
                b[at + 8 * i..at + 8 * i + 8].copy_from_slice(&v.to_le_bytes());
            }
        }
        b
    }

    fn copy_check(&self, geom: &Geometry) -> u64 {
        let mut bytes = [0u8; 40];
        bytes[..8].copy_from_slice(COPY_MAGIC);
        for (i, v) in [geom.lines, self.start, self.gap, self.moves].into_iter().enumerate() {
            bytes[8 + 8 * i..16 + 8 * i].copy_from_slice(&v.to_le_bytes());
        }
        fnv(&bytes)
    }

    /// Decode and check a register block against the geometry.
    pub fn decode(b: &BlockData, geom: &Geometry) -> Result<Registers, String> {
        let u = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        if geom.two_copies {
            let copy = |at: usize| {
                let r = Registers { start: u(at), gap: u(at + 8), moves: u(at + 16) };
                let ok = u(at + 24) == r.copy_check(geom) && r.start < geom.lines && r.gap <= geom.lines;
                ok.then_some(r)
            };
            return match (copy(0), copy(32)) {
                (Some(a), Some(b)) => Ok(if b.moves > a.moves { b } else { a }),
                (Some(r), None) | (None, Some(r)) => Ok(r),
                (None, None) => Err("start-gap register block: no valid copy".into()),
            };
        }
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
