//! What every step of the connection phase does with the client: wait for it within a
//! limit, and tell it why it is turned away.

use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::time::Instant;

use super::{Ending, Handshake, Settings};
use crate::protocol::Peer;
use crate::relay::error::{Refusal, RelayError};
use crate::relay::phase_io::write_all;
use crate::relay::timers;

impl Settings<'_> {
    /// `step`, the client's part of the connection phase, given `limit` from `since` — or,
    /// while newcomers wait for a connection-phase slot, the contended grace. A client that
    /// stays silent that long gets the refusal this returns.
    pub(super) async fn wait_for_client<T>(
        &self,
        what: &'static str,
        since: Instant,
        limit: Duration,
        key: &'static str,
        step: impl Future<Output = Result<T, RelayError>>,
    ) -> Result<Result<T, RelayError>, Refusal> {
        let contended = async {
            match self.gate {
                Some(gate) => gate.contended(since).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            done = step => Ok(done),
            () = timers::sleep_until(since + limit) => Err(Refusal::ClientSilent { what, waited: limit, why: key }),
            () = contended => Err(Refusal::ClientSilent {
                what,
                waited: since.elapsed(),
                why: "other clients waited for its slot: limits.max_connecting",
            }),
        }
    }

    /// Why the login failed when the upstream's socket did, mid-login.
    pub(super) fn lost_during_login(&self, e: &std::io::Error) -> Refusal {
        let reason = match e.kind() {
            std::io::ErrorKind::UnexpectedEof => "end of stream".to_owned(),
            _ => e.to_string(),
        };
        Refusal::LostDuringLogin { upstream: self.upstream.clone(), reason }
    }

    /// Tells the client why it is turned away (over its TLS, if it has it), then ends.
    pub(super) async fn refuse<S: AsyncWrite + Unpin>(
        &self,
        client: &mut S,
        seq: u8,
        protocol_41: bool,
        refusal: Refusal,
    ) -> Result<Handshake, RelayError> {
        // Counted before the client hears it: whoever reads the count after the ERR sees it.
        if refusal.is_upstream() {
            self.stats.upstream_connect_errors.fetch_add(1, Ordering::Relaxed);
        }
        write_all(client, &refusal.packet(seq, protocol_41), Peer::Client).await?;
        let _ = client.shutdown().await;
        Ok(Handshake::Ended(Ending::Refused(refusal)))
    }
}
