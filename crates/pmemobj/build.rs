//! Compiles `src/shim.c`: what Rust cannot write on stable (a C-variadic function, setjmp's
//! partner longjmp, the caller's return address) as a few lines of C.
fn main() {
    println!("cargo:rerun-if-changed=src/shim.c");
    cc::Build::new().file("src/shim.c").opt_level(2).warnings(true).compile("locsim_pmemobj_shim");
}
