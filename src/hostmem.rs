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
    let step = (4096 / std::mem::size_of::<T>()).max(1);
    for i in (0..len).step_by(step) {
        // SAFETY: `i < len`: inside the vector. A volatile write of the zero already there, so
        // that the compiler keeps the write that commits the page.
        unsafe { std::ptr::write_volatile(v.as_mut_ptr().add(i), T::default()) };
    }
    v
}

/// A copy of `src` in storage advised as [`zeroed`].
pub fn copy_of<T: Plain>(src: &[T]) -> Vec<T> {
    let mut v = zeroed(src.len());
    v.copy_from_slice(src);
    v
}

/// Integer types whose default value is all-zero bytes.
pub trait Plain: Copy + Default {}
impl Plain for u8 {}
impl Plain for u64 {}

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

const HUGE: usize = 2 << 20;

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

/// A byte image shared read-only by several private copies ([`Template::copy`]): the crash
/// checker's workers each need the run's initial image (tens of megabytes) as their own
/// writable buffers, of which a crash sweep touches only the blocks the run wrote. On Linux the
/// template lives in a memory file and each copy is a private mapping of it, so a copy costs
/// what it touches (a 4 KiB page copied at its first write, shared until then) instead of a
/// fresh, zeroed and filled allocation of the whole image. Elsewhere a copy is a plain vector.
/// Contents are the same either way.
pub struct Template {
    #[cfg(target_os = "linux")]
    fd: Option<std::os::fd::OwnedFd>,
    bytes: Vec<u8>,
}

impl Template {
    /// A template holding `bytes`.
    pub fn new(bytes: &[u8]) -> Template {
        #[cfg(target_os = "linux")]
        if let Some(fd) = memory_file(bytes) {
            return Template { fd: Some(fd), bytes: Vec::new() };
        }
        Template {
            #[cfg(target_os = "linux")]
            fd: None,
            bytes: bytes.to_vec(),
        }
    }

    /// A private, writable copy of the template's first `len` bytes.
    pub fn copy(&self, len: usize) -> Image {
        #[cfg(target_os = "linux")]
        if let Some(fd) = &self.fd {
            if let Some(img) = Image::map(fd, len) {
                return img;
            }
            // The mapping failed (address space?): read the bytes back instead.
            let mut v = vec![0u8; len];
            use std::os::unix::fs::FileExt;
            let file = std::fs::File::from(fd.try_clone().expect("duplicate a memory file descriptor"));
            file.read_exact_at(&mut v, 0).expect("read back the memory file");
            return Image::Vec(v);
        }
        Image::Vec(self.bytes[..len].to_vec())
    }
}

/// A file in memory holding `bytes`, or `None` where the kernel offers none.
#[cfg(target_os = "linux")]
fn memory_file(bytes: &[u8]) -> Option<std::os::fd::OwnedFd> {
    use std::io::Write;
    use std::os::fd::{FromRawFd, OwnedFd};
    // SAFETY: memfd_create takes a NUL-terminated name and flags; it returns a new descriptor
    // that nothing else owns, or -1.
    let raw = unsafe { libc::memfd_create(c"locsim-image".as_ptr(), libc::MFD_CLOEXEC) };
    if raw < 0 {
        return None;
    }
    // SAFETY: `raw` is a fresh descriptor owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let mut file = std::fs::File::from(fd);
    file.write_all(bytes).ok()?;
    Some(file.into())
}

/// A writable byte image: a private mapping of a [`Template`] or a plain vector.
pub enum Image {
    Vec(Vec<u8>),
    #[cfg(target_os = "linux")]
    Map {
        ptr: std::ptr::NonNull<u8>,
        len: usize,
    },
}

// SAFETY: a private mapping is memory owned by this value alone, like a vector's buffer.
unsafe impl Send for Image {}

impl Image {
    #[cfg(target_os = "linux")]
    fn map(fd: &std::os::fd::OwnedFd, len: usize) -> Option<Image> {
        use std::os::fd::AsRawFd;
        if len == 0 {
            return Some(Image::Vec(Vec::new()));
        }
        // SAFETY: a new private mapping of `len` bytes of a file at least that long (the
        // template's bytes); no existing memory is affected. Writes go to private pages.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return None;
        }
        Some(Image::Map { ptr: std::ptr::NonNull::new(p as *mut u8)?, len })
    }
}

impl std::ops::Deref for Image {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Image::Vec(v) => v,
            // SAFETY: the mapping is `len` readable bytes, alive as long as `self`.
            #[cfg(target_os = "linux")]
            Image::Map { ptr, len } => unsafe { std::slice::from_raw_parts(ptr.as_ptr(), *len) },
        }
    }
}

impl std::ops::DerefMut for Image {
    fn deref_mut(&mut self) -> &mut [u8] {
        match self {
            Image::Vec(v) => v,
            // SAFETY: the mapping is `len` writable bytes owned by `self` alone.
            #[cfg(target_os = "linux")]
            Image::Map { ptr, len } => unsafe { std::slice::from_raw_parts_mut(ptr.as_ptr(), *len) },
        }
    }
}

impl Drop for Image {
    fn drop(&mut self) {
        #[cfg(target_os = "linux")]
        if let Image::Map { ptr, len } = self {
            // SAFETY: unmapping exactly the mapping this value made; nothing refers to it after.
            unsafe { libc::munmap(ptr.as_ptr() as *mut libc::c_void, *len) };
        }
    }
}

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

    #[test]
    fn private_copies_of_a_template_start_equal_and_stay_apart() {
        let src: Vec<u8> = (0..(3 << 20) + 100).map(|i| (i * 13 + 5) as u8).collect();
        let t = super::Template::new(&src);
        let (mut a, b) = (t.copy(src.len()), t.copy(src.len() - 100));
        assert!(a[..] == src[..] && b[..] == src[..src.len() - 100]);
        a[4096 * 7 + 3] ^= 0xFF;
        a[src.len() - 1] = 0;
        assert_eq!(b[4096 * 7 + 3], src[4096 * 7 + 3], "a write to one copy shows in another");
        assert_eq!(t.copy(src.len())[..], src[..], "a write to one copy shows in the template");
        assert_eq!((a[4096 * 7 + 3], a[src.len() - 1]), (src[4096 * 7 + 3] ^ 0xFF, 0));
    }
}
