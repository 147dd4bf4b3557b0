//! Basic units shared by every part of the model: cycles, byte addresses, 64-byte blocks.
//!
//! Addresses are physical byte addresses in the simulated persistent memory (data area and
//! memory log area share one address space, see [`crate::pmem::Layout`]). A block is the
//! 64-byte unit of caching and of atomic persistence (docs/model.md section 2).

/// A point in simulated time or a duration, in core cycles (1 GHz by default: 1 cycle = 1 ns).
pub type Cycle = u64;

/// Bytes in one cache line / memory block; the unit of atomic persistence.
pub const BLOCK_BYTES: usize = 64;
/// log2 of [`BLOCK_BYTES`].
pub const BLOCK_SHIFT: u32 = 6;

/// The content of one 64-byte block.
pub type BlockData = [u8; BLOCK_BYTES];

/// A physical byte address in simulated persistent memory.
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
pub struct Addr(pub u64);

/// A block number: a byte address divided by [`BLOCK_BYTES`]. Kept apart from [`Addr`] because
/// mixing the two is the classic simulator bug.
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
pub struct BlockId(pub u64);

impl Addr {
    /// The block holding this byte.
    #[inline]
    pub fn block(self) -> BlockId {
        BlockId(self.0 >> BLOCK_SHIFT)
    }
    /// Byte offset inside its block.
    #[inline]
    pub fn offset_in_block(self) -> usize {
        (self.0 as usize) & (BLOCK_BYTES - 1)
    }
}

impl std::ops::Add<u64> for Addr {
    type Output = Addr;
    #[inline]
    fn add(self, rhs: u64) -> Addr {
        Addr(self.0 + rhs)
    }
}

impl BlockId {
    /// First byte address of the block.
    #[inline]
    pub fn addr(self) -> Addr {
        Addr(self.0 << BLOCK_SHIFT)
    }
    /// Byte range of the block inside a flat image starting at address 0.
    #[inline]
    pub fn range(self) -> std::ops::Range<usize> {
        let s = (self.0 as usize) << BLOCK_SHIFT;
        s..s + BLOCK_BYTES
    }
}

/// Iterate over the blocks covered by `len` bytes starting at `addr` (`len` may be 0).
#[inline]
pub fn blocks_of(addr: Addr, len: usize) -> impl Iterator<Item = BlockId> {
    let first = addr.0 >> BLOCK_SHIFT;
    let last = if len == 0 { first } else { (addr.0 + len as u64 - 1) >> BLOCK_SHIFT };
    let n = if len == 0 { 0 } else { last - first + 1 };
    (first..first + n).map(BlockId)
}
