//! libFuzzer entry point for the `binary` target; the harness and its
//! invariants live in `src/binary.rs`, shared with the regression test.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rttscope_fuzz::binary::run(data));
