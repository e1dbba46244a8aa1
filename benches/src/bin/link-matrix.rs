//! `link-matrix`: the background story's buffers × conditions matrix over the test WAN through
//! rttscope, one cell at a time; prints each cell's throughput, base RTT, verdict and evidence
//! and writes the table to `target/bench/matrix.md`. Needs root and TUN (the WAN emulator).
//! Run it with `scripts/bench.sh --matrix [FLAGS]`.

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use rttscope_benches::matrix::{self, Settings};

#[derive(Parser, Debug)]
#[command(about = "Buffers × network conditions over the test WAN through rttscope: each cell's verdict")]
struct Args {
    /// Cells to run, comma-separated: `auto/loss`, or a whole row or column (`rmem`, `cpu`).
    #[arg(long, default_value = "")]
    only: String,
    /// Rows of 1,000 bytes each cell's query returns (8,000 ≈ 8 MB).
    #[arg(long, default_value_t = 8_000)]
    rows: u64,
    /// The server namespace's congestion control (`reno` is loss-based like the story's hosts;
    /// `bbr` is this host's default).
    #[arg(long, default_value = "reno")]
    congestion_control: String,
    /// Seconds a cell's client may take before it is stopped.
    #[arg(long, default_value_t = 120)]
    cell_timeout: u64,
    /// Only list the cells.
    #[arg(long)]
    list: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let cells = match matrix::select(&args.only) {
        Ok(cells) => cells,
        Err(why) => {
            eprintln!("link-matrix: {why}");
            return ExitCode::FAILURE;
        }
    };
    if args.list {
        for cell in &cells {
            println!("{:<14} {} × {}", cell.key(), cell.buffers.name(), cell.condition.name());
        }
        return ExitCode::SUCCESS;
    }
    if let Err(why) = matrix::available() {
        eprintln!("link-matrix: cannot run here: {why}");
        return ExitCode::FAILURE;
    }
    let settings = Settings {
        sql: matrix::rows_sql(args.rows),
        congestion_control: args.congestion_control,
        cell_timeout: Duration::from_secs(args.cell_timeout),
    };
    let command = std::env::var("RTTSCOPE_BENCH_COMMAND").unwrap_or_else(|_| {
        let args: Vec<String> = std::env::args().skip(1).collect();
        format!("link-matrix {}", args.join(" ")).trim_end().to_owned()
    });
    let mut results = Vec::new();
    for (i, cell) in cells.iter().enumerate() {
        eprintln!("==> cell {}/{}: {} × {}", i + 1, cells.len(), cell.buffers.name(), cell.condition.name());
        let result = matrix::run_cell(*cell, &settings);
        match (&result.verdict, &result.error) {
            (Some(v), _) => eprintln!("==> {}: {} — {}", cell.key(), matrix::limit(v), v["summary"]),
            (None, Some(why)) => eprintln!("==> {}: no verdict: {why}", cell.key()),
            (None, None) => {}
        }
        results.push(result);
    }
    let table = matrix::table(&results, &command, &settings);
    print!("{table}");
    let out = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench/matrix.md");
    if let Err(e) =
        std::fs::create_dir_all(out.parent().expect("has a parent")).and_then(|()| std::fs::write(&out, &table))
    {
        eprintln!("link-matrix: could not write {}: {e}", out.display());
    }
    if results.iter().any(|r| r.verdict.is_none()) { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}
