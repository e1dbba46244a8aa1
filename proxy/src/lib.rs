//! rttscope: a MySQL wire-protocol proxy that shows where the time goes when
//! the database is far away.
//!
//! Modules, with dependencies pointing one way (socket → codec → record →
//! findings → report):
//!
//! - [`protocol`]: sans-io MySQL codec — framing, handshake, and the
//!   command/response state machine that knows where every response ends.
//! - [`relay`]: accepting clients, dialling upstream, forwarding bytes both
//!   ways with backpressure, shutdown.
//! - [`fingerprint`]: SQL normalisation and stable ids.

pub mod admin;
pub mod app;
pub mod cli;
pub mod commands;
pub mod findings;
pub mod fingerprint;
pub mod inject;
pub mod link;
pub mod protocol;
pub mod record;
pub mod report;
pub mod sys;
pub mod relay;
