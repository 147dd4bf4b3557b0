//! An experiment spec (quick mode): parsed with its points, or a one-line error.
#![no_main]
libfuzzer_sys::fuzz_target!(|text: &str| {
    match locsim::reproduce::spec::parse("fuzz", text, true) {
        Ok(s) => {
            std::hint::black_box((s.all_points().len(), s.columns()));
        }
        Err(e) => assert!(!e.contains('\n'), "{e}"),
    }
});
