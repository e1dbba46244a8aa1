//! libFuzzer entry point for the `compress` target; the harness and its
//! invariants live in `src/compress.rs`, shared with the regression test.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rttscope_fuzz::compress::run(data));
