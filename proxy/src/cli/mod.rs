//! The command line: flags and subcommands, as DESIGN.md promises them.
//!
//! - this file: the flags ([`Cli`], [`Command`]);
//! - `commands`: the subcommands that do not serve (`check-config`, `inject`);
//! - `reports`: `report`, its `--save` and `--diff`;
//! - `admin_client`: their HTTP client for a running rttscope's admin API.

pub mod admin_client;
pub mod commands;
pub mod reports;

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Parser, Subcommand};
use rttscope_config::{Bandwidth, ByteSize, HumanDuration, ListenAddr, LogFormat, Percent, ReportFormat, UpstreamAddr};

/// A MySQL wire-protocol proxy that shows where the time goes when the
/// database is far away.
#[derive(Debug, Parser)]
#[command(name = "rttscope", version, about)]
pub struct Cli {
    /// YAML config file; every key has a default, flags override it.
    #[arg(long, short, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Where MySQL clients connect: `ip:port` or `unix:/path/to.sock`; repeat the flag to
    /// listen on several (replaces the config's `listen`) [default: 127.0.0.1:6033].
    #[arg(long, value_name = "ADDR")]
    pub listen: Vec<ListenAddr>,
    /// The MySQL/MariaDB server to forward to [default: 127.0.0.1:3306].
    #[arg(long, value_name = "HOST:PORT")]
    pub upstream: Option<UpstreamAddr>,
    /// Address of the admin HTTP API [default: 127.0.0.1:6070].
    #[arg(long, value_name = "ADDR")]
    pub admin: Option<SocketAddr>,
    /// Any config key, as a dotted path and a value written as in the file
    /// (`--set limits.idle_timeout=5m`); repeatable. Wins over `RTTSCOPE_*` environment
    /// variables, which win over the file.
    #[arg(long = "set", value_name = "KEY=VALUE", global = true)]
    pub set: Vec<String>,
    /// Log lines as `text` (for people) or `json` (one object per line, for collectors)
    /// [default: the config's log.format, else text].
    #[arg(long, value_name = "text|json")]
    pub log_format: Option<LogFormat>,
    /// A subcommand; `None` runs the proxy itself.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The subcommands besides serving: each works on a config file or a running rttscope's admin
/// API, and forwards no traffic.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check a config file and print the effective configuration.
    CheckConfig {
        /// The YAML file to check.
        file: PathBuf,
    },
    /// Show or change a running rttscope's emulated link. Without changes,
    /// prints the current one; given values replace just those keys.
    Inject {
        /// Base URL of a running rttscope's admin API
        /// [default: the config's admin address, else http://127.0.0.1:6070].
        #[arg(long, value_name = "URL")]
        admin: Option<String>,
        /// A file holding the admin token [default: $RTTSCOPE_ADMIN_TOKEN, else the
        /// config's admin.token_file or admin.token]. Changes need the token.
        #[arg(long, value_name = "FILE")]
        token_file: Option<PathBuf>,
        /// Round-trip time to add, e.g. 15ms (each direction gets half).
        #[arg(long, allow_hyphen_values = true)]
        rtt: Option<HumanDuration>,
        /// Delay variation per direction, at most rtt/2.
        #[arg(long, allow_hyphen_values = true)]
        jitter: Option<HumanDuration>,
        /// Bandwidth per direction, e.g. 34mbit.
        #[arg(long)]
        bandwidth: Option<Bandwidth>,
        /// At most this many bytes in flight per round trip, e.g. 32KiB.
        #[arg(long)]
        window: Option<ByteSize>,
        /// Share of segments lost on the long hop, each direction, e.g. 1% (0% to 50%):
        /// recovery stalls and the loss-limited window of a Reno/CUBIC sender.
        #[arg(long)]
        loss: Option<Percent>,
        /// Only connections of these users (repeatable).
        #[arg(long = "user", value_name = "USER")]
        users: Vec<String>,
        /// Only connections on these schemas (repeatable).
        #[arg(long = "schema", value_name = "SCHEMA")]
        schemas: Vec<String>,
        /// Only this share of connections, e.g. 25%.
        #[arg(long)]
        percent: Option<Percent>,
        /// Turn the emulated link off.
        #[arg(long, conflicts_with_all = ["rtt", "jitter", "bandwidth", "window", "loss", "users", "schemas", "percent"])]
        off: bool,
    },
    /// Render a report: from a running rttscope's admin API, or from a
    /// saved JSON report. Or save the live one, or compare two.
    Report {
        /// A JSON report written by rttscope (report.path, /report, or --save).
        #[arg(conflicts_with = "admin")]
        file: Option<PathBuf>,
        /// Base URL of a running rttscope's admin API
        /// [default: the config's admin address, else http://127.0.0.1:6070].
        #[arg(long, value_name = "URL")]
        admin: Option<String>,
        /// A file holding the admin token [default: $RTTSCOPE_ADMIN_TOKEN, else the
        /// config's admin.token_file or admin.token]. Needed beyond loopback.
        #[arg(long, value_name = "FILE", conflicts_with = "file")]
        token_file: Option<PathBuf>,
        /// Output format: `text`, `json` or `html`.
        #[arg(long, short, default_value = "text", value_name = "text|json|html")]
        format: ReportFormat,
        /// Write to this file instead of standard output.
        #[arg(long, short, value_name = "FILE")]
        output: Option<PathBuf>,
        /// Save the live report (from --admin) as JSON to FILE, to compare later with --diff.
        #[arg(long, value_name = "FILE", conflicts_with_all = ["file", "diff", "output", "format"])]
        save: Option<PathBuf>,
        /// Only the last DURATION of the live report (from --admin), e.g. 15m: the admin
        /// API's /report?window=.
        #[arg(long, value_name = "DURATION", conflicts_with_all = ["file", "diff"])]
        window: Option<HumanDuration>,
        /// Compare two reports, each a saved JSON report or an admin URL (http://HOST:PORT, or a
        /// bare HOST:PORT as --admin takes it): totals, each statement's change, findings fixed, new
        /// and unchanged.
        #[arg(long, num_args = 2, value_names = ["BEFORE", "AFTER"], conflicts_with_all = ["file", "admin"])]
        diff: Option<Vec<String>>,
    },
}
