//! libFuzzer entry: see `fuzzing::report` for what it reads and who writes it.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::report(data));
