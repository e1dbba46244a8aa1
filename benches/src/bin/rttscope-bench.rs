//! `rttscope-bench`: the end-to-end benchmark; run it with `scripts/bench.sh [FLAGS]`.

use std::process::ExitCode;

use clap::Parser;
use rttscope_benches::{Options, pipe, run, scenario};

fn main() -> ExitCode {
    let options = Options::parse();
    if options.list_scenarios {
        print!("{}", scenario::list());
        return ExitCode::SUCCESS;
    }
    if let (Some(listen), Some(upstream)) = (options.raw_pipe_listen, options.raw_pipe_upstream) {
        return raw_pipe(listen, upstream);
    }
    // Two workers: the machines this runs on have two cores, shared with MariaDB and rttscope.
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("rttscope-bench: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async {
        tokio::select! {
            result = run(&options) => match result {
                Ok(report) => {
                    print!("{}", report.markdown);
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("rttscope-bench: {e:#}");
                    ExitCode::FAILURE
                }
            },
            // Dropping the run future kills the proxies; returning runs the exit hooks that
            // stop a private MariaDB.
            _ = interrupted() => {
                eprintln!("rttscope-bench: interrupted");
                ExitCode::from(130)
            }
        }
    })
}

/// The raw-pipe baseline, on the runtime rttscope's `main` builds (workers = CPUs).
fn raw_pipe(listen: std::net::SocketAddr, upstream: std::net::SocketAddr) -> ExitCode {
    let result = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(anyhow::Error::from)
        .and_then(|runtime| runtime.block_on(pipe::serve(listen, upstream)));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rttscope-bench raw pipe: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Completes on SIGINT (Ctrl-C), waited for on a thread (signal-hook: tokio's signal feature
/// is off in this workspace, see its Cargo.toml).
async fn interrupted() {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let waiting = signal_hook::iterator::Signals::new([signal_hook::consts::SIGINT]).and_then(|mut signals| {
        std::thread::Builder::new().name("bench-signals".to_owned()).spawn(move || {
            if signals.forever().next().is_some() {
                let _ = tx.send(());
            }
        })
    });
    if waiting.is_err() || rx.await.is_err() {
        std::future::pending::<()>().await;
    }
}
