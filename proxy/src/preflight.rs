//! What start would refuse, found before anything binds and by `rttscope check-config`:
//! the files the config names (TLS certificates and keys, CAs, the admin token file) and the
//! place the final report is written to, which is otherwise first tried at stop, when a
//! failure loses the whole recording.

use std::io;
use std::path::Path;

use rttscope_config::{ADMIN_TOKEN_ENV, Config};

use crate::relay::tls::{ClientSideTls, UpstreamSideTls};

/// Every problem start would meet with `config`'s files, one sentence each naming the key;
/// empty when there is none.
pub fn problems(config: &Config) -> Vec<String> {
    let mut problems = Vec::new();
    if config.admin.enabled
        && let Err(e) = crate::admin::token::resolve(&config.admin, std::env::var(ADMIN_TOKEN_ENV).ok())
    {
        problems.push(e.to_string());
    }
    // Without a certificate of its own rttscope generates one at start: nothing to read.
    if config.listen.tls.cert.is_some()
        && let Err(e) = ClientSideTls::from_config(&config.listen.tls)
    {
        problems.push(e.to_string());
    }
    if let Err(e) = UpstreamSideTls::from_config(&config.upstream) {
        problems.push(e.to_string());
    }
    if let Some(path) = &config.report.path
        && let Err(e) = report_path(path)
    {
        problems.push(e);
    }
    problems
}

/// Whether the final report can be written at `path` (`report.path`): a file can be created
/// beside it, as the atomic write does, and `path` is not a directory.
pub fn report_path(path: &Path) -> Result<(), String> {
    let fail = |why: String| format!("report.path: cannot write the final report to {}: {why}", path.display());
    if path.is_dir() {
        return Err(fail("it is a directory".to_owned()));
    }
    crate::report::check_writable(path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => {
            fail(format!("the directory {} does not exist", crate::report::directory(path).display()))
        }
        _ => fail(e.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_path_in_a_missing_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(report_path(&dir.path().join("r.json")), Ok(()));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "the check leaves nothing behind");
        let missing = dir.path().join("nope").join("r.json");
        let err = report_path(&missing).unwrap_err();
        assert!(err.starts_with("report.path: cannot write the final report to "), "{err}");
        assert!(err.ends_with(&format!("the directory {} does not exist", dir.path().join("nope").display())), "{err}");
        assert!(report_path(dir.path()).unwrap_err().ends_with("it is a directory"));
    }
}
