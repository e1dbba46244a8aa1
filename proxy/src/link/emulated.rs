//! Verdicts on transfers the emulated link (`inject`) held: its settings, not the real path's
//! or the server's, are the limit, and the verdict says so in its own figures.

use super::measurement::{LinkLimit, Measurement};
use crate::human::{bandwidth, bytes, rate, us};
use crate::inject::EmulatedLink;

/// A transfer is the emulation's when the link held it at least this share of its time.
const EMULATED_SHARE: f64 = 0.5;

/// Whether the emulated link held `m` for most of its time.
pub fn held(m: &Measurement) -> bool {
    m.emulated_us as f64 >= EMULATED_SHARE * m.duration_us.max(1) as f64
}

/// The limit the emulation set: its window, or its bandwidth (with neither, its RTT over
/// rttscope's own buffer, a window of sorts).
pub fn limit(link: &EmulatedLink) -> LinkLimit {
    if link.window_binds() || link.bandwidth_bps.is_none() { LinkLimit::ReceiveWindow } else { LinkLimit::Link }
}

/// The verdict's sentence and fix, in the emulated link's figures.
pub fn words(m: &Measurement, link: &EmulatedLink) -> (String, String) {
    let rtt = us(link.rtt_us);
    let moved = format!("{} in {} ({})", bytes(m.bytes), us(m.duration_us), rate(m.throughput));
    let what = match (link.window_bytes, link.bandwidth_bps) {
        (Some(w), _) if link.window_binds() => format!(
            "a {} window at its {rtt} RTT carries at most {}",
            bytes(w),
            rate(link.window_rate().unwrap_or_default())
        ),
        (_, Some(bw)) => format!("{} at {rtt} RTT", bandwidth(bw)),
        _ => format!("its {rtt} RTT with rttscope's buffer in between"),
    };
    let summary = format!(
        "{moved}: the emulated link (inject) is the limit: {what}; it held the transfer {} of its {}",
        us(m.emulated_us),
        us(m.duration_us)
    );
    let fix = "This is the link rttscope emulates (inject), as configured: what a database that far away would give this transfer. \
               Nothing on the real path or the server held it back; change or remove the emulation (PUT /inject) to try another link."
        .to_owned();
    (summary, fix)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::measurement::test_measurement;

    fn link(window_bytes: Option<u64>, bandwidth_bps: Option<u64>) -> EmulatedLink {
        EmulatedLink { rtt_us: 20_000, bandwidth_bps, window_bytes }
    }

    #[test]
    fn a_16k_window_at_20ms_binds_before_100_mbit() {
        let l = link(Some(16 << 10), Some(100_000_000));
        assert_eq!(limit(&l), LinkLimit::ReceiveWindow);
        let m = Measurement { emulated_us: 80_000, ..test_measurement(LinkLimit::Server) };
        assert!(held(&m));
        let (summary, fix) = words(&m, &l);
        assert!(
            summary.contains("the emulated link (inject) is the limit: a 16.0 KiB window at its 20.00 ms RTT"),
            "{summary}"
        );
        assert!(!summary.contains("server"), "{summary}");
        assert!(fix.contains("inject"), "{fix}");
    }

    #[test]
    fn bandwidth_alone_is_the_link_and_quotes_the_emulated_rtt() {
        let l = link(None, Some(20_000_000));
        assert_eq!(limit(&l), LinkLimit::Link);
        let (summary, _) = words(&test_measurement(LinkLimit::Link), &l);
        assert!(summary.contains("20 Mbit/s at 20.00 ms RTT"), "{summary}");
    }

    #[test]
    fn a_transfer_the_link_held_little_is_judged_as_before() {
        let m = Measurement { emulated_us: 10_000, ..test_measurement(LinkLimit::Server) };
        assert!(!held(&m));
    }
}
