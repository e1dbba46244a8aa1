//! The `rttscope` binary: parse flags, load config, set up logging, serve
//! until SIGINT/SIGTERM; SIGHUP reads the config file again and applies what can change
//! while running (the emulated link, the log level).

use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;
use std::sync::{Arc, OnceLock};

use clap::Parser;
use rttscope::admin::token;
use rttscope::app::Rttscope;
use rttscope::cli::admin_client::AdminClient;
use rttscope::cli::commands;
use rttscope::cli::reports::{self, Source};
use rttscope::cli::{Cli, Command};
use rttscope::human;
use rttscope_config::{
    ADMIN_TOKEN_ENV, AdminConfig, Config, ConfigError, LogFormat, Overrides, Setting, env_settings, flag_setting,
};

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::CheckConfig { ref file }) => commands::check_config(file, &outside_settings(&cli)),
        Some(Command::Inject {
            ref admin,
            ref token_file,
            rtt,
            jitter,
            bandwidth,
            window,
            loss,
            ref users,
            ref schemas,
            percent,
            off,
        }) => {
            let admin = match admin_client(&cli, admin.as_deref(), token_file.as_deref()) {
                Ok(admin) => admin,
                Err(message) => return cli_failure(&message),
            };
            let changes = commands::InjectChanges {
                rtt,
                jitter,
                bandwidth,
                window,
                loss,
                users: users.clone(),
                schemas: schemas.clone(),
                percent,
                off,
            };
            commands::inject(&admin, changes)
        }
        Some(Command::Report {
            ref file,
            ref admin,
            ref token_file,
            format,
            ref output,
            ref save,
            ref diff,
            window,
        }) => {
            let admin = match admin_client(&cli, admin.as_deref(), token_file.as_deref()) {
                Ok(admin) => admin,
                Err(message) => return cli_failure(&message),
            };
            match (diff.as_deref(), save, file) {
                (Some([before, after]), _, _) => reports::diff(
                    Source::parse(before, &admin),
                    Source::parse(after, &admin),
                    format,
                    output.as_deref(),
                ),
                (_, Some(save), _) => reports::save(&admin, window, save),
                (_, _, Some(file)) => reports::report(Source::File(file), format, output.as_deref()),
                _ => reports::report(Source::Admin(admin, window), format, output.as_deref()),
            }
        }
        None => match load_config(&cli) {
            Ok(config) => serve(config, cli),
            Err(message) => {
                eprintln!("rttscope: {message}");
                ExitCode::from(2)
            }
        },
    }
}

/// The client for `--admin URL` (else the address in the config named by `--config`, else
/// the default) with the token from `--token-file`, else `RTTSCOPE_ADMIN_TOKEN`, else the
/// config's `admin.token_file` or `admin.token`.
fn admin_client(cli: &Cli, url: Option<&str>, token_file: Option<&Path>) -> Result<AdminClient, String> {
    let config = load_config(cli).map(|c| c.admin).unwrap_or_else(|_| AdminConfig::default());
    let url = url.map_or_else(
        || {
            // A server bound to every interface is reached on loopback, and named so in Host.
            let mut addr = config.address;
            if addr.ip().is_unspecified() {
                addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
            }
            format!("http://{addr}")
        },
        str::to_owned,
    );
    let token = match token_file {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            Some(text.trim().to_owned())
        }
        None => {
            let loopback = AdminConfig { address: AdminConfig::default().address, ..config };
            token::resolve(&loopback, std::env::var(ADMIN_TOKEN_ENV).ok())
                .map_err(|e| e.to_string())?
                .map(|t| t.expose().to_owned())
        }
    };
    Ok(AdminClient::new(&url, token.as_deref()))
}

fn cli_failure(message: &str) -> ExitCode {
    eprintln!("rttscope: {message}");
    ExitCode::FAILURE
}

fn load_config(cli: &Cli) -> Result<Config, String> {
    let mut config = match &cli.config {
        Some(path) => Config::load(path).map_err(|e| every_problem_in(path, e))?,
        None => Config::default(),
    };
    let settings = outside_settings(cli).map_err(|e| e.to_string())?;
    config.apply_settings(&settings).map_err(|e| e.to_string())?;
    let overrides = Overrides {
        listen: cli.listen.clone(),
        upstream: cli.upstream.clone(),
        admin: cli.admin,
        log_format: cli.log_format,
    };
    config.apply_overrides(overrides).map_err(|e| e.to_string())?;
    Ok(config)
}

/// What is wrong with the config file at `path`, all of it (the loader stops at the first
/// problem), as `check-config` would list it; `first` alone when the file cannot be read.
fn every_problem_in(path: &std::path::Path, first: ConfigError) -> String {
    let name = path.display().to_string();
    let problems = std::fs::read_to_string(path).map(|text| Config::every_problem(&text)).unwrap_or_default();
    if problems.len() < 2 {
        return first.with_source_name(&name).to_string();
    }
    problems.iter().map(|p| p.with_source_name(&name).to_string()).collect::<Vec<_>>().join("\n")
}

/// The settings from outside the file: `RTTSCOPE_*` environment variables, then `--set`
/// flags (later wins).
fn outside_settings(cli: &Cli) -> Result<Vec<Setting>, ConfigError> {
    let (mut settings, _) = env_settings(std::env::vars());
    for arg in &cli.set {
        settings.push(flag_setting(arg)?);
    }
    Ok(settings)
}

/// `RTTSCOPE_*` variables that name no config key, logged once at start.
fn warn_unknown_env() {
    let unknown = commands::stray_env_variables();
    if !unknown.is_empty() {
        tracing::warn!(
            variables = %unknown.join(", "),
            "environment variables named like rttscope's settings name no config key; ignored"
        );
    }
}

/// Changes the log filter of the running process (`log.level`), or says why it cannot.
type SetLogLevel = Box<dyn Fn(&str) -> Result<(), String> + Send + Sync>;

/// Sets up logging to stderr; what it returns changes the level later.
fn init_logging(config: &Config) -> SetLogLevel {
    // RUST_LOG, when set, wins over the config file: the usual escape hatch.
    let from_env = tracing_subscriber::EnvFilter::try_from_default_env().ok();
    let env_wins = from_env.is_some();
    let filter = from_env.unwrap_or_else(|| tracing_subscriber::EnvFilter::new(&config.log.level));
    // Colour only for a person at a terminal: escape codes in a file or a log collector are
    // noise. NO_COLOR (https://no-color.org) turns it off there too.
    let ansi = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi);
    let set: Box<dyn Fn(tracing_subscriber::EnvFilter) -> Result<(), String> + Send + Sync> = match config.log.format {
        LogFormat::Json => {
            let builder = builder.json().with_filter_reloading();
            let handle = builder.reload_handle();
            builder.init();
            Box::new(move |filter| handle.reload(filter).map_err(|e| e.to_string()))
        }
        LogFormat::Text => {
            let builder = builder.with_filter_reloading();
            let handle = builder.reload_handle();
            builder.init();
            Box::new(move |filter| handle.reload(filter).map_err(|e| e.to_string()))
        }
    };
    Box::new(move |level| match env_wins {
        true => Err("RUST_LOG is set and wins over log.level".to_owned()),
        false => set(tracing_subscriber::EnvFilter::try_new(level).map_err(|e| e.to_string())?),
    })
}

/// What SIGHUP does once rttscope runs: read the config file again (with the same flags and
/// environment) and apply what can change while running. A file with problems changes
/// nothing; the problems are logged.
fn reload_on_hangup(
    cli: Cli,
    reloader: rttscope::app::Reloader,
    set_level: SetLogLevel,
    level: String,
) -> impl Fn() + Send + Sync {
    let level = std::sync::Mutex::new(level);
    move || {
        let file = cli.config.as_ref().map_or_else(|| "no config file".to_owned(), |p| p.display().to_string());
        let config = match load_config(&cli) {
            Ok(config) => config,
            Err(problems) => {
                tracing::error!(config = %file, "SIGHUP: the config file has problems; nothing changed:\n{problems}");
                return;
            }
        };
        let mut last_level = rttscope::sync::locked(&level);
        let level_changed = *last_level != config.log.level;
        let new_level = config.log.level.clone();
        let mut reloaded = reloader.apply(config);
        if level_changed {
            match set_level(&new_level) {
                Ok(()) => reloaded.applied.push("log.level"),
                Err(why) => tracing::warn!("SIGHUP: log.level not changed: {why}"),
            }
        }
        *last_level = new_level;
        tracing::info!(
            config = %file,
            applied = %list(&reloaded.applied),
            at_next_start = %list(&reloaded.at_restart),
            "SIGHUP: config file read again (rttscope logs to stderr: there is no log file to reopen)"
        );
    }
}

/// `a, b`, or `nothing`.
fn list(names: &[&str]) -> String {
    if names.is_empty() { "nothing".to_owned() } else { names.join(", ") }
}

fn serve(config: Config, cli: Cli) -> ExitCode {
    let set_level = init_logging(&config);
    warn_unknown_env();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            tracing::error!(error = %e, "cannot start the runtime");
            return ExitCode::FAILURE;
        }
    };
    let config = Arc::new(config);
    runtime.block_on(async move {
        let on_hangup = Arc::new(OnceLock::new());
        let shutdown = shutdown_signal(on_hangup.clone());
        let rttscope = match Rttscope::bind(config.clone()).await {
            Ok(rttscope) => rttscope,
            Err(e) => {
                tracing::error!("cannot start: {e}");
                return ExitCode::FAILURE;
            }
        };
        let reload: HangupAction =
            Box::new(reload_on_hangup(cli, rttscope.reloader(), set_level, config.log.level.clone()));
        let _ = on_hangup.set(reload);
        tracing::info!(
            listen = %rttscope.listening().join(", "),
            admin = %if config.admin.enabled { config.admin.address.to_string() } else { "off".to_owned() },
            upstream = %config.upstream.address,
            upstream.tls = %word(&config.upstream.tls.mode),
            upstream.compression = %word(&config.upstream.compression),
            max_connections = config.limits.max_connections,
            max_connecting = config.limits.connecting_slots(),
            first_byte_timeout = %humantime::format_duration(config.limits.first_byte_limit()),
            buffer_size = %human::size(config.relay.buffer_size.0),
            buffer_budget = %human::size(config.limits.buffer_budget.0),
            idle_timeout = %config.limits.idle_timeout,
            idle_poll = %config.relay.idle_poll,
            sched_batch = config.relay.sched_batch,
            record = config.record.enabled,
            "rttscope ready"
        );
        match rttscope.run(shutdown).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                tracing::error!(error = %e, "stopped with an error");
                ExitCode::FAILURE
            }
        }
    })
}

/// A config value as the YAML file spells it (`verify-ca`, not `VerifyCa`).
fn word(value: &impl serde::Serialize) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => "?".to_owned(),
    }
}

/// What SIGHUP does, once rttscope runs.
type HangupAction = Box<dyn Fn() + Send + Sync>;

/// Completes on SIGINT or SIGTERM; a second one stops the process at once. SIGHUP (logrotate,
/// `ExecReload=kill -HUP`, a closed terminal) never stops it: it runs `on_hangup` (before
/// rttscope runs, it is logged and ignored). The handlers are installed when this is called,
/// not when the future is first polled: called before the listeners bind, a signal as soon
/// as rttscope accepts connections gets its action, never the default action's kill. The
/// signals are waited for on a thread of their own (signal-hook), not by tokio's signal
/// driver, which every runtime would look at on every park, the connection threads'
/// included.
fn shutdown_signal(on_hangup: Arc<OnceLock<HangupAction>>) -> impl std::future::Future<Output = ()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let (first, got) = tokio::sync::oneshot::channel();
    let waiting = signal_hook::iterator::Signals::new([SIGTERM, SIGINT, SIGHUP]).and_then(|mut signals| {
        std::thread::Builder::new().name("rttscope-signals".to_owned()).spawn(move || {
            let mut first = Some(first);
            for signal in signals.forever() {
                if signal == SIGHUP {
                    match on_hangup.get() {
                        Some(reload) => reload(),
                        None => tracing::info!("SIGHUP before rttscope was ready: ignored"),
                    }
                    continue;
                }
                let Some(first) = first.take() else {
                    tracing::warn!("second signal: stopping at once, cutting off what is in flight");
                    rttscope::app::write_final_report_now(std::time::Duration::from_secs(2));
                    std::process::exit(1);
                };
                let name = if signal == SIGTERM { "SIGTERM" } else { "SIGINT" };
                tracing::info!("{name}: shutting down (a second signal stops at once)");
                let _ = first.send(());
            }
        })
    });
    async move {
        if waiting.is_err() {
            tracing::warn!("cannot install signal handlers; stop rttscope with SIGKILL");
            return std::future::pending().await;
        }
        if got.await.is_err() {
            // The thread ended without a signal (it cannot, short of a panic): run on.
            std::future::pending::<()>().await;
        }
    }
}
