//! The subcommands that do not serve: `check-config` and `report`.

use std::path::Path;
use std::process::ExitCode;

use rttscope_config::{Bandwidth, ByteSize, Config, HumanDuration, Inject, Percent, ReportFormat};

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

/// Changes to the emulated link asked for on the command line.
#[derive(Default)]
pub struct InjectChanges {
    pub rtt: Option<HumanDuration>,
    pub jitter: Option<HumanDuration>,
    pub bandwidth: Option<Bandwidth>,
    pub window: Option<ByteSize>,
    pub users: Vec<String>,
    pub schemas: Vec<String>,
    pub percent: Option<Percent>,
    pub off: bool,
}

impl InjectChanges {
    fn is_empty(&self) -> bool {
        !self.off
            && self.rtt.is_none()
            && self.jitter.is_none()
            && self.bandwidth.is_none()
            && self.window.is_none()
            && self.users.is_empty()
            && self.schemas.is_empty()
            && self.percent.is_none()
    }

    fn apply(self, mut inject: Inject) -> Inject {
        if self.off {
            return Inject::default();
        }
        if let Some(v) = self.rtt {
            inject.rtt = v;
        }
        if let Some(v) = self.jitter {
            inject.jitter = v;
        }
        if self.bandwidth.is_some() {
            inject.bandwidth = self.bandwidth;
        }
        if self.window.is_some() {
            inject.window = self.window;
        }
        if !self.users.is_empty() {
            inject.scope.users = self.users;
        }
        if !self.schemas.is_empty() {
            inject.scope.schemas = self.schemas;
        }
        if let Some(p) = self.percent {
            inject.scope.percent = p;
        }
        inject
    }
}

/// `rttscope inject`: show the emulated link, or change the given keys.
pub fn inject(admin: &str, changes: InjectChanges) -> ExitCode {
    let current = match client::get(admin, "/inject").map(|body| serde_json::from_str::<Inject>(&body)) {
        Ok(Ok(current)) => current,
        Ok(Err(e)) => return fail(&format!("{admin}/inject answered something that is not an inject setting: {e}")),
        Err(e) => return fail(&e.to_string()),
    };
    let result = if changes.is_empty() {
        Ok(current)
    } else {
        let wanted = changes.apply(current);
        match serde_json::to_string(&wanted) {
            Ok(body) => client::put_json(admin, "/inject", &body).and_then(|reply| {
                serde_json::from_str::<Inject>(&reply).map_err(|e| client::ClientError::Unreachable { url: admin.to_owned(), reason: e.to_string() })
            }),
            Err(e) => return fail(&e.to_string()),
        }
    };
    match result {
        Ok(inject) => {
            match serde_yaml::to_string(&inject) {
                Ok(yaml) => print!("# emulated link: {}\n{yaml}", if inject.is_active() { "on" } else { "off" }),
                Err(e) => return fail(&e.to_string()),
            }
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e.to_string()),
    }
}

fn fail(message: &str) -> ExitCode {
    eprintln!("rttscope: {message}");
    ExitCode::FAILURE
}
