//! Host memory for the simulator's large arrays (the byte images of persistent memory, the PCM
//! cell counters): zeroed and, on Linux, backed by transparent huge pages where the kernel
//! allows them. Simulated accesses land at random places in tens of megabytes; with 4 KiB pages
//! nearly each one also misses the host TLB. A hint only: contents and results are the same.

/// A zeroed vector of `len` elements whose storage the kernel is asked to back with huge pages.
/// `T` must be a plain integer type (all-zero bytes are its zero).
pub fn zeroed<T: Plain>(len: usize) -> Vec<T> {
    // A large zeroed allocation is fresh, untouched memory: advising it before the first touch
    // lets the first page faults allocate huge pages.
    let v = vec![T::default(); len];
    advise_huge(v.as_ptr() as *const u8, len * std::mem::size_of::<T>());
    v
}

/// [`zeroed`], with every host page committed now: each 4 KiB is written once, so the host's
/// cost of providing fresh memory (page faults, zeroing, and under a hypervisor its own first
/// touch, which was seen to cost up to a second per run on the shared machines) is paid when
/// the array is built, as it is for the byte images ([`copy_of`]), and not at the first
/// simulated access to each page.
pub fn committed<T: Plain>(len: usize) -> Vec<T> {
    let mut v = zeroed::<T>(len);
    commit_zeroed(&mut v, T::default());
    v
}

/// Commit every host page of a fresh vector whose every element is `zero` (built by `vec!` or
/// [`zeroed`]), writing `zero` once per 4 KiB without reading first. A page read before it is
/// written is first mapped to the kernel's shared zero page; the write that then replaces it
/// must flush the TLBs of every CPU running the process: an inter-processor interrupt per page
/// that stalls the process's other threads.
pub fn commit_zeroed<T: Copy>(v: &mut [T], zero: T) {
    let step = (4096 / std::mem::size_of::<T>().max(1)).max(1);
    for i in (0..v.len()).step_by(step) {
        // SAFETY: `i < v.len()`: inside the slice. A volatile write (never a read) of the value
        // already there, so that the compiler keeps it.
        unsafe { std::ptr::write_volatile(v.as_mut_ptr().add(i), zero) };
    }
}

/// Commit every host page of `v` now, keeping its contents: a page not yet provided (fresh
/// memory, read as zero) is provided at this write, so not at a later one.
pub fn commit(v: &mut [u8]) {
    for i in (0..v.len()).step_by(4096) {
        // SAFETY: `i < v.len()`: inside the slice. Volatile, so that the compiler keeps the
        // write of the value just read.
        unsafe {
            let p = v.as_mut_ptr().add(i);
            std::ptr::write_volatile(p, std::ptr::read_volatile(p));
        }
    }
}

/// A copy of `src` in storage advised as [`zeroed`].
pub fn copy_of<T: Plain>(src: &[T]) -> Vec<T> {
    let mut v = zeroed(src.len());
    v.copy_from_slice(src);
    v
}

/// Integer types (and `bool`) whose default value is all-zero bytes.
pub trait Plain: Copy + Default {}
impl Plain for u8 {}
impl Plain for u32 {}
impl Plain for u64 {}
impl Plain for bool {}

/// Host cache hint: start loading the line holding `x` (no effect on results).
#[inline(always)]
pub fn prefetch<T>(x: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults and never changes memory; `x` is a valid reference.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(x as *const T as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
}

/// Host cache hint: start loading every line of `bytes` (no effect on results).
#[inline]
pub fn prefetch_bytes(bytes: &[u8]) {
    for x in bytes.iter().step_by(64) {
        prefetch(x);
    }
    if let Some(last) = bytes.last() {
        prefetch(last);
    }
}

/// Which 4 KiB pages of a byte array hold a non-zero byte. A copy of a mostly-zero array
/// ([`Sparse::copy`]) writes only those; the others stay fresh memory, which reads as zero
/// and which the kernel provides at the first write, if there is one (the crash checker's
/// workers copy images whose log area is mostly zero). Contents are those of [`copy_of`].
pub struct Sparse {
    pages: Vec<u32>,
}

const PAGE: usize = 4096;

impl Sparse {
    pub fn of(src: &[u8]) -> Sparse {
        let zero = |p: &[u8]| p.chunks(64).all(|b| b.iter().fold(0u8, |a, &x| a | x) == 0);
        let pages = src.chunks(PAGE).enumerate().filter(|(_, p)| !zero(p)).map(|(i, _)| i as u32).collect();
        Sparse { pages }
    }

    /// A copy of `src` (the array this was made of, or its first bytes).
    pub fn copy(&self, src: &[u8]) -> Vec<u8> {
        let mut v = zeroed::<u8>(src.len());
        self.copy_into(src, &mut v);
        v
    }

    /// Copy `src` (the array this was made of, or its first bytes) to the start of `dst`,
    /// whose first `src.len()` bytes must be zero (fresh memory from [`zeroed`]): only the
    /// pages holding a non-zero byte are written.
    pub fn copy_into(&self, src: &[u8], dst: &mut [u8]) {
        for &p in &self.pages {
            let r = p as usize * PAGE..((p as usize + 1) * PAGE).min(src.len());
            if r.start >= src.len() {
                break;
            }
            dst[r.clone()].copy_from_slice(&src[r]);
        }
    }
}

/// Bytes of a host huge page (x86-64 transparent huge pages), the unit [`zeroed`] advises.
pub const HUGE: usize = 2 << 20;

#[cfg(target_os = "linux")]
fn advise_huge(p: *const u8, bytes: usize) {
    let start = (p as usize).next_multiple_of(HUGE);
    let end = (p as usize + bytes) / HUGE * HUGE;
    if end > start {
        // SAFETY: madvise only changes how the kernel backs pages of this range, which lies
        // inside one live allocation; it never changes their contents. Failure is harmless.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_huge(_p: *const u8, _bytes: usize) {}

#[cfg(test)]
mod tests {
    #[test]
    fn zeroed_and_copies_are_exact() {
        let v: Vec<u64> = super::zeroed(5 << 20);
        assert!(v.iter().all(|&x| x == 0));
        let c: Vec<u64> = super::committed((5 << 20) + 3);
        assert!(c.len() == (5 << 20) + 3 && c.iter().all(|&x| x == 0));
        let src: Vec<u8> = (0..(3 << 20)).map(|i| (i * 7) as u8).collect();
        assert_eq!(super::copy_of(&src), src);
    }

    /// A sparse copy equals the array, whole or a prefix, with non-zero bytes at the first and
    /// last byte of pages, in a last partial page, and pages of zeros between.
    #[test]
    fn sparse_copies_are_exact() {
        let mut src = vec![0u8; (5 << 20) + 100];
        for (i, at) in [0usize, 4095, 4096 * 7, 4096 * 9 - 1, 3 << 20, (5 << 20) + 99].into_iter().enumerate() {
            src[at] = i as u8 + 1;
        }
        let sparse = super::Sparse::of(&src);
        assert_eq!(sparse.pages, [0, 7, 8, 768, 1280]);
        assert!(sparse.copy(&src) == src);
        assert!(sparse.copy(&src[..(3 << 20) + 1]) == src[..(3 << 20) + 1]);
        assert!(sparse.copy(&src[..4096 * 8]) == src[..4096 * 8]);
        let mut c = sparse.copy(&src);
        super::commit(&mut c);
        assert!(c == src);
    }
}
