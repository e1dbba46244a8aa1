//! `rttscope-soak`: many connections of mixed traffic through rttscope for a long while,
//! the emulated link switched live, rttscope's RSS and descriptors sampled; prints the
//! figures as Markdown. Run it with `scripts/soak.sh [FLAGS]`.

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use rttscope_benches::child::resolve_binary;
use rttscope_benches::options::parse_duration;
use rttscope_benches::soak::{self, SoakOptions};

#[derive(Parser)]
#[command(about = "Soak rttscope: many connections, mixed traffic, the link switched live; RSS and fds over time")]
struct Args {
    /// Concurrent client connections.
    #[arg(long, default_value_t = 1000)]
    connections: usize,
    /// How long (e.g. 10m, 30s).
    #[arg(long, value_parser = parse_duration, default_value = "10m")]
    duration: Duration,
    /// How often rttscope's RSS and descriptors are read.
    #[arg(long, value_parser = parse_duration, default_value = "10s")]
    sample: Duration,
    /// How often the emulated link is switched on or off through the admin API.
    #[arg(long, value_parser = parse_duration, default_value = "30s")]
    toggle: Duration,
    /// Mean pause between one connection's commands.
    #[arg(long, value_parser = parse_duration, default_value = "1s")]
    think: Duration,
    /// More of rttscope's YAML config, e.g. "report:\n  window_max: 0\n".
    #[arg(long, default_value = "")]
    yaml: String,
    /// The rttscope binary (default: this build's, rebuilt first).
    #[arg(long)]
    proxy_bin: Option<std::path::PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let options = SoakOptions {
        connections: args.connections,
        duration: args.duration,
        sample_every: args.sample,
        toggle_every: args.toggle,
        think: args.think,
        extra_yaml: args.yaml,
    };
    let result = resolve_binary(args.proxy_bin.as_deref()).and_then(|binary| {
        // Two workers: the machines this runs on have two cores, shared with MariaDB and rttscope.
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
        runtime.block_on(soak::run(&binary, &options))
    });
    match result {
        Ok(report) => {
            print!("{}", report.markdown());
            if report.errors == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE }
        }
        Err(e) => {
            eprintln!("rttscope-soak: {e:#}");
            ExitCode::FAILURE
        }
    }
}
