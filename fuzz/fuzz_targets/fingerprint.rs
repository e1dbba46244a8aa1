//! libFuzzer entry point for the `fingerprint` target; the harness and its
//! invariants live in `src/fingerprint.rs`, shared with the regression test.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rttscope_fuzz::fingerprint::run(data));
