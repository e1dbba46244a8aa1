//! rttscope: a MySQL wire-protocol proxy that shows where the time goes.
