//! c. One large result set: `SELECT REPEAT('x', len) FROM seq_1_to_N` read row by row
//! over the text protocol. What a report query or an export asks of the proxy: bytes/s.

use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use mysql_async::OptsBuilder;
use mysql_async::prelude::Queryable;

use super::connect;

/// One timed read of the large result.
#[derive(Clone, Copy, Debug)]
pub struct LargeRun {
    /// Cell bytes received (rows × row length); the wire carries a few more per row.
    pub bytes: u64,
    pub elapsed: Duration,
}

impl LargeRun {
    /// MB (10^6 bytes) of cell data per second.
    pub fn mb_per_second(&self) -> f64 {
        self.bytes as f64 / 1e6 / self.elapsed.as_secs_f64()
    }
}

/// Bytes one row of a one-column text result takes on the wire: the packet's 4-byte
/// header, the cell's length-encoded prefix (1, 3, 4 or 9 bytes) and the cell.
pub fn row_packet_bytes(row_len: u64) -> u64 {
    let prefix = match row_len {
        0..251 => 1,
        251..65_536 => 3,
        65_536..16_777_216 => 4,
        _ => 9,
    };
    4 + prefix + row_len
}

/// Reads a result of `total_bytes` (rounded down to whole rows of `row_len`) on a fresh
/// connection; only the query and the reading are timed.
pub async fn run(opts: &OptsBuilder, side: &str, total_bytes: u64, row_len: u64) -> Result<LargeRun> {
    let rows = (total_bytes / row_len).max(1);
    let mut conn = connect(opts, side).await?;
    let sql = format!("SELECT REPEAT('x', {row_len}) FROM seq_1_to_{rows}");
    let start = Instant::now();
    let mut result = conn.query_iter(sql).await?;
    let (mut seen, mut bytes) = (0u64, 0u64);
    result
        .for_each(|row| {
            seen += 1;
            bytes += row.as_ref(0).map_or(0, |v| match v {
                mysql_async::Value::Bytes(b) => b.len() as u64,
                _ => 0,
            });
        })
        .await?;
    result.drop_result().await?;
    let elapsed = start.elapsed();
    conn.disconnect().await?;
    if seen != rows || bytes != rows * row_len {
        bail!("large result: expected {rows} rows of {row_len} bytes, got {seen} rows, {bytes} bytes");
    }
    Ok(LargeRun { bytes, elapsed })
}
