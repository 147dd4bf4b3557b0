//! A SQL command trace for the PCM journal: parsed, or a one-line error.
#![no_main]
libfuzzer_sys::fuzz_target!(|text: &str| {
    if let Err(e) = locsim::journal::sql_trace::Trace::parse(text) {
        assert!(!e.contains('\n'), "{e}");
    }
});
