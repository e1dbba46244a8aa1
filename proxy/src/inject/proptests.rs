//! Property tests: whatever the settings — inside the validated ranges or anywhere in
//! their types' whole range, as a bug or a future path around validation could hand
//! over — building the models and scheduling bytes never panics, never releases bytes
//! before they arrived, and never reorders them, whatever segments are lost.

use std::time::{Duration, Instant};

use proptest::prelude::*;
use rttscope_config::{Bandwidth, ByteSize, DirectionOverride, HumanDuration, Inject, Percent};

use super::{DelayLine, MAX_PIPE_BYTES, OneWayModel, model, pipe_capacity};
use crate::protocol::Direction;

/// Any `Duration` at all, weighted towards the edges where overflow lives.
fn duration() -> impl Strategy<Value = Duration> {
    prop_oneof![
        Just(Duration::ZERO),
        Just(Duration::MAX),
        (0u64..=120_000_000_000).prop_map(Duration::from_nanos),
        (any::<u64>(), 0u32..1_000_000_000).prop_map(|(s, n)| Duration::new(s, n)),
    ]
}

/// Any `u64`, weighted towards the edges.
fn edge_u64() -> impl Strategy<Value = u64> {
    prop_oneof![Just(0), Just(1), Just(u64::MAX), Just(u64::MAX / 2 + 1), 1u64..1_000_000, any::<u64>()]
}

fn one_way_model() -> impl Strategy<Value = OneWayModel> {
    (
        duration(),
        duration(),
        proptest::option::of(edge_u64()),
        proptest::option::of(edge_u64()),
        duration(),
        prop_oneof![Just(0u32), Just(500_000), Just(u32::MAX), any::<u32>()],
    )
        .prop_map(|(delay, jitter, bytes_per_second, window, rtt, loss_ppm)| OneWayModel {
            delay,
            jitter,
            // The model's contract: a rate is never zero (`model` makes at least 1 B/s).
            bytes_per_second: bytes_per_second.map(|b| b.max(1)),
            window,
            rtt,
            loss_ppm,
        })
}

fn bandwidth() -> impl Strategy<Value = Option<Bandwidth>> {
    proptest::option::of(edge_u64()).prop_map(|b| b.and_then(Bandwidth::new))
}

/// Any loss a `Percent` holds (0 to 100 %, beyond what validation allows).
fn loss() -> impl Strategy<Value = Option<Percent>> {
    proptest::option::of(prop_oneof![Just(0.0), Just(50.0), Just(100.0), 0.0f64..=100.0])
        .prop_map(|p| p.and_then(Percent::new))
}

fn direction_override() -> impl Strategy<Value = DirectionOverride> {
    (proptest::option::of(duration()), proptest::option::of(duration()), bandwidth(), loss()).prop_map(
        |(delay, jitter, bandwidth, loss)| DirectionOverride {
            delay: delay.map(HumanDuration),
            jitter: jitter.map(HumanDuration),
            bandwidth,
            loss,
        },
    )
}

/// Any settings, validated or not.
fn inject() -> impl Strategy<Value = Inject> {
    (
        duration(),
        duration(),
        bandwidth(),
        proptest::option::of(edge_u64()),
        loss(),
        direction_override(),
        direction_override(),
    )
        .prop_map(|(rtt, jitter, bandwidth, window, loss, to_upstream, to_client)| Inject {
            rtt: HumanDuration(rtt),
            jitter: HumanDuration(jitter),
            bandwidth,
            window: window.map(ByteSize),
            loss,
            to_upstream,
            to_client,
            ..Inject::default()
        })
}

/// Reads as the relay hands them over: a gap since the last one (any, up to a day) and a
/// size up to 16 KiB (a window of 1 byte makes a piece per byte).
fn reads() -> impl Strategy<Value = Vec<(u64, usize)>> {
    proptest::collection::vec((prop_oneof![Just(0u64), 0u64..86_400_000_000_000], 0usize..=16 * 1024), 1..6)
}

/// Schedules `reads` on a line of `model` and checks the order and arrival invariants.
fn check_line(model: OneWayModel, offset: u64, seed: u64, reads: &[(u64, usize)]) -> Result<(), TestCaseError> {
    let t0 = Instant::now();
    let mut line = DelayLine::new(model, offset, seed);
    let (mut now, mut scheduled, mut released) = (t0, offset, offset);
    for &(gap, len) in reads {
        now += Duration::from_nanos(gap);
        let release = line.schedule(now, len);
        prop_assert!(release >= now, "released before it arrived");
        // Held releases keep stream order (a later read may bring earlier ones forward,
        // never past the ones ahead of them).
        let marks: Vec<(u64, Instant)> = line.marks().collect();
        prop_assert!(marks.windows(2).all(|m| m[0].0 <= m[1].0 && m[0].1 <= m[1].1), "reordered: {marks:?}");
        prop_assert!(marks.first().is_none_or(|m| m.1 >= t0), "released before it arrived");
        scheduled = scheduled.saturating_add(len as u64);
        let by_now = line.released_by(now);
        prop_assert!(by_now >= released && by_now <= scheduled, "released {by_now} of {scheduled}");
        released = by_now;
        if let Some(next) = line.next_release() {
            prop_assert!(next > now, "a release due by now was left behind");
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn any_one_way_model_schedules_without_panicking(
        m in one_way_model(),
        offset in edge_u64(),
        seed in any::<u64>(),
        reads in reads(),
    ) {
        let _ = m.pipe_bytes();
        let capacity = pipe_capacity(&m, 64 * 1024);
        prop_assert!((64 * 1024..=MAX_PIPE_BYTES).contains(&capacity));
        check_line(m, offset, seed, &reads)?;
    }

    #[test]
    fn any_settings_make_models_that_schedule_without_panicking(
        settings in inject(),
        seed in any::<u64>(),
        reads in reads(),
    ) {
        for direction in [Direction::ToUpstream, Direction::ToClient] {
            let m = model(&settings, direction);
            let capacity = pipe_capacity(&m, 64 * 1024);
            prop_assert!((64 * 1024..=MAX_PIPE_BYTES).contains(&capacity));
            check_line(m, 0, seed, &reads)?;
        }
    }
}
