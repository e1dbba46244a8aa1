//! libFuzzer entry point for the `handshake` target; the harness and its
//! invariants live in `src/handshake.rs`, shared with the regression test.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rttscope_fuzz::handshake::run(data));
