//! The delay line's schedule, case by case.

use super::*;

fn model(delay_ms: u64) -> OneWayModel {
    OneWayModel { delay: Duration::from_millis(delay_ms), ..OneWayModel::default() }
}

#[test]
fn a_chunk_waits_the_one_way_delay() {
    let t0 = Instant::now();
    let mut line = DelayLine::new(model(5), 0, 1);
    let release = line.schedule(t0, 100);
    assert_eq!(release, t0 + Duration::from_millis(5));
    assert_eq!(line.released_by(t0 + Duration::from_millis(4)), 0);
    assert_eq!(line.released_by(release), 100);
    assert_eq!(line.next_release(), None);
}

#[test]
fn bandwidth_serialises_back_to_back_chunks() {
    let t0 = Instant::now();
    // 1 MB/s: 10 kB takes 10 ms on the wire.
    let m =
        OneWayModel { bytes_per_second: Some(1_000_000), delay: Duration::from_millis(1), ..OneWayModel::default() };
    let mut line = DelayLine::new(m, 0, 1);
    assert_eq!(line.schedule(t0, 10_000), t0 + Duration::from_millis(11));
    assert_eq!(line.schedule(t0, 10_000), t0 + Duration::from_millis(21));
    // 5 MB arriving at once: size/bandwidth + delay.
    let mut line = DelayLine::new(m, 0, 1);
    let mut last = t0;
    for _ in 0..160 {
        last = line.schedule(t0, 32 * 1024);
    }
    let expected = Duration::from_nanos(160 * 32 * 1024 * 1000) + Duration::from_millis(1);
    assert_eq!(last - t0, expected);
}

#[test]
fn a_large_read_leaves_piece_by_piece() {
    let t0 = Instant::now();
    // 10 MB/s: pieces of 1 ms = 10,000 bytes.
    let m =
        OneWayModel { bytes_per_second: Some(10_000_000), delay: Duration::from_millis(5), ..OneWayModel::default() };
    let mut line = DelayLine::new(m, 0, 1);
    assert_eq!(line.schedule(t0, 105_000), t0 + Duration::from_micros(15_500));
    // The first piece is through after its own millisecond on the wire, not the read's ten.
    assert_eq!(line.released_by(t0 + Duration::from_millis(6)), 10_000);
    assert_eq!(line.next_release(), Some(t0 + Duration::from_millis(7)));
    assert_eq!(line.released_by(t0 + Duration::from_millis(15)), 100_000);
    assert_eq!(line.released_by(t0 + Duration::from_micros(15_500)), 105_000);
}

#[test]
fn a_window_allows_w_bytes_per_round_trip() {
    let t0 = Instant::now();
    let m = OneWayModel {
        delay: Duration::from_millis(10),
        rtt: Duration::from_millis(20),
        window: Some(32 * 1024),
        ..OneWayModel::default()
    };
    let mut line = DelayLine::new(m, 0, 1);
    // 1.6 MB offered at once: 50 windows, one per 20 ms, the first window going at once — but
    // slow start's first two rounds carry 14,480 and 28,960 bytes, not two windows: one round
    // more.
    let mut last = t0;
    for _ in 0..100 {
        last = line.schedule(t0, 16 * 1024);
    }
    let took = last - t0 - Duration::from_millis(10);
    assert_eq!(took, Duration::from_millis(20 * 50), "{took:?}");
}

#[test]
fn a_read_draws_its_jitter_once() {
    let t0 = Instant::now();
    // 1.5 MB/s: a 15,000-byte read is ten pieces of 1,500 bytes, 1 ms each on the wire.
    let m = OneWayModel {
        delay: Duration::from_millis(10),
        jitter: Duration::from_millis(5),
        bytes_per_second: Some(1_500_000),
        ..OneWayModel::default()
    };
    let mut line = DelayLine::new(m, 0, 7);
    let mut spread = (Duration::MAX, Duration::ZERO);
    for read in 0..50 {
        let now = t0 + Duration::from_millis(100 * read);
        line.schedule(now, 15_000);
        let times: Vec<Instant> = line.marks.iter().map(|&(_, at)| at).collect();
        assert_eq!(times.len(), 10);
        // One draw: the pieces stay exactly their wire time apart.
        assert!(times.windows(2).all(|p| p[1] - p[0] == Duration::from_millis(1)), "{read}: {times:?}");
        let held = times[0] - now - Duration::from_millis(1);
        assert!(held >= Duration::from_millis(5) && held <= Duration::from_millis(15), "{held:?}");
        spread = (spread.0.min(held), spread.1.max(held));
        line.released_by(now + Duration::from_millis(50));
    }
    assert!(spread.1 - spread.0 >= Duration::from_millis(4), "the draw varies from read to read: {spread:?}");
}

#[test]
fn jitter_is_bounded_and_never_reorders() {
    let t0 = Instant::now();
    let m =
        OneWayModel { delay: Duration::from_millis(10), jitter: Duration::from_millis(3), ..OneWayModel::default() };
    let mut line = DelayLine::new(m, 0, 42);
    let mut previous = t0;
    let mut spread = (Duration::MAX, Duration::ZERO);
    for i in 0..1000u64 {
        let now = t0 + Duration::from_millis(i);
        let release = line.schedule(now, 10);
        assert!(release >= previous, "reordered at {i}");
        let held = release - now;
        assert!(held <= Duration::from_millis(13), "{held:?}");
        spread = (spread.0.min(held), spread.1.max(held));
        previous = release;
    }
    assert!(spread.1 - spread.0 >= Duration::from_millis(4), "jitter varies: {spread:?}");
}

#[test]
fn a_line_started_mid_stream_counts_from_there() {
    let t0 = Instant::now();
    let mut line = DelayLine::new(model(5), 10_000, 1);
    assert_eq!(line.released_by(t0), 10_000, "bytes before the line are not held");
    let release = line.schedule(t0, 100);
    assert_eq!(line.released_by(t0), 10_000);
    assert_eq!(line.released_by(release), 10_100);
}

#[test]
fn a_new_model_applies_to_new_bytes_only() {
    let t0 = Instant::now();
    let mut line = DelayLine::new(model(50), 0, 1);
    let first = line.schedule(t0, 10);
    line.set_model(model(1));
    let second = line.schedule(t0 + Duration::from_millis(1), 10);
    assert_eq!(first, t0 + Duration::from_millis(50));
    assert_eq!(second, first, "held behind the earlier bytes, not reordered");
    let third = line.schedule(t0 + Duration::from_millis(100), 10);
    assert_eq!(third, t0 + Duration::from_millis(101));
}

#[test]
fn a_large_result_takes_slow_starts_rounds() {
    let t0 = Instant::now();
    let m = OneWayModel { delay: Duration::from_millis(40), rtt: Duration::from_millis(80), ..OneWayModel::default() };
    let mut line = DelayLine::new(m, 0, 1);
    // 40 MB offered at once leaves in 12 rounds from ten segments: the first at once and 11
    // more, as the projections charge it (`CommandRecord::slow_start_rounds`).
    let mut last = t0;
    for _ in 0..40_000_000 / 64_000 {
        last = line.schedule(t0, 64_000);
    }
    assert_eq!(last - t0, Duration::from_millis(40 + 11 * 80));
    // After a second's silence (three timeouts of 280 ms) the window restarts at an eighth of
    // the 40 MB the acknowledgements opened: 5 MB go at once, the sixth waits a round.
    let later = last - Duration::from_millis(40) + Duration::from_secs(1);
    line.released_by(later);
    let held: Vec<Duration> = (0..3).map(|_| line.schedule(later, 2_000_000) - later).collect();
    assert_eq!(held, [40, 40, 120].map(Duration::from_millis));
    // After a minute, from ten segments again: 2 MB take 8 rounds.
    let much_later = later + Duration::from_secs(60);
    line.released_by(much_later);
    assert_eq!(line.schedule(much_later, 2_000_000) - much_later, Duration::from_millis(40 + 7 * 80));
}

#[test]
fn a_long_trickle_remembers_a_round_trip_of_departures() {
    // Segment-sized reads every millisecond for 60 s at 80 ms, no bandwidth: one burst, its
    // window still growing; only the last round trip's departures can still bind. Slow start
    // holds the first ones back (115 KB in flight from a 14 KB window), then never again.
    let t0 = Instant::now();
    let m = OneWayModel { delay: Duration::from_millis(40), rtt: Duration::from_millis(80), ..OneWayModel::default() };
    let mut line = DelayLine::new(m, 0, 1);
    for ms in 0..60_000 {
        let now = t0 + Duration::from_millis(ms);
        let release = line.schedule(now, 1448);
        if ms >= 1_000 {
            assert_eq!(release, now + Duration::from_millis(40), "held back at {ms} ms");
        }
        line.released_by(now);
    }
    assert!(line.departures.len() <= 81, "{} departures remembered", line.departures.len());
}
