//! A configuration file: `Config::build` returns a configuration or a one-line error.
#![no_main]
libfuzzer_sys::fuzz_target!(|text: &str| {
    if let Err(e) = locsim::config::Config::build(Some(text), &[]) {
        assert!(!e.0.trim_end().contains('\n'), "{e}");
    }
});
