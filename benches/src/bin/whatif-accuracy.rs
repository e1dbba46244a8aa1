//! `whatif-accuracy`: rttscope's what-if projections held against runs measured over the links
//! they project onto (`scripts/bench.sh --whatif`). Prints the table and writes it to
//! `target/bench/whatif.md`, the figures to `target/bench/whatif.json`.

use std::process::ExitCode;

use clap::Parser;
use rttscope_benches::whatif::{self, Plan, Workload};

#[derive(Parser, Debug)]
#[command(about = "What-if projections against runs measured over emulated links")]
struct Args {
    /// Two RTTs and fewer repetitions: a smoke run of a minute or two.
    #[arg(long)]
    quick: bool,
    /// Only these workloads (comma-separated), e.g. `--only large-read` to re-run its cells.
    #[arg(long, value_enum, value_delimiter = ',')]
    only: Vec<Workload>,
    /// Runs of each workload over each link, taken in turn; the table shows their medians and
    /// each measured cell's fastest and slowest run. The large read takes at least seven
    /// outside `--quick`: one run of it can be half another's.
    #[arg(long, default_value_t = 1)]
    runs: u32,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let plan = Plan::new(args.quick, &args.only, args.runs);
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("whatif-accuracy: {e}");
            return ExitCode::FAILURE;
        }
    };
    let rows = match runtime.block_on(whatif::run(&plan)) {
        Ok(rows) => rows,
        Err(e) => {
            eprintln!("whatif-accuracy: {e:#}");
            return ExitCode::FAILURE;
        }
    };
    let table = whatif::markdown(&plan, &rows);
    println!("{table}");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench");
    let written =
        std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(dir.join("whatif.md"), &table)).and_then(|()| {
            std::fs::write(dir.join("whatif.json"), serde_json::to_string_pretty(&rows).unwrap_or_default())
        });
    if let Err(e) = written {
        eprintln!("whatif-accuracy: writing target/bench: {e}");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
