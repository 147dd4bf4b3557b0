//! The exported entry points that need the machine's calling convention (x86-64 System V):
//!
//! - `pmemobj_tx_begin(pop, env, ...)` is C-variadic: its integer and pointer arguments come in
//!   the registers and stack slots of fixed arguments at the same positions, so a function with
//!   fixed arguments reads them; the list ends with `TX_PARAM_NONE` (0), and no slot past it is
//!   used;
//! - the exact level's hooks: gcc's and clang's `-fsanitize=thread`, compiled without linking
//!   the sanitizer's run-time, calls `__tsan_{read,write}{1,2,4,8,16}(addr)` (and the unaligned
//!   and range forms) before each access, a read-modify-write as a read then a write. Each hook
//!   is a naked function that passes the address, the size, the kind and its return address
//!   (the site of the access: `[rsp]` at entry) to [`hook`], which tests the address against
//!   the open pools' span (one compare for the accesses that miss every pool). The
//!   kernel-address sanitizer's call-based hooks (`__asan_*_noabort`) are served too, but that
//!   instrumentation checks a read-modify-write once, as a load (its `x += 1` is no store), so
//!   docs/pmdk.md names `-fsanitize=thread`;
//! - the exact level's `memcpy`, `memmove` and `memset` (the header maps the program's calls
//!   here): the source a load, the destination a store, at the caller's site.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// The span [lo, hi) covering every open pool (0, 0 when none is open).
pub static LO: AtomicUsize = AtomicUsize::new(0);
pub static HI: AtomicUsize = AtomicUsize::new(0);

/// An access of `len` bytes at `addr` (a store when `store`), from `site`.
extern "C" fn hook(addr: usize, len: usize, store: c_int, site: usize) {
    if len != 0 && addr.wrapping_add(len) > LO.load(Relaxed) && addr < HI.load(Relaxed) {
        crate::locsim_access(addr, len, store, site as *const c_void);
    }
}

macro_rules! fixed {
    ($($name:ident $len:literal $store:literal),* $(,)?) => {$(
        #[unsafe(naked)]
        #[no_mangle]
        pub unsafe extern "C" fn $name(_addr: usize) {
            core::arch::naked_asm!(
                concat!("mov esi, ", $len),
                concat!("mov edx, ", $store),
                "mov rcx, [rsp]",
                "jmp {h}",
                h = sym hook,
            )
        }
    )*};
}

fixed!(
    __tsan_read1 1 0, __tsan_read2 2 0, __tsan_read4 4 0, __tsan_read8 8 0, __tsan_read16 16 0,
    __tsan_write1 1 1, __tsan_write2 2 1, __tsan_write4 4 1, __tsan_write8 8 1, __tsan_write16 16 1,
    __tsan_unaligned_read2 2 0, __tsan_unaligned_read4 4 0, __tsan_unaligned_read8 8 0,
    __tsan_unaligned_read16 16 0, __tsan_unaligned_write2 2 1, __tsan_unaligned_write4 4 1,
    __tsan_unaligned_write8 8 1, __tsan_unaligned_write16 16 1,
    __asan_load1_noabort 1 0, __asan_load2_noabort 2 0, __asan_load4_noabort 4 0,
    __asan_load8_noabort 8 0, __asan_load16_noabort 16 0, __asan_store1_noabort 1 1,
    __asan_store2_noabort 2 1, __asan_store4_noabort 4 1, __asan_store8_noabort 8 1,
    __asan_store16_noabort 16 1,
);

macro_rules! ranged {
    ($($name:ident $store:literal),* $(,)?) => {$(
        #[unsafe(naked)]
        #[no_mangle]
        pub unsafe extern "C" fn $name(_addr: usize, _len: usize) {
            core::arch::naked_asm!(
                concat!("mov edx, ", $store),
                "mov rcx, [rsp]",
                "jmp {h}",
                h = sym hook,
            )
        }
    )*};
}

ranged!(__tsan_read_range 0, __tsan_write_range 1, __asan_loadN_noabort 0, __asan_storeN_noabort 1);

/// ThreadSanitizer's bookkeeping calls: nothing to do.
#[no_mangle]
pub extern "C" fn __tsan_init() {}
#[no_mangle]
pub extern "C" fn __tsan_func_entry(_pc: *mut c_void) {}
#[no_mangle]
pub extern "C" fn __tsan_func_exit() {}
#[no_mangle]
pub extern "C" fn __tsan_vptr_update(_vptr: *mut c_void, _val: *mut c_void) {}
/// Called before a call that does not return (exit, longjmp): nothing to do.
#[no_mangle]
pub extern "C" fn __asan_handle_no_return() {}

extern "C" fn copy_impl(d: *mut c_void, s: *const c_void, n: usize, site: usize) -> *mut c_void {
    hook(s as usize, n, 0, site);
    hook(d as usize, n, 1, site);
    // SAFETY: the program's memmove (or memcpy: a memmove is a correct memcpy).
    unsafe { std::ptr::copy(s as *const u8, d as *mut u8, n) };
    d
}

extern "C" fn set_impl(d: *mut c_void, c: c_int, n: usize, site: usize) -> *mut c_void {
    hook(d as usize, n, 1, site);
    // SAFETY: the program's memset.
    unsafe { std::ptr::write_bytes(d as *mut u8, c as u8, n) };
    d
}

/// `memcpy` at the exact level.
#[unsafe(naked)]
#[no_mangle]
pub unsafe extern "C" fn locsim_pmemobj_memcpy(_d: *mut c_void, _s: *const c_void, _n: usize) -> *mut c_void {
    core::arch::naked_asm!("mov rcx, [rsp]", "jmp {f}", f = sym copy_impl)
}

/// `memmove` at the exact level.
#[unsafe(naked)]
#[no_mangle]
pub unsafe extern "C" fn locsim_pmemobj_memmove(_d: *mut c_void, _s: *const c_void, _n: usize) -> *mut c_void {
    core::arch::naked_asm!("mov rcx, [rsp]", "jmp {f}", f = sym copy_impl)
}

/// `memset` at the exact level.
#[unsafe(naked)]
#[no_mangle]
pub unsafe extern "C" fn locsim_pmemobj_memset(_d: *mut c_void, _c: c_int, _n: usize) -> *mut c_void {
    core::arch::naked_asm!("mov rcx, [rsp]", "jmp {f}", f = sym set_impl)
}

/// `pmemobj_tx_begin(pop, env, ...)`: the variadic parameters read as fixed arguments (up to
/// 12 words: four in registers, eight on the stack), up to `TX_PARAM_NONE`.
///
/// # Safety
/// Called as the C-variadic function of the header, with a parameter list ended by
/// `TX_PARAM_NONE`.
#[no_mangle]
pub unsafe extern "C" fn pmemobj_tx_begin(
    pop: *mut c_void,
    env: *mut c_void,
    a0: usize,
    a1: usize,
    a2: usize,
    a3: usize,
    a4: usize,
    a5: usize,
    a6: usize,
    a7: usize,
    a8: usize,
    a9: usize,
    a10: usize,
    a11: usize,
) -> c_int {
    let words = [a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11];
    let (mut kinds, mut a, mut b) = (Vec::new(), Vec::new(), Vec::new());
    let mut i = 0;
    while i < words.len() {
        // TX_PARAM_* is an int: the low 32 bits of its word.
        let k = words[i] as u32 as c_int;
        if k == 0 || i + 1 >= words.len() {
            break;
        }
        kinds.push(k);
        a.push(words[i + 1] as *mut c_void);
        if k == 3 {
            // TX_PARAM_CB: the callback, then its argument.
            b.push(words.get(i + 2).copied().unwrap_or(0) as *mut c_void);
            i += 3;
        } else {
            b.push(std::ptr::null_mut());
            i += 2;
        }
    }
    crate::locsim_tx_begin(pop, env, kinds.len(), kinds.as_ptr(), a.as_ptr(), b.as_ptr())
}
