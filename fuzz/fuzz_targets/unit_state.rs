//! libFuzzer entry: see `fuzzing::unit_state` for what it reads and who writes it.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::unit_state(data));
