//! libFuzzer entry point for the `packets` target; the harness and its
//! invariants live in `src/packets.rs`, shared with the regression test.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rttscope_fuzz::packets::run(data));
