//! The long-haul link: the kernel's own numbers for every upstream socket
//! (TCP_INFO, buffer sizes, queues), and a verdict per large transfer on
//! which limit held it back — the diagnosis the background articles make by
//! hand with Wireshark and SystemTap. rttscope never sets SO_SNDBUF or
//! SO_RCVBUF itself (unless an experiment asks): autotuning stays on.
//!
//! - `probe`: the per-connection [`Probe`], the tap that reads sockets and
//!   follows transfers (with `transfer`'s [`TransferTracker`]);
//! - `loss`: what the socket shows of loss, duplication and reordering, and the
//!   Mathis bound a loss-limited transfer meets;
//! - `silence`: a retransmission timeout told from a server pausing as long;
//! - `events`: the probes' own channel ([`LinkSink`]) and its collector;
//! - `measurement`: what a transfer measured and the [`LinkLimit`] it was judged to hit,
//!   the vocabulary the others share;
//! - `verdict`: [`Links`], the verdicts kept for reports, with their words; `emulated`: the
//!   words when the emulated link (`inject`) held the transfer;
//! - `expected`: the configured link held against the measured one, and the host's
//!   buffer ceilings checked again once a path is measured;
//! - `sysctl`: the host's TCP buffer limits, checked at start-up.

mod emulated;
mod events;
mod expected;
mod flight;
mod loss;
mod measurement;
mod probe;
mod silence;
pub mod sysctl;
mod transfer;
mod verdict;

use crate::human;
use rttscope_config::Config;

pub use events::{LinkEvent, LinkSink, collect};
pub use expected::Expected;
pub use loss::{Loss, mathis_bound};
pub use measurement::{LinkLimit, Measurement};
pub use probe::{Due, Probe, ProbeSettings};
pub use sysctl::Sysctls;
pub use transfer::TransferTracker;
pub use verdict::{LinkVerdict, Links};

fn unknown() -> String {
    "unknown".to_owned()
}

/// `tcp_rmem`/`tcp_wmem` as a reader sets them: `min 4 KiB, default 128 KiB, max 6 MiB`.
fn buffer_triple(sysctl: Option<[u64; 3]>) -> String {
    sysctl.map_or_else(unknown, |[min, default, max]| {
        format!("min {}, default {}, max {}", human::size(min), human::size(default), human::size(max))
    })
}

fn on_off(flag: Option<bool>) -> &'static str {
    match flag {
        Some(true) => "on",
        Some(false) => "off",
        None => "unknown",
    }
}

/// The start-up check: reads the host's TCP buffer sysctls, logs them, and
/// warns when their ceilings cannot cover the configured link (or the
/// emulated one).
pub fn startup_check(config: &Config) -> Sysctls {
    let sysctls = Sysctls::read();
    tracing::info!(
        tcp_rmem = %buffer_triple(sysctls.tcp_rmem),
        tcp_wmem = %buffer_triple(sysctls.tcp_wmem),
        rmem_max = %sysctls.rmem_max.map_or_else(unknown, human::size),
        wmem_max = %sysctls.wmem_max.map_or_else(unknown, human::size),
        tcp_moderate_rcvbuf = %on_off(sysctls.tcp_moderate_rcvbuf),
        tcp_window_scaling = %on_off(sysctls.tcp_window_scaling),
        "TCP buffer limits on this host"
    );
    let link = &config.link;
    let inject = &config.inject;
    let (rtt, bandwidth) = match (link.expected_rtt, link.expected_bandwidth) {
        (Some(rtt), Some(bw)) => (Some(rtt.0), Some(bw.bits_per_second())),
        _ => (Some(inject.rtt.0).filter(|d| !d.is_zero()), inject.bandwidth.map(|b| b.bits_per_second())),
    };
    if let (Some(rtt), Some(bps)) = (rtt, bandwidth) {
        let bdp = (u128::from(bps / 8) * rtt.as_micros() / 1_000_000) as u64;
        for problem in sysctls.problems(bdp) {
            tracing::warn!(bdp, "{problem}");
        }
    }
    sysctls
}
