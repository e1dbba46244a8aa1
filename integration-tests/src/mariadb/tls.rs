//! A second private MariaDB that speaks TLS, for the tests of TLS on each leg: certificates
//! made with rcgen and written to the server's temp dir ([`TestCerts`]), and, besides the
//! usual fixtures, four accounts:
//!
//! | account       | password     | authentication          | requires |
//! |---------------|--------------|-------------------------|----------|
//! | `tls_native`  | `tls-native` | `mysql_native_password` | SSL      |
//! | `tls_ed25519` | `tls-ed`     | `ed25519`               | SSL      |
//! | `tls_x509`    | `tls-x509`   | `mysql_native_password` | X509     |
//! | `tls_plain`   | `tls-plain`  | `mysql_native_password` | nothing  |
//!
//! each as `@'%'` and `@'localhost'`, with ALL on [`DB`]. [`TlsDb::shared`] starts it once per
//! test process; the plain server of [`TestDb::shared`] is a different one and stays as it is.
//! Always a private server: `RTTSCOPE_TEST_MYSQL_URL` names a server whose TLS is not ours.

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};

use super::*;

pub const TLS_NATIVE: Account = account("tls_native", "tls-native");
pub const TLS_ED25519: Account = account("tls_ed25519", "tls-ed");
/// `REQUIRE X509`: the client must present a certificate the test CA signed
/// ([`TestCerts::client_cert`]).
pub const TLS_X509: Account = account("tls_x509", "tls-x509");
/// No requirement: TLS or not, as the client likes.
pub const TLS_PLAIN: Account = account("tls_plain", "tls-plain");

/// Certificates for a test, PEM files in one directory.
#[derive(Debug, Clone)]
pub struct TestCerts {
    /// The test CA, which signed the server's and the client's certificates.
    pub ca: PathBuf,
    /// The server's certificate, for `localhost` and `127.0.0.1`, and its key.
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    /// A client certificate the test CA signed (for [`TLS_X509`]), and its key.
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
    /// A CA that signed nothing here: trusting it alone must fail verification.
    pub other_ca: PathBuf,
}

impl TestCerts {
    /// Generates a fresh set into `dir`.
    pub fn generate(dir: &Path) -> Result<TestCerts> {
        let write = |name: &str, pem: &str| -> Result<PathBuf> {
            let path = dir.join(name);
            fs::write(&path, pem).with_context(|| format!("writing {}", path.display()))?;
            Ok(path)
        };
        let (ca, ca_pem) = test_ca("rttscope test CA")?;
        let (_, other_pem) = test_ca("rttscope test CA that signed nothing")?;

        let names = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
        let (server, server_key) =
            leaf(CertificateParams::new(names)?, "localhost", ExtendedKeyUsagePurpose::ServerAuth, &ca)?;
        let (client, client_key) =
            leaf(CertificateParams::new(Vec::<String>::new())?, "rttscope", ExtendedKeyUsagePurpose::ClientAuth, &ca)?;
        Ok(TestCerts {
            ca: write("ca.pem", &ca_pem)?,
            server_cert: write("server-cert.pem", &server)?,
            server_key: write("server-key.pem", &server_key)?,
            client_cert: write("client-cert.pem", &client)?,
            client_key: write("client-key.pem", &client_key)?,
            other_ca: write("other-ca.pem", &other_pem)?,
        })
    }
}

fn test_ca(name: &str) -> Result<(CertifiedIssuer<'static, KeyPair>, String)> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params.distinguished_name.push(DnType::CommonName, name);
    let ca = CertifiedIssuer::self_signed(params, KeyPair::generate()?)?;
    let pem = ca.pem();
    Ok((ca, pem))
}

/// A certificate `ca` signed, and its key, as PEM.
fn leaf(
    mut params: CertificateParams,
    common_name: &str,
    usage: ExtendedKeyUsagePurpose,
    ca: &CertifiedIssuer<'static, KeyPair>,
) -> Result<(String, String)> {
    params.distinguished_name.push(DnType::CommonName, common_name);
    params.extended_key_usages = vec![usage];
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, ca)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// The TLS-speaking private server, with its certificates.
pub struct TlsDb {
    db: TestDb,
    certs: TestCerts,
}

impl std::ops::Deref for TlsDb {
    type Target = TestDb;
    fn deref(&self) -> &TestDb {
        &self.db
    }
}

static TLS_SHARED: OnceLock<Result<TlsDb, String>> = OnceLock::new();

impl TlsDb {
    /// The process-wide TLS server, started on first use. Blocking; safe from any thread or
    /// runtime.
    pub fn shared() -> &'static TlsDb {
        match TLS_SHARED.get_or_init(|| TlsDb::start().map_err(|e| format!("{e:#}"))) {
            Ok(db) => db,
            Err(e) => panic!("TLS test database unavailable: {e}"),
        }
    }

    /// The certificates the server uses (and the client certificate and other CA).
    pub fn certs(&self) -> &TestCerts {
        &self.certs
    }

    fn start() -> Result<TlsDb> {
        let mut certs = None;
        let server = PrivateServer::start_with(|dir| {
            let generated = TestCerts::generate(dir)?;
            let options = vec![
                format!("--ssl-ca={}", generated.ca.display()),
                format!("--ssl-cert={}", generated.server_cert.display()),
                format!("--ssl-key={}", generated.server_key.display()),
            ];
            certs = Some(generated);
            Ok(options)
        })?;
        let certs = certs.ok_or_else(|| anyhow!("certificates were not generated"))?;
        let root = || -> Opts {
            OptsBuilder::default().socket(Some(server.socket.to_string_lossy())).user(Some("root")).into()
        };
        let facts = match create_fixtures(root()).and_then(|facts| {
            create_tls_accounts(root())?;
            Ok(facts)
        }) {
            Ok(facts) => facts,
            Err(e) => {
                server.kill();
                return Err(e.context(format!("creating fixtures\n{}", server.logs())));
            }
        };
        // SAFETY: registers a plain extern "C" fn that never unwinds.
        #[allow(unsafe_code)]
        unsafe {
            libc::atexit(stop_tls_server_at_exit)
        };
        let addr = SocketAddr::from(([127, 0, 0, 1], server.port));
        Ok(TlsDb { db: TestDb { addr, facts, private: Some(server) }, certs })
    }
}

extern "C" fn stop_tls_server_at_exit() {
    if let Some(Ok(TlsDb { db: TestDb { private: Some(server), .. }, .. })) = TLS_SHARED.get() {
        server.stop();
    }
}

fn create_tls_accounts(root: Opts) -> Result<()> {
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        rt.block_on(async move {
            let mut conn = mysql_async::Conn::new(root).await.context("connecting to create TLS accounts")?;
            let via = |plugin: &str, a: Account| format!("IDENTIFIED VIA {plugin} USING PASSWORD('{}')", a.password);
            let accounts = [
                (TLS_NATIVE, via("mysql_native_password", TLS_NATIVE), "REQUIRE SSL"),
                (TLS_ED25519, via("ed25519", TLS_ED25519), "REQUIRE SSL"),
                (TLS_X509, via("mysql_native_password", TLS_X509), "REQUIRE X509"),
                (TLS_PLAIN, via("mysql_native_password", TLS_PLAIN), "REQUIRE NONE"),
            ];
            for (account, identified, require) in accounts {
                for host in ["%", "localhost"] {
                    let who = format!("'{}'@'{host}'", account.user);
                    for sql in [
                        format!("CREATE USER {who} {identified} {require}"),
                        format!("GRANT ALL PRIVILEGES ON {DB}.* TO {who}"),
                    ] {
                        conn.query_drop(&sql).await.with_context(|| sql.clone())?;
                    }
                }
            }
            conn.disconnect().await?;
            Ok(())
        })
    })
    .join()
    .map_err(|_| anyhow!("the TLS accounts thread panicked"))?
}
