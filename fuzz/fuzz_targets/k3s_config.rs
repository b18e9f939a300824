//! libFuzzer entry: see `fuzzing::k3s_config` for what it reads and who writes it.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::k3s_config(data));
