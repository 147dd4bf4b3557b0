//! The pool's byte layout and its persistent allocator (docs/pmdk.md, "The pool file").
//!
//! Offset 0 holds the pool header (4 KiB); the heap follows. Every object is a block: a 16-byte
//! header (the block's size with two flag bits, then the type number) and the object's bytes.
//! A block's size is a multiple of 64 up to 2 KiB and of 4 KiB above; the free blocks form 64
//! lists (one per size up to 2 KiB, one per power of two above: a freed block joins the list of
//! the largest size it holds, an allocation takes from the list of the smallest that holds
//! it) whose head lies in the pool header and whose links lie in
//! the free blocks' headers (the type number's word), so that a free leaves the object's bytes
//! as they were, as PMDK's does. New blocks are cut from the end of the used heap (`bump`)
//! while it lasts, and only then taken from the free lists: a freed object is not handed out
//! again at once (hashmap_atomic's remove reads an entry after freeing it, which PMDK's
//! allocator, recycling freed blocks late, lets it do).
//! Every change the allocator makes goes through [`Writer`], which names the range for the
//! trace: the allocator's writes are the program's writes. Inside a transaction the writer
//! logs the old bytes of the program's objects for its rollback, but not of the allocator's
//! metadata (the heap's end, the free lists' heads and links, block headers), which the
//! threads' transactions share: restoring an aborted transaction's snapshot of them would undo
//! the allocations and frees other threads made meanwhile (handing their blocks out again).
//! An aborted transaction's allocations are freed instead ([`TxLog::allocs`]), and its frees
//! wait for its commit ([`TxLog::frees`]), as PMDK defers `pmemobj_tx_free`.

/// Bytes of the pool header.
pub const HEADER: u64 = 4096;
/// Bytes of a block's header.
pub const OBJ_HDR: u64 = 16;
pub const MAGIC: &[u8; 8] = b"LOCSIMPO";
pub const VERSION: u64 = 1;
/// Block flags in the low bits of the size word.
pub const ALLOCATED: u64 = 1;
pub const ROOT: u64 = 2;
/// The block size's bits of the size word (multiples of 16 below 2^56); the top byte holds
/// the slack of an exact-size block: its usable bytes are the block's less 16 less the slack.
const SIZE_BITS: u64 = 0x00ff_ffff_ffff_fff0;

/// A block's size, from its size word.
pub fn bs_of(w: u64) -> u64 {
    w & SIZE_BITS
}

/// The usable bytes of a block, from its size word.
pub fn usable_of(w: u64) -> u64 {
    bs_of(w) - OBJ_HDR - (w >> 56)
}

/// The free list a freed block of `bs` bytes joins: the largest class whose blocks it holds.
fn class_down(bs: u64) -> usize {
    if bs <= 2048 {
        (bs / 64).max(1) as usize - 1
    } else {
        32 + (63 - bs.leading_zeros() as usize - 12)
    }
}
pub const CLASSES: usize = 64;
/// Where the layout name lies in the header, and its room (with the NUL).
pub const LAYOUT_AT: u64 = 1024;
pub const LAYOUT_MAX: usize = 1024;

/// Header fields (byte offsets).
pub const H_MAGIC: u64 = 0;
pub const H_VERSION: u64 = 8;
pub const H_SIZE: u64 = 16;
pub const H_UUID: u64 = 24;
pub const H_ROOT: u64 = 32;
pub const H_ROOT_SIZE: u64 = 40;
pub const H_BUMP: u64 = 48;
pub const H_FREE: u64 = 64;

/// The block size that holds `size` bytes of object, and its class.
pub fn block_of(size: u64) -> Option<(u64, usize)> {
    let need = size.checked_add(OBJ_HDR)?;
    if need <= 2048 {
        let bs = need.div_ceil(64) * 64;
        Some((bs, (bs / 64 - 1) as usize))
    } else {
        // Whole pages; the free list of the power of two at or above (its blocks all hold it).
        let bs = need.checked_next_multiple_of(4096)?;
        let class = 32 + (need.checked_next_power_of_two()?.trailing_zeros() as usize - 12);
        (class < CLASSES).then_some((bs, class))
    }
}

/// One place that writes the pool: `base` is its mapping; each write names the range touched
/// and, inside a transaction (`tx`), logs the old bytes of what is not the allocator's.
pub struct Writer<'a> {
    pub base: *mut u8,
    pub size: u64,
    pub tx: Option<TxLog<'a>>,
    pub touched: &'a mut Vec<(u64, u64)>,
}

/// A transaction's logs, as the allocator writes them.
pub struct TxLog<'a> {
    /// Old bytes of the ranges written, restored (last first) by an abort.
    pub undo: &'a mut Vec<(u64, Vec<u8>)>,
    /// The objects allocated, freed by an abort.
    pub allocs: &'a mut Vec<u64>,
    /// The objects freed, freed when the transaction commits (an abort keeps them).
    pub frees: &'a mut Vec<u64>,
}

impl Writer<'_> {
    pub fn read(&self, off: u64) -> u64 {
        debug_assert!(off + 8 <= self.size);
        // SAFETY: `off` lies in the mapped pool (callers check offsets against its size).
        unsafe { (self.base.add(off as usize) as *const u64).read_unaligned() }
    }

    pub fn write(&mut self, off: u64, v: u64) {
        self.bytes(off, &v.to_le_bytes());
    }

    pub fn bytes(&mut self, off: u64, b: &[u8]) {
        if let Some(tx) = self.tx.as_mut() {
            // SAFETY: as in `read`.
            let old = unsafe { std::slice::from_raw_parts(self.base.add(off as usize), b.len()) };
            tx.undo.push((off, old.to_vec()));
        }
        self.meta(off, b);
    }

    /// A write of the allocator's metadata: touched, never logged for a rollback.
    fn meta(&mut self, off: u64, b: &[u8]) {
        self.touched.push((off, b.len() as u64));
        // SAFETY: as in `read`.
        unsafe { std::slice::from_raw_parts_mut(self.base.add(off as usize), b.len()) }.copy_from_slice(b);
    }

    /// Zero `len` bytes at `off` (logged like a write).
    pub fn zero(&mut self, off: u64, len: u64) {
        if let Some(u) = self.tx.as_mut().map(|tx| &mut *tx.undo) {
            // SAFETY: as in `read`.
            let old = unsafe { std::slice::from_raw_parts(self.base.add(off as usize), len as usize) };
            u.push((off, old.to_vec()));
        }
        self.touched.push((off, len));
        // SAFETY: as in `read`.
        unsafe { std::ptr::write_bytes(self.base.add(off as usize), 0, len as usize) };
    }

    /// Allocate a block for `size` bytes of type `type_num`; the object's offset, or None when
    /// the pool is full. `exact`: an allocation class's object (`POBJ_CLASS_ID`), whose usable
    /// size is `size` itself (its block is `size + 16` rounded up to 16 bytes). Inside a
    /// transaction the object joins its allocations (an abort frees it).
    pub fn alloc(&mut self, size: u64, type_num: u64, flags: u64, exact: bool) -> Option<u64> {
        let (bs, class) = block_of(size)?;
        let bs = if exact { (size + OBJ_HDR).div_ceil(16) * 16 } else { bs };
        let head_at = H_FREE + 8 * class as u64;
        let bump = self.read(H_BUMP);
        let (block, bs) = if bump.checked_add(bs)? <= self.size {
            self.meta(H_BUMP, &(bump + bs).to_le_bytes());
            (bump, bs)
        } else {
            let head = self.read(head_at);
            if head == 0 {
                return None;
            }
            let next = self.read(head + 8);
            self.meta(head_at, &next.to_le_bytes());
            // A freed block keeps its size (it may be larger than the class's).
            (head, bs_of(self.read(head)))
        };
        let slack = if exact { bs - OBJ_HDR - size } else { 0 };
        let flags = flags | (slack << 56);
        self.meta(block, &[(bs | ALLOCATED | flags).to_le_bytes(), type_num.to_le_bytes()].concat());
        // The object's bytes are the program's from here: the range is touched (its stores
        // are the transaction's).
        self.touched.push((block + OBJ_HDR, bs - OBJ_HDR));
        if let Some(tx) = self.tx.as_mut() {
            tx.allocs.push(block + OBJ_HDR);
        }
        Some(block + OBJ_HDR)
    }

    /// Free the object at `off` (a block allocated before); inside a transaction, when it
    /// commits.
    pub fn free(&mut self, off: u64) {
        if let Some(tx) = self.tx.as_mut() {
            tx.frees.push(off);
            return;
        }
        let block = off - OBJ_HDR;
        let bs = bs_of(self.read(block));
        let class = class_down(bs);
        let head_at = H_FREE + 8 * class as u64;
        let head = self.read(head_at);
        self.write(block + 8, head);
        self.write(block, bs);
        self.write(head_at, block);
    }
}

/// The size word of the block holding the object at `off`, if `off` can be one.
pub fn size_word(base: *const u8, size: u64, off: u64) -> Option<u64> {
    if off < HEADER + OBJ_HDR || off >= size || !off.is_multiple_of(16) {
        return None;
    }
    // SAFETY: checked inside the pool.
    let w = unsafe { (base.add((off - OBJ_HDR) as usize) as *const u64).read_unaligned() };
    let bs = bs_of(w);
    (w & ALLOCATED != 0 && bs >= 32 && off - OBJ_HDR + bs <= size).then_some(w)
}

/// The usable bytes of the object at `off` (0 when it is not an allocated object).
pub fn usable(base: *const u8, size: u64, off: u64) -> u64 {
    size_word(base, size, off).map_or(0, usable_of)
}

/// The type number of the object at `off`.
pub fn type_num(base: *const u8, size: u64, off: u64) -> Option<u64> {
    size_word(base, size, off)?;
    // SAFETY: checked by size_word.
    Some(unsafe { (base.add((off - 8) as usize) as *const u64).read_unaligned() })
}

/// The first allocated object (not the root) at or after the block at `block`.
pub fn next_object(base: *const u8, size: u64, mut block: u64) -> Option<u64> {
    // SAFETY: the header lies in the pool.
    let bump = unsafe { (base.add(H_BUMP as usize) as *const u64).read_unaligned() }.min(size);
    while block + OBJ_HDR <= bump {
        // SAFETY: block < bump <= size.
        let w = unsafe { (base.add(block as usize) as *const u64).read_unaligned() };
        let bs = bs_of(w);
        if bs < 32 {
            return None;
        }
        if w & ALLOCATED != 0 && w & ROOT == 0 {
            return Some(block + OBJ_HDR);
        }
        block += bs;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_sizes_hold_the_object_and_its_header() {
        assert_eq!(block_of(1), Some((64, 0)));
        assert_eq!(block_of(48), Some((64, 0)));
        assert_eq!(block_of(49), Some((128, 1)));
        assert_eq!(block_of(100), Some((128, 1)));
        assert_eq!(block_of(2032), Some((2048, 31)));
        assert_eq!(block_of(2033), Some((4096, 32)));
        assert_eq!(block_of(5000), Some((8192, 33)));
        assert_eq!(class_down(8192), 33);
        assert_eq!(block_of((1 << 20) - 16), Some((1 << 20, 40)));
    }

    #[test]
    fn freed_blocks_are_reused_by_their_class_and_the_iteration_skips_them() {
        let mut pool = vec![0u8; 1 << 16];
        let base = pool.as_mut_ptr();
        let mut touched = Vec::new();
        let mut w = Writer { base, size: 1 << 16, tx: None, touched: &mut touched };
        w.write(H_BUMP, HEADER);
        let a = w.alloc(100, 3, 0, false).unwrap();
        let b = w.alloc(10, 4, 0, false).unwrap();
        let c = w.alloc(100, 5, 0, false).unwrap();
        assert_eq!((a, b, c), (HEADER + 16, HEADER + 128 + 16, HEADER + 192 + 16));
        w.free(a);
        assert_eq!(next_object(base, 1 << 16, HEADER), Some(b));
        // The heap's end first, then the freed block.
        let mut n = 0;
        while w.alloc(40, 7, 0, false).is_some() {
            n += 1;
        }
        assert_eq!(n, ((1 << 16) - HEADER - 320) / 64);
        assert_eq!(w.alloc(90, 6, 0, false), Some(a));
        assert_eq!(type_num(base, 1 << 16, a), Some(6));
        assert_eq!(usable(base, 1 << 16, a), 112);
        assert_eq!(w.alloc(1 << 20, 1, 0, false), None);
        // An allocation class's object: its usable size is what was asked.
        w.write(H_BUMP, HEADER + 320);
        let e = w.alloc(100, 8, 0, true).unwrap();
        assert_eq!((e, usable(base, 1 << 16, e)), (HEADER + 320 + 16, 100));
        assert_eq!(next_object(base, 1 << 16, HEADER + 320), Some(e));
        w.free(e);
        assert_eq!(usable(base, 1 << 16, e), 0);
    }

    #[test]
    fn in_a_transaction_the_allocators_metadata_is_not_logged_and_frees_wait() {
        let mut pool = vec![0u8; 1 << 16];
        let base = pool.as_mut_ptr();
        let (mut touched, mut undo, mut allocs, mut frees) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut w = Writer { base, size: 1 << 16, tx: None, touched: &mut touched };
        w.write(H_BUMP, HEADER);
        let a = w.alloc(100, 3, 0, false).unwrap();
        let b = {
            let tx = TxLog { undo: &mut undo, allocs: &mut allocs, frees: &mut frees };
            let mut w = Writer { base, size: 1 << 16, tx: Some(tx), touched: &mut touched };
            let b = w.alloc(100, 4, 0, false).unwrap();
            w.zero(b, 112);
            w.write(a, 7);
            w.free(a);
            b
        };
        // The free waits: the object is still allocated.
        assert_eq!(usable(base, 1 << 16, a), 112);
        // Logged: the zeroing of the new object and the write to the old one, not the heap's
        // end or the new block's header.
        assert_eq!(undo.iter().map(|u| (u.0, u.1.len())).collect::<Vec<_>>(), [(b, 112), (a, 8)]);
        assert_eq!((allocs, frees), (vec![b], vec![a]));
        // Both the metadata and the objects are touched (the trace's ranges).
        assert!(touched.contains(&(H_BUMP, 8)) && touched.contains(&(b - OBJ_HDR, 16)));
    }
}
