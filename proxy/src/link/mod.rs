//! The long-haul link: the kernel's own numbers for every upstream socket
//! (TCP_INFO, buffer sizes, queues), and a verdict per large transfer on
//! which limit held it back — the diagnosis the background articles make by
//! hand with Wireshark and SystemTap. rttscope never sets SO_SNDBUF or
//! SO_RCVBUF itself (unless an experiment asks): autotuning stays on.

pub mod sample;
pub mod sysctl;
pub mod transfer;
pub mod verdict;

use std::sync::{Arc, Mutex};

use rttscope_config::Config;

pub use sample::{sample, LinkSample};
pub use sysctl::Sysctls;
pub use transfer::TransferTracker;
pub use verdict::{Limit, LinkVerdict, Links, Measurement};

use crate::record::{Consumer, Event};

/// Feeds verdicts and RTT readings to [`Links`], one lock per batch.
pub struct LinksConsumer(pub Arc<Mutex<Links>>);

impl Consumer for LinksConsumer {
    fn events(&mut self, batch: &[Event]) {
        let mut links = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        for event in batch {
            match event {
                Event::Link { conn_id, at_us, measurement } => {
                    let v = links.add(*conn_id, *at_us, *measurement);
                    tracing::info!(conn.id = conn_id, limit = v.measurement.limit.name(), "link: {}", v.summary);
                }
                Event::Command(r) if r.rtt_us > 0 => links.rtt.observe(f64::from(r.rtt_us) / 1e6),
                _ => {}
            }
        }
    }
}

/// The start-up check: reads the host's TCP buffer sysctls, logs them, and
/// warns when their ceilings cannot cover the configured link (or the
/// emulated one).
pub fn startup_check(config: &Config) -> Sysctls {
    let sysctls = Sysctls::read();
    tracing::info!(
        tcp_rmem = ?sysctls.tcp_rmem,
        tcp_wmem = ?sysctls.tcp_wmem,
        rmem_max = ?sysctls.rmem_max,
        wmem_max = ?sysctls.wmem_max,
        tcp_moderate_rcvbuf = ?sysctls.tcp_moderate_rcvbuf,
        tcp_window_scaling = ?sysctls.tcp_window_scaling,
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
