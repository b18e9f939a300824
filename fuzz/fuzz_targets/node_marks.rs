//! libFuzzer entry: see `fuzzing::node_marks` for what it reads and who writes it.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::node_marks(data));
