//! a. Sequential round trips: one connection, `SELECT 1` over the text protocol, each
//! round trip timed into a histogram. What an N+1 loop pays per query.

use std::time::{Duration, Instant};

use anyhow::Result;
use hdrhistogram::Histogram;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, OptsBuilder};

use super::connect;

/// A histogram of round-trip times in nanoseconds, 3 significant digits, up to a minute.
pub fn histogram() -> Result<Histogram<u64>> {
    Ok(Histogram::new_with_bounds(1, 60_000_000_000, 3)?)
}

/// One side's connection, kept open across batches so that batches of different sides can
/// be interleaved finely: a burst of other work on the machine then lands on both sides.
pub struct Client {
    conn: Conn,
}

impl Client {
    /// Connects and runs `warmup` unmeasured round trips.
    pub async fn start(opts: &OptsBuilder, side: &str, warmup: u64) -> Result<Client> {
        let mut conn = connect(opts, side).await?;
        for _ in 0..warmup {
            conn.query_drop("SELECT 1").await?;
        }
        Ok(Client { conn })
    }

    /// Runs `count` round trips, recording each into `into`.
    pub async fn measure(&mut self, count: u64, into: &mut Histogram<u64>) -> Result<()> {
        for _ in 0..count {
            let start = Instant::now();
            self.conn.query_drop("SELECT 1").await?;
            into.saturating_record(start.elapsed().as_nanos() as u64);
        }
        Ok(())
    }

    /// Like [`Client::measure`], idle for `pause` before each round trip: what a round
    /// trip costs once the client, the proxy and the server have all gone idle, as they do
    /// while waiting on a long emulated link.
    pub async fn measure_paced(&mut self, count: u64, pause: Duration, into: &mut Histogram<u64>) -> Result<()> {
        for _ in 0..count {
            tokio::time::sleep(pause).await;
            let start = Instant::now();
            self.conn.query_drop("SELECT 1").await?;
            into.saturating_record(start.elapsed().as_nanos() as u64);
        }
        Ok(())
    }

    pub async fn finish(self) -> Result<()> {
        Ok(self.conn.disconnect().await?)
    }
}
