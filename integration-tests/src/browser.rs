//! Headless Chromium for the HTML pages rttscope writes: offline, a fresh profile each run, and
//! a page that makes the console speak (a script error, a failed load) fails the test.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::clients::{self, Output};

const LIMIT: Duration = Duration::from_secs(180);

/// The first `name` on `PATH` or in `/usr/bin`.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).chain([PathBuf::from("/usr/bin")]).map(|d| d.join(name)).find(|p| p.is_file())
}

/// Chromium, headless and offline, on `page`: `extra` flags decide what it does. A fresh profile
/// each run; no sandbox (tests run as root in containers); every host name resolves to nothing,
/// so whatever the page or the browser tries, nothing leaves the machine.
pub fn chromium(browser: &Path, page: &Path, extra: &[String]) -> Output {
    let profile = tempfile::tempdir().expect("profile dir");
    let mut cmd = Command::new(browser);
    cmd.args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run"])
        .args(["--disable-background-networking", "--disable-component-update", "--disable-sync"])
        .args(["--host-resolver-rules=MAP * ~NOTFOUND", "--enable-logging=stderr", "--v=0"])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(extra)
        .arg(format!("file://{}", page.display()));
    let out = clients::run(cmd, LIMIT).unwrap_or_else(|e| panic!("{e:#}"));
    assert!(out.status.success(), "chromium {extra:?}: {}\n{}", out.status, out.stderr);
    // Console messages (script errors, failed loads) come out as "...:CONSOLE(n)] ..." lines.
    let console: Vec<&str> = out.stderr.lines().filter(|l| l.contains("CONSOLE") || l.contains("Uncaught")).collect();
    assert!(console.is_empty(), "the page made the console speak:\n{}", console.join("\n"));
    out
}

/// A screenshot of `page` at `width`×`height` into `png`, checked to be a real image of that
/// size (not an empty file or an error page's few bytes).
pub fn screenshot(browser: &Path, page: &Path, png: &Path, (width, height): (u32, u32)) {
    let _ = std::fs::remove_file(png);
    let flags = [format!("--screenshot={}", png.display()), format!("--window-size={width},{height}")];
    let shot = chromium(browser, page, &flags);
    let bytes = std::fs::read(png).unwrap_or_else(|e| panic!("no screenshot ({e}):\n{}", shot.stderr));
    assert!(bytes.len() > 10 * 1024, "screenshot only {} bytes", bytes.len());
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    let dimension = |at: usize| u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
    assert_eq!((dimension(16), dimension(20)), (width, height), "IHDR width and height");
}

/// The DOM as Chromium built it from `page`.
pub fn dom(browser: &Path, page: &Path) -> String {
    chromium(browser, page, &["--dump-dom".into()]).stdout
}
