//! One confusion-matrix cell, start to end: a fresh link, server and rttscope set up for the
//! cell's cause; the result streamed (or read slowly); the verdict on it from `/report`. A
//! failure anywhere is the cell's `error` and its verdict `unknown`, never the run's end.

use std::io::Read;
use std::panic::AssertUnwindSafe;
use std::process::Child;
use std::time::{Duration, Instant};

use rttscope_integration_tests::link_rig::{Line, Rig};
use serde_json::Value;

use super::{Cell, READER_BYTES_PER_SECOND, rows_for};
use crate::matrix::{describe_line, load_average};

/// What one cell gave.
#[derive(Clone, Debug)]
pub struct CellResult {
    pub cell: Cell,
    /// The 1-minute load average when the cell started.
    pub load: f64,
    /// The client's time for the whole query, s.
    pub client_seconds: f64,
    /// The verdict on the cell's result, from `/report`'s `links`.
    pub verdict: Option<Value>,
    /// What the emulator did to the server's packets.
    pub line: String,
    /// Why the cell has no verdict.
    pub error: Option<String>,
}

impl CellResult {
    /// The verdict's limit, or `unknown` without one.
    pub fn predicted(&self) -> &str {
        self.verdict.as_ref().and_then(|v| v["limit"].as_str()).unwrap_or("unknown")
    }
}

/// Runs `cell`, stopping its client after `timeout`.
pub fn run_cell(cell: Cell, timeout: Duration) -> CellResult {
    let load = load_average().unwrap_or(f64::NAN);
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| run_inner(cell, timeout)));
    let (client_seconds, verdict, line, error) = match outcome {
        Ok(Ok((seconds, verdict, line))) => (seconds, Some(verdict), line, None),
        Ok(Err((seconds, line, why))) => (seconds, None, line, Some(why)),
        Err(panic) => {
            let why = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_else(|| "panicked".into());
            (f64::NAN, None, String::new(), Some(why))
        }
    };
    CellResult { cell, load, client_seconds, verdict, line, error }
}

fn as_str(pairs: &[(String, String)]) -> Vec<(&str, &str)> {
    pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

type Outcome = Result<(f64, Value, String), (f64, String, String)>;

fn run_inner(cell: Cell, timeout: Duration) -> Outcome {
    let setup = cell.cause.setup(cell.rtt_ms, cell.mib);
    let line = Line { rtt: cell.rtt(), bandwidth_bps: setup.bandwidth_bps, impairments: setup.impairments() };
    let rig = Rig::start_on(line, &as_str(&setup.server_sysctls), &as_str(&setup.client_sysctls), "").ok_or((
        f64::NAN,
        String::new(),
        "the WAN emulator cannot run here".to_owned(),
    ))?;
    let started = Instant::now();
    let finished = if setup.slow_reader {
        read_slowly(rig.stream_to_pipe(&setup.sql), started + timeout)
    } else {
        wait_for(rig.stream(&setup.sql), started + timeout)
    };
    let seconds = started.elapsed().as_secs_f64();
    let line = describe_line(&rig.link.stats());
    finished.map_err(|why| (seconds, line.clone(), why))?;
    // The cell's verdict is the one on its result: at least the rows' characters.
    let least = rows_for(cell.mib) * 1_000;
    let verdict = rig.verdict(|v| v["bytes"].as_u64().unwrap_or(0) >= least);
    Ok((seconds, verdict, line))
}

/// Waits for the client until `deadline`, then stops it.
fn wait_for(mut child: Child, deadline: Instant) -> Result<(), String> {
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return exited(child, status),
            Ok(None) if Instant::now() >= deadline => return Err(stop(child)),
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => return Err(format!("waiting for mariadb: {e}")),
        }
    }
}

/// Takes the client's output at [`READER_BYTES_PER_SECOND`], pausing between reads (an
/// application that works between rows), until it ends or `deadline`.
fn read_slowly(mut child: Child, deadline: Instant) -> Result<(), String> {
    let mut out = child.stdout.take().ok_or("the client's output is not piped")?;
    let started = Instant::now();
    let mut buf = vec![0u8; 16 * 1024];
    let mut total = 0u64;
    loop {
        match out.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => total += n as u64,
            Err(e) => return Err(format!("reading the client's output: {e}")),
        }
        if Instant::now() >= deadline {
            return Err(stop(child));
        }
        let due = Duration::from_secs_f64(total as f64 / READER_BYTES_PER_SECOND);
        if let Some(ahead) = due.checked_sub(started.elapsed()) {
            std::thread::sleep(ahead);
        }
    }
    let status = child.wait().map_err(|e| format!("waiting for mariadb: {e}"))?;
    exited(child, status)
}

fn exited(mut child: Child, status: std::process::ExitStatus) -> Result<(), String> {
    if status.success() {
        return Ok(());
    }
    let mut err = String::new();
    if let Some(mut stderr) = child.stderr.take() {
        let _ = stderr.read_to_string(&mut err);
    }
    Err(format!("mariadb failed ({status}): {}", err.trim()))
}

fn stop(mut child: Child) -> String {
    let _ = child.kill();
    let _ = child.wait();
    "the client had not finished in time (stopped)".to_owned()
}
