//! Test harness: a private MariaDB server, rttscope started in-process
//! against it, and (for link tests) a WAN emulator.

pub mod counting;
pub mod fake_upstream;
pub mod mariadb;
pub mod process;
pub mod proxy;
pub mod wan;
