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

/// The whole logical image: the log area through the registers, every other byte as stored
/// (the data area, any NV-LLC state; the reserve after the log area keeps the physical spare
/// line and register block, which no protocol reads).
pub fn logical_image(geom: &Geometry, phys: &[u8]) -> Result<Vec<u8>, String> {
    let mut logical = phys.to_vec();
    logical_log(geom, phys, &mut logical)?;
    Ok(logical)
}

/// Gap moves [`update_logical_log`] replays at most; more, and it asks for a rebuild.
const MAX_REPLAYED_MOVES: u64 = 1024;

/// Bring `logical` (a view built by [`logical_log`] under `regs`) up to date with `phys` after
/// the physical blocks `written` changed, from the register block `phys` holds now: the lines
/// moved by the gap moves between `regs` and those registers (at most `MAX_REPLAYED_MOVES`), and
/// the lines written, are copied. Returns the new registers, or `None` (nothing done) when the
/// register block does not decode or is not reachable from `regs` by replaying moves: the
/// caller must rebuild with [`logical_log`]. The result equals [`logical_log`]'s.
pub fn update_logical_log(
    geom: &Geometry,
    regs: &Registers,
    phys: &[u8],
    written: &[BlockId],
    logical: &mut [u8],
) -> Option<Registers> {
    let regs_block: &[u8; 64] = phys[geom.regs_block().range()].try_into().expect("64 bytes");
    let now = Registers::decode(regs_block, geom).ok()?;
    if now.moves < regs.moves || now.moves - regs.moves > MAX_REPLAYED_MOVES {
        return None;
    }
    let (mut r, mut moved) = (*regs, Vec::new());
    while r.moves < now.moves {
        let (src, _, next) = geom.next_move(&r);
        moved.push(geom.logical_line(&r, src).expect("a move's source holds a line"));
        r = next;
    }
    if r != now {
        return None;
    }
    let lines = moved.into_iter().map(|l| BlockId(geom.line0 + l));
    let written = written.iter().filter_map(|p| geom.logical_line(&now, p.0 - geom.line0));
    for b in lines.chain(written.map(|l| BlockId(geom.line0 + l))) {
        logical[b.range()].copy_from_slice(&phys[geom.physical(&now, b).range()]);
    }
    Some(now)
}
