//! The subcommands that do not serve: `check-config` and `inject` (`report` is in `reports`).

use std::path::Path;
use std::process::ExitCode;

use rttscope_config::{Bandwidth, ByteSize, Config, ConfigError, HumanDuration, Inject, Percent, Setting};

use super::admin_client::{AdminClient, ClientError};

/// `RTTSCOPE_*` variables in this environment that name no config key: a typo would otherwise
/// pass unnoticed. The tests' own variables are not rttscope's to judge.
pub fn stray_env_variables() -> Vec<String> {
    let (_, unknown) = rttscope_config::env_settings(std::env::vars());
    unknown.into_iter().filter(|name| !name.starts_with("RTTSCOPE_TEST_")).collect()
}

/// `rttscope check-config FILE`: exit 0 and print the effective config (the file, then the
/// `RTTSCOPE_*` environment and `--set` flags in `settings`), or exit 2 with every problem
/// found.
pub fn check_config(file: &Path, settings: &Result<Vec<Setting>, ConfigError>) -> ExitCode {
    let name = file.display().to_string();
    let text = match std::fs::read_to_string(file) {
        Ok(text) => text,
        Err(e) => {
            eprintln!("rttscope: cannot read {name}: {e}");
            return ExitCode::from(2);
        }
    };
    // Variables named like rttscope's settings that name no key: start warns of them too.
    for variable in stray_env_variables() {
        eprintln!("warning: {variable} names no config key; rttscope ignores it");
    }
    let problems = Config::every_problem(&text);
    if !problems.is_empty() {
        for problem in &problems {
            eprintln!("{}", problem.with_source_name(&name));
        }
        // A bad --set or environment value is a problem of its own, not hidden by the file's:
        // tried on the defaults, as the file cannot be read into a config.
        let outside = settings
            .as_ref()
            .map_err(ToString::to_string)
            .and_then(|settings| Config::default().apply_settings(settings).map_err(|e| e.to_string()));
        if let Err(e) = outside {
            eprintln!("{e}");
        }
        return ExitCode::from(2);
    }
    let config = Config::from_yaml(&text).map_err(|e| e.with_source_name(&name).to_string()).and_then(|mut config| {
        let settings = settings.as_ref().map_err(ToString::to_string)?;
        config.apply_settings(settings).map_err(|e| e.to_string())?;
        Ok(config)
    });
    match config {
        Ok(config) => {
            // What start would refuse, as this environment would run it: an admin API beyond
            // loopback with no token, a file it cannot read, a report path it cannot write.
            let problems = crate::preflight::problems(&config);
            if !problems.is_empty() {
                for problem in problems {
                    eprintln!("{name}: {problem}");
                }
                return ExitCode::from(2);
            }
            println!("# {name}: ok");
            match serde_yaml::to_string(&config) {
                Ok(yaml) => print!("{yaml}"),
                Err(e) => eprintln!("(cannot print the effective config: {e})"),
            }
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("{message}");
            ExitCode::from(2)
        }
    }
}

/// Changes to the emulated link asked for on the command line.
#[derive(Default)]
pub struct InjectChanges {
    /// `--rtt`: replaces `inject.rtt` (each direction gets half).
    pub rtt: Option<HumanDuration>,
    /// `--jitter`: replaces `inject.jitter`, the delay variation per direction.
    pub jitter: Option<HumanDuration>,
    /// `--bandwidth`: replaces `inject.bandwidth`, per direction.
    pub bandwidth: Option<Bandwidth>,
    /// `--window`: replaces `inject.window`, the bytes in flight per round trip.
    pub window: Option<ByteSize>,
    /// `--loss`: replaces `inject.loss`, the share of segments lost each direction.
    pub loss: Option<Percent>,
    /// `--user`: replaces `inject.scope.users` when any is given; none keeps the current list.
    pub users: Vec<String>,
    /// `--schema`: replaces `inject.scope.schemas` when any is given; none keeps the current list.
    pub schemas: Vec<String>,
    /// `--percent`: replaces `inject.scope.percent`, the share of connections affected.
    pub percent: Option<Percent>,
    /// `--off`: back to `Inject::default()` (no emulated link); every other change is then ignored.
    pub off: bool,
}

impl InjectChanges {
    fn is_empty(&self) -> bool {
        !self.off
            && self.rtt.is_none()
            && self.jitter.is_none()
            && self.bandwidth.is_none()
            && self.window.is_none()
            && self.loss.is_none()
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
        if self.loss.is_some() {
            inject.loss = self.loss;
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
pub fn inject(admin: &AdminClient, changes: InjectChanges) -> ExitCode {
    let base = admin.base();
    let current = match admin.get("/inject").map(|body| serde_json::from_str::<Inject>(&body)) {
        Ok(Ok(current)) => current,
        Ok(Err(e)) => return fail(&format!("{base}/inject answered something that is not an inject setting: {e}")),
        Err(e) => return fail(&e.to_string()),
    };
    let result = if changes.is_empty() {
        Ok(current)
    } else {
        let wanted = changes.apply(current);
        match serde_json::to_string(&wanted) {
            Ok(body) => admin.put_json("/inject", &body).and_then(|reply| {
                serde_json::from_str::<Inject>(&reply)
                    .map_err(|e| ClientError::Unreachable { url: base.to_owned(), reason: e.to_string() })
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

pub(super) fn fail(message: &str) -> ExitCode {
    eprintln!("rttscope: {message}");
    ExitCode::FAILURE
}
