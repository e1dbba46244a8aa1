//! The emulated link: delay, jitter, bandwidth, window and loss per direction,
//! applied in the relay to the connections in scope — so a team can see
//! what moving the database will do before they move it. Changeable at run
//! time without dropping a byte.
//!
//! - [`InjectControl`]: the current settings, shared and replaced live;
//! - `binding`: a connection's place on the link ([`InjectBinding`]), the
//!   models for its two directions given who it is;
//! - `delay`: one direction's schedule ([`DelayLine`], [`OneWayModel`]);
//! - `loss`: what loss on the long hop costs above TCP (recovery stalls, the
//!   loss-limited window);
//! - `timer`: sub-millisecond wake-ups for the delay lines.

mod binding;
pub mod delay;
pub mod loss;
#[cfg(test)]
mod proptests;
pub(crate) mod slow_start;
pub mod timer;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rttscope_config::{Direction as ConfigDirection, Inject};

pub use binding::InjectBinding;
pub use delay::{DelayLine, OneWayModel};

use crate::protocol::Direction;
use crate::sync::locked;

/// The current emulated link, shared by every connection. Connections
/// check the generation (one atomic load) and re-read the settings only
/// when it moved.
#[derive(Debug)]
pub struct InjectControl {
    generation: AtomicU64,
    settings: Mutex<Arc<Inject>>,
}

impl InjectControl {
    /// Starts with `initial` (from the config) at generation 1.
    pub fn new(initial: Inject) -> InjectControl {
        InjectControl { generation: AtomicU64::new(1), settings: Mutex::new(Arc::new(initial)) }
    }

    /// Bumped by every [`InjectControl::replace`]: a connection re-reads only when it moved.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The settings now in force.
    pub fn current(&self) -> Arc<Inject> {
        locked(&self.settings).clone()
    }

    /// Replaces the link for existing and new connections at once.
    pub fn replace(&self, inject: Inject) {
        let describe = describe(&inject);
        *locked(&self.settings) = Arc::new(inject);
        self.generation.fetch_add(1, Ordering::AcqRel);
        tracing::info!("emulated link changed: {describe}");
    }
}

/// The emulated link as reports quote it: the round trip, and what holds a result back on
/// its way to the client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EmulatedLink {
    /// The emulated round trip, µs: both directions' one-way delays added.
    pub rtt_us: u64,
    /// Towards the client, where results flow; `None`: unlimited.
    pub bandwidth_bps: Option<u64>,
    /// Bytes in flight per round trip towards the client (`window`, or what `loss` leaves a
    /// loss-based sender); `None`: no window.
    pub window_bytes: Option<u64>,
}

impl EmulatedLink {
    /// The link `inject` emulates, if any.
    pub fn of(inject: &Inject) -> Option<EmulatedLink> {
        if !inject.is_active() {
            return None;
        }
        use rttscope_config::Direction as Way;
        let (up, down) = (inject.direction(Way::ToUpstream), inject.direction(Way::ToClient));
        Some(EmulatedLink {
            rtt_us: (up.delay + down.delay).as_micros() as u64,
            bandwidth_bps: down.bandwidth_bps,
            window_bytes: model(inject, Direction::ToClient).window_limit(),
        })
    }

    /// What a window allows per second at this RTT, bytes; `None` without a window.
    pub fn window_rate(&self) -> Option<u64> {
        self.window_bytes.map(|w| (u128::from(w) * 1_000_000 / u128::from(self.rtt_us.max(1))) as u64)
    }

    /// Whether the window, rather than the bandwidth, is what limits a large transfer.
    pub fn window_binds(&self) -> bool {
        match (self.window_rate(), self.bandwidth_bps) {
            (Some(w), Some(bw)) => w < bw / 8,
            (Some(_), None) => true,
            (None, _) => false,
        }
    }
}

/// One line for logs: what the link is now.
pub fn describe(inject: &Inject) -> String {
    if !inject.is_active() {
        return "off".to_owned();
    }
    match serde_json::to_string(inject) {
        Ok(json) => json,
        Err(_) => format!("{inject:?}"),
    }
}

/// Whether the link applies to a connection of `user` on `schema`; the
/// percentage is drawn once per connection from its id.
pub fn in_scope(inject: &Inject, conn_id: u64, user: &str, schema: Option<&str>) -> bool {
    if !inject.is_active() || !inject.scope.matches(user, schema) {
        return false;
    }
    // A stable draw per connection: the same connection stays in or out as long as the scope holds.
    let draw = (conn_id.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 11) as f64 / (1u64 << 53) as f64;
    draw < inject.scope.percent.fraction()
}

/// The model for one direction.
pub fn model(inject: &Inject, direction: Direction) -> OneWayModel {
    let config_direction = match direction {
        Direction::ToUpstream => ConfigDirection::ToUpstream,
        Direction::ToClient => ConfigDirection::ToClient,
    };
    let one_way = inject.direction(config_direction);
    let there = inject.direction(ConfigDirection::ToUpstream).delay;
    let back = inject.direction(ConfigDirection::ToClient).delay;
    OneWayModel {
        delay: one_way.delay,
        jitter: one_way.jitter,
        bytes_per_second: one_way.bandwidth_bps.map(|bps| (bps / 8).max(1)),
        window: inject.window.map(|w| w.0),
        rtt: there.saturating_add(back),
        loss_ppm: one_way.loss_ppm,
    }
}

/// Largest buffer an emulated pipe may grow to per direction.
pub const MAX_PIPE_BYTES: usize = 64 << 20;
/// Without a bandwidth limit, the emulated pipe holds this much.
const UNLIMITED_PIPE_BYTES: usize = 16 << 20;

/// Buffer an emulated direction needs so the model, not the buffer, sets the pace.
pub fn pipe_capacity(model: &OneWayModel, base: usize) -> usize {
    let needed =
        model.pipe_bytes().map_or(UNLIMITED_PIPE_BYTES, |b| usize::try_from(b.saturating_mul(2)).unwrap_or(usize::MAX));
    needed.clamp(base, MAX_PIPE_BYTES)
}
