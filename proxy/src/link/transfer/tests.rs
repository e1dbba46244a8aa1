//! Classification on synthetic timelines: reads as a kernel would deliver
//! them for each kind of limit.

use super::*;

/// A 20 ms path: the tracker has seen the socket say so.
fn tracker() -> TransferTracker {
    let mut t = TransferTracker::new(1 << 20, Some(6 << 20));
    t.sample(&LinkSample { rtt_us: 20_000, min_rtt_us: Some(20_000), rcv_ssthresh: 3 << 20, rcvbuf: 6 << 20, ..LinkSample::default() });
    t
}

fn window(t: &mut TransferTracker, advertised: u32, rcvbuf: u32) {
    t.sample(&LinkSample { rtt_us: 20_000, min_rtt_us: Some(20_000), rcv_wnd: Some(advertised), rcvbuf, ..LinkSample::default() });
}

#[test]
fn a_steady_stream_is_the_link() {
    let mut t = tracker();
    t.response_started(0);
    // 100 Mbit/s: a 32 KiB read every 2.6 ms for 2 s.
    for i in 1..=770 {
        t.read(i * 2_600);
    }
    window(&mut t, 3 << 20, 6 << 20);
    let m = t.finished(2_002_000, 25_000_000, 1, 2_002_000).unwrap();
    assert_eq!(m.limit, Limit::Link, "{m:?}");
    assert!((12_000_000..13_000_000).contains(&m.throughput), "{m:?}");
}

#[test]
fn bursts_under_a_wide_open_window_are_the_sender() {
    let mut t = tracker();
    t.response_started(0);
    // 32 KiB per 20 ms RTT, arriving in 1.5 ms, then silence.
    for rtt in 0..100u64 {
        t.read(rtt * 20_000 + 500);
        t.read(rtt * 20_000 + 1_500);
    }
    window(&mut t, 1 << 20, 2 << 20);
    let m = t.finished(2_000_000, 3_276_800, 1, 2_000_000).unwrap();
    assert_eq!(m.limit, Limit::Sender, "{m:?}");
    assert!((30_000..36_000).contains(&m.bytes_per_rtt), "{m:?}");
}

#[test]
fn bursts_that_fill_our_window_are_the_receive_window() {
    let mut t = tracker();
    t.response_started(0);
    for rtt in 0..100u64 {
        t.read(rtt * 20_000 + 500);
        t.read(rtt * 20_000 + 1_500);
    }
    // We advertised no more than what arrived per round trip.
    window(&mut t, 36_000, 64 << 10);
    let m = t.finished(2_000_000, 3_276_800, 1, 2_000_000).unwrap();
    assert_eq!(m.limit, Limit::ReceiveWindow, "{m:?}");
}

#[test]
fn a_window_reopened_piece_by_piece_is_the_receive_window() {
    let mut t = tracker();
    t.response_started(0);
    // Seen over the emulator with tcp_rmem max 32 KiB: the 19 KB window arrives as a
    // read every 3.3 ms, as our reads reopen it, never a silence long enough to be idle.
    let mut now = 0;
    while now < 4_300_000 {
        now += 3_300;
        t.read(now);
    }
    window(&mut t, 19_072, 32_768);
    let m = t.finished(now, 4_028_068, 1, now).unwrap();
    assert_eq!(m.limit, Limit::ReceiveWindow, "{m:?}");
    assert_eq!(m.idle_us, 0, "{m:?}");
}

#[test]
fn loss_recovery_stalls_on_a_full_link_are_the_link() {
    let mut t = tracker();
    t.response_started(0);
    // 100 Mbit/s with a tail-drop queue: now and then a hole, and the reader waits
    // ~2 RTTs for its retransmission (35-45 ms seen over the emulator), then
    // gets what queued behind it at once. 15 of those are 23 % of the transfer.
    let mut now = 0;
    for i in 1..=770u64 {
        now += if i % 50 == 0 { 40_000 } else { 2_600 };
        t.read(now);
    }
    window(&mut t, 8 << 20, 12 << 20);
    let m = t.finished(now, 22_154_068, 1, now).unwrap();
    assert_eq!(m.limit, Limit::Link, "{m:?}");
    assert_eq!((m.idle_us, m.server_pauses), (0, 0), "{m:?}");
}

#[test]
fn scattered_short_gaps_at_full_speed_are_the_link() {
    let mut t = tracker();
    t.response_started(0);
    // A link-limited 22 MB on a busy host: a 6-10 ms gap every ~12 reads (holes refilled,
    // the reader descheduled), 20 % of the time, yet 92 Mbit/s. A window leaves far more.
    let mut now = 0;
    for i in 1..=620u64 {
        now += if i % 12 == 0 { 6_000 + (i % 5) * 1_000 } else { 2_600 };
        t.read(now);
    }
    window(&mut t, 12 << 20, 19 << 20);
    let m = t.finished(now, 22_154_068, 1, now).unwrap();
    let idle = m.idle_us as f64 / m.duration_us as f64;
    assert!((0.15..0.3).contains(&idle), "{idle} {m:?}");
    assert_eq!(m.limit, Limit::Link, "{m:?}");
}

#[test]
fn a_transfer_too_quick_to_sample_is_not_a_window() {
    // Loopback: 2 MiB in 2 ms, before the first 10 ms sample; no window is known.
    let mut t = TransferTracker::new(1 << 20, Some(6 << 20));
    t.sample(&LinkSample { rtt_us: 50, min_rtt_us: Some(50), ..LinkSample::default() });
    t.response_started(0);
    for i in 1..=64 {
        t.read(i * 30);
    }
    let m = t.finished(2_000, 2 << 20, 1, 2_000).unwrap();
    assert_eq!((m.limit, m.advertised_window), (Limit::Link, 0), "{m:?}");
}

#[test]
fn holding_off_for_a_slow_client_is_the_client_reader() {
    let mut t = tracker();
    t.response_started(0);
    let mut now = 0;
    for _ in 0..50 {
        now += 1_000;
        t.read(now);
        t.held_off(true, now);
        now += 30_000;
        t.held_off(false, now);
    }
    let m = t.finished(now, 2 << 20, 1, now).unwrap();
    assert_eq!(m.limit, Limit::ClientReader, "{m:?}");
    assert_eq!(m.idle_us, 0, "time held off is not idle pipe");
}

#[test]
fn long_silences_are_the_server() {
    let mut t = tracker();
    t.response_started(0);
    let mut now = 0;
    for _ in 0..10 {
        for _ in 0..20 {
            now += 2_600;
            t.read(now);
        }
        now += 200_000;
        t.read(now);
    }
    let m = t.finished(now, 5 << 20, 1, now).unwrap();
    assert_eq!(m.limit, Limit::Server, "{m:?}");
    assert_eq!(m.server_pauses, 10);
}

#[test]
fn a_thousand_small_round_trips_at_20_ms_are_latency() {
    let mut t = tracker();
    let mut verdicts = Vec::new();
    for i in 0..1000u64 {
        t.response_started(i * 20_400);
        verdicts.extend(t.finished(i * 20_400 + 20_300, 200, 1, 20_300));
    }
    assert_eq!(verdicts.len(), 1);
    assert_eq!((verdicts[0].limit, verdicts[0].round_trips), (Limit::Latency, 1000));
    // On loopback the same queries are not "latency": round trips are a sliver of their time.
    let mut t = TransferTracker::new(1 << 20, None);
    t.sample(&LinkSample { rtt_us: 50, min_rtt_us: Some(50), ..LinkSample::default() });
    for i in 0..1000u64 {
        t.response_started(i * 400);
        assert_eq!(t.finished(i * 400 + 300, 200, 1, 300), None);
    }
}
