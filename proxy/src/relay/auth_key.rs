//! rttscope's RSA key for logins of plain clients over a TLS long hop: such a client, told
//! to send its password in full (caching_sha2_password, sha256_password), asks for the
//! server's public key; rttscope answers with this one, decrypts what the client sends and
//! passes the password on over TLS — as MySQL Router and ProxySQL do.
//!
//! The key is `listen.rsa_key` (PEM, PKCS#1 or PKCS#8), or one generated once per process
//! on a blocking thread (generation takes a while) and shared by every connection.

use std::path::Path;
use std::sync::Arc;

use rsa::pkcs1::DecodeRsaPrivateKey;
use rsa::pkcs8::{DecodePrivateKey, EncodePublicKey, LineEnding};
use rsa::{Oaep, RsaPrivateKey};
use tokio::sync::OnceCell;
use zeroize::Zeroizing;

use super::tls::TlsSetupError;

/// MySQL's own key size (`caching_sha2_password_auto_generate_rsa_keys`).
const GENERATED_BITS: usize = 2048;

/// An RSA key pair: the public half as clients read it, the private half to decrypt.
pub struct AuthKey {
    private: RsaPrivateKey,
    /// SubjectPublicKeyInfo PEM (`BEGIN PUBLIC KEY`), as MySQL sends its own.
    public_pem: Vec<u8>,
}

impl AuthKey {
    fn new(private: RsaPrivateKey) -> Result<AuthKey, String> {
        let public_pem = private.to_public_key().to_public_key_pem(LineEnding::LF).map_err(|e| e.to_string())?;
        Ok(AuthKey { private, public_pem: public_pem.into_bytes() })
    }

    /// The key in `path` (`listen.rsa_key`).
    pub fn load(path: &Path) -> Result<AuthKey, TlsSetupError> {
        let bad =
            |reason: String| TlsSetupError::File { key: "listen.rsa_key", path: path.display().to_string(), reason };
        let pem = Zeroizing::new(std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?);
        let private = RsaPrivateKey::from_pkcs1_pem(&pem)
            .or_else(|_| RsaPrivateKey::from_pkcs8_pem(&pem))
            .map_err(|e| bad(format!("no RSA private key in PEM (PKCS#1 or PKCS#8): {e}")))?;
        AuthKey::new(private).map_err(bad)
    }

    fn generate() -> Result<AuthKey, String> {
        let private = RsaPrivateKey::new(&mut rsa::rand_core::OsRng, GENERATED_BITS).map_err(|e| e.to_string())?;
        AuthKey::new(private)
    }

    /// The public key, PEM.
    pub fn public_pem(&self) -> &[u8] {
        &self.public_pem
    }

    /// The plaintext of an RSA-OAEP (SHA-1, MGF1-SHA-1) `ciphertext`, as the SHA-256
    /// plugins' clients encrypt; `None` if it is not one this key can open.
    pub fn decrypt(&self, ciphertext: &[u8]) -> Option<Zeroizing<Vec<u8>>> {
        self.private.decrypt(Oaep::new::<sha1::Sha1>(), ciphertext).ok().map(Zeroizing::new)
    }
}

/// The process's generated key, made once whichever proxy asks first.
static GENERATED: OnceCell<Arc<AuthKey>> = OnceCell::const_new();

/// Where a connection gets the key: the configured one, or the shared generated one.
#[derive(Clone, Default)]
pub struct AuthKeys {
    configured: Option<Arc<AuthKey>>,
}

impl AuthKeys {
    /// From `listen.rsa_key`, or generating on first use.
    pub fn from_config(path: Option<&Path>) -> Result<AuthKeys, TlsSetupError> {
        let configured = path.map(AuthKey::load).transpose()?.map(Arc::new);
        Ok(AuthKeys { configured })
    }

    /// Starts generating the key in the background, so the first login that needs it does
    /// not wait the whole generation.
    pub fn warm_up(&self) {
        if self.configured.is_none() && GENERATED.get().is_none() {
            tokio::spawn(async {
                let _ = generated().await;
            });
        }
    }

    /// The key.
    pub async fn get(&self) -> Result<Arc<AuthKey>, String> {
        match &self.configured {
            Some(key) => Ok(Arc::clone(key)),
            None => generated().await,
        }
    }
}

async fn generated() -> Result<Arc<AuthKey>, String> {
    GENERATED
        .get_or_try_init(|| async {
            let key = tokio::task::spawn_blocking(AuthKey::generate).await.map_err(|e| e.to_string())??;
            tracing::info!("generated an RSA key for plain clients' full logins over the TLS long hop");
            Ok(Arc::new(key))
        })
        .await
        .cloned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rsa::RsaPublicKey;
    use rsa::pkcs8::DecodePublicKey;

    #[tokio::test]
    async fn what_a_client_encrypts_with_the_public_pem_decrypts() {
        let key = AuthKeys::default().get().await.unwrap();
        let pem = std::str::from_utf8(key.public_pem()).unwrap();
        assert!(pem.starts_with("-----BEGIN PUBLIC KEY-----\n"), "{pem}");
        let public = RsaPublicKey::from_public_key_pem(pem).unwrap();
        let ciphertext = public.encrypt(&mut rsa::rand_core::OsRng, Oaep::new::<sha1::Sha1>(), b"secret\0").unwrap();
        assert_eq!(key.decrypt(&ciphertext).unwrap().as_slice(), b"secret\0");
        assert!(key.decrypt(&ciphertext[1..]).is_none());
        assert!(key.decrypt(b"\x02").is_none());
    }

    #[test]
    fn a_configured_key_loads_from_pkcs1_and_pkcs8_pem_and_garbage_is_named() {
        use rsa::pkcs1::EncodeRsaPrivateKey;
        use rsa::pkcs8::EncodePrivateKey;
        let private = RsaPrivateKey::new(&mut rsa::rand_core::OsRng, 1024).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let pkcs1 = dir.path().join("pkcs1.pem");
        std::fs::write(&pkcs1, private.to_pkcs1_pem(LineEnding::LF).unwrap().as_bytes()).unwrap();
        let pkcs8 = dir.path().join("pkcs8.pem");
        std::fs::write(&pkcs8, private.to_pkcs8_pem(LineEnding::LF).unwrap().as_bytes()).unwrap();
        for path in [pkcs1, pkcs8] {
            assert_eq!(AuthKey::load(&path).unwrap().private, private);
        }
        let garbage = dir.path().join("garbage.pem");
        std::fs::write(&garbage, "not a key").unwrap();
        let err = AuthKey::load(&garbage).err().unwrap().to_string();
        assert!(err.starts_with("listen.rsa_key: "), "{err}");
    }
}
