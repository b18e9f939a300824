//! libFuzzer entry: see `fuzzing::lease_annotations` for what it reads and who writes it.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::lease_annotations(data));
