//! rttscope run in-process for a test: a thread and runtime of its own, a
//! free port, pointed at the test server, stopped (gracefully) on drop.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::mpsc;
use std::thread::JoinHandle;

use rttscope::admin::AdminState;
use rttscope::app::Rttscope;
use rttscope::cli::admin_client::AdminClient;
use rttscope::record::Aggregates;
use rttscope::relay::RelayStats;
use rttscope_config::{AdminConfig, AdminToken, Config};
use tokio::sync::oneshot;

use crate::mariadb::TestDb;

pub struct TestProxy {
    addr: SocketAddr,
    admin: SocketAddr,
    state: Arc<AdminState>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

/// The admin token of [`test_config`]: changes through the admin API need one.
pub const TEST_ADMIN_TOKEN: &str = "rttscope-test-admin-token";

/// A config for tests: ephemeral ports, the shared test server upstream, an admin token.
pub fn test_config() -> Config {
    Config {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)).into(),
        admin: AdminConfig {
            token: Some(AdminToken::new(TEST_ADMIN_TOKEN)),
            ..AdminConfig::from(SocketAddr::from(([127, 0, 0, 1], 0)))
        },
        upstream: TestDb::shared().upstream_addr().into(),
        ..Config::default()
    }
}

/// rttscope in-process in front of `upstream` (a fake server, a dead address, a TLS or
/// compressing server of the test's own), with [`test_config`]'s ports and token, a 1 s
/// shutdown grace so dropping it is quick, and then whatever `tweak` sets.
pub fn proxy_to(upstream: SocketAddr, tweak: impl FnOnce(&mut Config)) -> TestProxy {
    let mut config = test_config();
    config.upstream = upstream.into();
    config.limits.shutdown_grace = rttscope_config::HumanDuration::from_secs(1);
    tweak(&mut config);
    TestProxy::with_config(config)
}

impl TestProxy {
    /// rttscope with its defaults, in front of the test server.
    pub fn start() -> TestProxy {
        TestProxy::with_config(test_config())
    }

    pub fn with_config(config: Config) -> TestProxy {
        let (ready_tx, ready_rx) = mpsc::channel();
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("rttscope-under-test".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .expect("runtime for the proxy under test");
                runtime.block_on(async move {
                    let rttscope = Rttscope::bind(Arc::new(config)).await.expect("rttscope binds");
                    let addrs = (
                        rttscope.mysql_addr().expect("bound"),
                        rttscope.admin_addr().expect("bound"),
                        rttscope.state(),
                    );
                    ready_tx.send(addrs).expect("test is waiting");
                    rttscope
                        .run(async {
                            let _ = stopped.await;
                        })
                        .await
                        .expect("rttscope runs");
                });
            })
            .expect("spawn proxy thread");
        let (addr, admin, state) = ready_rx.recv().expect("proxy started");
        TestProxy { addr, admin, state, stop: Some(stop), thread: Some(thread) }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn stats(&self) -> &RelayStats {
        &self.state.relay
    }

    /// The admin API's address.
    pub fn admin(&self) -> SocketAddr {
        self.admin
    }

    /// A client of the admin API that shows [`TEST_ADMIN_TOKEN`].
    pub fn admin_client(&self) -> AdminClient {
        AdminClient::new(&format!("http://{}", self.admin), Some(TEST_ADMIN_TOKEN))
    }

    /// What the admin API serves, for tests that read it directly.
    pub fn state(&self) -> &AdminState {
        &self.state
    }

    /// Polls the aggregates until `check` finds what it wants (records are
    /// applied by the collector a moment after the client saw its result).
    /// Panics with `what` after 10 s.
    pub fn wait_for<T>(&self, what: &str, check: impl Fn(&Aggregates) -> Option<T>) -> T {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            self.state.catch_up.now();
            if let Some(found) = check(&self.state.recording.lock().expect("recording lock").cumulative()) {
                return found;
            }
            assert!(std::time::Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// Shuts down as on SIGTERM and waits until the proxy has stopped.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for TestProxy {
    fn drop(&mut self) {
        self.shutdown();
    }
}
