//! libFuzzer entry point for the `session` target; the harness and its
//! invariants live in `src/session.rs`, shared with the regression test.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rttscope_fuzz::session::run(data));
