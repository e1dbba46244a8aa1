//! Benchmark harness for rttscope.
