//! Compiles the C shim (src/shim.c) against the bundled SQLite's sqlite3ext.h, which
//! libsqlite3-sys exports as DEP_SQLITE3_INCLUDE.
fn main() {
    let include = std::env::var("DEP_SQLITE3_INCLUDE").expect("libsqlite3-sys (bundled) exports its include directory");
    println!("cargo:rerun-if-changed=src/shim.c");
    cc::Build::new().file("src/shim.c").include(include).warnings(true).extra_warnings(true).compile("pcmjournal_shim");
}
