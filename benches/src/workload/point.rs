//! b. Point selects: `connections` clients each running a prepared
//! `SELECT c FROM sbtest WHERE id = ?` (binary protocol) in a loop for a fixed time. What a
//! busy OLTP service asks of the proxy: many small exchanges at once.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, OptsBuilder, Statement};
use tokio::task::JoinSet;

use super::fixtures::TABLE;
use super::{Rng, connect};

/// Unmeasured queries per connection first: the statement, the server's buffer pool and
/// the proxy's buffers all warm.
const WARMUP_PER_CONNECTION: u64 = 200;

/// One timed run of workload b on one side.
#[derive(Clone, Copy, Debug)]
pub struct PointRun {
    pub queries: u64,
    pub elapsed: Duration,
    /// The proxy's CPU time over exactly the timed window, when a clock was given.
    pub cpu: Option<Duration>,
}

impl PointRun {
    pub fn per_second(&self) -> f64 {
        self.queries as f64 / self.elapsed.as_secs_f64()
    }
}

/// Reads the CPU time a process has used so far.
pub type CpuClock<'a> = &'a dyn Fn() -> Result<Duration>;

/// Connects and warms up `connections` clients, then runs them all for `duration`,
/// reading `cpu` (the proxy's CPU clock) right before and after the timed window.
pub async fn run(
    opts: &OptsBuilder,
    side: &str,
    connections: usize,
    rows: u64,
    duration: Duration,
    cpu: Option<CpuClock<'_>>,
) -> Result<PointRun> {
    let sql = format!("SELECT c FROM {TABLE} WHERE id = ?");
    let mut ready = JoinSet::new();
    for i in 0..connections {
        let (opts, side, sql) = (opts.clone(), side.to_owned(), sql.clone());
        ready.spawn(async move {
            let mut conn = connect(&opts, &side).await?;
            let stmt = conn.prep(&sql).await.with_context(|| format!("preparing {sql}"))?;
            let mut rng = Rng::new(0x5eed ^ i as u64);
            for _ in 0..WARMUP_PER_CONNECTION {
                select_one(&mut conn, &stmt, &mut rng, rows).await?;
            }
            Ok::<_, anyhow::Error>((conn, stmt, rng))
        });
    }
    let mut clients = Vec::with_capacity(connections);
    while let Some(joined) = ready.join_next().await {
        clients.push(joined.map_err(|e| anyhow!("a client task failed: {e}"))??);
    }

    let cpu_before = cpu.map(|clock| clock()).transpose()?;
    let start = Instant::now();
    let deadline = start + duration;
    let mut running = JoinSet::new();
    for (mut conn, stmt, mut rng) in clients {
        running.spawn(async move {
            let mut queries = 0u64;
            while Instant::now() < deadline {
                select_one(&mut conn, &stmt, &mut rng, rows).await?;
                queries += 1;
            }
            Ok::<_, anyhow::Error>((conn, queries))
        });
    }
    let mut queries = 0;
    let mut done = Vec::with_capacity(connections);
    while let Some(joined) = running.join_next().await {
        let (conn, n) = joined.map_err(|e| anyhow!("a client task failed: {e}"))??;
        queries += n;
        done.push(conn);
    }
    let elapsed = start.elapsed();
    let cpu = match (cpu, cpu_before) {
        (Some(clock), Some(before)) => Some(clock()?.saturating_sub(before)),
        _ => None,
    };
    for conn in done {
        conn.disconnect().await?;
    }
    Ok(PointRun { queries, elapsed, cpu })
}

async fn select_one(conn: &mut Conn, stmt: &Statement, rng: &mut Rng, rows: u64) -> Result<()> {
    let id = rng.id(rows);
    // Reading the value (not dropping it) keeps the client honest: a real one decodes rows.
    let c: Option<String> = conn.exec_first(stmt, (id,)).await?;
    match c {
        Some(c) if !c.is_empty() => Ok(()),
        _ => bail!("{TABLE} has no row {id}: the table was changed during the run"),
    }
}
