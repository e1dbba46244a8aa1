//! The soak: many connections of mixed traffic through rttscope for a long while, the
//! emulated link switched on and off through the admin API as it runs, and rttscope's
//! resident memory, heap (the allocator's count, from `/metrics`) and open descriptors sampled
//! throughout. What it proves is that nothing grows: each series is fitted with a least-squares
//! line after the warm-up and the slopes reported, with every client error counted (none is
//! expected). The heap beside RSS tells a leak (the heap grows) from the allocator keeping
//! freed memory or pages becoming resident (only RSS grows).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, OptsBuilder};
use rttscope::cli::admin_client::AdminClient;
use rttscope_integration_tests::legs::samples;
use rttscope_integration_tests::mariadb::{NATIVE, TestDb};
use rttscope_integration_tests::process::ProxyProcess;
use tokio::time::Instant;

use crate::workload::{Rng, fixtures};

/// Rows of the prepared statements' table.
const ROWS: u64 = 10_000;
/// The admin token the soak's rttscope is given, to switch the link.
const TOKEN: &str = "rttscope-soak-admin-token";
/// The emulated link while it is on.
const LINK_ON: &str = r#"{"rtt": "5ms", "bandwidth": "100mbit"}"#;

/// What to run.
pub struct SoakOptions {
    pub connections: usize,
    pub duration: Duration,
    /// How often RSS, heap and descriptors are read.
    pub sample_every: Duration,
    /// How often the emulated link is switched (on, off, on …).
    pub toggle_every: Duration,
    /// Mean pause between one connection's commands.
    pub think: Duration,
    /// More of rttscope's YAML config (top-level keys other than `upstream` and `limits`).
    pub extra_yaml: String,
}

/// One reading of the rttscope process.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    pub at_s: f64,
    pub rss_kib: u64,
    /// `rttscope_heap_bytes` in KiB: what rttscope holds (absent off glibc).
    pub heap_kib: Option<u64>,
    /// `rttscope_heap_free_bytes` in KiB: freed memory the allocator keeps.
    pub heap_free_kib: Option<u64>,
    pub fds: u64,
}

/// What the soak measured.
pub struct SoakReport {
    /// Readings while the traffic ran.
    pub samples: Vec<Sample>,
    /// The reading once every client had disconnected.
    pub after: Sample,
    /// Commands by kind: point query, prepared point select, large result.
    pub commands: [u64; 3],
    pub errors: u64,
    pub first_errors: Vec<String>,
    pub toggles: u64,
    /// Least-squares slopes after the warm-up, per minute.
    pub rss_kib_per_min: f64,
    pub heap_kib_per_min: Option<f64>,
    pub fds_per_min: f64,
}

#[derive(Default)]
struct Counters {
    commands: [AtomicU64; 3],
    errors: AtomicU64,
    first_errors: std::sync::Mutex<Vec<String>>,
}

impl Counters {
    fn error(&self, what: String) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut first) = self.first_errors.lock()
            && first.len() < 10
        {
            first.push(what);
        }
    }
}

pub async fn run(binary: &Path, options: &SoakOptions) -> Result<SoakReport> {
    let db = TestDb::shared();
    let direct = db.opts_via(db.upstream_addr(), NATIVE.user, NATIVE.password);
    fixtures::prepare(&direct, Some(ROWS)).await?;
    let mut admin_conn = Conn::new(direct.clone()).await.context("connecting directly")?;
    let max: u64 = admin_conn.query_first("SELECT @@max_connections").await?.unwrap_or(0);
    admin_conn.disconnect().await?;
    if max < options.connections as u64 + 20 {
        bail!(
            "the server allows {max} connections, the soak needs {} (a private server takes \
             RTTSCOPE_TEST_MYSQL_MAX_CONNECTIONS)",
            options.connections + 20
        );
    }
    let yaml = format!(
        "upstream: {}\nlimits:\n  max_connections: {}\n{}",
        db.upstream_addr(),
        options.connections + 50,
        options.extra_yaml
    );
    let proxy = ProxyProcess::start_with(binary, &yaml, |cmd| {
        cmd.env("RTTSCOPE_ADMIN_TOKEN", TOKEN).env("RUST_LOG", "warn");
    })?;
    let opts = db.opts_via(proxy.listen(), NATIVE.user, NATIVE.password);
    let admin_url = format!("http://{}", proxy.admin());

    let counters = Arc::new(Counters::default());
    let started = Instant::now();
    let deadline = started + options.duration;
    let mut clients = Vec::with_capacity(options.connections);
    for n in 0..options.connections {
        let (opts, counters, think) = (opts.clone(), counters.clone(), options.think);
        clients.push(tokio::spawn(client(n as u64, opts, counters, think, deadline)));
        // Logins spread over the first seconds, as a pool filling up.
        if n % 50 == 49 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    let pid = proxy.pid();
    let mut samples = Vec::new();
    let mut toggles = 0u64;
    let mut next_toggle = started + options.toggle_every;
    let mut next_sample = started;
    while Instant::now() < deadline {
        let now = Instant::now();
        if now >= next_sample {
            samples.push(sample(pid, &admin_url, started.elapsed().as_secs_f64()).await?);
            next_sample += options.sample_every;
        }
        if now >= next_toggle {
            let body = if toggles.is_multiple_of(2) { LINK_ON } else { "{}" };
            let url = admin_url.clone();
            let put =
                tokio::task::spawn_blocking(move || AdminClient::new(&url, Some(TOKEN)).put_json("/inject", body))
                    .await?;
            if let Err(e) = put {
                counters.error(format!("PUT /inject: {e}"));
            }
            toggles += 1;
            next_toggle += options.toggle_every;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for client in clients {
        client.await?;
    }
    let after = sample(pid, &admin_url, started.elapsed().as_secs_f64()).await?;

    // After the warm-up: every connection logged in and the link switched at least once.
    let warm = (options.duration.as_secs_f64() * 0.1).max(options.toggle_every.as_secs_f64() + 1.0);
    let steady: Vec<&Sample> = samples.iter().filter(|s| s.at_s >= warm).collect();
    let slope =
        |value: fn(&Sample) -> f64| slope_per_min(&steady.iter().map(|s| (s.at_s, value(s))).collect::<Vec<_>>());
    let first_errors = counters.first_errors.lock().map(|e| e.clone()).unwrap_or_default();
    Ok(SoakReport {
        rss_kib_per_min: slope(|s| s.rss_kib as f64),
        heap_kib_per_min: steady
            .iter()
            .all(|s| s.heap_kib.is_some())
            .then(|| slope(|s| s.heap_kib.unwrap_or(0) as f64)),
        fds_per_min: slope(|s| s.fds as f64),
        commands: [0, 1, 2].map(|i| counters.commands[i].load(Ordering::Relaxed)),
        errors: counters.errors.load(Ordering::Relaxed),
        first_errors,
        toggles,
        samples,
        after,
    })
}

/// One connection's traffic until `deadline`: mostly point queries, a prepared point select
/// in four, a 2 MB result in five hundred; a random pause around `think` between them.
async fn client(n: u64, opts: OptsBuilder, counters: Arc<Counters>, think: Duration, deadline: Instant) {
    let mut conn = match Conn::new(opts).await {
        Ok(conn) => conn,
        Err(e) => return counters.error(format!("connection {n}: login: {e}")),
    };
    let mut rng = Rng::new(n + 1);
    let think_ms = think.as_millis().max(1) as u64;
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(think_ms / 2 + rng.next_u64() % think_ms)).await;
        let pick = rng.next_u64() % 500;
        let result = if pick == 0 {
            let bytes = conn.query_iter("SELECT REPEAT('x', 1000) FROM seq_1_to_2000").await;
            match bytes {
                Ok(mut rows) => rows.for_each(|_| {}).await.map(|()| 2),
                Err(e) => Err(e),
            }
        } else if pick < 125 {
            let id = rng.id(ROWS);
            conn.exec_first::<String, _, _>("SELECT c FROM sbtest WHERE id = ?", (id,)).await.map(|_| 1)
        } else {
            let v = rng.next_u64() % 1_000_000;
            conn.query_first::<u64, _>(format!("SELECT {v}")).await.map(|_| 0)
        };
        match result {
            Ok(kind) => {
                counters.commands[kind].fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                counters.error(format!("connection {n}: {e}"));
                return;
            }
        }
    }
    if let Err(e) = conn.disconnect().await {
        counters.error(format!("connection {n}: disconnect: {e}"));
    }
}

/// rttscope's resident memory, heap and open descriptors now.
async fn sample(pid: u32, admin_url: &str, at_s: f64) -> Result<Sample> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).context("rttscope exited")?;
    let rss_kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .context("VmRSS")?;
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))?.count() as u64;
    let url = admin_url.to_owned();
    let metrics = tokio::task::spawn_blocking(move || AdminClient::new(&url, Some(TOKEN)).get("/metrics"))
        .await?
        .context("GET /metrics")?;
    let kib = |name: &str| samples(&metrics, name).get("").map(|bytes| *bytes as u64 / 1024);
    let (heap_kib, heap_free_kib) = (kib("rttscope_heap_bytes"), kib("rttscope_heap_free_bytes"));
    Ok(Sample { at_s, rss_kib, heap_kib, heap_free_kib, fds })
}

/// The least-squares slope of `points` (seconds, value), per minute; 0 with fewer than two.
fn slope_per_min(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    if points.len() < 2 {
        return 0.0;
    }
    let (mx, my) = (points.iter().map(|p| p.0).sum::<f64>() / n, points.iter().map(|p| p.1).sum::<f64>() / n);
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if sxx == 0.0 { 0.0 } else { 60.0 * sxy / sxx }
}

impl SoakReport {
    /// The figures as Markdown: the summary, then the samples.
    pub fn markdown(&self) -> String {
        let [point, prepared, large] = self.commands;
        let kib = |v: Option<u64>| v.map_or_else(|| "-".to_owned(), |v| v.to_string());
        let heap_slope = self.heap_kib_per_min.map_or_else(|| "-".to_owned(), |s| format!("{s:+.1} KiB/min"));
        let mut out = format!(
            "| commands | point `SELECT n` | prepared point selects | 2 MB results | link switches | errors | RSS slope | heap slope | fd slope |\n\
             |---|---|---|---|---|---|---|---|---|\n\
             | {} | {point} | {prepared} | {large} | {} | {} | {:+.1} KiB/min | {heap_slope} | {:+.2}/min |\n\n\
             | t (s) | RSS (KiB) | heap (KiB) | heap kept free (KiB) | fds |\n|---|---|---|---|---|\n",
            point + prepared + large,
            self.toggles,
            self.errors,
            self.rss_kib_per_min,
            self.fds_per_min,
        );
        for s in &self.samples {
            out.push_str(&format!(
                "| {:.0} | {} | {} | {} | {} |\n",
                s.at_s,
                s.rss_kib,
                kib(s.heap_kib),
                kib(s.heap_free_kib),
                s.fds
            ));
        }
        out.push_str(&format!(
            "\nafter every client disconnected ({:.0} s): RSS {} KiB, heap {} KiB, {} fds\n",
            self.after.at_s,
            self.after.rss_kib,
            kib(self.after.heap_kib),
            self.after.fds
        ));
        for e in &self.first_errors {
            out.push_str(&format!("\nerror: {e}"));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::slope_per_min;

    #[test]
    fn slope_of_a_line_per_minute() {
        let points: Vec<(f64, f64)> = (0..10).map(|s| (s as f64 * 6.0, 100.0 + s as f64)).collect();
        assert!((slope_per_min(&points) - 10.0).abs() < 1e-9);
        assert_eq!(slope_per_min(&[(1.0, 5.0)]), 0.0);
    }
}
