//! rttscope: a MySQL wire-protocol proxy that shows where the time goes when
//! the database is far away.
//!
//! Data flows one way: socket → codec → record → findings → report. The modules, in
//! that order (each depends only on those above it, leaves excepted):
//!
//! - [`sys`], [`socket`]: system calls std does not wrap, and one reading of a TCP
//!   socket as the kernel sees it (leaves); [`sync`]: a lock taken even when poisoned (a leaf).
//! - [`human`]: number formatting for sentences and renderings (a leaf).
//! - [`memory`]: hands freed heap back to the system every `limits.heap_trim` (a leaf).
//! - [`protocol`]: the sans-io MySQL codec — framing, compression, handshake, and the
//!   command/response state machine that knows where every response ends.
//! - [`fingerprint`]: SQL normalisation and stable ids.
//! - [`inject`]: the emulated link (delay lines and their models, the live settings).
//! - [`live`]: the live view of open connections.
//! - [`record`]: the per-connection recorder (a tap on the relay), command records and
//!   their aggregates, collected off the forwarding path.
//! - [`link`]: TCP_INFO sampling of the long hop and a verdict per large transfer.
//! - [`relay`]: accepting clients, dialling upstream, TLS and compression per leg,
//!   forwarding bytes both ways with backpressure, statements answered locally, shutdown.
//! - [`findings`]: query-pattern detectors, their costs and what-if projections.
//! - [`report`]: the one place the versioned report schema is built and rendered.
//! - [`admin`]: the HTTP API (metrics, report, live connections, the emulated link).
//! - [`sqlview`]: the SQL view (`SHOW RTTSCOPE ...`), answered through the relay.
//! - [`preflight`]: what start would refuse (files the config names, where the report
//!   goes), found before anything binds.
//! - [`app`]: everything assembled; [`cli`]: the command line.

// Every public item says what it is for (units, sources, when it is empty); clippy's
// `-D warnings` in .ci/run makes a missing one fail the build.
#![warn(missing_docs)]

pub mod admin;
pub mod app;
pub mod cli;
pub mod findings;
pub mod fingerprint;
pub mod human;
pub mod inject;
pub mod link;
pub mod live;
pub mod local_peer;
pub mod memory;
pub mod preflight;
pub mod protocol;
pub mod record;
pub mod relay;
pub mod report;
pub mod socket;
pub mod sqlview;
pub mod sync;
pub mod sys;
