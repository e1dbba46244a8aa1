//! A `COM_CHANGE_USER` from a plain client over a TLS long hop, relayed the way the login
//! was: told to send its password in full, the client asks for the server's key, which over
//! the TLS leg the server would read as a wrong password. The forwarding loop stops before the
//! command goes upstream ([`Ended::ChangeUser`](crate::relay::Ended)), this relays the exchange
//! with rttscope's key standing in (see `stand_in`), and the loop resumes after the server's
//! answer. On an emulated link the exchange pays its round trips, as the login's did.
//!
//! Either leg may be compressed. Towards a compressed server the command starts a frame with
//! sequence id 0 (marked here, as the pump marks the commands it writes); the packets after it
//! follow the ids of the server's frames, and a compressed client's frames follow the
//! client's, as the legs number them anyway. The next pump finds the stream written upstream
//! shorter than the client's by what the stand-in kept from the server (see `pump::withheld`).

use std::time::Duration;

use super::auth::{AuthEnd, Framed, relay_auth};
use super::stand_in::{StandIn, Watch};
use crate::protocol::auth::greeting_scramble;
use crate::protocol::{Peer, Session};
use crate::relay::auth_key::AuthKeys;
use crate::relay::error::{Refusal, RelayError};
use crate::relay::phase_io::write_all;
use crate::relay::pump::{Legs, Observers};
use crate::relay::timers;

/// What the stand-in needs from the login, kept for the connection's `COM_CHANGE_USER`s.
pub(in crate::relay) struct ChangeUserStandIn {
    keys: AuthKeys,
    /// The greeting's scramble: the server reuses it for a change of user, and the client
    /// hides its password under it.
    scramble: Vec<u8>,
    /// The upstream, for messages.
    upstream: String,
}

impl ChangeUserStandIn {
    /// For a connection whose greeting was `greeting` (the payload).
    pub(in crate::relay) fn new(keys: AuthKeys, greeting: &[u8], upstream: String) -> ChangeUserStandIn {
        ChangeUserStandIn { keys, scramble: greeting_scramble(greeting).unwrap_or_default(), upstream }
    }
}

/// How the exchange ended.
pub(in crate::relay) enum ChangedUser {
    /// The server's OK or ERR reached the client: the connection goes on.
    Relayed,
    /// rttscope ended it (a password its key does not open, a server that stalled): the
    /// client was told why, the server is mid-exchange, and the connection ends.
    Refused(Refusal),
}

/// Relays the exchange of the `COM_CHANGE_USER` at the front of `legs.client_pending`, until
/// the server's OK or ERR, each of the server's answers `rtt` (the emulated link's) after
/// what it answers went upstream; what either side sent beyond it is left pending for the
/// loop.
pub(in crate::relay) async fn change_user(
    legs: &mut Legs,
    session: &mut Session,
    tap: &mut Observers,
    stand_in: &ChangeUserStandIn,
    rtt: Duration,
    timeout: Duration,
) -> Result<ChangedUser, RelayError> {
    let Legs { client, upstream, client_pending, upstream_pending } = legs;
    // The pump stopped with everything before the COM_CHANGE_USER written: it starts here.
    upstream.mark_next_write_command_start();
    let mut client = Framed::with_pending(client, std::mem::take(client_pending));
    let mut upstream = Framed::with_pending(upstream, std::mem::take(upstream_pending));
    let watch = Watch::StandIn(StandIn::for_change_user(stand_in.keys.clone(), stand_in.scramble.clone()));
    // A command: both legs' sequence ids start at 0, no delta.
    let auth = relay_auth(&mut client, &mut upstream, 0, rtt, Some(watch), session, tap);
    let ended = match timers::timeout(timeout, auth).await {
        Ok(ended) => ended?,
        Err(_) => AuthEnd::Refused {
            seq: session.response_seq().unwrap_or(1),
            refusal: Refusal::LoginStalled { upstream: stand_in.upstream.clone(), timeout },
        },
    };
    let changed = match ended {
        AuthEnd::LoggedIn | AuthEnd::Failed => ChangedUser::Relayed,
        AuthEnd::Refused { seq, refusal } => {
            tracing::info!("change of user refused: {refusal}");
            write_all(&mut client.io, &refusal.packet(seq, true), Peer::Client).await?;
            ChangedUser::Refused(refusal)
        }
    };
    (_, *client_pending) = client.into_parts();
    (_, *upstream_pending) = upstream.into_parts();
    // The COM_CHANGE_USER's start, noted as the session read it: marked above already.
    session.take_command_starts().for_each(drop);
    Ok(changed)
}
