//! libFuzzer entry point for the `framing` target; the harness and its
//! invariants live in `src/framing.rs`, shared with the regression test.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rttscope_fuzz::framing::run(data));
