//! `inject`: the emulated link (delay, jitter, bandwidth, window, loss) and who it applies to;
//! also the body of the admin API's `PUT /inject`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Checker, Problem, into_result};
use crate::units::{Bandwidth, ByteSize, HumanDuration, Percent};
use crate::{ConfigError, parse};

/// Longest delay the link emulates (`rtt`, `jitter`, a direction's `delay` and `jitter`):
/// beyond a minute every client has timed out, and the delay lines would hold bytes for it.
pub const MAX_DELAY: Duration = Duration::from_secs(60);
/// Slowest and fastest emulated bandwidth, in bits per second (1 kbit/s to 100 Gbit/s).
pub const BANDWIDTH_BPS: (u64, u64) = (1_000, 100_000_000_000);
/// Smallest and largest window: below a segment nothing moves; TCP's own maximum is 1 GiB.
pub const WINDOW_BYTES: (u64, u64) = (512, 1 << 30);
/// Most loss the link emulates, in percent of segments: beyond half, TCP barely moves and
/// the model (recovery stalls, a loss-limited window) no longer describes it.
pub const MAX_LOSS_PERCENT: f64 = 50.0;
/// Most names `scope.users` and `scope.schemas` may each list.
pub const MAX_SCOPE_NAMES: usize = 1024;

/// Which way bytes travel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// From the client to the upstream server (commands).
    ToUpstream,
    /// From the upstream server to the client (results).
    ToClient,
}

impl Direction {
    /// The config key of this direction's override (`to_upstream`, `to_client`).
    pub const fn key(self) -> &'static str {
        match self {
            Direction::ToUpstream => "to_upstream",
            Direction::ToClient => "to_client",
        }
    }
}

/// The emulated link between rttscope and the upstream server.
///
/// There is no `enabled` key: the link is active (see [`Inject::is_active`]) as soon as it
/// does something, i.e. some direction gets a delay, jitter, bandwidth limit or loss, or a
/// window is set. With every key at its default the proxy forwards without touching timing.
///
/// Delay is measured from the moment bytes arrive at rttscope; changing or removing the link
/// at run time never drops bytes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Inject {
    /// Round-trip time to add; each direction is delayed by half of it. At most `60s`.
    /// Default `0`.
    pub rtt: HumanDuration,
    /// Random variation added to or taken from each direction's one-way delay, at most
    /// `rtt/2` so a delay never goes below zero. Default `0`.
    pub jitter: HumanDuration,
    /// Speed of the emulated link, applied to each direction separately (full duplex),
    /// from `1kbit` to `100gbit`. Unset (the default): unlimited.
    pub bandwidth: Option<Bandwidth>,
    /// At most this many bytes in flight per direction per round trip, like a TCP window
    /// that never grows, from `512B` to `1GiB`. Unset (the default): no window limit.
    pub window: Option<ByteSize>,
    /// Share of TCP segments lost on the long hop, per direction, as a lossy path does to a
    /// loss-based sender (Reno, CUBIC): a loss holds the data behind it for a recovery stall
    /// (about one RTT for a fast retransmit, an RTO of RTT + 200 ms for a lone segment) and
    /// caps the window at the Mathis bound. `0%` to `50%`; a bare number is a percentage
    /// (`1` is 1 %). Unset (the default): nothing lost. Duplication and reordering have no
    /// key: TCP hides them from the application (see docs/inject-loss.md).
    pub loss: Option<Percent>,
    /// Overrides the one-way values for bytes sent to the upstream server.
    pub to_upstream: DirectionOverride,
    /// Overrides the one-way values for bytes sent to the client.
    pub to_client: DirectionOverride,
    /// Which connections the link applies to. Default: all.
    pub scope: Scope,
}

/// One direction's departures from the link-wide settings; each unset key keeps the
/// link-wide value.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DirectionOverride {
    /// One-way delay for this direction, instead of `rtt/2`. At most `60s`.
    pub delay: Option<HumanDuration>,
    /// Jitter for this direction, instead of `jitter`; at most this direction's delay.
    pub jitter: Option<HumanDuration>,
    /// Bandwidth for this direction, instead of `bandwidth` (asymmetric links); `1kbit` to
    /// `100gbit`.
    pub bandwidth: Option<Bandwidth>,
    /// Loss for this direction, instead of `loss` (e.g. only results lost); `0%` to `50%`.
    pub loss: Option<Percent>,
}

/// Which connections the emulated link applies to; the conditions combine with "and".
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Scope {
    /// MySQL user names (exact match) whose connections are affected, at most 1024; empty
    /// (the default) means every user.
    pub users: Vec<String>,
    /// Default schemas (as sent at login or by `USE`) whose connections are affected, at
    /// most 1024; empty (the default) means every schema.
    pub schemas: Vec<String>,
    /// Share of the matching connections affected, chosen per connection when it opens.
    /// Default `100%`.
    pub percent: Percent,
}

impl Scope {
    /// Whether a connection of `user` with default schema `schema` matches `users` and
    /// `schemas` (the `percent` draw is the caller's).
    pub fn matches(&self, user: &str, schema: Option<&str>) -> bool {
        let user_ok = self.users.is_empty() || self.users.iter().any(|u| u == user);
        let schema_ok = self.schemas.is_empty() || schema.is_some_and(|s| self.schemas.iter().any(|x| x == s));
        user_ok && schema_ok
    }
}

/// The resolved settings for one direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OneWay {
    /// Delay added to every byte in this direction.
    pub delay: Duration,
    /// The delay varies by up to this much either way; never more than `delay`.
    pub jitter: Duration,
    /// Bits per second this direction is limited to, if any.
    pub bandwidth_bps: Option<u64>,
    /// Share of segments lost, in parts per million (0 to 500,000): an integer, so that
    /// settings compare exactly.
    pub loss_ppm: u32,
}

impl Inject {
    /// Parses the JSON body of `PUT /inject` (the same keys as the `inject` section, e.g.
    /// `{"rtt": "15ms", "bandwidth": "34mbit"}`) and validates it. Paths in errors are
    /// relative to the body (`rtt`, `to_client.jitter`).
    pub fn from_json(text: &str) -> Result<Inject, ConfigError> {
        let inject: Inject = parse::from_json(text)?;
        inject.validate()?;
        Ok(inject)
    }

    /// Checks ranges and cross-field rules, reporting every problem at once with paths
    /// relative to this section.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut problems: Vec<Problem> = Vec::new();
        self.check(&mut Checker::new(&mut problems));
        into_result(problems)
    }

    pub(crate) fn check(&self, c: &mut Checker<'_>) {
        let half_rtt = self.rtt.0 / 2;
        if self.jitter.0 > half_rtt {
            c.problem("jitter", format!("must be at most rtt/2 ({}), not {}", HumanDuration(half_rtt), self.jitter));
        }
        for dir in [Direction::ToUpstream, Direction::ToClient] {
            let over = self.override_for(dir);
            let way = self.direction(dir);
            // Only a direction with its own delay or jitter can break the bound differently
            // from the link-wide check above.
            if way.jitter > way.delay && (over.delay.is_some() || over.jitter.is_some()) {
                let key = if over.jitter.is_some() { "jitter" } else { "delay" };
                c.at(dir.key()).problem(
                    key,
                    format!(
                        "jitter {} exceeds the one-way delay {} of this direction",
                        HumanDuration(way.jitter),
                        HumanDuration(way.delay)
                    ),
                );
            }
        }
        let mut scope = c.at("scope");
        for (key, names) in [("users", &self.scope.users), ("schemas", &self.scope.schemas)] {
            scope.require(
                names.len() <= MAX_SCOPE_NAMES,
                key,
                format!("lists {} names; at most {MAX_SCOPE_NAMES}", names.len()),
            );
            for (i, name) in names.iter().enumerate().take(MAX_SCOPE_NAMES) {
                scope.require(!name.is_empty(), &format!("{key}[{i}]"), "must not be empty");
            }
        }
        self.check_ranges(c);
    }

    /// Each value within its documented range (see the constants above), so that no
    /// setting can hold bytes for hours or overflow the arithmetic of the delay lines.
    fn check_ranges(&self, c: &mut Checker<'_>) {
        let delay = |c: &mut Checker<'_>, key: &str, value: HumanDuration| {
            c.require(value.0 <= MAX_DELAY, key, format!("must be at most {} (is {value})", HumanDuration(MAX_DELAY)));
        };
        let bandwidth = |c: &mut Checker<'_>, key: &str, value: Bandwidth| {
            let (lo, hi) = BANDWIDTH_BPS;
            let bps = value.bits_per_second();
            c.require(
                (lo..=hi).contains(&bps),
                key,
                format!("must be between 1kbit and 100gbit (is {value}); leave it unset for no limit"),
            );
        };
        delay(c, "rtt", self.rtt);
        delay(c, "jitter", self.jitter);
        let loss = |c: &mut Checker<'_>, key: &str, value: Percent| {
            c.require(
                value.value() <= MAX_LOSS_PERCENT,
                key,
                format!("must be between 0% and {MAX_LOSS_PERCENT}% (is {value}); leave it unset for no loss"),
            );
        };
        if let Some(b) = self.bandwidth {
            bandwidth(c, "bandwidth", b);
        }
        if let Some(l) = self.loss {
            loss(c, "loss", l);
        }
        for dir in [Direction::ToUpstream, Direction::ToClient] {
            let over = self.override_for(dir);
            let mut c = c.at(dir.key());
            for (key, value) in [("delay", over.delay), ("jitter", over.jitter)] {
                if let Some(value) = value {
                    delay(&mut c, key, value);
                }
            }
            if let Some(b) = over.bandwidth {
                bandwidth(&mut c, "bandwidth", b);
            }
            if let Some(l) = over.loss {
                loss(&mut c, "loss", l);
            }
        }
        if let Some(window) = self.window {
            let (lo, hi) = WINDOW_BYTES;
            c.require(
                (lo..=hi).contains(&window.0),
                "window",
                format!(
                    "must be between {} and {} (is {window}); leave it unset for no window limit",
                    ByteSize(lo),
                    ByteSize(hi)
                ),
            );
        }
    }

    fn override_for(&self, dir: Direction) -> &DirectionOverride {
        match dir {
            Direction::ToUpstream => &self.to_upstream,
            Direction::ToClient => &self.to_client,
        }
    }

    /// Delay, jitter, bandwidth and loss for `dir`: the direction's override where set, else
    /// `rtt/2`, `jitter`, `bandwidth` and `loss`.
    pub fn direction(&self, dir: Direction) -> OneWay {
        let over = self.override_for(dir);
        OneWay {
            delay: over.delay.map_or(self.rtt.0 / 2, HumanDuration::get),
            jitter: over.jitter.unwrap_or(self.jitter).0,
            bandwidth_bps: over.bandwidth.or(self.bandwidth).map(Bandwidth::bits_per_second),
            // Validated to at most 50 %; clamped anyway, so no setting overflows the integer.
            loss_ppm: over.loss.or(self.loss).map_or(0, |p| (p.fraction().clamp(0.0, 0.5) * 1e6).round() as u32),
        }
    }

    /// True when the link changes anything: some direction has a delay, jitter, bandwidth
    /// limit or loss, or a window is set. `scope` alone changes nothing.
    pub fn is_active(&self) -> bool {
        let idle = OneWay::default();
        self.window.is_some()
            || self.direction(Direction::ToUpstream) != idle
            || self.direction(Direction::ToClient) != idle
    }
}
