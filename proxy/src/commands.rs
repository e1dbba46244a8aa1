//! The subcommands that do not serve: `check-config` and `report`.

use std::path::Path;
use std::process::ExitCode;

use rttscope_config::{Config, ReportFormat};

use crate::admin::client;
use crate::report::{render_html, render_text, Report, SCHEMA_VERSION};

/// `rttscope check-config FILE`: exit 0 and print the effective config, or
/// exit 2 with every problem found.
pub fn check_config(file: &Path) -> ExitCode {
    match Config::load(file) {
        Ok(config) => {
            println!("# {}: ok", file.display());
            match serde_yaml::to_string(&config) {
                Ok(yaml) => print!("{yaml}"),
                Err(e) => eprintln!("(cannot print the effective config: {e})"),
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{}", e.with_source_name(&file.display().to_string()));
            ExitCode::from(2)
        }
    }
}

/// `rttscope report`: fetch or read a JSON report and render it.
pub fn report(file: Option<&Path>, admin: &str, format: ReportFormat, output: Option<&Path>) -> ExitCode {
    let (json, source) = match file {
        Some(path) => match std::fs::read_to_string(path) {
            Ok(json) => (json, path.display().to_string()),
            Err(e) => return fail(&format!("cannot read {}: {e}", path.display())),
        },
        None => match client::get(admin, "/report") {
            Ok(json) => (json, admin.to_owned()),
            Err(e) => return fail(&e.to_string()),
        },
    };
    let report: Report = match serde_json::from_str(&json) {
        Ok(report) => report,
        Err(e) => return fail(&format!("{source} is not an rttscope JSON report: {e}")),
    };
    if report.schema_version != SCHEMA_VERSION {
        eprintln!("rttscope: warning: {source} has report schema {}, this rttscope reads {SCHEMA_VERSION}", report.schema_version);
    }
    let rendered = match format {
        ReportFormat::Json => match serde_json::to_string_pretty(&report) {
            Ok(json) => json + "\n",
            Err(e) => return fail(&e.to_string()),
        },
        ReportFormat::Text => render_text(&report),
        ReportFormat::Html => render_html(&report),
    };
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

fn fail(message: &str) -> ExitCode {
    eprintln!("rttscope: {message}");
    ExitCode::FAILURE
}
