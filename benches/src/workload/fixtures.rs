//! The data the workloads read: a sysbench-shaped `sbtest` table, made once and kept
//! between runs, and MariaDB's Sequence engine for the large result.

use anyhow::{Context, Result, bail};
use mysql_async::OptsBuilder;
use mysql_async::prelude::Queryable;

use super::connect;

/// Table of workload b, in the harness's fixture database.
pub const TABLE: &str = "sbtest";

/// Makes sure the server has the Sequence engine and, when `rows` is given, that `sbtest`
/// has exactly that many rows (ids 1..=rows), re-creating it otherwise. Returns whether it
/// (re)built the table.
pub async fn prepare(opts: &OptsBuilder, rows: Option<u64>) -> Result<bool> {
    let mut conn = connect(opts, "directly to MariaDB to prepare the test data").await?;
    // `seq_1_to_N` tables make the data here and the large result of c; MySQL lacks them.
    if conn.query_drop("SELECT 1 FROM seq_1_to_1").await.is_err() {
        bail!("the server has no Sequence engine (seq_1_to_N tables): the bench needs MariaDB");
    }
    let Some(rows) = rows else {
        conn.disconnect().await?;
        return Ok(false);
    };
    let have: Option<(u64, Option<u64>)> =
        conn.query_first(format!("SELECT COUNT(*), MAX(id) FROM {TABLE}")).await.ok().flatten();
    if have == Some((rows, Some(rows))) {
        conn.disconnect().await?;
        return Ok(false);
    }
    // Shaped like sysbench's oltp table: c CHAR(120), pad CHAR(60), a secondary index on k.
    let statements = [
        format!("DROP TABLE IF EXISTS {TABLE}"),
        format!(
            "CREATE TABLE {TABLE} (id INT UNSIGNED NOT NULL PRIMARY KEY, k INT UNSIGNED NOT NULL, \
             c CHAR(120) NOT NULL, pad CHAR(60) NOT NULL, KEY k_1 (k)) ENGINE=InnoDB"
        ),
        format!(
            "INSERT INTO {TABLE} (id, k, c, pad) SELECT seq, (seq * 7919) % {rows} + 1, \
             LEFT(REPEAT(MD5(seq), 4), 120), LEFT(REPEAT(SHA1(seq), 2), 60) FROM seq_1_to_{rows}"
        ),
        format!("ANALYZE TABLE {TABLE}"),
    ];
    for sql in &statements {
        conn.query_drop(sql).await.with_context(|| sql.clone())?;
    }
    conn.disconnect().await?;
    Ok(true)
}
