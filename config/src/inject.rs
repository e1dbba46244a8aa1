//! `inject`: the emulated link (delay, jitter, bandwidth, window) and who it applies to;
//! also the body of the admin API's `PUT /inject`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Checker, Problem, into_result};
use crate::units::{Bandwidth, ByteSize, HumanDuration, Percent};
use crate::{ConfigError, parse};

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
/// does something, i.e. some direction gets a delay, jitter or bandwidth limit, or a window
/// is set. With every key at its default the proxy forwards without touching timing.
///
/// Delay is measured from the moment bytes arrive at rttscope; changing or removing the link
/// at run time never drops bytes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Inject {
    /// Round-trip time to add; each direction is delayed by half of it. Default `0`.
    pub rtt: HumanDuration,
    /// Random variation added to or taken from each direction's one-way delay, at most
    /// `rtt/2` so a delay never goes below zero. Default `0`.
    pub jitter: HumanDuration,
    /// Speed of the emulated link, applied to each direction separately (full duplex).
    /// Unset (the default): unlimited.
    pub bandwidth: Option<Bandwidth>,
    /// At most this many bytes in flight per direction per round trip, like a TCP window
    /// that never grows. Unset (the default): no window limit.
    pub window: Option<ByteSize>,
    /// Let jitter reorder data. Off by default: bytes on one connection are delayed but
    /// always delivered in order, as on one TCP connection.
    pub reorder: bool,
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
    /// One-way delay for this direction, instead of `rtt/2`.
    pub delay: Option<HumanDuration>,
    /// Jitter for this direction, instead of `jitter`; at most this direction's delay.
    pub jitter: Option<HumanDuration>,
    /// Bandwidth for this direction, instead of `bandwidth` (asymmetric links).
    pub bandwidth: Option<Bandwidth>,
}

/// Which connections the emulated link applies to; the conditions combine with "and".
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Scope {
    /// MySQL user names (exact match) whose connections are affected; empty (the
    /// default) means every user.
    pub users: Vec<String>,
    /// Default schemas (as sent at login or by `USE`) whose connections are affected;
    /// empty (the default) means every schema.
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
        let schema_ok =
            self.schemas.is_empty() || schema.is_some_and(|s| self.schemas.iter().any(|x| x == s));
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
            c.problem(
                "jitter",
                format!(
                    "must be at most rtt/2 ({}), not {}",
                    HumanDuration(half_rtt),
                    self.jitter
                ),
            );
        }
        for dir in [Direction::ToUpstream, Direction::ToClient] {
            let over = self.override_for(dir);
            let way = self.direction(dir);
            // Only a direction with its own delay or jitter can break the bound differently
            // from the link-wide check above.
            if way.jitter > way.delay && (over.delay.is_some() || over.jitter.is_some()) {
                let key = if over.jitter.is_some() {
                    "jitter"
                } else {
                    "delay"
                };
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
        c.require(
            self.window != Some(ByteSize(0)),
            "window",
            "must be greater than 0 (leave it unset for no window limit)",
        );
        let mut scope = c.at("scope");
        for (key, names) in [
            ("users", &self.scope.users),
            ("schemas", &self.scope.schemas),
        ] {
            for (i, name) in names.iter().enumerate() {
                scope.require(
                    !name.is_empty(),
                    &format!("{key}[{i}]"),
                    "must not be empty",
                );
            }
        }
    }

    fn override_for(&self, dir: Direction) -> &DirectionOverride {
        match dir {
            Direction::ToUpstream => &self.to_upstream,
            Direction::ToClient => &self.to_client,
        }
    }

    /// Delay, jitter and bandwidth for `dir`: the direction's override where set, else
    /// `rtt/2`, `jitter` and `bandwidth`.
    pub fn direction(&self, dir: Direction) -> OneWay {
        let over = self.override_for(dir);
        OneWay {
            delay: over.delay.map_or(self.rtt.0 / 2, HumanDuration::get),
            jitter: over.jitter.unwrap_or(self.jitter).0,
            bandwidth_bps: over
                .bandwidth
                .or(self.bandwidth)
                .map(Bandwidth::bits_per_second),
        }
    }

    /// True when the link changes anything: some direction has a delay, jitter or
    /// bandwidth limit, or a window is set. `reorder` and `scope` alone change nothing.
    pub fn is_active(&self) -> bool {
        let idle = OneWay::default();
        self.window.is_some()
            || self.direction(Direction::ToUpstream) != idle
            || self.direction(Direction::ToClient) != idle
    }
}
