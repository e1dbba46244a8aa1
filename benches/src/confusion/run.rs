//! The confusion-matrix cells of one cause at one RTT, start to end: a fresh link, server and
//! rttscope set up for the cause (the settings of the three result sizes differ only in the
//! query, and starting MariaDB is the slowest step on a loaded host); each result streamed (or
//! read slowly) on a connection of its own; the verdict on each from `/report`. A failure
//! anywhere is the cell's `error` and its verdict `unknown`, never the run's end.

use std::io::Read;
use std::process::Child;
use std::time::{Duration, Instant};

use rttscope_integration_tests::link_rig::{Line, Rig};
use rttscope_integration_tests::wan::{DirectionStats, WanStats};

use super::{Cause, Cell, READER_BYTES_PER_SECOND, rows_for};
use crate::matrix::{catching, describe_line, load_average};

/// What one cell gave.
pub type CellResult = crate::matrix::CellResult<Cell>;

impl CellResult {
    /// The verdict's limit, or `unknown` without one.
    pub fn predicted(&self) -> &str {
        self.verdict.as_ref().and_then(|v| v["limit"].as_str()).unwrap_or("unknown")
    }

    fn failed(cell: Cell, why: String) -> CellResult {
        let load = load_average().unwrap_or(f64::NAN);
        CellResult { cell, load, client_seconds: f64::NAN, verdict: None, line: String::new(), error: Some(why) }
    }
}

/// Runs the cells of `cause` at `rtt_ms` for each size in `sizes_mib` on one rig, stopping
/// each client after `timeout`.
pub fn run_group(cause: Cause, rtt_ms: u64, sizes_mib: &[u64], timeout: Duration) -> Vec<CellResult> {
    let cells: Vec<Cell> = sizes_mib.iter().map(|&mib| Cell { cause, rtt_ms, mib }).collect();
    let Some(&first) = cells.first() else { return Vec::new() };
    let rig = match catching(|| start_rig(first)) {
        Ok(Some(rig)) => rig,
        Ok(None) => {
            return cells.iter().map(|&c| CellResult::failed(c, "the WAN emulator cannot run here".into())).collect();
        }
        Err(why) => return cells.iter().map(|&c| CellResult::failed(c, why.clone())).collect(),
    };
    cells.iter().map(|&cell| run_cell(&rig, cell, timeout)).collect()
}

fn start_rig(cell: Cell) -> Option<Rig> {
    let setup = cell.cause.setup(cell.rtt_ms, cell.mib);
    let line = Line { rtt: cell.rtt(), bandwidth_bps: setup.bandwidth_bps, impairments: setup.impairments() };
    Rig::start_on(line, &as_str(&setup.server_sysctls), &as_str(&setup.client_sysctls), "")
}

fn as_str(pairs: &[(String, String)]) -> Vec<(&str, &str)> {
    pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

/// One result through `rig`: the query, the client, the verdict on a response that large.
fn run_cell(rig: &Rig, cell: Cell, timeout: Duration) -> CellResult {
    let load = load_average().unwrap_or(f64::NAN);
    let setup = cell.cause.setup(cell.rtt_ms, cell.mib);
    let before = rig.link.stats();
    let started = Instant::now();
    let finished = catching(|| {
        if setup.slow_reader {
            read_slowly(rig.stream_to_pipe(&setup.sql), started + timeout)
        } else {
            wait_for(rig.stream(&setup.sql), started + timeout)
        }
    })
    .and_then(|r| r);
    let client_seconds = started.elapsed().as_secs_f64();
    let line = describe_line(&since(&rig.link.stats(), &before));
    // The cell's verdict is the one on its result: at least the rows' characters, newer
    // than the group's earlier (smaller) results.
    let least = rows_for(cell.mib) * 1_000;
    let most = rows_for(cell.mib) * 1_100;
    let verdict =
        finished.and_then(|()| catching(|| rig.verdict(|v| (least..most).contains(&v["bytes"].as_u64().unwrap_or(0)))));
    let (verdict, error) = match verdict {
        Ok(v) => (Some(v), None),
        Err(why) => (None, Some(why.lines().next().unwrap_or_default().to_owned())),
    };
    CellResult { cell, load, client_seconds, verdict, line, error }
}

/// The server's direction's counters over a cell.
fn since(now: &WanStats, before: &WanStats) -> WanStats {
    let (n, b) = (&now.server_to_client, &before.server_to_client);
    let down = DirectionStats {
        seen: n.seen - b.seen,
        dropped: n.dropped - b.dropped,
        lost: n.lost - b.lost,
        duplicated: n.duplicated - b.duplicated,
        reordered: n.reordered - b.reordered,
        ..*n
    };
    WanStats { server_to_client: down, ..*now }
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
/// application that works between rows), until it ends or `deadline`. Timed from the first
/// byte: an application has no time saved up from waiting for its first row (timed from the
/// start, the reader took the first 0.5-2 MB at full speed while the connection and the query
/// crossed the line, and was not slow in a 1 MiB cell at all).
fn read_slowly(mut child: Child, deadline: Instant) -> Result<(), String> {
    let mut out = child.stdout.take().ok_or("the client's output is not piped")?;
    let mut started = None;
    let mut buf = vec![0u8; 16 * 1024];
    let mut total = 0u64;
    loop {
        match out.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => total += n as u64,
            Err(e) => return Err(format!("reading the client's output: {e}")),
        }
        let started = *started.get_or_insert_with(Instant::now);
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
