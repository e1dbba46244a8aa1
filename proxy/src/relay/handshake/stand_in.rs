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

use crate::protocol::auth::{
    asks_for_full_password, auth_switch, change_user_plugin, greeting_scramble, is_key_request, public_key_packet,
    xor_scramble,
};
use crate::relay::auth_key::{AuthKey, AuthKeys};
use crate::relay::error::Refusal;

/// What rttscope does in the auth exchange besides relaying it, as the legs require.
pub(super) enum Watch {
    /// A plain client over a TLS long hop: answer its key request.
    StandIn(StandIn),
    /// A plain client over a plain long hop: refuse where its password would go in clear.
    NoClear(NoClearOnTheLongHop),
}

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
    /// The key the client was given in this login. A client keeps it for the connection: told
    /// later to send the password in full (after an auth switch), it encrypts with it at once.
    gave: Option<Arc<AuthKey>>,
    /// The client's next packet is its password, encrypted with that key.
    password_next: bool,
    /// The client's next packet is a `COM_CHANGE_USER`, which names the plugin.
    plugin_next: bool,
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
            password_next: false,
            plugin_next: false,
        }
    }

    /// For a `COM_CHANGE_USER` on a connection whose greeting gave `scramble`: the server
    /// reuses the connection's scramble, and the command names the plugin.
    pub(super) fn for_change_user(keys: AuthKeys, scramble: Vec<u8>) -> StandIn {
        StandIn { keys, plugin: String::new(), scramble, gave: None, password_next: false, plugin_next: true }
    }

    /// Follows the server's packet: an auth switch brings a plugin and a scramble; a request
    /// for the password in full, to a client that holds rttscope's key, brings it encrypted.
    pub(super) fn upstream_said(&mut self, payload: &[u8]) {
        let full = asks_for_full_password(&self.plugin, payload);
        if let Some((plugin, scramble)) = auth_switch(payload) {
            self.plugin = plugin.to_owned();
            self.scramble = scramble.to_vec();
        }
        self.password_next = full && self.gave.is_some();
    }

    /// What to do with the client's packet `payload`.
    pub(super) async fn client_said(&mut self, payload: &[u8]) -> Result<ClientPacket, Refusal> {
        if std::mem::take(&mut self.plugin_next) {
            self.plugin = change_user_plugin(payload).unwrap_or_default().to_owned();
            // A client given rttscope's key at login keeps it for the connection (mysql_async
            // does): told to send the password in full, it encrypts with it without asking.
            // One that asks is answered all the same.
            self.gave = Some(self.keys.get().await.map_err(Refusal::NoRsaKey)?);
            return Ok(ClientPacket::Relay);
        }
        if is_key_request(&self.plugin, payload) {
            return self.give_key().await.map(ClientPacket::Answer);
        }
        let key = match (&self.gave, std::mem::take(&mut self.password_next)) {
            (Some(key), true) => key,
            _ => return Ok(ClientPacket::Relay),
        };
        let Some(mut password) = key.decrypt(payload) else {
            return Err(Refusal::PasswordNotDecrypted);
        };
        xor_scramble(&mut password, &self.scramble);
        Ok(ClientPacket::Clear(password))
    }

    /// The packet that gives the client rttscope's key; its next packet is the password.
    pub(super) async fn give_key(&mut self) -> Result<Vec<u8>, Refusal> {
        let key = self.keys.get().await.map_err(Refusal::NoRsaKey)?;
        let answer = public_key_packet(key.public_pem());
        self.gave = Some(key);
        self.password_next = true;
        Ok(answer)
    }
}

/// For a client without TLS over a plain long hop, where a server that wants the password in
/// full would get it in clear across the long hop. A client on a Unix socket treats its
/// connection as secure and sends it in clear: its login is refused at the server's request,
/// before it sends anything. A TCP client should ask for the server's key and encrypt; one
/// whose library takes the connection for a secure one anyway (libmariadb told to use TLS that
/// was not offered) sends it in clear — that packet is refused instead of forwarded.
pub(super) struct NoClearOnTheLongHop {
    plugin: String,
    upstream: String,
    unix_client: bool,
    /// The server asked for the password in full: the client's next packet is a key request
    /// or the password, which must be encrypted.
    password_next: bool,
}

/// RSA ciphertexts are as long as the key's modulus: 1024 to 4096 bits, 128 bytes apiece.
const RSA_BLOCK: usize = 128;

impl NoClearOnTheLongHop {
    pub(super) fn new(plugin: Option<&str>, upstream: &str, unix_client: bool) -> NoClearOnTheLongHop {
        NoClearOnTheLongHop {
            plugin: plugin.unwrap_or_default().to_owned(),
            upstream: upstream.to_owned(),
            unix_client,
            password_next: false,
        }
    }

    /// The refusal, if the server's packet asks for the password in full (caching_sha2's
    /// "perform full authentication", or a switch to sha256_password) of a Unix-socket client.
    pub(super) fn upstream_said(&mut self, payload: &[u8]) -> Option<Refusal> {
        let full = asks_for_full_password(&self.plugin, payload);
        if let Some((plugin, _)) = auth_switch(payload) {
            self.plugin = plugin.to_owned();
        }
        self.password_next = full;
        (full && self.unix_client).then(|| Refusal::PasswordInClear { upstream: self.upstream.clone() })
    }

    /// The refusal, if the client answers the server's request for its password in full with
    /// anything but a key request or an RSA ciphertext: the password in clear.
    pub(super) fn client_said(&mut self, payload: &[u8]) -> Option<Refusal> {
        if !std::mem::take(&mut self.password_next) || is_key_request(&self.plugin, payload) {
            return None;
        }
        let encrypted = payload.len() >= RSA_BLOCK && payload.len().is_multiple_of(RSA_BLOCK);
        (!encrypted).then(|| Refusal::PasswordSentInClear { upstream: self.upstream.clone() })
    }
}

#[cfg(test)]
mod tests {
    use rsa::pkcs8::DecodePublicKey;
    use rsa::{Oaep, RsaPublicKey};

    use super::*;

    /// A greeting whose scramble is "ABCDEFGH" + "IJKLMNOPQRST" (see protocol::auth's tests).
    fn greeting() -> Vec<u8> {
        let mut p = vec![10];
        p.extend_from_slice(b"8.4.0\0");
        p.extend_from_slice(&[8, 0, 0, 0]);
        p.extend_from_slice(b"ABCDEFGH\0");
        p.extend_from_slice(&[0xff, 0xff, 0xff, 2, 0, 0xff, 0xdf, 21]);
        p.extend_from_slice(&[0; 10]);
        p.extend_from_slice(b"IJKLMNOPQRST\0caching_sha2_password\0");
        p
    }

    /// What a client does with the key it was given: password + NUL, XOR the scramble, RSA-OAEP.
    fn encrypt(answer: &[u8], password: &[u8], scramble: &[u8]) -> Vec<u8> {
        let pem = std::str::from_utf8(answer.strip_prefix(&[1]).expect("AuthMoreData")).unwrap();
        let public = RsaPublicKey::from_public_key_pem(pem).unwrap();
        let mut plain = [password, b"\0"].concat();
        xor_scramble(&mut plain, scramble);
        public.encrypt(&mut rsa::rand_core::OsRng, Oaep::new::<sha1::Sha1>(), &plain).unwrap()
    }

    async fn key_for(stand_in: &mut StandIn, request: &[u8]) -> Vec<u8> {
        match stand_in.client_said(request).await {
            Ok(ClientPacket::Answer(key)) => key,
            _ => panic!("the key request was not answered"),
        }
    }

    #[tokio::test]
    async fn a_caching_sha2_key_request_gets_a_key_and_the_password_comes_out_in_clear() {
        let mut stand_in = StandIn::new(AuthKeys::default(), &greeting(), Some("caching_sha2_password"));
        // The scramble and "perform full authentication" are relayed.
        assert!(matches!(stand_in.client_said(&[7; 32]).await, Ok(ClientPacket::Relay)));
        stand_in.upstream_said(&[1, 4]);
        let key = key_for(&mut stand_in, &[2]).await;
        let ciphertext = encrypt(&key, b"a password longer than twenty bytes", b"ABCDEFGHIJKLMNOPQRST");
        match stand_in.client_said(&ciphertext).await {
            Ok(ClientPacket::Clear(password)) => {
                assert_eq!(password.as_slice(), b"a password longer than twenty bytes\0")
            }
            _ => panic!("the password was not decrypted"),
        }
    }

    #[tokio::test]
    async fn an_auth_switch_to_sha256_brings_its_scramble_and_garbage_is_refused() {
        let mut stand_in = StandIn::new(AuthKeys::default(), &greeting(), Some("caching_sha2_password"));
        stand_in.upstream_said(b"\xfesha256_password\0abcdefghijklmnopqrst\0");
        let key = key_for(&mut stand_in, &[1]).await;
        let ciphertext = encrypt(&key, b"pw", b"abcdefghijklmnopqrst");
        assert!(
            matches!(stand_in.client_said(&ciphertext).await, Ok(ClientPacket::Clear(p)) if p.as_slice() == b"pw\0")
        );
        key_for(&mut stand_in, &[1]).await;
        assert!(matches!(stand_in.client_said(b"not a ciphertext").await, Err(Refusal::PasswordNotDecrypted)));
    }

    #[test]
    fn a_unix_client_is_refused_where_its_password_would_cross_a_plain_long_hop() {
        let mut guard = NoClearOnTheLongHop::new(Some("caching_sha2_password"), "db:3306", true);
        assert!(guard.upstream_said(&[1, 3]).is_none(), "fast authentication");
        assert!(matches!(guard.upstream_said(&[1, 4]), Some(Refusal::PasswordInClear { .. })));
        let mut guard = NoClearOnTheLongHop::new(Some("caching_sha2_password"), "db:3306", true);
        assert!(guard.upstream_said(b"\xfemysql_native_password\0abcdefghijklmnopqrst\0").is_none());
        assert!(guard.upstream_said(&[1, 4]).is_none(), "not caching_sha2 any more");
        assert!(guard.upstream_said(b"\xfesha256_password\0abcdefghijklmnopqrst\0").is_some());
    }

    #[test]
    fn a_tcp_client_sending_its_password_in_clear_over_a_plain_long_hop_is_refused() {
        let guard = || NoClearOnTheLongHop::new(Some("caching_sha2_password"), "db:3306", false);
        // Asked for the password in full, it asks for the key, then encrypts: relayed.
        let mut g = guard();
        assert!(g.upstream_said(&[1, 4]).is_none(), "a TCP client may still encrypt");
        assert!(g.client_said(&[2]).is_none(), "the key request");
        assert!(g.upstream_said(b"\x01-----BEGIN PUBLIC KEY-----").is_none());
        assert!(g.client_said(&[0x5a; 256]).is_none(), "a 2048-bit ciphertext");
        // Or sends it in clear: refused.
        let mut g = guard();
        g.upstream_said(&[1, 4]);
        assert!(matches!(g.client_said(b"secret\0"), Some(Refusal::PasswordSentInClear { .. })));
        // After a switch to sha256_password, its answer is the password.
        let mut g = guard();
        assert!(g.upstream_said(b"\xfesha256_password\0abcdefghijklmnopqrst\0").is_none());
        assert!(g.client_said(b"secret\0").is_some());
        // Fast authentication and the native plugin send no password to watch.
        let mut g = guard();
        g.upstream_said(&[1, 3]);
        assert!(g.client_said(b"anything").is_none());
        g.upstream_said(b"\xfemysql_native_password\0abcdefghijklmnopqrst\0");
        assert!(g.client_said(&[7; 20]).is_none());
    }

    #[tokio::test]
    async fn a_client_that_holds_the_key_sends_its_password_after_a_switch_without_asking() {
        let mut stand_in = StandIn::new(AuthKeys::default(), &greeting(), Some("sha256_password"));
        let key = key_for(&mut stand_in, &[1]).await;
        let first = encrypt(&key, b"pw", b"ABCDEFGHIJKLMNOPQRST");
        assert!(matches!(stand_in.client_said(&first).await, Ok(ClientPacket::Clear(_))));
        stand_in.upstream_said(b"\xfecaching_sha2_password\0abcdefghijklmnopqrst\0");
        assert!(matches!(stand_in.client_said(&[9; 32]).await, Ok(ClientPacket::Relay)), "the scramble");
        stand_in.upstream_said(&[1, 4]);
        let again = encrypt(&key, b"pw", b"abcdefghijklmnopqrst");
        assert!(matches!(stand_in.client_said(&again).await, Ok(ClientPacket::Clear(p)) if p.as_slice() == b"pw\0"));
    }

    #[tokio::test]
    async fn a_change_user_names_the_plugin_and_the_connections_scramble_hides_the_password() {
        let mut stand_in = StandIn::for_change_user(AuthKeys::default(), b"ABCDEFGHIJKLMNOPQRST".to_vec());
        let mut change_user = b"\x11u_sha2\0\x20".to_vec();
        change_user.extend_from_slice(&[7; 32]);
        change_user.extend_from_slice(b"\0\xff\0caching_sha2_password\0");
        assert!(matches!(stand_in.client_said(&change_user).await, Ok(ClientPacket::Relay)));
        stand_in.upstream_said(&[1, 4]);
        let key = key_for(&mut stand_in, &[2]).await;
        let ciphertext = encrypt(&key, b"pw", b"ABCDEFGHIJKLMNOPQRST");
        assert!(
            matches!(stand_in.client_said(&ciphertext).await, Ok(ClientPacket::Clear(p)) if p.as_slice() == b"pw\0")
        );
        // A client that kept the key from its login does not ask for it again.
        let mut stand_in = StandIn::for_change_user(AuthKeys::default(), b"ABCDEFGHIJKLMNOPQRST".to_vec());
        assert!(matches!(stand_in.client_said(&change_user).await, Ok(ClientPacket::Relay)));
        stand_in.upstream_said(&[1, 4]);
        let ciphertext = encrypt(&key, b"pw", b"ABCDEFGHIJKLMNOPQRST");
        assert!(
            matches!(stand_in.client_said(&ciphertext).await, Ok(ClientPacket::Clear(p)) if p.as_slice() == b"pw\0")
        );
    }

    #[tokio::test]
    async fn other_plugins_and_other_bytes_are_relayed() {
        let mut stand_in = StandIn::new(AuthKeys::default(), &greeting(), Some("mysql_native_password"));
        assert!(matches!(stand_in.client_said(&[2]).await, Ok(ClientPacket::Relay)));
        stand_in.upstream_said(b"\xfecaching_sha2_password\0abcdefghijklmnopqrst\0");
        assert!(matches!(stand_in.client_said(&[1]).await, Ok(ClientPacket::Relay)));
        assert!(matches!(stand_in.client_said(b"secret\0").await, Ok(ClientPacket::Relay)));
    }
}
