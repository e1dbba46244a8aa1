//! Test harness: a private MariaDB server and helpers to drive rttscope against it.
