//! The command line: flags and subcommands, as DESIGN.md promises them.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Parser, Subcommand};
use rttscope_config::{ReportFormat, UpstreamAddr};

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
