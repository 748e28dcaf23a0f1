#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| interpreter_fuzz_targets::app_server_stdio(data));
