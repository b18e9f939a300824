//! libFuzzer entry: see `fuzzing::role_file` for what it reads and who writes it.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::role_file(data));
