//! The pump on paused time: idle and query timeouts, drain and backpressure, checked in
//! virtual seconds. The legs are Unix socket pairs: whatever one end writes is already in
//! the kernel when the runtime looks, so auto-advancing time never overtakes a byte.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::{Ended, Legs, Observers, PumpSettings, pump};
use crate::link::{LinkSink, Probe, ProbeSettings};
use crate::live::LiveConnection;
use crate::protocol::constants::capability::{CLIENT_DEPRECATE_EOF, CLIENT_PROTOCOL_41};
use crate::protocol::test_util::{column_def, ok, ok_eof, packet, query, text_row};
use crate::protocol::{Identity, Session};
use crate::record::micros;
use crate::relay::activity::Activity;
use crate::relay::drain::Drain;
use crate::relay::idle_poll::{self, Awaited};
use crate::relay::leg::{Leg, Transport};
use crate::relay::pipe::BufferBudget;
use crate::relay::{RelayError, RelayStats};

const CAPS: u64 = CLIENT_PROTOCOL_41 | CLIENT_DEPRECATE_EOF;
/// SERVER_STATUS_AUTOCOMMIT: the status an idle session's OK carries.
const AUTOCOMMIT: u16 = 0x0002;
/// Each direction's buffer; small, so that backpressure shows with little data.
const BUFFER: usize = 16 << 10;

/// A pump between an application's socket and a fake server's, logged in.
struct Rig {
    app: UnixStream,
    server: UnixStream,
    drain: Arc<Drain>,
    budget: Arc<BufferBudget>,
    pump: JoinHandle<Result<Ended, RelayError>>,
}

impl Rig {
    /// Starts the pump right after the handshake response went upstream, then lets the
    /// server's OK end the login, as the relay's handshake would have left it.
    async fn start(idle_timeout: Option<Duration>, query_timeout: Option<Duration>) -> Rig {
        let (app, client_side) = UnixStream::pair().unwrap();
        let (upstream_side, server) = UnixStream::pair().unwrap();
        let drain = Arc::new(Drain::default());
        let watch = drain.watch(1);
        // Room to grow, which only an emulated link may use: the pipes must not.
        let budget = Arc::new(BufferBudget::new(64 << 20));
        let settings = PumpSettings {
            buffer_size: BUFFER,
            idle_timeout,
            query_timeout,
            budget: budget.clone(),
            local: None,
            kills: None,
            change_user_stand_in: false,
        };
        let accepted = Instant::now();
        let live = Arc::new(LiveConnection::new(1, "test".into(), 0));
        let (sink, _) = LinkSink::channel(1);
        let probe_settings = ProbeSettings { large_transfer: u64::MAX, sample_interval_us: 1000, rmem_max: None };
        let probe = Probe::new(1, live.clone(), sink, accepted, probe_settings);
        let mut observers = Observers {
            activity: Activity::new(live, Arc::new(RelayStats::default()), accepted),
            probe,
            recorder: None,
        };
        // The handshake response was packet 1; the server's OK is packet 2.
        let mut session = Session::after_handshake(Identity::default(), CAPS, 80, 1, 60, 1024, &mut observers);
        let pump = tokio::spawn(async move {
            let mut legs = Legs {
                client: Leg::new(Transport::Unix(client_side)),
                upstream: Leg::new(Transport::Unix(upstream_side)),
                client_pending: Vec::new(),
                upstream_pending: Vec::new(),
            };
            pump(&mut legs, &mut session, &mut observers, &settings, None, &watch).await
        });
        let mut rig = Rig { app, server, drain, budget, pump };
        rig.server.write_all(&ok(2, 0, AUTOCOMMIT)).await.unwrap();
        assert_eq!(rig.app_reads(11).await, ok(2, 0, AUTOCOMMIT), "the login's OK is relayed");
        rig
    }

    async fn app_reads(&mut self, n: usize) -> Vec<u8> {
        let mut got = vec![0; n];
        self.app.read_exact(&mut got).await.unwrap();
        got
    }

    async fn server_reads(&mut self, n: usize) -> Vec<u8> {
        let mut got = vec![0; n];
        self.server.read_exact(&mut got).await.unwrap();
        got
    }

    /// A `SELECT` sent by the application and read by the server: a command in flight.
    async fn command_in_flight(&mut self) {
        let select = query("SELECT 1");
        self.app.write_all(&select).await.unwrap();
        assert_eq!(self.server_reads(select.len()).await, select);
    }

    /// The server's answer to [`Rig::command_in_flight`], read by the application.
    async fn answer(&mut self) {
        let mut response = packet(1, &[1]);
        response.extend(column_def(2, "1"));
        response.extend(text_row(3, &["1"]));
        response.extend(ok_eof(4, AUTOCOMMIT));
        self.server.write_all(&response).await.unwrap();
        assert_eq!(self.app_reads(response.len()).await, response);
    }

    /// How the pump ended, within `limit` of virtual time.
    async fn ended_within(self, limit: Duration) -> Ended {
        tokio::time::timeout(limit, self.pump).await.expect("the pump did not end").unwrap().unwrap()
    }

    /// Whether the pump is still forwarding after `wait` of virtual time.
    async fn still_running_after(&mut self, wait: Duration) -> bool {
        tokio::time::sleep(wait).await;
        !self.pump.is_finished()
    }
}

/// What the pump told the thread's poller it waits for as it went idle: the poller polls
/// for an answer's first byte only for a client sending back to back, and for the rest of
/// an answer under way whatever the client's pace (`idle_poll`'s module doc).
#[tokio::test(start_paused = true)]
async fn the_pump_tells_the_poller_what_it_waits_for() {
    let mut rig = Rig::start(None, None).await;
    // On this test's one thread, the pump has gone idle once the sleep ends.
    let awaited = || async {
        tokio::time::sleep(Duration::from_millis(1)).await;
        idle_poll::awaited()
    };
    assert_eq!(awaited().await, Awaited::Command, "logged in, nothing asked");
    rig.command_in_flight().await;
    assert_eq!(awaited().await, Awaited::Answer, "asked, nothing answered");
    let start = [packet(1, &[1]), column_def(2, "1"), text_row(3, &["1"])].concat();
    rig.server.write_all(&start).await.unwrap();
    assert_eq!(rig.app_reads(start.len()).await, start);
    assert_eq!(awaited().await, Awaited::Rest, "rows streaming");
    rig.server.write_all(&ok_eof(4, AUTOCOMMIT)).await.unwrap();
    assert_eq!(rig.app_reads(ok_eof(4, AUTOCOMMIT).len()).await, ok_eof(4, AUTOCOMMIT));
    assert_eq!(awaited().await, Awaited::Command, "answered");
}

#[tokio::test(start_paused = true)]
async fn an_idle_connection_closes_after_the_idle_timeout() {
    let rig = Rig::start(Some(Duration::from_secs(30)), None).await;
    let started = Instant::now();
    assert_eq!(rig.ended_within(Duration::from_secs(60)).await, Ended::IdleTimeout);
    let idled = started.elapsed();
    assert!(idled >= Duration::from_secs(30) && idled < Duration::from_secs(31), "closed after {idled:?}");
}

#[tokio::test(start_paused = true)]
async fn traffic_pushes_the_idle_timeout_back() {
    let mut rig = Rig::start(Some(Duration::from_secs(30)), None).await;
    tokio::time::sleep(Duration::from_secs(20)).await;
    rig.command_in_flight().await;
    rig.answer().await;
    let answered = Instant::now();
    assert!(rig.still_running_after(Duration::from_secs(25)).await, "closed 25 s after the last command");
    assert_eq!(rig.ended_within(Duration::from_secs(60)).await, Ended::IdleTimeout);
    let idled = answered.elapsed();
    assert!(idled >= Duration::from_secs(30) && idled < Duration::from_secs(31), "closed {idled:?} after the answer");
}

#[tokio::test(start_paused = true)]
async fn a_command_waiting_for_its_answer_is_never_idle() {
    let mut rig = Rig::start(Some(Duration::from_secs(30)), None).await;
    rig.command_in_flight().await;
    assert!(rig.still_running_after(Duration::from_secs(300)).await, "a slow query was cut off as idle");
    // Once answered, the connection idles out like any other.
    rig.answer().await;
    assert_eq!(rig.ended_within(Duration::from_secs(31)).await, Ended::IdleTimeout);
}

#[tokio::test(start_paused = true)]
async fn a_command_ends_at_the_query_timeout() {
    let mut rig = Rig::start(None, Some(Duration::from_secs(10))).await;
    // Idle time does not count against the query timeout.
    assert!(rig.still_running_after(Duration::from_secs(60)).await, "an idle connection hit the query timeout");
    rig.command_in_flight().await;
    let sent = Instant::now();
    assert_eq!(rig.ended_within(Duration::from_secs(20)).await, Ended::QueryTimeout);
    let waited = sent.elapsed();
    assert!(waited >= Duration::from_secs(10) && waited < Duration::from_secs(11), "ended after {waited:?}");
}

#[tokio::test(start_paused = true)]
async fn drain_closes_an_idle_connection_at_once() {
    let rig = Rig::start(None, None).await;
    rig.drain.start();
    assert_eq!(rig.ended_within(Duration::from_millis(1)).await, Ended::Drained);
}

#[tokio::test(start_paused = true)]
async fn drain_waits_for_the_command_in_flight() {
    let mut rig = Rig::start(None, None).await;
    rig.command_in_flight().await;
    rig.drain.start();
    assert!(rig.still_running_after(Duration::from_secs(120)).await, "drain cut a command off");
    // The answer still reaches the application whole, then the connection closes.
    rig.answer().await;
    assert_eq!(rig.ended_within(Duration::from_millis(1)).await, Ended::Drained);
}

#[tokio::test(start_paused = true)]
async fn a_reader_that_stops_stops_the_server() {
    let mut rig = Rig::start(None, None).await;
    rig.command_in_flight().await;
    // A result far larger than every buffer on the way: header, one column, then rows.
    let mut response = packet(1, &[1]);
    response.extend(column_def(2, "v"));
    let value = "x".repeat(200);
    let mut seq = 3u8;
    while response.len() < 8 << 20 {
        response.extend(text_row(seq, &[&value]));
        seq = seq.wrapping_add(1);
    }
    response.extend(ok_eof(seq, AUTOCOMMIT));
    let total = response.len();
    let Rig { mut app, server, budget, pump, .. } = rig;
    let (_server_read, mut server_write) = server.into_split();
    let writer = tokio::spawn(async move {
        server_write.write_all(&response).await.unwrap();
        (server_write, response)
    });
    // The application reads nothing: the pump fills its buffer, stops reading, and the
    // server's writes block on full socket buffers instead of growing anything.
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert!(!writer.is_finished(), "{total} bytes went out with no one reading them");
    assert!(!pump.is_finished());
    assert!(budget.total() <= 2 * BUFFER as u64, "buffers hold {} bytes", budget.total());
    assert_eq!(budget.extra(), 0, "a pipe grew past its fixed size");
    // Reading again releases it all, unchanged and in order.
    let mut got = vec![0; total];
    app.read_exact(&mut got).await.unwrap();
    let (_server_write, response) = writer.await.unwrap();
    assert!(got == response, "the result arrived changed");
    pump.abort();
}

#[tokio::test(start_paused = true)]
async fn a_late_write_is_activity_at_its_own_time() {
    let settings = PumpSettings {
        buffer_size: BUFFER,
        idle_timeout: Some(Duration::from_secs(30)),
        query_timeout: None,
        budget: Arc::new(BufferBudget::new(0)),
        local: None,
        kills: None,
        change_user_stand_in: false,
    };
    let mut timeouts = super::Timeouts::new(&settings);
    let read = Instant::now();
    let check = read + Duration::from_secs(30);
    // Bytes a slow reader took 20 s after they were read: idle from then, not from the read.
    let mut last_activity = micros(read);
    let written = read + Duration::from_secs(20);
    assert_eq!(timeouts.check(check, &mut last_activity, Some(written), None), Ok(written + Duration::from_secs(30)));
    // Nothing since the read: idle.
    let mut last_activity = micros(read);
    assert_eq!(timeouts.check(check, &mut last_activity, None, None), Err(Ended::IdleTimeout));
}

/// More pipelined commands than the session follows at once (1,024): the pump stops
/// reading the application, and must start again as answers come — reading it on a turn
/// of its own, since nothing wakes it for bytes that were already waiting.
#[tokio::test(start_paused = true)]
async fn commands_pipelined_past_the_bound_are_all_forwarded_and_answered() {
    let rig = Rig::start(None, None).await;
    const COMMANDS: usize = 2_000;
    let select = query("SELECT 1");
    let burst: Vec<u8> = select.iter().copied().cycle().take(select.len() * COMMANDS).collect();
    let Rig { app, server, pump, .. } = rig;
    let (mut app_read, mut app_write) = app.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let sender = tokio::spawn(async move { app_write.write_all(&burst).await.unwrap() });
    // The server reads until the pump stops sending (a virtual second with nothing new),
    // then answers all it has in one write: an OK apiece.
    let answer = ok(1, 0, AUTOCOMMIT);
    let server = tokio::spawn(async move {
        let (mut answered, mut unanswered, mut buf) = (0, Vec::new(), vec![0; 64 << 10]);
        while answered < COMMANDS {
            while let Ok(Ok(n @ 1..)) = tokio::time::timeout(Duration::from_secs(1), server_read.read(&mut buf)).await {
                unanswered.extend_from_slice(&buf[..n]);
            }
            let commands = unanswered.len() / select.len();
            unanswered.drain(..commands * select.len());
            let answers: Vec<u8> = answer.iter().copied().cycle().take(answer.len() * commands).collect();
            server_write.write_all(&answers).await.unwrap();
            answered += commands;
        }
    });
    let mut answers = vec![0; ok(1, 0, AUTOCOMMIT).len() * COMMANDS];
    tokio::time::timeout(Duration::from_secs(60), app_read.read_exact(&mut answers))
        .await
        .expect("answers stopped coming: the pump stopped reading the application")
        .unwrap();
    sender.await.unwrap();
    server.await.unwrap();
    assert!(answers.chunks(ok(1, 0, AUTOCOMMIT).len()).all(|a| a == ok(1, 0, AUTOCOMMIT)), "an answer changed");
    pump.abort();
}
