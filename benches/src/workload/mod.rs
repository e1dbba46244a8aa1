//! The workloads, each a plain async function over one side's connection options: the
//! caller decides which side (direct or a proxy) and in which order, so every workload is
//! measured alike on both.
//!
//! - [`sequential`]: a. `SELECT 1` round trips on one connection, each timed;
//! - [`point`]: b. prepared point selects on many connections for a fixed time;
//! - [`large`]: c. one large text result set;
//! - [`fixtures`]: the `sbtest` table b reads.

pub mod fixtures;
pub mod large;
pub mod point;
pub mod sequential;

use anyhow::{Context, Result};
use mysql_async::{Conn, OptsBuilder};

/// Connects, naming the side in the error: "could not connect" is useless when two
/// servers (MariaDB and a proxy) are in play.
pub async fn connect(opts: &OptsBuilder, side: &str) -> Result<Conn> {
    Conn::new(opts.clone()).await.with_context(|| format!("connecting {side}"))
}

/// A small fast PRNG (splitmix64), so each connection of b reads its own sequence of ids
/// without a dependency or a shared lock.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// In `1..=n` (n > 0); the modulo bias is irrelevant at these sizes.
    pub fn id(&mut self, n: u64) -> u64 {
        1 + self.next_u64() % n
    }
}
