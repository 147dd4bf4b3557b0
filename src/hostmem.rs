//! Host memory for the simulator's large arrays (the byte images of persistent memory, the PCM
//! cell counters): zeroed and, on Linux, backed by transparent huge pages where the kernel
//! allows them. Simulated accesses land at random places in tens of megabytes; with 4 KiB pages
//! nearly each one also misses the host TLB. A hint only: contents and results are the same.

/// A zeroed vector of `len` elements whose storage the kernel is asked to back with huge pages.
/// `T` must be a plain integer type (all-zero bytes are its zero).
pub fn zeroed<T: Plain>(len: usize) -> Vec<T> {
    try_zeroed(len).unwrap_or_else(|r| panic!("{r}"))
}

/// [`zeroed`], or [`Refused`] if the host does not give the memory (a simulated memory larger
/// than the host allows: the caller says which setting asked for it).
pub fn try_zeroed<T: Plain>(len: usize) -> Result<Vec<T>, Refused> {
    // A large zeroed allocation is fresh, untouched memory, or (at most 32 MiB) memory given
    // back and cleared ([`HostAlloc`]): advising fresh memory before the first touch lets the
    // first page faults allocate huge pages.
    let v = alloc_zeroed::<T>(len)?;
    advise(v.as_ptr() as *const u8, len * std::mem::size_of::<T>(), true);
    Ok(v)
}

/// A zeroed vector of `len` elements whose storage the kernel is asked to back with small
/// (4 KiB) pages even where it backs every large mapping with huge pages: for an array that a
/// run touches sparsely and commits a piece at a time, where a huge page would zero 2 MiB for
/// each piece. [`advise_huge_slice`] asks for huge pages again over a part of it not yet
/// touched. [`Refused`] as [`try_zeroed`].
pub fn try_zeroed_small_pages<T: Plain>(len: usize) -> Result<Vec<T>, Refused> {
    let v = alloc_zeroed::<T>(len)?;
    advise(v.as_ptr() as *const u8, len * std::mem::size_of::<T>(), false);
    Ok(v)
}

/// Memory the host can still give this process, if known (Linux: `MemAvailable` of
/// /proc/meminfo, and no more than the cgroup's `memory.max` less its `memory.current`).
pub fn available_bytes() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib = info.lines().find_map(|l| l.strip_prefix("MemAvailable:"))?.trim().strip_suffix("kB")?;
    let avail = kib.trim().parse::<u64>().ok()?.checked_mul(1024)?;
    let cgroup = |f: &str| std::fs::read_to_string(format!("/sys/fs/cgroup/{f}")).ok()?.trim().parse::<u64>().ok();
    Some(match (cgroup("memory.max"), cgroup("memory.current")) {
        (Some(max), Some(cur)) => avail.min(max.saturating_sub(cur)),
        _ => avail,
    })
}

/// The host refused an allocation of this many bytes.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Refused(pub u64);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the host refused {} bytes of memory", self.0)
    }
}

/// `len` zeroed elements from the global allocator, or [`Refused`] (where `vec!` would abort
/// the process).
fn alloc_zeroed<T: Plain>(len: usize) -> Result<Vec<T>, Refused> {
    let refused = Refused((len as u64).saturating_mul(std::mem::size_of::<T>() as u64));
    let layout = std::alloc::Layout::array::<T>(len).map_err(|_| refused)?;
    if layout.size() == 0 {
        return Ok(vec![T::default(); len]);
    }
    // SAFETY: a layout of non-zero size. The block, if any, is `len` zeroed `T`s (a `Plain` type
    // is valid as zero bytes) allocated by the global allocator with the layout `Vec<T>` of
    // capacity `len` frees it with.
    unsafe {
        let p = std::alloc::alloc_zeroed(layout) as *mut T;
        if p.is_null() {
            return Err(refused);
        }
        Ok(Vec::from_raw_parts(p, len, len))
    }
}

/// Ask the kernel to back the host huge pages lying wholly inside `v` with huge pages (as
/// [`zeroed`] does for a whole array); pages of `v` already touched keep their backing.
pub fn advise_huge_slice<T>(v: &[T]) {
    advise(v.as_ptr() as *const u8, std::mem::size_of_val(v), true);
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

/// The host CPU's family when it is AMD's (CPUID vendor "AuthenticAMD"; 0x19 for Zen 3 and
/// Zen 4, 0x1A for Zen 5), `None` on any other host: for host hints fitted per CPU (no effect on
/// results).
pub fn host_amd_family() -> Option<u32> {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: CPUID leaves 0 and 1 exist on every x86-64 CPU.
        #[allow(unused_unsafe)]
        let (id, sig) = unsafe { (std::arch::x86_64::__cpuid(0), std::arch::x86_64::__cpuid(1)) };
        // The vendor string is EBX, EDX, ECX: "Auth", "enti", "cAMD" in little-endian bytes.
        if (id.ebx, id.edx, id.ecx) != (0x6874_7541, 0x6974_6e65, 0x444d_4163) {
            return None;
        }
        // Leaf 1's EAX: base family in bits 8-11, extended family (added when the base is 0xF)
        // in bits 20-27.
        let base = (sig.eax >> 8) & 0xF;
        Some(if base == 0xF { base + ((sig.eax >> 20) & 0xFF) } else { base })
    }
    #[cfg(not(target_arch = "x86_64"))]
    None
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
        self.try_copy(src).unwrap_or_else(|r| panic!("{r}"))
    }

    /// [`Sparse::copy`], or [`Refused`] if the host does not give the memory.
    pub fn try_copy(&self, src: &[u8]) -> Result<Vec<u8>, Refused> {
        let mut v = try_zeroed::<u8>(src.len())?;
        self.copy_into(src, &mut v);
        Ok(v)
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

/// Advise the host huge pages lying wholly inside `bytes` bytes at `p`: back them with huge
/// pages (`huge`) or with small pages only.
#[cfg(target_os = "linux")]
fn advise(p: *const u8, bytes: usize, huge: bool) {
    let start = (p as usize).next_multiple_of(HUGE);
    let end = (p as usize + bytes) / HUGE * HUGE;
    if end > start {
        let advice = if huge { libc::MADV_HUGEPAGE } else { libc::MADV_NOHUGEPAGE };
        // SAFETY: madvise only changes how the kernel backs pages of this range, which lies
        // inside one live allocation; it never changes their contents. Failure is harmless.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, advice);
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn advise(_p: *const u8, _bytes: usize, _huge: bool) {}

/// The host allocator of locsim's programs (installed with `#[global_allocator]` by the binary
/// and the Python module): a zeroed allocation of at least [`LARGE`] bytes is a mapping of its
/// own at an address aligned to [`HUGE`] (fresh, or one of its size given back and cleared);
/// every other allocation is the system allocator's, as before.
///
/// Why: the simulator's large arrays (the program and device byte images, the caches' tag
/// arrays, the PCM cell counters) are allocated zeroed, indexed by simulated block, 64 bytes
/// each, and read cold. The system allocator places a large block 16 bytes past a page
/// boundary (glibc's chunk header), so every simulated block straddled two host cache lines:
/// two host memory misses per cold block instead of one, and a prefetch of the block's first
/// byte fetched half of it. Aligned to a huge page, a block is one host line, and transparent
/// huge pages can back the whole array, not only the huge pages wholly inside it. The reuse
/// follows the system allocator's, which maps afresh only above a threshold of at most 32 MiB
/// and reuses freed memory below it; allocations that are not zeroed (copies, growing vectors)
/// stay with it.
pub struct HostAlloc;

/// Zeroed allocations of at least this many bytes are mapped by [`HostAlloc`] itself.
pub const LARGE: usize = 1 << 20;

#[cfg(target_os = "linux")]
mod map {
    use super::{HUGE, PAGE};
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// The live mappings of [`HostAlloc`](super::HostAlloc), by address (0: a free entry): a
    /// block given back is unmapped only if it is here, and given to the system allocator
    /// otherwise. A zeroed allocation finding no free entry is the system allocator's.
    static LIVE: [AtomicUsize; 1024] = [const { AtomicUsize::new(0) }; 1024];

    fn pages(bytes: usize) -> usize {
        bytes.next_multiple_of(PAGE)
    }

    fn entry(p: usize) -> Option<&'static AtomicUsize> {
        if !p.is_multiple_of(PAGE) {
            return None; // every mapping is page aligned; most other blocks are not
        }
        LIVE.iter().find(|e| e.load(Ordering::Relaxed) == p)
    }

    /// Is `p` a live mapping of [`map`]?
    pub(super) fn is_live(p: *mut u8) -> bool {
        entry(p as usize).is_some()
    }

    /// Fresh zeroed memory of `bytes` bytes, aligned to `HUGE` and registered (null on failure,
    /// or when every entry is taken).
    pub(super) fn map(bytes: usize) -> *mut u8 {
        let len = pages(bytes);
        if let Some(p) = reuse(len) {
            // SAFETY: a whole mapping of `len` bytes taken out of the cache: the caller's alone.
            unsafe { std::ptr::write_bytes(p, 0, bytes) };
            return p;
        }
        // SAFETY: an anonymous private mapping of fresh memory; the parts outside the aligned
        // range are unmapped again, and the rest belongs to the caller.
        unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                len + HUGE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            if p == libc::MAP_FAILED {
                return std::ptr::null_mut();
            }
            let start = p as usize;
            let aligned = start.next_multiple_of(HUGE);
            if aligned > start {
                libc::munmap(p, aligned - start);
            }
            let tail = start + len + HUGE - (aligned + len);
            if tail > 0 {
                libc::munmap((aligned + len) as *mut libc::c_void, tail);
            }
            let free =
                LIVE.iter().find(|e| e.compare_exchange(0, aligned, Ordering::Relaxed, Ordering::Relaxed).is_ok());
            if free.is_none() {
                libc::munmap(aligned as *mut libc::c_void, len);
                return std::ptr::null_mut();
            }
            aligned as *mut u8
        }
    }

    /// Give back `p` of `bytes` bytes if it is a live mapping of [`map`]; `false` otherwise.
    ///
    /// # Safety
    /// `p` and `bytes` are those of a live allocation of [`HostAlloc`](super::HostAlloc).
    pub(super) unsafe fn unmap(p: *mut u8, bytes: usize) -> bool {
        let Some(e) = entry(p as usize) else { return false };
        if !keep(p, pages(bytes)) {
            libc::munmap(p as *mut libc::c_void, pages(bytes));
            e.store(0, Ordering::Relaxed);
        }
        true
    }

    /// Mappings of at most this many bytes given back are kept for reuse (as the system
    /// allocator reuses blocks up to its own mapping threshold, 32 MiB at most): a run's
    /// arrays of a few MiB built again by the next point of an experiment are cleared
    /// instead of mapped afresh, which would fault in every page they touch again.
    const REUSE_MAX: usize = 32 << 20;

    /// Mappings given back and kept, `(address, bytes)` (0: none; at most 16 x 32 MiB); they
    /// stay in `LIVE`.
    static KEPT: std::sync::Mutex<[(usize, usize); 16]> = std::sync::Mutex::new([(0, 0); 16]);

    /// Keep the mapping `p` of `len` bytes for reuse; `false` if it is not kept.
    fn keep(p: *mut u8, len: usize) -> bool {
        if len > REUSE_MAX {
            return false;
        }
        let Ok(mut kept) = KEPT.lock() else { return false };
        match kept.iter_mut().find(|k| k.0 == 0) {
            Some(k) => {
                *k = (p as usize, len);
                true
            }
            None => false,
        }
    }

    /// A kept mapping of exactly `len` bytes, taken out of the cache.
    fn reuse(len: usize) -> Option<*mut u8> {
        if len > REUSE_MAX {
            return None;
        }
        let mut kept = KEPT.lock().ok()?;
        let k = kept.iter_mut().find(|k| k.0 != 0 && k.1 == len)?;
        let p = std::mem::take(k).0;
        Some(p as *mut u8)
    }

    /// Resize `p` of `old` bytes to `new` if it is a live mapping of [`map`] (`None`
    /// otherwise): a mapping holding its first bytes (page aligned; null on failure, `p` then
    /// unchanged).
    ///
    /// # Safety
    /// `p` and `old` are those of a live allocation of [`HostAlloc`](super::HostAlloc).
    pub(super) unsafe fn remap(p: *mut u8, old: usize, new: usize) -> Option<*mut u8> {
        let e = entry(p as usize)?;
        let q = libc::mremap(p as *mut libc::c_void, pages(old), pages(new.max(1)), libc::MREMAP_MAYMOVE);
        if q == libc::MAP_FAILED {
            return Some(std::ptr::null_mut());
        }
        e.store(q as usize, Ordering::Relaxed);
        Some(q as *mut u8)
    }
}

#[cfg(target_os = "linux")]
// SAFETY: a mapped block is a whole mapping of its own (zeroed, aligned to `HUGE`, which every
// alignment up to it divides), registered in `map::LIVE` while live and given back with
// `munmap`; every other block is the system allocator's and goes back to it.
unsafe impl std::alloc::GlobalAlloc for HostAlloc {
    unsafe fn alloc(&self, l: std::alloc::Layout) -> *mut u8 {
        std::alloc::System.alloc(l)
    }

    unsafe fn alloc_zeroed(&self, l: std::alloc::Layout) -> *mut u8 {
        if l.size() >= LARGE && l.align() <= HUGE {
            let p = map::map(l.size());
            if !p.is_null() {
                return p;
            }
        }
        std::alloc::System.alloc_zeroed(l)
    }

    unsafe fn dealloc(&self, p: *mut u8, l: std::alloc::Layout) {
        if !(l.size() >= LARGE && map::unmap(p, l.size())) {
            std::alloc::System.dealloc(p, l)
        }
    }

    unsafe fn realloc(&self, p: *mut u8, l: std::alloc::Layout, new: usize) -> *mut u8 {
        if l.size() >= LARGE && new >= LARGE {
            if let Some(q) = map::remap(p, l.size(), new) {
                return q;
            }
        } else if l.size() >= LARGE && map::is_live(p) {
            // Shrunk below `LARGE`: to the system allocator, which every block of that size is.
            let q = std::alloc::System.alloc(std::alloc::Layout::from_size_align_unchecked(new, l.align()));
            if !q.is_null() {
                std::ptr::copy_nonoverlapping(p, q, new);
                map::unmap(p, l.size());
            }
            return q;
        }
        std::alloc::System.realloc(p, l, new)
    }
}

#[cfg(not(target_os = "linux"))]
// SAFETY: the system allocator's.
unsafe impl std::alloc::GlobalAlloc for HostAlloc {
    unsafe fn alloc(&self, l: std::alloc::Layout) -> *mut u8 {
        std::alloc::System.alloc(l)
    }
    unsafe fn alloc_zeroed(&self, l: std::alloc::Layout) -> *mut u8 {
        std::alloc::System.alloc_zeroed(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: std::alloc::Layout) {
        std::alloc::System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: std::alloc::Layout, new: usize) -> *mut u8 {
        std::alloc::System.realloc(p, l, new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request no host gives (2^62 bytes, beyond any x86-64 address space) is an error that
    /// names its size, not an abort; a small one is zeroed memory.
    #[test]
    fn a_refused_allocation_is_an_error_and_a_given_one_is_zeroed() {
        assert_eq!(try_zeroed::<u8>(1 << 62).unwrap_err(), Refused(1 << 62));
        assert_eq!(try_zeroed::<u64>(1 << 60).unwrap_err(), Refused(1 << 63));
        assert_eq!(try_zeroed_small_pages::<u32>(1 << 61).unwrap_err(), Refused(1 << 63));
        assert_eq!(try_zeroed::<u64>(usize::MAX).unwrap_err(), Refused(u64::MAX));
        let v = try_zeroed::<u32>(3 * LARGE).unwrap();
        assert!(v.len() == 3 * LARGE && v.iter().all(|&x| x == 0));
        assert!(try_zeroed::<u8>(0).unwrap().is_empty());
        assert_eq!(Sparse::of(&[0, 1, 0]).try_copy(&[0, 1, 0]).unwrap(), vec![0, 1, 0]);
    }

    /// The vendor and family read from CPUID are the ones the kernel reports.
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    #[test]
    fn host_family_matches_the_kernels() {
        let info = std::fs::read_to_string("/proc/cpuinfo").expect("/proc/cpuinfo");
        let field = |name: &str| {
            info.lines()
                .find_map(|l| l.strip_prefix(name).filter(|rest| rest.trim_start().starts_with(':')))
                .map(|rest| rest.trim_start_matches([' ', '\t', ':']).trim().to_string())
                .unwrap_or_else(|| panic!("a {name} line"))
        };
        let family: u32 = field("cpu family").parse().expect("a decimal cpu family");
        let amd = field("vendor_id") == "AuthenticAMD";
        assert_eq!(super::host_amd_family(), amd.then_some(family));
    }

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

    /// [`super::HostAlloc`] against what it promises, over every path: a zeroed large block
    /// is zero (fresh, and when reusing one given back dirty) and aligned to a huge page;
    /// blocks keep their bytes when they grow or shrink across `LARGE` and within it; blocks
    /// of every kind go back without fault; past the registry's entries, zeroed blocks still
    /// come (from the system allocator) and are zero.
    #[cfg(target_os = "linux")]
    #[test]
    fn host_allocator_keeps_its_promises() {
        use super::{HostAlloc, HUGE, LARGE};
        use std::alloc::{GlobalAlloc, Layout};
        let a = HostAlloc;
        let fill = |p: *mut u8, n: usize, seed: u8| {
            for i in (0..n).step_by(4093) {
                unsafe { *p.add(i) = seed ^ (i as u8) | 1 };
            }
        };
        let holds =
            |p: *mut u8, n: usize, seed: u8| (0..n).step_by(4093).all(|i| unsafe { *p.add(i) } == seed ^ (i as u8) | 1);
        let zero = |p: *mut u8, n: usize| unsafe { std::slice::from_raw_parts(p, n) }.iter().all(|&x| x == 0);
        unsafe {
            for (round, &n) in [LARGE, 3 * LARGE + 5, 40 << 20, LARGE - 1, 100].iter().enumerate() {
                let l = Layout::from_size_align(n, 8).unwrap();
                for _ in 0..3 {
                    // Zeroed, written, given back: the next zeroed block of the size is zero again.
                    let p = a.alloc_zeroed(l);
                    assert!(!p.is_null() && zero(p, n), "size {n}");
                    if n >= LARGE {
                        assert_eq!(p as usize % HUGE, 0, "size {n}");
                    }
                    fill(p, n, round as u8);
                    a.dealloc(p, l);
                }
                // Grow, shrink across LARGE and within it: the bytes stay.
                let p = a.alloc_zeroed(l);
                fill(p, n, 7);
                let q = a.realloc(p, l, 2 * n + LARGE);
                assert!(holds(q, n, 7), "grown from {n}");
                let r = a.realloc(q, Layout::from_size_align(2 * n + LARGE, 8).unwrap(), LARGE / 2);
                assert!(holds(r, n.min(LARGE / 2), 7), "shrunk from {n}");
                let s = a.realloc(r, Layout::from_size_align(LARGE / 2, 8).unwrap(), LARGE + 1);
                assert!(holds(s, n.min(LARGE / 2), 7), "grown again from {n}");
                a.dealloc(s, Layout::from_size_align(LARGE + 1, 8).unwrap());
                // Not zeroed: the system allocator's.
                let p = a.alloc(l);
                fill(p, n, 9);
                assert!(holds(p, n, 9));
                a.dealloc(p, l);
            }
            // More live zeroed blocks than the registry has entries (untouched: address space only).
            let l = Layout::from_size_align(LARGE, 8).unwrap();
            let many: Vec<*mut u8> = (0..1100).map(|_| a.alloc_zeroed(l)).collect();
            assert!(many.iter().all(|&p| !p.is_null()));
            assert!(many.iter().filter(|&&p| !(p as usize).is_multiple_of(HUGE)).count() >= 1100 - 1024);
            assert!(zero(many[1099], LARGE));
            for p in many {
                a.dealloc(p, l);
            }
        }
    }
}
