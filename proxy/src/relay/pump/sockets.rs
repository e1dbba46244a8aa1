//! What the pump asks of the sockets themselves, beside the bytes: the link probe's readings,
//! and whether the client hung up or has sent more.

use super::Observers;
use crate::link::Due;
use crate::record::Tap;
use crate::relay::leg::Leg;

/// Lets the link probe read the sockets (if a reading is due) and tells the
/// other observers what it read. Inlined, always (a plain `#[inline]` was not taken): it
/// runs after every read, and as a call it cost more than asking whether a reading is due.
#[inline(always)]
pub(super) fn sample(tap: &mut Observers, client: &Leg, upstream: &Leg) {
    // The reading at a response's end is for the recorder alone (which commands waited for a
    // retransmission): with recording off, it is not made.
    let loss_wanted = tap.recorder.is_some();
    match tap.probe.due(loss_wanted) {
        Due::Nothing => {}
        Due::Read => read_sockets(tap, client, upstream, loss_wanted),
        Due::Settle => {
            if let Some(recorder) = &mut tap.recorder {
                recorder.loss_unread();
            }
        }
    }
}

/// The link probe's reading of the sockets, when one is due ([`sample`]).
#[inline(never)]
fn read_sockets(tap: &mut Observers, client: &Leg, upstream: &Leg, loss_wanted: bool) {
    tap.probe.client_unread(&client.transport().socket());
    let Some(up) = upstream.transport().tcp() else { return };
    let (reading, counters) = tap.probe.sample(up, client.transport().tcp(), loss_wanted);
    if let Some(reading) = reading {
        tap.link_sample(&reading);
    }
    if let Some(counters) = counters {
        tap.loss_counters(&counters);
    }
}

/// Whether the client closed its socket both ways (see [`crate::sys::hung_up`]): asked only
/// once it has sent its last byte with a command in flight.
pub(super) fn client_hung_up(client: &Leg) -> bool {
    crate::sys::hung_up(&client.transport().socket())
}

/// Whether the client has sent bytes rttscope has not read: a peek at the socket itself
/// (under any TLS or compression). Asked of the kernel, not the runtime: the runtime may
/// not have noticed bytes that arrived a moment ago, and a client's last command (its
/// COM_QUIT, say) must not be cut off for that.
pub(super) fn bytes_waiting(client: &Leg) -> bool {
    let mut probe = [std::mem::MaybeUninit::<u8>::uninit(); 1];
    matches!(socket2::SockRef::from(&client.transport().socket()).peek(&mut probe), Ok(n) if n > 0)
}
