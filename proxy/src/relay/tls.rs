//! TLS on both legs, with rustls. Towards clients rttscope is the TLS server: with the
//! configured certificate, or with a CA and a `localhost` certificate it generates at start
//! (fingerprints logged, the CA served at the admin API's `/tls/ca.pem` for clients that
//! verify). Towards the server it is the TLS client, in the modes MySQL clients know from
//! `--ssl-mode`: `preferred`/`required` encrypt without checking the certificate (as MySQL
//! clients do), `verify-ca` checks the chain, `verify-identity` the name too.
//!
//! Set up once at start; a bad file or key is an error that names the config key.

use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;

use rttscope_config::{ListenTls, ListenTlsMode, UpstreamConfig, UpstreamTlsMode};
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_rustls::{TlsAcceptor, TlsConnector};

pub use crate::live::TlsInfo;

/// Why TLS could not be set up at start.
#[derive(Debug, thiserror::Error)]
pub enum TlsSetupError {
    /// A certificate or key file could not be read or parsed.
    #[error("{key}: {path}: {reason}")]
    File {
        /// The config key that named the file.
        key: &'static str,
        /// The file.
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// rustls refused the certificates or settings.
    #[error("{key}: {reason}")]
    Rejected {
        /// The config key at fault.
        key: &'static str,
        /// What rustls said.
        reason: String,
    },
}

impl TlsInfo {
    pub(crate) fn of(state: &rustls::CommonState) -> TlsInfo {
        let version = match state.protocol_version() {
            Some(rustls::ProtocolVersion::TLSv1_3) => "TLSv1.3".to_owned(),
            Some(rustls::ProtocolVersion::TLSv1_2) => "TLSv1.2".to_owned(),
            Some(other) => format!("{other:?}"),
            None => "unknown".to_owned(),
        };
        let cipher = state
            .negotiated_cipher_suite()
            .and_then(|s| s.suite().as_str())
            .map_or_else(|| "unknown".to_owned(), iana_name);
        TlsInfo { version, cipher }
    }
}

/// A suite's IANA name. rustls names TLS 1.3's suites `TLS13_…`, which is no standard's
/// name; IANA's (and the server's `Ssl_cipher`) is `TLS_…`. TLS 1.2 names are IANA's already.
fn iana_name(rustls_name: &str) -> String {
    match rustls_name.strip_prefix("TLS13_") {
        Some(rest) => format!("TLS_{rest}"),
        None => rustls_name.to_owned(),
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// rttscope's TLS server side, towards clients.
pub struct ClientSideTls {
    /// Accepts TLS from a client that sent an SSLRequest.
    pub acceptor: TlsAcceptor,
    /// Whether clients must use TLS (`listen.tls.mode: required`).
    pub required: bool,
    /// The generated CA (PEM), when rttscope made its own certificate.
    pub generated_ca: Option<String>,
    /// Where a client that verifies certificates finds the CA to trust, for log lines.
    trust: String,
}

impl ClientSideTls {
    /// From `listen.tls`; `None` when it is `off`.
    pub fn from_config(config: &ListenTls) -> Result<Option<ClientSideTls>, TlsSetupError> {
        if config.mode == ListenTlsMode::Off {
            return Ok(None);
        }
        let (chain, key, generated_ca) = match (&config.cert, &config.key) {
            (Some(cert), Some(key)) => (read_certs("listen.tls.cert", cert)?, read_key("listen.tls.key", key)?, None),
            _ => {
                let generated = generate()?;
                (vec![generated.leaf], generated.key, Some(generated.ca_pem))
            }
        };
        let fingerprint = sha256_fingerprint(&chain[0]);
        let server = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .and_then(|b| b.with_no_client_auth().with_single_cert(chain, key))
            .map_err(|e| TlsSetupError::Rejected { key: "listen.tls", reason: e.to_string() })?;
        let trust = match (&generated_ca, &config.cert) {
            (Some(ca), _) => format!(
                "the CA rttscope generated, at the admin API's /tls/ca.pem (SHA-256 {})",
                pem_fingerprint(ca).unwrap_or_default()
            ),
            (None, Some(cert)) => format!("the CA that issued listen.tls.cert ({})", cert.display()),
            (None, None) => "the CA that issued listen.tls.cert".to_owned(),
        };
        match &generated_ca {
            Some(ca) => tracing::info!(
                certificate.sha256 = %fingerprint,
                "TLS for clients: generated a CA and a certificate for localhost; the CA is at the admin API's /tls/ca.pem (CA SHA-256 {})",
                pem_fingerprint(ca).unwrap_or_default()
            ),
            None => tracing::info!(certificate.sha256 = %fingerprint, "TLS for clients: using listen.tls.cert"),
        }
        Ok(Some(ClientSideTls {
            acceptor: TlsAcceptor::from(Arc::new(server)),
            required: config.mode == ListenTlsMode::Required,
            generated_ca,
            trust,
        }))
    }

    /// Why a client that finished its TLS handshake hung up before its login, as the log
    /// says it. Clients that verify the certificate after the handshake (libmariadb: the
    /// `mariadb` CLI, Connector/C and what is built on it) hang up just so when they do not
    /// trust it.
    pub(crate) fn explain_hangup_after_tls(&self) -> String {
        format!(
            "probably it does not trust rttscope's certificate (a client that verifies it hangs up so); {}",
            self.give_ca()
        )
    }

    /// Which CA to give a client that verifies certificates.
    fn give_ca(&self) -> String {
        format!("give it {} as its CA (--ssl-ca, sslrootcert, trustStore...)", self.trust)
    }

    /// Why a client's TLS handshake failed, as the log says it: when the client refused
    /// rttscope's certificate (an alert saying so, or a close in the middle of the
    /// handshake, as some clients do), which CA to give it. Such a client shows only its
    /// own 2026 error, with no word of rttscope.
    pub(crate) fn explain_failure(&self, e: &std::io::Error) -> String {
        use rustls::AlertDescription as Alert;
        let refused_certificate = match e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>()) {
            Some(rustls::Error::AlertReceived(alert)) => matches!(
                alert,
                Alert::UnknownCA | Alert::BadCertificate | Alert::CertificateUnknown | Alert::UnsupportedCertificate
            ),
            Some(_) => false,
            None => matches!(e.kind(), std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::ConnectionReset),
        };
        match refused_certificate {
            true => format!("{e}: the client does not trust rttscope's certificate; {}", self.give_ca()),
            false => e.to_string(),
        }
    }
}

/// rttscope's TLS client side, towards the server.
pub struct UpstreamSideTls {
    /// Starts TLS over a connection to the server.
    pub connector: TlsConnector,
    /// The name sent as SNI (and checked in `verify-identity`).
    pub server_name: ServerName<'static>,
    /// How strictly (never `Disabled`).
    pub mode: UpstreamTlsMode,
}

impl UpstreamSideTls {
    /// From `upstream`; `None` when `upstream.tls.mode` is `disabled`.
    pub fn from_config(upstream: &UpstreamConfig) -> Result<Option<UpstreamSideTls>, TlsSetupError> {
        let config = &upstream.tls;
        if config.mode == UpstreamTlsMode::Disabled {
            return Ok(None);
        }
        let name = config.server_name.clone().unwrap_or_else(|| upstream.address.host().to_owned());
        let server_name = match name.parse::<IpAddr>() {
            Ok(ip) => ServerName::IpAddress(ip.into()),
            Err(_) => ServerName::try_from(name.clone()).map_err(|e| TlsSetupError::Rejected {
                key: "upstream.tls.server_name",
                reason: format!("{name}: {e}"),
            })?,
        };
        let provider = provider();
        let verifier: Arc<dyn ServerCertVerifier> = if config.mode.verifies() {
            let roots = match &config.ca {
                Some(ca) => {
                    let mut roots = RootCertStore::empty();
                    for cert in read_certs("upstream.tls.ca", ca)? {
                        roots.add(cert).map_err(|e| TlsSetupError::File {
                            key: "upstream.tls.ca",
                            path: ca.display().to_string(),
                            reason: e.to_string(),
                        })?;
                    }
                    roots
                }
                None => system_roots(),
            };
            let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                .build()
                .map_err(|e| TlsSetupError::Rejected { key: "upstream.tls.ca", reason: e.to_string() })?;
            if config.mode == UpstreamTlsMode::VerifyCa {
                Arc::new(Lenient { chain: Some(webpki), algorithms: provider.signature_verification_algorithms })
            } else {
                webpki
            }
        } else {
            Arc::new(Lenient { chain: None, algorithms: provider.signature_verification_algorithms })
        };
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsSetupError::Rejected { key: "upstream.tls", reason: e.to_string() })?
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        let client = match (&config.cert, &config.key) {
            (Some(cert), Some(key)) => builder
                .with_client_auth_cert(read_certs("upstream.tls.cert", cert)?, read_key("upstream.tls.key", key)?)
                .map_err(|e| TlsSetupError::Rejected { key: "upstream.tls.cert", reason: e.to_string() })?,
            _ => builder.with_no_client_auth(),
        };
        Ok(Some(UpstreamSideTls { connector: TlsConnector::from(Arc::new(client)), server_name, mode: config.mode }))
    }
}

/// The system's trust anchors; those that fail to load are skipped with a warning.
fn system_roots() -> RootCertStore {
    let mut roots = RootCertStore::empty();
    let found = rustls_native_certs::load_native_certs();
    for error in &found.errors {
        tracing::warn!(%error, "cannot load some of the system's CA certificates");
    }
    let (added, ignored) = roots.add_parsable_certificates(found.certs);
    tracing::debug!(added, ignored, "system CA certificates for upstream.tls");
    roots
}

/// The modes that check less than a full verification: `preferred` and `required` (no
/// chain: encrypted, the certificate not checked, as MySQL clients do in these modes) and
/// `verify-ca` (the chain must lead to a trusted CA; the name is not checked). The
/// handshake's signatures are always verified, so the session keys belong to whoever holds
/// the presented certificate's key.
#[derive(Debug)]
struct Lenient {
    /// The CA check for `verify-ca`; `None` for no check.
    chain: Option<Arc<WebPkiServerVerifier>>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for Lenient {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(chain) = &self.chain else { return Ok(ServerCertVerified::assertion()) };
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

fn read_certs(key: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsSetupError> {
    let bad = |reason: String| TlsSetupError::File { key, path: path.display().to_string(), reason };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| bad(e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(e.to_string()))?;
    if certs.is_empty() {
        return Err(bad("no PEM certificate in it".to_owned()));
    }
    Ok(certs)
}

fn read_key(key: &'static str, path: &Path) -> Result<PrivateKeyDer<'static>, TlsSetupError> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| TlsSetupError::File {
        key,
        path: path.display().to_string(),
        reason: format!("no usable PEM private key: {e}"),
    })
}

/// A CA and a certificate it signed for `localhost` (and the loopback addresses).
struct Generated {
    ca_pem: String,
    leaf: CertificateDer<'static>,
    key: PrivateKeyDer<'static>,
}

fn generate() -> Result<Generated, TlsSetupError> {
    let failed = |e: rcgen::Error| TlsSetupError::Rejected { key: "listen.tls", reason: format!("generating: {e}") };
    let ca_key = rcgen::KeyPair::generate().map_err(failed)?;
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).map_err(failed)?;
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign, rcgen::KeyUsagePurpose::CrlSign];
    ca_params.distinguished_name.push(rcgen::DnType::CommonName, "rttscope generated CA");
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).map_err(failed)?;
    let names = vec!["localhost".to_owned(), "127.0.0.1".to_owned(), "::1".to_owned()];
    let mut leaf_params = rcgen::CertificateParams::new(names).map_err(failed)?;
    leaf_params.distinguished_name.push(rcgen::DnType::CommonName, "localhost");
    let leaf_key = rcgen::KeyPair::generate().map_err(failed)?;
    let leaf = leaf_params.signed_by(&leaf_key, &ca).map_err(failed)?;
    Ok(Generated {
        ca_pem: ca.pem(),
        leaf: leaf.der().clone(),
        key: PrivateKeyDer::Pkcs8(leaf_key.serialize_der().into()),
    })
}

/// `AB:CD:...`, the form `openssl x509 -fingerprint -sha256` prints.
fn sha256_fingerprint(der: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, der);
    digest.as_ref().iter().map(|b| format!("{b:02X}")).collect::<Vec<_>>().join(":")
}

fn pem_fingerprint(pem: &str) -> Option<String> {
    CertificateDer::from_pem_slice(pem.as_bytes()).ok().map(|der| sha256_fingerprint(&der))
}

#[cfg(test)]
mod tests {
    #[test]
    fn suites_carry_their_iana_names() {
        assert_eq!(super::iana_name("TLS13_AES_256_GCM_SHA384"), "TLS_AES_256_GCM_SHA384");
        let tls12 = "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256";
        assert_eq!(super::iana_name(tls12), tls12);
    }

    use super::*;

    #[test]
    fn a_generated_certificate_chains_to_its_ca() {
        let generated = generate().unwrap();
        let mut roots = RootCertStore::empty();
        roots.add(CertificateDer::from_pem_slice(generated.ca_pem.as_bytes()).unwrap()).unwrap();
        let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider()).build().unwrap();
        let name = ServerName::try_from("localhost").unwrap();
        verifier.verify_server_cert(&generated.leaf, &[], &name, &[], UnixTime::now()).expect("valid for localhost");
        let other = ServerName::try_from("db.example.com").unwrap();
        assert!(verifier.verify_server_cert(&generated.leaf, &[], &other, &[], UnixTime::now()).is_err());
        // verify-ca accepts it under any name.
        let ignore = Lenient { chain: Some(verifier), algorithms: provider().signature_verification_algorithms };
        ignore.verify_server_cert(&generated.leaf, &[], &other, &[], UnixTime::now()).expect("name not checked");
        assert_eq!(sha256_fingerprint(&generated.leaf).len(), 32 * 3 - 1);
    }
}
