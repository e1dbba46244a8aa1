//! `cpu-per-query`: rttscope's CPU per query against HAProxy's at the rates a sidecar sees
//! (`scripts/bench.sh --cpu`). Prints the table and writes it to `target/bench/cpu.md`, the
//! figures to `target/bench/cpu.json`.

use std::process::ExitCode;

use clap::Parser;
use rttscope_benches::paced;

#[derive(Parser, Debug)]
#[command(about = "rttscope's CPU per query against HAProxy's, paced and saturating, near and 2 ms away")]
struct Args {
    /// A fifth of each window: a smoke run of a minute.
    #[arg(long)]
    quick: bool,
    /// The built-in scenario rttscope runs as (`scripts/bench.sh --list-scenarios`), to
    /// race a setting against HAProxy, e.g. `no-idle-poll`.
    #[arg(long, default_value = "default")]
    scenario: String,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let outcome = match paced::run(&paced::cases(args.quick), &args.scenario) {
        Ok(outcome) => outcome,
        Err(e) => {
            eprintln!("cpu-per-query: {e:#}");
            return ExitCode::FAILURE;
        }
    };
    let table = paced::markdown(&outcome);
    println!("{table}");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench");
    let written =
        std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(dir.join("cpu.md"), &table)).and_then(|()| {
            std::fs::write(dir.join("cpu.json"), serde_json::to_string_pretty(&outcome).unwrap_or_default())
        });
    if let Err(e) = written {
        eprintln!("cpu-per-query: writing {}: {e}", dir.display());
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
