//! The `rttscope` binary: parse flags, load config, set up logging, serve
//! until SIGINT/SIGTERM.

use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use rttscope::cli::{Cli, Command};
use rttscope::commands;
use rttscope::app::Rttscope;
use rttscope_config::{Config, LogFormat, Overrides};

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::CheckConfig { ref file }) => commands::check_config(file),
        Some(Command::Inject { ref admin, rtt, jitter, bandwidth, window, ref users, ref schemas, percent, off }) => {
            let admin = admin.clone().unwrap_or_else(|| default_admin_url(&cli));
            let changes = commands::InjectChanges { rtt, jitter, bandwidth, window, users: users.clone(), schemas: schemas.clone(), percent, off };
            commands::inject(&admin, changes)
        }
        Some(Command::Report { ref file, ref admin, format, ref output }) => {
            let admin = admin.clone().unwrap_or_else(|| default_admin_url(&cli));
            commands::report(file.as_deref(), &admin, format, output.as_deref())
        }
        None => match load_config(&cli) {
            Ok(config) => serve(config),
            Err(message) => {
                eprintln!("rttscope: {message}");
                ExitCode::from(2)
            }
        },
    }
}

/// The admin URL of the config named by `--config`, else the default.
fn default_admin_url(cli: &Cli) -> String {
    let admin = load_config(cli).map(|c| c.admin).unwrap_or_else(|_| Config::default().admin);
    format!("http://{admin}")
}

fn load_config(cli: &Cli) -> Result<Config, String> {
    let mut config = match &cli.config {
        Some(path) => Config::load(path).map_err(|e| e.with_source_name(&path.display().to_string()).to_string())?,
        None => Config::default(),
    };
    let overrides = Overrides { listen: cli.listen, upstream: cli.upstream.clone(), admin: cli.admin };
    config.apply_overrides(overrides).map_err(|e| e.to_string())?;
    Ok(config)
}

fn init_logging(config: &Config) {
    // RUST_LOG, when set, wins over the config file: the usual escape hatch.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(&config.log.level));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match config.log.format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.init(),
    }
}

fn serve(config: Config) -> ExitCode {
    init_logging(&config);
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            tracing::error!(error = %e, "cannot start the runtime");
            return ExitCode::FAILURE;
        }
    };
    let config = Arc::new(config);
    runtime.block_on(async move {
        let rttscope = match Rttscope::bind(config.clone()).await {
            Ok(rttscope) => rttscope,
            Err(e) => {
                tracing::error!(error = %e, listen = %config.listen, "cannot listen");
                return ExitCode::FAILURE;
            }
        };
        tracing::info!(listen = %config.listen, admin = %config.admin, upstream = %config.upstream, "rttscope ready");
        match rttscope.run(shutdown_signal()).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                tracing::error!(error = %e, "stopped with an error");
                ExitCode::FAILURE
            }
        }
    })
}

/// Completes on SIGINT or SIGTERM.
async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
        tracing::warn!("cannot install signal handlers; stop rttscope with SIGKILL");
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
        _ = int.recv() => tracing::info!("SIGINT: shutting down"),
    }
}
