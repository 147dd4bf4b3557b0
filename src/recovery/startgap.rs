//! The logical view of a Start-Gap log area (docs/formats/startgap.md): what recovery of any
//! protocol reads, built from the physical durable image using only what is persisted there
//! (the register block and the `N + 1` lines) and the static geometry.

use crate::startgap::{Geometry, Registers};
use crate::types::BlockId;

/// Write the `N` logical log lines of `logical` (an image in the protocols' layout, data area
/// first) from the physical image `phys`. Returns the registers read. `Err` when the register
/// block does not decode; nothing is written then.
pub fn logical_log(geom: &Geometry, phys: &[u8], logical: &mut [u8]) -> Result<Registers, String> {
    let regs_block: &[u8; 64] = phys[geom.regs_block().range()].try_into().expect("64 bytes");
    let regs = Registers::decode(regs_block, geom)?;
    for l in 0..geom.lines {
        let b = BlockId(geom.line0 + l);
        logical[b.range()].copy_from_slice(&phys[geom.physical(&regs, b).range()]);
    }
    Ok(regs)
}

/// The whole logical image (data area as stored, log area through the registers).
pub fn logical_image(geom: &Geometry, phys: &[u8]) -> Result<Vec<u8>, String> {
    let len = phys.len() - Geometry::EXTRA_BYTES as usize;
    let mut logical = phys[..len].to_vec();
    logical_log(geom, phys, &mut logical)?;
    Ok(logical)
}
