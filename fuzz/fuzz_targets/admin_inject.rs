//! libFuzzer entry point for the `admin_inject` target; the harness and its
//! invariants live in `src/admin_inject.rs`, shared with the regression test.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rttscope_fuzz::admin_inject::run(data));
