//! `--set` values, one per line: `Config::build` returns a configuration or a one-line error.
#![no_main]
libfuzzer_sys::fuzz_target!(|text: &str| {
    let sets: Vec<String> = text.split('\n').map(String::from).collect();
    if let Err(e) = locsim::config::Config::build(None, &sets) {
        assert!(!e.0.trim_end().contains('\n'), "{e}");
    }
});
