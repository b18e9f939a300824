//! libFuzzer entry: see `fuzzing::local_addresses` for what it reads and who writes it.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::local_addresses(data));
