//! The command line: flags and subcommands, as DESIGN.md promises them.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Parser, Subcommand};
use rttscope_config::{Bandwidth, ByteSize, HumanDuration, Percent, ReportFormat, UpstreamAddr};

/// A MySQL wire-protocol proxy that shows where the time goes when the
/// database is far away.
#[derive(Debug, Parser)]
#[command(name = "rttscope", version, about)]
pub struct Cli {
    /// YAML config file; every key has a default, flags override it.
    #[arg(long, short, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Address to listen on for MySQL clients [default: 127.0.0.1:6033].
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<SocketAddr>,
    /// The MySQL/MariaDB server to forward to [default: 127.0.0.1:3306].
    #[arg(long, value_name = "HOST:PORT")]
    pub upstream: Option<UpstreamAddr>,
    /// Address of the admin HTTP API [default: 127.0.0.1:6070].
    #[arg(long, value_name = "ADDR")]
    pub admin: Option<SocketAddr>,
    #[command(subcommand)]
    pub command: Option<Command>,
}

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
        #[arg(long, conflicts_with_all = ["rtt", "jitter", "bandwidth", "window", "users", "schemas", "percent"])]
        off: bool,
    },
    /// Render a report: from a running rttscope's admin API, or from a
    /// saved JSON report.
    Report {
        /// A JSON report written by rttscope (report.path, or /report).
        #[arg(conflicts_with = "admin")]
        file: Option<PathBuf>,
        /// Base URL of a running rttscope's admin API
        /// [default: the config's admin address, else http://127.0.0.1:6070].
        #[arg(long, value_name = "URL")]
        admin: Option<String>,
        /// Output format.
        #[arg(long, short, default_value = "text")]
        format: ReportFormat,
        /// Write to this file instead of standard output.
        #[arg(long, short, value_name = "FILE")]
        output: Option<PathBuf>,
    },
}
