//! Test harness: a private MariaDB server (or one named by
//! RTTSCOPE_TEST_MYSQL_URL), rttscope in-process or as a child process,
//! real clients (Python connectors, admin tools), a scripted fake
//! upstream, a byte-counting relay, and a WAN emulator.

pub mod clients;
pub mod counting;
pub mod fake_upstream;
pub mod mariadb;
pub mod process;
pub mod proxy;
pub mod wan;
