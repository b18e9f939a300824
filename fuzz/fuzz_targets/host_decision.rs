//! libFuzzer entry: see `fuzzing::host_decision` for what it reads and who writes it.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::host_decision(data));
