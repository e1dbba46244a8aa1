//! rttscope standing in for the server's RSA key, for a plain client over a TLS long hop.
//!
//! Told to send its password in full, a client on a plain leg asks for the server's
//! public key (caching_sha2_password's 0x02, sha256_password's 0x01) to encrypt it. Relayed
//! over TLS, the server would read that byte as a wrong password, so rttscope answers with
//! its own key instead, decrypts the password the client sends, and sends it on in clear —
//! over TLS, as the server expects from a client on a secure connection. The password lives
//! only in a buffer that is wiped as soon as it has been written.

use std::sync::Arc;

use zeroize::Zeroizing;

use crate::protocol::auth::{auth_switch, greeting_scramble, is_key_request, public_key_packet, xor_scramble};
use crate::relay::auth_key::{AuthKey, AuthKeys};
use crate::relay::error::Refusal;

/// What became of a client's auth packet.
pub(super) enum ClientPacket {
    /// Relay it as it is.
    Relay,
    /// Answer the client with this (rttscope's key) and send nothing upstream.
    Answer(Vec<u8>),
    /// Send this (the NUL-terminated password) upstream in its place.
    Clear(Zeroizing<Vec<u8>>),
}

/// The exchange as far as the stand-in follows it.
pub(super) struct StandIn {
    keys: AuthKeys,
    /// The plugin in use: the client's first, then the one an auth switch names.
    plugin: String,
    /// The scramble that plugin was given, which the client XORs its password with.
    scramble: Vec<u8>,
    /// The key the client was given: its next packet is the password, encrypted with it.
    gave: Option<Arc<AuthKey>>,
}

impl StandIn {
    /// For a login whose greeting was `greeting` (the payload) and whose client answered
    /// with `plugin`.
    pub(super) fn new(keys: AuthKeys, greeting: &[u8], plugin: Option<&str>) -> StandIn {
        StandIn {
            keys,
            plugin: plugin.unwrap_or_default().to_owned(),
            scramble: greeting_scramble(greeting).unwrap_or_default(),
            gave: None,
        }
    }

    /// Follows the server's packet: an auth switch brings a plugin and a scramble.
    pub(super) fn upstream_said(&mut self, payload: &[u8]) {
        if let Some((plugin, scramble)) = auth_switch(payload) {
            self.plugin = plugin.to_owned();
            self.scramble = scramble.to_vec();
        }
    }

    /// What to do with the client's packet `payload`.
    pub(super) async fn client_said(&mut self, payload: &[u8]) -> Result<ClientPacket, Refusal> {
        if let Some(key) = self.gave.take() {
            let Some(mut password) = key.decrypt(payload) else {
                return Err(Refusal::PasswordNotDecrypted);
            };
            xor_scramble(&mut password, &self.scramble);
            return Ok(ClientPacket::Clear(password));
        }
        if !is_key_request(&self.plugin, payload) {
            return Ok(ClientPacket::Relay);
        }
        let key = self.keys.get().await.map_err(Refusal::NoRsaKey)?;
        let answer = public_key_packet(key.public_pem());
        self.gave = Some(key);
        Ok(ClientPacket::Answer(answer))
    }
}
