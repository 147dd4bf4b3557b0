//! Basic units shared by every part of the model: cycles, byte addresses, 64-byte blocks.
//!
//! Addresses are physical byte addresses in the simulated persistent memory (data area and
//! memory log area share one address space, see [`crate::pmem::Layout`]). A block is the
//! 64-byte unit of caching and of atomic persistence (docs/model.md section 2).

/// A point in simulated time or a duration, in core cycles (1 GHz by default: 1 cycle = 1 ns).
///
/// A type of its own so that a count that is not time (blocks, transactions, bits) cannot be
/// added to a clock, and so that nanoseconds ([`Ns`]) cannot be: a latency in ns becomes cycles
/// only through [`crate::config::Config::ns_to_cycles`], and cycles become seconds only through
/// [`crate::config::Config::cycles_to_seconds`]. It holds a bare `u64` (`repr(transparent)`: the
/// same code as the integer), serializes as the bare number, and prints (`Display` and `Debug`)
/// as the bare number, so results and replay commands read as before.
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
#[repr(transparent)]
pub struct Cycle(u64);

impl Cycle {
    /// Time zero; also the empty duration.
    pub const ZERO: Cycle = Cycle(0);
    /// Later than any simulated time ("never").
    pub const MAX: Cycle = Cycle(u64::MAX);

    /// `n` cycles: a point in time or a duration.
    #[inline]
    pub const fn new(n: u64) -> Cycle {
        Cycle(n)
    }

    /// The number of cycles.
    #[inline]
    pub const fn get(self) -> u64 {
        self.0
    }

    /// `self + rhs`, or [`Cycle::MAX`] when that is past it.
    #[inline]
    pub fn saturating_add(self, rhs: Cycle) -> Cycle {
        Cycle(self.0.saturating_add(rhs.0))
    }

    /// `self - rhs`, or zero when `rhs` is later.
    #[inline]
    pub fn saturating_sub(self, rhs: Cycle) -> Cycle {
        Cycle(self.0.saturating_sub(rhs.0))
    }
}

impl std::ops::Add for Cycle {
    type Output = Cycle;
    #[inline]
    fn add(self, rhs: Cycle) -> Cycle {
        Cycle(self.0 + rhs.0)
    }
}

impl std::ops::AddAssign for Cycle {
    #[inline]
    fn add_assign(&mut self, rhs: Cycle) {
        self.0 += rhs.0;
    }
}

impl std::ops::Sub for Cycle {
    type Output = Cycle;
    #[inline]
    fn sub(self, rhs: Cycle) -> Cycle {
        Cycle(self.0 - rhs.0)
    }
}

impl std::ops::SubAssign for Cycle {
    #[inline]
    fn sub_assign(&mut self, rhs: Cycle) {
        self.0 -= rhs.0;
    }
}

/// A duration repeated a number of times (`n` accesses of `latency` each).
impl std::ops::Mul<u64> for Cycle {
    type Output = Cycle;
    #[inline]
    fn mul(self, n: u64) -> Cycle {
        Cycle(self.0 * n)
    }
}

impl std::iter::Sum for Cycle {
    fn sum<I: Iterator<Item = Cycle>>(it: I) -> Cycle {
        Cycle(it.map(|c| c.0).sum())
    }
}

impl std::fmt::Display for Cycle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.0, f)
    }
}

impl std::fmt::Debug for Cycle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&self.0, f)
    }
}

/// A latency in nanoseconds of wall time, as the configuration gives device latencies. Apart
/// from [`Cycle`]: it becomes cycles only through [`crate::config::Config::ns_to_cycles`] (the
/// core frequency decides how many). Serializes as the bare number.
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
#[repr(transparent)]
pub struct Ns(u64);

impl Ns {
    /// `n` nanoseconds.
    #[inline]
    pub const fn new(n: u64) -> Ns {
        Ns(n)
    }

    /// The number of nanoseconds.
    #[inline]
    pub const fn get(self) -> u64 {
        self.0
    }
}

impl std::ops::Add for Ns {
    type Output = Ns;
    #[inline]
    fn add(self, rhs: Ns) -> Ns {
        Ns(self.0 + rhs.0)
    }
}

impl std::fmt::Display for Ns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.0, f)
    }
}

impl std::fmt::Debug for Ns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&self.0, f)
    }
}

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
    let end = if len == 0 { first } else { ((addr.0 + len as u64 - 1) >> BLOCK_SHIFT) + 1 };
    (first..end).map(BlockId)
}
