#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| interpreter_fuzz_targets::messages_stream(data));
