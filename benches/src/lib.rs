//! rttscope's benchmark harness: the same workloads against MariaDB directly and through
//! the rttscope binary, in one run, reported side by side as ratios (`scripts/bench.sh`).
//!
//! - [`options`]: the flags, and the [`options::Plan`] they resolve to;
//! - [`scenario`]: named proxy configs, each raced against direct;
//! - [`child`]: the proxy under test as a child process, where it listens, its CPU and memory;
//! - [`pipe`]: the raw-pipe baseline relay;
//! - [`haproxy`]: HAProxy, the peer, and its generated config;
//! - [`workload`]: a. sequential round trips, b. point selects, c. a large result;
//! - [`accuracy`]: e. the emulated link (`inject`) measured against its settings;
//! - [`instructions`]: f. the proxy's instructions per round trip, under callgrind;
//! - [`stats`]: percentiles, medians, means;
//! - [`report`]: the Markdown table and the JSON;
//! - [`run`]: one run, start to end;
//! - [`matrix`]: the link matrix (`link-matrix`, `scripts/bench.sh --matrix`): buffers ×
//!   network conditions over the test WAN, each cell's verdict from rttscope.
//! - [`confusion`]: the link-verdict confusion matrix (`link-confusion`,
//!   `scripts/bench.sh --confusion`): six injected causes × RTT × result size, each cell's
//!   verdict against its cause.
//! - [`soak`]: the soak (`rttscope-soak`): many connections for a long while, memory and
//!   descriptors sampled.
//! - [`whatif`]: the what-if accuracy suite (`whatif-accuracy`, `scripts/bench.sh --whatif`):
//!   projections held against runs measured over the links they project onto.
//!
//! The codec micro-benchmarks are in `benches/codec.rs` (`cargo bench -p rttscope-benches`).

pub mod accuracy;
pub mod child;
pub mod confusion;
pub mod haproxy;
pub mod instructions;
pub mod matrix;
pub mod options;
pub mod paced;
pub mod pipe;
pub mod report;
pub mod run;
pub mod scenario;
pub mod soak;
pub mod stats;
pub mod whatif;
pub mod workload;

pub use options::Options;
pub use report::Report;
pub use run::run;
