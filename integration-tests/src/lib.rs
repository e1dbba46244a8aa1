//! Test harness: a private MariaDB server, rttscope started in-process
//! against it, and (for link tests) a WAN emulator.

pub mod mariadb;
pub mod proxy;
pub mod process;
