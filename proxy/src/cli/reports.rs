//! `rttscope report`: render one report, `--save` the live one to a file, or `--diff` two.
//! A report is read from a file or fetched from an admin URL alike.

use std::path::Path;
use std::process::ExitCode;

use rttscope_config::{HumanDuration, ReportFormat};

use super::admin_client::AdminClient;
use super::commands::fail;
use crate::report::{Report, SCHEMA_VERSION, diff, render};

/// Where a report comes from: a JSON file, or a running rttscope's admin API.
pub enum Source<'a> {
    /// A JSON report rttscope wrote (`report.path`, a snapshot, `--save`); refused unless its
    /// `schema_version` is this build's.
    File(&'a Path),
    /// The admin API (its base URL, `http://127.0.0.1:6070`, or its `/report` URL), and
    /// the rolling window to ask for (none: the cumulative report).
    Admin(AdminClient, Option<HumanDuration>),
}

impl<'a> Source<'a> {
    /// An admin URL when `s` starts with `http://` or `https://`, or is a bare `HOST:PORT`
    /// as `--admin` takes it (asked with `admin`'s token); else a file. An existing file
    /// wins over an address, so a report saved as `127.0.0.1:6070` still reads as one.
    pub fn parse(s: &'a str, admin: &AdminClient) -> Source<'a> {
        Source::parse_seeing(s, admin, Path::new(s).is_file())
    }

    /// [`Source::parse`], told whether `s` names an existing file.
    fn parse_seeing(s: &'a str, admin: &AdminClient, is_file: bool) -> Source<'a> {
        let url = s.starts_with("http://") || s.starts_with("https://");
        if url || (is_host_port(s) && !is_file) { Source::Admin(admin.at(s), None) } else { Source::File(Path::new(s)) }
    }

    fn name(&self) -> String {
        match self {
            Source::File(path) => path.display().to_string(),
            Source::Admin(admin, _) => admin.base().to_owned(),
        }
    }
}

/// `HOST:PORT` with a numeric port and a host that is no path (`127.0.0.1:6070`,
/// `[::1]:6070`, `admin.example:6070`), as opposed to a file name.
fn is_host_port(s: &str) -> bool {
    let Some((host, port)) = s.rsplit_once(':') else { return false };
    let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    !host.is_empty() && !host.contains(['/', '\\']) && port.parse::<u16>().is_ok()
}

/// The report at `source`, and its JSON as read; or why it is not one this rttscope reads.
pub fn read(source: &Source) -> Result<(Report, String), String> {
    let name = source.name();
    let json = match source {
        Source::File(path) => std::fs::read_to_string(path).map_err(|e| format!("cannot read {name}: {e}"))?,
        Source::Admin(admin, window) => {
            let mut path = if admin.base().ends_with("/report") { "" } else { "/report" }.to_owned();
            if let Some(window) = window {
                path.push_str(&format!("?window={window}"));
            }
            admin.get(&path).map_err(|e| e.to_string())?
        }
    };
    // The version first: a report of another schema would fail to parse with a message
    // about some field, not about the version.
    #[derive(serde::Deserialize)]
    struct Version {
        schema_version: u32,
    }
    match serde_json::from_str::<Version>(&json) {
        Ok(v) if v.schema_version == SCHEMA_VERSION => {}
        Ok(v) => {
            return Err(format!(
                "{name} has report schema {}, this rttscope reads schema {SCHEMA_VERSION} (docs/report-schema.md); render it with the rttscope that wrote it",
                v.schema_version
            ));
        }
        Err(e) => return Err(format!("{name} is not an rttscope JSON report: {e}")),
    }
    let report = serde_json::from_str(&json).map_err(|e| format!("{name} is not an rttscope JSON report: {e}"))?;
    Ok((report, json))
}

/// `rttscope report [FILE | --admin URL]`: render one report.
pub fn report(source: Source, format: ReportFormat, output: Option<&Path>) -> ExitCode {
    let report = match read(&source) {
        Ok((report, _)) => report,
        Err(e) => return fail(&e),
    };
    match render(&report, format) {
        Ok(rendered) => emit(&rendered, output),
        Err(e) => fail(&e.to_string()),
    }
}

/// `rttscope report --save FILE`: the live report's JSON, as the admin API sent it, written
/// whole or not at all, to be compared later with `--diff`.
pub fn save(admin: &AdminClient, window: Option<HumanDuration>, file: &Path) -> ExitCode {
    let json = match read(&Source::Admin(admin.at(admin.base()), window)) {
        Ok((_, json)) => json,
        Err(e) => return fail(&e),
    };
    let tmp = file.with_extension("tmp");
    match std::fs::write(&tmp, json).and_then(|()| std::fs::rename(&tmp, file)) {
        Ok(()) => {
            eprintln!("rttscope: saved the report of {} to {}", admin.base(), file.display());
            ExitCode::SUCCESS
        }
        Err(e) => fail(&format!("cannot write {}: {e}", file.display())),
    }
}

/// `rttscope report --diff BEFORE AFTER`: each a saved report or an admin URL.
pub fn diff(before: Source, after: Source, format: ReportFormat, output: Option<&Path>) -> ExitCode {
    let (b, a) = match (read(&before), read(&after)) {
        (Ok((b, _)), Ok((a, _))) => (b, a),
        (Err(e), _) | (_, Err(e)) => return fail(&e),
    };
    let d = diff::diff(&b, &a, (&before.name(), &after.name()));
    match diff::render(&d, format) {
        Ok(rendered) => emit(&rendered, output),
        Err(e) => fail(&e.to_string()),
    }
}

fn emit(rendered: &str, output: Option<&Path>) -> ExitCode {
    match output {
        Some(path) => match std::fs::write(path, rendered) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(&format!("cannot write {}: {e}", path.display())),
        },
        None => {
            print!("{rendered}");
            ExitCode::SUCCESS
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{AdminClient, Source};

    fn parsed(s: &str) -> String {
        let admin = AdminClient::new("127.0.0.1:6070", None);
        match Source::parse(s, &admin) {
            Source::File(path) => format!("file {}", path.display()),
            Source::Admin(admin, _) => format!("admin {}", admin.base()),
        }
    }

    #[test]
    fn a_diff_side_is_a_url_a_bare_host_port_or_a_file() {
        assert_eq!(parsed("http://127.0.0.1:6070"), "admin http://127.0.0.1:6070");
        // A bare HOST:PORT is an admin API, as `--admin` takes it.
        assert_eq!(parsed("127.0.0.1:6070"), "admin http://127.0.0.1:6070");
        assert_eq!(parsed("localhost:6071"), "admin http://localhost:6071");
        assert_eq!(parsed("[::1]:6070"), "admin http://[::1]:6070");
        // Anything else is a file.
        for file in ["before.json", "reports/a:b.json", "dir/127.0.0.1:6070", "host:port", ":6070"] {
            assert_eq!(parsed(file), format!("file {file}"));
        }
    }

    #[test]
    fn an_existing_file_named_like_an_address_is_a_file() {
        let admin = AdminClient::new("127.0.0.1:6070", None);
        assert!(matches!(Source::parse_seeing("127.0.0.1:6070", &admin, true), Source::File(_)));
        assert!(matches!(Source::parse_seeing("127.0.0.1:6070", &admin, false), Source::Admin(..)));
    }
}
