//! libFuzzer entry: see `fuzzing::etcd_health` for what it reads and who writes it.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::etcd_health(data));
