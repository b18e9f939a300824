//! libFuzzer entry: see `fuzzing::validated_values` for what it reads and who writes it.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::validated_values(data));
