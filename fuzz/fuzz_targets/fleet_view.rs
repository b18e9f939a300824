//! libFuzzer entry: see `fuzzing::fleet_view` for what it reads and who writes it.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::fleet_view(data));
