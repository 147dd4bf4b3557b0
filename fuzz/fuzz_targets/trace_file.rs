//! A trace file (binary or text): every record decoded, or a one-line error.
#![no_main]
libfuzzer_sys::fuzz_target!(|bytes: &[u8]| {
    let run = || -> Result<(), locsim_trace::TraceError> {
        let mut d = locsim_trace::Decoder::new(bytes)?;
        while d.next_record()?.is_some() {}
        Ok(())
    };
    if let Err(e) = run() {
        assert!(!e.to_string().contains('\n'), "{e}");
    }
});
