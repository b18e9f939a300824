//! libFuzzer entry: see `fuzzing::env_file` for what it reads and who writes it.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::env_file(data));
