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
    /// Bytes an emulated link held went out `late_us` after the moment they were due: its
    /// timers' and the relay's own lateness (a busy machine), time the link added beyond its
    /// settings. Told for the write that sent the last bytes due so far.
    fn released_late(&mut self, _direction: Direction, _late_us: u64) {}
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
    fn column(&mut self, definition: &[u8], of: ColumnOf) {
        if let Some(t) = self {
            t.column(definition, of);
        }
    }
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
    fn released_late(&mut self, direction: Direction, late_us: u64) {
        if let Some(t) = self {
            t.released_late(direction, late_us);
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

/// Several taps, told in order.
macro_rules! tuple_tap {
    ($($t:ident . $i:tt),+) => {
        impl<$($t: Observer),+> Observer for ($($t,)+) {
            fn command_started(&mut self, command: u8) { $(self.$i.command_started(command);)+ }
            fn command(&mut self, command: &CommandPacket<'_>) { $(self.$i.command(command);)+ }
            fn response_started(&mut self) { $(self.$i.response_started();)+ }
            fn result_set(&mut self, columns: u32) { $(self.$i.result_set(columns);)+ }
            fn column(&mut self, definition: &[u8], of: ColumnOf) {
                $(self.$i.column(definition, of);)+
            }
            fn row(&mut self, prefix: &[u8]) { $(self.$i.row(prefix);)+ }
            fn finished(&mut self, summary: &Summary) { $(self.$i.finished(summary);)+ }
            fn identity(&mut self, identity: &Identity) { $(self.$i.identity(identity);)+ }
            fn desync(&mut self, reason: &'static str) { $(self.$i.desync(reason);)+ }
        }

        impl<$($t: Tap),+> Tap for ($($t,)+) {
            fn arrived(&mut self, direction: Direction, arrived_us: u64, released_us: u64, len: usize) {
                $(self.$i.arrived(direction, arrived_us, released_us, len);)+
            }
            fn line_stalled(&mut self, direction: Direction, stalled_us: u64) {
                $(self.$i.line_stalled(direction, stalled_us);)+
            }
            fn released_late(&mut self, direction: Direction, late_us: u64) {
                $(self.$i.released_late(direction, late_us);)+
            }
            fn connected(&mut self, client: &str, response: &HandshakeResponse41, legs: &Legs) {
                $(self.$i.connected(client, response, legs);)+
            }
            fn held_off(&mut self, held: bool, now: Instant) { $(self.$i.held_off(held, now);)+ }
            fn link_sample(&mut self, sample: &LinkSample) { $(self.$i.link_sample(sample);)+ }
            fn loss_counters(&mut self, counters: &LossCounters) { $(self.$i.loss_counters(counters);)+ }
            fn wire(&mut self, direction: Direction, bytes: u64) { $(self.$i.wire(direction, bytes);)+ }
            fn response_bytes(&mut self, bytes: &[u8]) { $(self.$i.response_bytes(bytes);)+ }
        }
    };
}

tuple_tap!(A.0, B.1);
tuple_tap!(A.0, B.1, C.2);

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
