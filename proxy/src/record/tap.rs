//! What the relay tells its observers besides protocol events: when bytes
//! arrived (and when an emulated link releases them), who connected, when
//! rttscope holds off for a slow client, and what the kernel said about the
//! long-haul socket. Observers implement [`Tap`]; the relay composes several
//! (a tuple of taps is a tap that tells each in turn) and never knows what
//! they do with it.

use tokio::time::Instant;

use crate::live::Legs;
use crate::protocol::handshake::HandshakeResponse41;
use crate::protocol::{ColumnOf, CommandPacket, Direction, Identity, Observer, Summary};
use crate::socket::{LinkSample, LossCounters};

/// An observer that is also told about I/O. Called on the forwarding path:
/// implementations must be quick and must not block.
pub trait Tap: Observer {
    /// `len` bytes were read at `arrived_us`, before the state machine sees
    /// them; they go on at `released_us` (later than `arrived_us` only on an
    /// emulated link). Both are [`micros`](super::micros), read once per chunk by the relay
    /// so that no observer does clock arithmetic of its own.
    fn arrived(&mut self, _direction: Direction, _arrived_us: u64, _released_us: u64, _len: usize) {}
    /// Before the bytes `arrived` tells next, reading had waited `stalled_us` because an
    /// emulated link's bytes filled rttscope's buffer: time the link added (its sender's
    /// window closed meanwhile), beyond what those bytes are held.
    fn line_stalled(&mut self, _direction: Direction, _stalled_us: u64) {}
    /// The read `arrived` tells next filled rttscope's buffer: bytes had waited in the
    /// socket for rttscope, so the time since the read before was not the path standing empty.
    fn buffer_filled(&mut self, _direction: Direction) {}
    /// Bytes an emulated link held went out `late_us` after the moment they were due: its
    /// timers' and the relay's own lateness (a busy machine), time the link added beyond its
    /// settings — or, negative, before it: the timer fired ahead by the wake-up it expected,
    /// and the wake-up was quicker; then `peer_us` more because the peer was not taking them
    /// (a client reading slower than the link released): the peer's time, not the link's.
    /// Told for the write that sent the last bytes due so far.
    fn released_late(&mut self, _direction: Direction, _late_us: i64, _peer_us: u64) {}
    /// The handshake was relayed: who connected, as whom.
    fn connected(&mut self, _client: &str, _response: &HandshakeResponse41, _legs: &Legs) {}
    /// rttscope stopped (`true`) or resumed reading upstream because the
    /// client was not taking what was ready for it.
    fn held_off(&mut self, _held: bool, _now: Instant) {}
    /// A fresh reading of the long-haul socket (taken by the link probe).
    fn link_sample(&mut self, _sample: &LinkSample) {}
    /// The long-haul socket's loss counters, read after a response's end (but for a short
    /// command right after another reading: `link::probe`) and with every full reading:
    /// what a command that waited for a retransmission moved.
    fn loss_counters(&mut self, _counters: &LossCounters) {}
    /// `bytes` crossed the long hop's wire going `direction`: told only when the upstream
    /// leg is compressed, so that wire bytes and packet bytes can be told apart.
    fn wire(&mut self, _direction: Direction, _bytes: u64) {}
    /// `bytes` read from the server, before the state machine sees them: told only when the
    /// upstream leg is not compressed, so that a result's compressibility can be sampled.
    fn response_bytes(&mut self, _bytes: &[u8]) {}
}

/// The tap that observes nothing.
impl Observer for () {}
impl Tap for () {}

/// A tap that may be absent (recording switched off).
impl<T: Observer> Observer for Option<T> {
    #[inline(always)]
    fn command_started(&mut self, command: u8) {
        if let Some(t) = self {
            t.command_started(command);
        }
    }
    fn command(&mut self, command: &CommandPacket<'_>) {
        if let Some(t) = self {
            t.command(command);
        }
    }
    fn response_started(&mut self) {
        if let Some(t) = self {
            t.response_started();
        }
    }
    fn result_set(&mut self, columns: u32) {
        if let Some(t) = self {
            t.result_set(columns);
        }
    }
    #[inline(always)]
    fn column(&mut self, definition: &[u8], of: ColumnOf) {
        if let Some(t) = self {
            t.column(definition, of);
        }
    }
    #[inline(always)]
    fn row(&mut self, prefix: &[u8]) {
        if let Some(t) = self {
            t.row(prefix);
        }
    }
    fn finished(&mut self, summary: &Summary) {
        if let Some(t) = self {
            t.finished(summary);
        }
    }
    fn identity(&mut self, identity: &Identity) {
        if let Some(t) = self {
            t.identity(identity);
        }
    }
    fn desync(&mut self, reason: &'static str) {
        if let Some(t) = self {
            t.desync(reason);
        }
    }
}

impl<T: Tap> Tap for Option<T> {
    #[inline(always)]
    fn arrived(&mut self, direction: Direction, arrived_us: u64, released_us: u64, len: usize) {
        if let Some(t) = self {
            t.arrived(direction, arrived_us, released_us, len);
        }
    }
    fn line_stalled(&mut self, direction: Direction, stalled_us: u64) {
        if let Some(t) = self {
            t.line_stalled(direction, stalled_us);
        }
    }
    fn buffer_filled(&mut self, direction: Direction) {
        if let Some(t) = self {
            t.buffer_filled(direction);
        }
    }
    fn released_late(&mut self, direction: Direction, late_us: i64, peer_us: u64) {
        if let Some(t) = self {
            t.released_late(direction, late_us, peer_us);
        }
    }
    fn connected(&mut self, client: &str, response: &HandshakeResponse41, legs: &Legs) {
        if let Some(t) = self {
            t.connected(client, response, legs);
        }
    }
    fn held_off(&mut self, held: bool, now: Instant) {
        if let Some(t) = self {
            t.held_off(held, now);
        }
    }
    fn link_sample(&mut self, sample: &LinkSample) {
        if let Some(t) = self {
            t.link_sample(sample);
        }
    }
    fn loss_counters(&mut self, counters: &LossCounters) {
        if let Some(t) = self {
            t.loss_counters(counters);
        }
    }
    fn wire(&mut self, direction: Direction, bytes: u64) {
        if let Some(t) = self {
            t.wire(direction, bytes);
        }
    }
    fn response_bytes(&mut self, bytes: &[u8]) {
        if let Some(t) = self {
            t.response_bytes(bytes);
        }
    }
}

/// Several taps in one value, each told in turn: `tell_each!([generics of the Observer impl]
/// [generics of the Tap impl] Type { field or index, ... })`. For tuples of taps here, and for
/// the relay's named set of a connection's observers.
macro_rules! tell_each {
    ([$($observers:tt)*] [$($taps:tt)*] $ty:ty { $($i:tt),+ }) => {
        impl<$($observers)*> $crate::protocol::Observer for $ty {
            #[inline(always)]
            fn command_started(&mut self, command: u8) { $($crate::protocol::Observer::command_started(&mut self.$i, command);)+ }
            fn command(&mut self, command: &$crate::protocol::CommandPacket<'_>) { $($crate::protocol::Observer::command(&mut self.$i, command);)+ }
            fn response_started(&mut self) { $($crate::protocol::Observer::response_started(&mut self.$i);)+ }
            fn result_set(&mut self, columns: u32) { $($crate::protocol::Observer::result_set(&mut self.$i, columns);)+ }
            #[inline(always)]
            fn column(&mut self, definition: &[u8], of: $crate::protocol::ColumnOf) {
                $($crate::protocol::Observer::column(&mut self.$i, definition, of);)+
            }
            #[inline(always)]
            fn row(&mut self, prefix: &[u8]) { $($crate::protocol::Observer::row(&mut self.$i, prefix);)+ }
            fn finished(&mut self, summary: &$crate::protocol::Summary) { $($crate::protocol::Observer::finished(&mut self.$i, summary);)+ }
            fn identity(&mut self, identity: &$crate::protocol::Identity) { $($crate::protocol::Observer::identity(&mut self.$i, identity);)+ }
            fn desync(&mut self, reason: &'static str) { $($crate::protocol::Observer::desync(&mut self.$i, reason);)+ }
        }

        impl<$($taps)*> $crate::record::Tap for $ty {
            #[inline(always)]
            fn arrived(&mut self, direction: $crate::protocol::Direction, arrived_us: u64, released_us: u64, len: usize) {
                $($crate::record::Tap::arrived(&mut self.$i, direction, arrived_us, released_us, len);)+
            }
            fn line_stalled(&mut self, direction: $crate::protocol::Direction, stalled_us: u64) {
                $($crate::record::Tap::line_stalled(&mut self.$i, direction, stalled_us);)+
            }
            fn buffer_filled(&mut self, direction: $crate::protocol::Direction) {
                $($crate::record::Tap::buffer_filled(&mut self.$i, direction);)+
            }
            fn released_late(&mut self, direction: $crate::protocol::Direction, late_us: i64, peer_us: u64) {
                $($crate::record::Tap::released_late(&mut self.$i, direction, late_us, peer_us);)+
            }
            fn connected(&mut self, client: &str, response: &$crate::protocol::handshake::HandshakeResponse41, legs: &$crate::live::Legs) {
                $($crate::record::Tap::connected(&mut self.$i, client, response, legs);)+
            }
            fn held_off(&mut self, held: bool, now: ::tokio::time::Instant) { $($crate::record::Tap::held_off(&mut self.$i, held, now);)+ }
            fn link_sample(&mut self, sample: &$crate::socket::LinkSample) { $($crate::record::Tap::link_sample(&mut self.$i, sample);)+ }
            fn loss_counters(&mut self, counters: &$crate::socket::LossCounters) { $($crate::record::Tap::loss_counters(&mut self.$i, counters);)+ }
            fn wire(&mut self, direction: $crate::protocol::Direction, bytes: u64) { $($crate::record::Tap::wire(&mut self.$i, direction, bytes);)+ }
            fn response_bytes(&mut self, bytes: &[u8]) { $($crate::record::Tap::response_bytes(&mut self.$i, bytes);)+ }
        }
    };
}

tell_each!([A: Observer, B: Observer] [A: Tap, B: Tap] (A, B) { 0, 1 });
tell_each!([A: Observer, B: Observer, C: Observer] [A: Tap, B: Tap, C: Tap] (A, B, C) { 0, 1, 2 });
pub(crate) use tell_each;

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts what it is told.
    #[derive(Default)]
    struct Count {
        commands: u32,
        finished: u32,
        bytes: usize,
        samples: u32,
    }
    impl Observer for Count {
        fn command_started(&mut self, _command: u8) {
            self.commands += 1;
        }
        fn finished(&mut self, _summary: &Summary) {
            self.finished += 1;
        }
    }
    impl Tap for Count {
        fn arrived(&mut self, _d: Direction, _a: u64, _r: u64, len: usize) {
            self.bytes += len;
        }
        fn link_sample(&mut self, _sample: &LinkSample) {
            self.samples += 1;
        }
    }

    #[test]
    fn a_tuple_tells_every_tap_and_an_absent_one_is_skipped() {
        let mut taps = (Count::default(), Some(Count::default()), None::<Count>);
        taps.command_started(3);
        taps.arrived(Direction::ToClient, 1, 1, 10);
        taps.finished(&Summary::default());
        taps.link_sample(&LinkSample::default());
        let (a, b, c) = taps;
        let b = b.expect("present");
        for t in [&a, &b] {
            assert_eq!((t.commands, t.finished, t.bytes, t.samples), (1, 1, 10, 1));
        }
        assert!(c.is_none());
    }
}
