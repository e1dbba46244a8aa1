//! Test harness: a private MariaDB server (or one named by
//! RTTSCOPE_TEST_MYSQL_URL), rttscope in-process or as a child process,
//! real clients (Python connectors, admin tools) and each leg as they see it, a scripted fake
//! upstream, headless Chromium for HTML pages, a byte-counting relay, a WAN emulator, and the
//! link rig on it (MariaDB and rttscope at either end).

pub mod browser;
pub mod clients;
pub mod counting;
pub mod cpu_hog;
pub mod fake_upstream;
pub mod legs;
pub mod link_rig;
pub mod mariadb;
pub mod mysql8;
pub mod process;
pub mod proxy;
pub mod wan;

/// A test that cannot run here says why and passes — unless `RTTSCOPE_TEST_REQUIRE_ALL` is set
/// (CI sets it: it runs as root with TUN, the packages installed, and a MariaDB), where
/// a skip is a failure, so a test that silently stopped running cannot pass.
pub fn skip(why: impl std::fmt::Display) {
    if std::env::var_os("RTTSCOPE_TEST_REQUIRE_ALL").is_some_and(|v| !v.is_empty() && v != "0") {
        panic!("skipped, but RTTSCOPE_TEST_REQUIRE_ALL is set: {why}");
    }
    eprintln!("skipped: {why}");
}
