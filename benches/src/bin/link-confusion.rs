//! `link-confusion`: the link-verdict confusion matrix — six injected causes × RTT {5, 20,
//! 80 ms} × result size {1, 10, 40 MiB} over the test WAN through rttscope, each cell's verdict
//! against its cause; prints per-class precision and recall and the share without a verdict,
//! then every cell, and writes it all to `target/bench/confusion.md`. Needs root and TUN (the
//! WAN emulator). Run it with `scripts/bench.sh --confusion [FLAGS]`.

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use rttscope_benches::confusion::{self, run, table};

#[derive(Parser, Debug)]
#[command(about = "Injected causes × RTT × result size over the test WAN: rttscope's verdicts against the causes")]
struct Args {
    /// Cells to run, comma-separated filters on their keys (`loss`, `80ms`, `reader/1MiB`).
    #[arg(long, default_value = "")]
    only: String,
    /// Runs of every cell.
    #[arg(long, default_value_t = 1)]
    repeat: u32,
    /// Seconds a cell's client may take before it is stopped (its verdict is then `unknown`).
    #[arg(long, default_value_t = 150)]
    cell_timeout: u64,
    /// Only list the cells.
    #[arg(long)]
    list: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let cells = match confusion::select(&args.only) {
        Ok(cells) => cells,
        Err(why) => {
            eprintln!("link-confusion: {why}");
            return ExitCode::FAILURE;
        }
    };
    if args.list {
        for cell in &cells {
            println!("{:<22} {:?}", cell.key(), cell.cause.setup(cell.rtt_ms, cell.mib));
        }
        return ExitCode::SUCCESS;
    }
    if let Err(why) = rttscope_benches::matrix::available() {
        eprintln!("link-confusion: cannot run here: {why}");
        return ExitCode::FAILURE;
    }
    let command = std::env::var("RTTSCOPE_BENCH_COMMAND").unwrap_or_else(|_| {
        let args: Vec<String> = std::env::args().skip(1).collect();
        format!("link-confusion {}", args.join(" ")).trim_end().to_owned()
    });
    let timeout = Duration::from_secs(args.cell_timeout);
    let total = cells.len() * args.repeat as usize;
    let mut results = Vec::new();
    for round in 0..args.repeat {
        for group in confusion::groups(&cells) {
            let (cause, rtt_ms, sizes) = group;
            eprintln!(
                "==> {}/{rtt_ms}ms: sizes {sizes:?} MiB (run {}; {} of {total} cells done)",
                cause.key(),
                round + 1,
                results.len()
            );
            for result in run::run_group(cause, rtt_ms, &sizes, timeout) {
                let said = result.verdict.as_ref().map_or_else(
                    || format!("no verdict: {}", result.error.clone().unwrap_or_default()),
                    |v| format!("{} — {}", rttscope_benches::matrix::limit(v), v["summary"]),
                );
                eprintln!("==> {}: {said}", result.cell.key());
                results.push(result);
            }
        }
    }
    let confusion = table::Confusion::of(&results);
    let report = format!(
        "Link-verdict confusion matrix: `{command}`, {} runs of each cell, {} build\n\n{}\n{}",
        args.repeat,
        if cfg!(debug_assertions) { "dev" } else { "release" },
        table::summary(&confusion),
        table::cells(&results)
    );
    print!("{report}");
    let out = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench/confusion.md");
    if let Err(e) =
        std::fs::create_dir_all(out.parent().expect("has a parent")).and_then(|()| std::fs::write(&out, &report))
    {
        eprintln!("link-confusion: could not write {}: {e}", out.display());
    }
    ExitCode::SUCCESS
}
