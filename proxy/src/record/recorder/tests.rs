//! The recorder's attribution of prepared-statement traffic, driven as the state machine drives
//! it: commands in the order the client sent them, answers in order. Each sequence is one a
//! real driver sends (or a server allows): the execution must land on the statement the
//! server ran. And the recorder's time over an emulated link, as the relay tells it.

use std::sync::Arc;

use tokio::time::Instant;

use super::*;
use crate::fingerprint::{StatementKind, hash_value};
use crate::protocol::binary::types::{MYSQL_TYPE_LONG, MYSQL_TYPE_LONGLONG};
use crate::protocol::session::PreparedStatement;

const BLOB: u8 = 0xfc;

struct Rig {
    recorder: Recorder,
    events: super::super::EventReceiver,
}

impl Rig {
    fn new() -> Rig {
        let (sink, events) = EventSink::channel(1024);
        let live = Arc::new(LiveConnection::new(1, "test".into(), 0));
        let recorder = Recorder::new(1, sink, live, Instant::now(), RecorderSettings { examples: false });
        Rig { recorder, events }
    }

    fn send(&mut self, command: u8, payload: &[u8]) {
        self.recorder.command_started(command);
        let len = payload.len() as u64;
        self.recorder.command(&CommandPacket { command, payload, len, query_attributes: false });
    }

    fn prepare(&mut self, sql: &str) {
        self.send(COM_STMT_PREPARE, sql.as_bytes());
    }

    /// The server's answer to the oldest command: `round_trips` as the state machine counts them.
    fn answer(&mut self, command: u8, round_trips: u32, statement: Option<PreparedStatement>, error: bool) {
        let error = error.then_some(crate::protocol::packets::ErrPacket { code: 1243, sql_state: *b"HY000" });
        self.recorder.finished(&Summary { command, round_trips, statement, error, ..Summary::default() });
    }

    fn prepared(&mut self, id: u32, params: u16) {
        self.answer(COM_STMT_PREPARE, 1, Some(PreparedStatement { id, params, columns: 1 }), false);
    }

    /// Every record, in order, once the connection has closed.
    async fn records(mut self) -> Vec<CommandRecord> {
        self.recorder.closed();
        drop(self.recorder);
        let mut batch = Vec::new();
        while self.events.recv_many(&mut batch, 1024).await > 0 {}
        batch
            .into_iter()
            .filter_map(|e| match e {
                Event::Command(r) => Some(*r),
                _ => None,
            })
            .collect()
    }
}

/// A `COM_STMT_EXECUTE` of statement `id` binding `params` (type, value bytes), types sent.
fn execute(id: u32, params: &[(u8, &[u8])]) -> Vec<u8> {
    let mut p = id.to_le_bytes().to_vec();
    p.extend_from_slice(&[0, 1, 0, 0, 0]);
    p.extend(std::iter::repeat_n(0, params.len().div_ceil(8)));
    p.push(1);
    for (ty, _) in params {
        p.extend_from_slice(&[*ty, 0]);
    }
    for (_, value) in params {
        p.extend_from_slice(value);
    }
    p
}

fn long(v: i64) -> [u8; 8] {
    v.to_le_bytes()
}

fn hashed(texts: &[&str]) -> Vec<u64> {
    texts.iter().map(|t| hash_value(t.as_bytes())).collect()
}

fn executes(records: &[CommandRecord]) -> Vec<&CommandRecord> {
    records.iter().filter(|r| r.command == COM_STMT_EXECUTE).collect()
}

/// Connector/C's execute-direct: the prepare and an execute of "the statement just prepared"
/// sent together. The execute is the statement's, with its parameters read once the prepare's
/// answer says how many there are, and the round trip the two shared is the execution's.
#[tokio::test]
async fn an_execute_sent_with_its_prepare_is_that_statements() {
    let mut rig = Rig::new();
    rig.prepare("SELECT name FROM a WHERE id = ?");
    rig.send(COM_STMT_EXECUTE, &execute(LAST_PREPARED, &[(MYSQL_TYPE_LONGLONG, &long(42))]));
    rig.prepared(7, 1);
    rig.answer(COM_STMT_EXECUTE, 0, None, false);
    // The next execution by its id: the types were learned from the first.
    let mut again = execute(7, &[(MYSQL_TYPE_LONGLONG, &long(43))]);
    again.truncate(10);
    again.push(0);
    again.extend_from_slice(&long(43));
    rig.send(COM_STMT_EXECUTE, &again);
    rig.answer(COM_STMT_EXECUTE, 1, None, false);
    let records = rig.records().await;
    let prepare = records.iter().find(|r| r.command == COM_STMT_PREPARE).expect("the prepare");
    let executes = executes(&records);
    assert_eq!(executes.len(), 2);
    for (e, value) in executes.iter().zip(["42", "43"]) {
        assert_eq!((e.fingerprint, e.statement), (prepare.fingerprint, Some(7)), "{e:?}");
        assert_eq!(e.values.as_slice(), hashed(&[value]).as_slice(), "{e:?}");
        assert_eq!(e.round_trips, 1, "{e:?}");
    }
    assert_eq!(prepare.round_trips, 0, "the round trip went to the execution");
}

/// Connector/Python's executemany: a prepare with a COM_STMT_BULK_EXECUTE of "the statement just
/// prepared" behind it, then the close of that statement by its id: all three are the statement's.
#[tokio::test]
async fn a_bulk_execute_sent_with_its_prepare_is_that_statements() {
    let mut rig = Rig::new();
    rig.prepare("INSERT INTO t (id, v) VALUES (?, ?)");
    rig.send(COM_STMT_BULK_EXECUTE, &[&LAST_PREPARED.to_le_bytes()[..], &[0x80, 0, 1, 0, 0xfd, 0]].concat());
    rig.prepared(9, 2);
    rig.answer(COM_STMT_BULK_EXECUTE, 0, None, false);
    rig.send(COM_STMT_CLOSE, &9u32.to_le_bytes());
    rig.answer(COM_STMT_CLOSE, 0, None, false);
    let records = rig.records().await;
    let texts: Vec<(&str, Option<u32>)> = records.iter().map(|r| (r.text.as_ref(), r.statement)).collect();
    let insert = "insert into t (id, v) values(?+)";
    assert_eq!(texts, [(insert, Some(9)), (insert, Some(9)), (insert, Some(9))]);
}

/// Two prepares pipelined, each with an execute of "the statement just prepared": each execute
/// runs the prepare sent just before it.
#[tokio::test]
async fn pipelined_prepares_each_run_their_own_execute() {
    let mut rig = Rig::new();
    rig.prepare("SELECT a FROM t WHERE id = ?");
    rig.send(COM_STMT_EXECUTE, &execute(LAST_PREPARED, &[(MYSQL_TYPE_LONG, &1i32.to_le_bytes())]));
    rig.prepare("SELECT b FROM u WHERE id = ?");
    rig.send(COM_STMT_EXECUTE, &execute(LAST_PREPARED, &[(MYSQL_TYPE_LONG, &2i32.to_le_bytes())]));
    rig.prepared(1, 1);
    rig.answer(COM_STMT_EXECUTE, 0, None, false);
    rig.prepared(2, 1);
    rig.answer(COM_STMT_EXECUTE, 0, None, false);
    let records = rig.records().await;
    let texts: Vec<(&str, Option<u32>, &[u64])> =
        executes(&records).iter().map(|r| (r.text.as_ref(), r.statement, r.values.as_slice())).collect();
    let (one, two) = (hashed(&["1"]), hashed(&["2"]));
    assert_eq!(
        texts,
        vec![
            ("select a from t where id = ?", Some(1), one.as_slice()),
            ("select b from u where id = ?", Some(2), two.as_slice())
        ]
    );
}

/// A server that hands a closed statement's id to the next prepare (a proxy in front of the
/// server may): an execute of that id sent behind the close and the prepare runs the new one.
#[tokio::test]
async fn an_id_reused_after_a_close_names_the_new_statement() {
    let mut rig = Rig::new();
    rig.prepare("SELECT a FROM t WHERE id = ?");
    rig.prepared(1, 1);
    rig.send(COM_STMT_EXECUTE, &execute(1, &[(MYSQL_TYPE_LONG, &1i32.to_le_bytes())]));
    rig.send(COM_STMT_CLOSE, &1u32.to_le_bytes());
    rig.prepare("SELECT b FROM u WHERE id = ?");
    rig.send(COM_STMT_EXECUTE, &execute(1, &[(MYSQL_TYPE_LONG, &2i32.to_le_bytes())]));
    rig.answer(COM_STMT_EXECUTE, 1, None, false);
    rig.answer(COM_STMT_CLOSE, 0, None, false);
    rig.prepared(1, 1);
    rig.answer(COM_STMT_EXECUTE, 0, None, false);
    let records = rig.records().await;
    let texts: Vec<&str> = executes(&records).iter().map(|r| r.text.as_ref()).collect();
    assert_eq!(texts, ["select a from t where id = ?", "select b from u where id = ?"]);
    let close = records.iter().find(|r| r.command == COM_STMT_CLOSE).expect("the close");
    assert_eq!(close.text.as_ref(), "select a from t where id = ?");
}

/// After a prepare the server refused, "the statement just prepared" is none (MariaDB answers
/// its execute with an error), not the statement prepared before.
#[tokio::test]
async fn after_a_failed_prepare_the_last_prepared_id_names_nothing() {
    let mut rig = Rig::new();
    rig.prepare("SELECT a FROM t WHERE id = ?");
    rig.prepared(1, 1);
    rig.prepare("SELECT nonsense FROM");
    rig.answer(COM_STMT_PREPARE, 1, None, true);
    rig.send(COM_STMT_EXECUTE, &execute(LAST_PREPARED, &[(MYSQL_TYPE_LONG, &1i32.to_le_bytes())]));
    rig.answer(COM_STMT_EXECUTE, 1, None, true);
    let records = rig.records().await;
    let e = executes(&records)[0];
    assert_eq!(e.text.as_ref(), "unknown prepared statement", "{e:?}");
}

/// A parameter sent by COM_STMT_SEND_LONG_DATA is not in the next execute: the key after it is
/// read where it is. (Connector/C also flags it NULL there; the server does not need the flag,
/// and this client does not send it.) The long data is for one execute; COM_STMT_RESET drops it.
#[tokio::test]
async fn long_data_parameters_are_not_read_from_the_execute() {
    let mut rig = Rig::new();
    rig.prepare("INSERT INTO t (doc, id) VALUES (?, ?)");
    rig.prepared(3, 2);
    let long_data = |param: u16| [&3u32.to_le_bytes()[..], &param.to_le_bytes(), b"a large document"].concat();
    let key = |k: i32| k.to_le_bytes();
    // Long data for the document, then an execute carrying only the key.
    rig.send(COM_STMT_SEND_LONG_DATA, &long_data(0));
    rig.answer(COM_STMT_SEND_LONG_DATA, 0, None, false);
    let mut only_key = execute(3, &[(BLOB, &[]), (MYSQL_TYPE_LONG, &key(10))]);
    only_key.truncate(only_key.len() - 4);
    only_key.extend_from_slice(&key(10));
    rig.send(COM_STMT_EXECUTE, &only_key);
    rig.answer(COM_STMT_EXECUTE, 1, None, false);
    // The next execute sends both again; so does one after long data that a reset dropped.
    let both = execute(3, &[(BLOB, b"\x03doc"), (MYSQL_TYPE_LONG, &key(11))]);
    rig.send(COM_STMT_EXECUTE, &both);
    rig.answer(COM_STMT_EXECUTE, 1, None, false);
    rig.send(COM_STMT_SEND_LONG_DATA, &long_data(0));
    rig.answer(COM_STMT_SEND_LONG_DATA, 0, None, false);
    rig.send(COM_STMT_RESET, &3u32.to_le_bytes());
    rig.answer(COM_STMT_RESET, 1, None, false);
    rig.send(COM_STMT_EXECUTE, &both);
    rig.answer(COM_STMT_EXECUTE, 1, None, false);
    let records = rig.records().await;
    let values: Vec<Vec<u64>> = executes(&records).iter().map(|r| r.values.as_slice().to_vec()).collect();
    let doc_11 = hashed(&["doc", "11"]);
    assert_eq!(values, vec![vec![0, hash_value(b"10")], doc_11.clone(), doc_11]);
    let sent = records.iter().filter(|r| r.command == COM_STMT_SEND_LONG_DATA);
    assert!(
        sent.clone().count() == 2 && sent.clone().all(|r| r.statement == Some(3) && r.kind == StatementKind::Insert)
    );
}

/// Any mix of prepares, closes, resets and statement commands, pipelined any way and answered in
/// order (some with errors), leaves nothing waiting once everything is answered, and never
/// panics. (A seeded generator: the same sequences every run.)
#[tokio::test]
async fn any_pipeline_settles_once_answered() {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let commands = [
        COM_STMT_PREPARE,
        COM_STMT_EXECUTE,
        COM_STMT_CLOSE,
        COM_STMT_RESET,
        COM_STMT_SEND_LONG_DATA,
        COM_RESET_CONNECTION,
    ];
    for _ in 0..200 {
        let mut rig = Rig::new();
        let mut sent: Vec<u8> = Vec::new();
        for _ in 0..next(40) {
            let command = commands[next(commands.len() as u64) as usize];
            let id = if next(3) == 0 { LAST_PREPARED } else { next(4) as u32 };
            match command {
                COM_STMT_PREPARE => rig.prepare("SELECT a FROM t WHERE id = ? AND b = ?"),
                COM_STMT_EXECUTE => rig.send(command, &execute(id, &[(MYSQL_TYPE_LONG, &[1, 0, 0, 0])])),
                _ => rig.send(command, &[&id.to_le_bytes()[..], &[0, 0]].concat()),
            }
            sent.push(command);
            // Answer some of what is in flight, oldest first.
            while !sent.is_empty() && next(2) == 0 {
                let command = sent.remove(0);
                let id = next(4) as u32;
                let error = next(5) == 0;
                let statement =
                    (command == COM_STMT_PREPARE).then_some(PreparedStatement { id, params: 2, columns: 1 });
                rig.answer(command, 1, statement, error);
            }
        }
        for command in sent.drain(..) {
            rig.answer(command, 1, Some(PreparedStatement { id: 1, params: 2, columns: 1 }), false);
        }
        assert_eq!((rig.recorder.unsettled, rig.recorder.in_flight.len()), (0, 0));
        assert!(rig.records().await.iter().all(|r| r.fingerprint != UNNAMED));
    }
}

/// Over an emulated link, what the link added is what it measured, both ways: the hold its
/// settings gave and how late the relay let the bytes go (timers on a busy machine). That
/// lateness is the link's time, never the server's, and the response's end is when the client
/// got it. Before, a late request counted as the server's time and a late answer not at all.
#[tokio::test]
async fn an_emulated_links_lateness_is_the_links_time() {
    let mut rig = Rig::new();
    // The request arrives at 1,000 µs, due upstream 7.5 ms later, and goes 2 ms late.
    rig.recorder.arrived(Direction::ToUpstream, 1_000, 8_500, 10);
    rig.send(COM_QUERY, b"SELECT 1");
    rig.recorder.released_late(Direction::ToUpstream, 2_000, 0);
    // The answer arrives at 12,000 µs, due at the client at 19,500, and goes 1 ms late.
    rig.recorder.arrived(Direction::ToClient, 12_000, 19_500, 20);
    rig.answer(COM_QUERY, 1, None, false);
    rig.recorder.released_late(Direction::ToClient, 1_000, 0);
    let records = rig.records().await;
    let r = records.iter().find(|r| r.command == COM_QUERY).expect("the query's record");
    assert_eq!((r.request_us, r.last_byte_us), (1_000, 20_500));
    assert_eq!((r.injected_us, r.late_us), (7_500 + 7_500 + 3_000, 3_000));
    // What is left is the server's: from the request's real arrival upstream (10.5 ms) to
    // its answer's (12 ms).
    assert_eq!(r.latency_us() - r.injected_us, 1_500);
}

/// The link's timer fires ahead of a release by the wake-up it expects; a quicker wake-up
/// lets the bytes go early, and the peer has them then. The response's end is when the client
/// got it and the link held each way that much less — before, the end stayed at its schedule,
/// so an N+1 finding's span outlasted the client's own timing of the loop (by 333 µs under load).
#[tokio::test]
async fn bytes_an_emulated_link_let_go_early_count_as_sent_then() {
    let mut rig = Rig::new();
    // The request arrives at 1,000 µs, due upstream 7.5 ms later, and goes 200 µs early.
    rig.recorder.arrived(Direction::ToUpstream, 1_000, 8_500, 10);
    rig.send(COM_QUERY, b"SELECT 1");
    rig.recorder.released_late(Direction::ToUpstream, -200, 0);
    // The answer arrives at 12,000 µs, due at the client at 19,500, and goes 300 µs early.
    rig.recorder.arrived(Direction::ToClient, 12_000, 19_500, 20);
    rig.answer(COM_QUERY, 1, None, false);
    rig.recorder.released_late(Direction::ToClient, -300, 0);
    let records = rig.records().await;
    let r = records.iter().find(|r| r.command == COM_QUERY).expect("the query's record");
    assert_eq!((r.request_us, r.last_byte_us), (1_000, 19_200));
    assert_eq!((r.injected_us, r.late_us), (7_300 + 7_200, 0));
    // The server's: from the request's real arrival upstream (8.3 ms) to its answer's (12 ms).
    assert_eq!(r.latency_us() - r.injected_us, 3_700);
}

/// A 40 MB read over an emulated 15 ms link: the request arrives at 1 ms, due upstream 7.5 ms
/// later and going `late_up` µs late; the response's first read arrives and is released at
/// `first`, its last at `last`; the end goes `late_down` (the link's µs, then the client's)
/// late. The query's record.
async fn large_read(first: (u64, u64), last: (u64, u64), late_up: i64, late_down: (i64, u64)) -> CommandRecord {
    let mut rig = Rig::new();
    rig.recorder.arrived(Direction::ToUpstream, 1_000, 8_500, 10);
    rig.send(COM_QUERY, b"SELECT REPEAT('x', 1000) FROM seq_1_to_40000");
    rig.recorder.released_late(Direction::ToUpstream, late_up, 0);
    rig.recorder.arrived(Direction::ToClient, first.0, first.1, 65_536);
    rig.recorder.response_started();
    rig.recorder.arrived(Direction::ToClient, last.0, last.1, 65_536);
    rig.recorder.finished(&Summary {
        command: COM_QUERY,
        round_trips: 1,
        bytes_down: 40_000_000,
        ..Summary::default()
    });
    rig.recorder.released_late(Direction::ToClient, late_down.0, late_down.1);
    let records = rig.records().await;
    records.into_iter().find(|r| r.command == COM_QUERY).expect("the query's record")
}

/// A large response whose slow start on the link releases its first read 45 ms after it
/// came: its streaming is timed from when the server's bytes came, so that what the server
/// did while the link held them is the server's.
#[tokio::test]
async fn a_large_responses_streaming_is_timed_from_the_servers_first_byte() {
    let r = large_read((13_000, 58_000), (861_000, 868_500), 500, (0, 0)).await;
    assert_eq!((r.first_arrived_us, r.first_byte_us, r.last_byte_us), (Some(13_000), Some(58_000), 868_500));
    assert_eq!((r.injected_us, r.request_injected_us), (7_500 + 500 + 7_500, 7_500 + 500));
    // From the first byte's arrival to the last's release, less the end's 7.5 ms on the link.
    assert_eq!(r.stream_us(), 868_500 - 13_000 - 7_500);
}

/// A client reading a large result slower than the emulated link releases it: the response's
/// end goes 1 ms late by the link's timers, then waits 120 ms for the client to read on. The
/// client's wait is in the command's time, as it would be without the link, and is not the
/// link's: what is left after the link's time is the server's and the client's.
#[tokio::test]
async fn a_client_that_does_not_read_on_is_not_the_links_lateness() {
    let r = large_read((12_000, 19_500), (600_000, 607_500), 0, (1_000, 120_000)).await;
    assert_eq!(r.last_byte_us, 607_500 + 1_000 + 120_000, "the client got the end then");
    assert_eq!((r.injected_us, r.late_us), (7_500 + 7_500 + 1_000, 1_000));
    assert_eq!(r.latency_us() - r.injected_us, 600_000 + 120_000 - 8_500);
    assert_eq!(r.stream_us(), 600_000 + 120_000 - 12_000);
}

/// Reads from the server that came as it sent them are its pace; one after a stall on the
/// emulated link's full buffer, or one that filled rttscope's with a backlog, is not, and
/// neither is the first (the request's round trip and the server's work before it).
#[tokio::test]
async fn only_reads_that_came_as_the_server_sent_them_are_its_pace() {
    let mut rig = Rig::new();
    rig.recorder.arrived(Direction::ToUpstream, 1_000, 1_000, 10);
    rig.send(COM_QUERY, b"SELECT REPEAT('x', 1000) FROM seq_1_to_40000");
    rig.recorder.arrived(Direction::ToClient, 10_000, 10_000, 32_768);
    rig.recorder.response_started();
    rig.recorder.arrived(Direction::ToClient, 10_100, 10_100, 32_768);
    rig.recorder.line_stalled(Direction::ToClient, 5_000);
    rig.recorder.arrived(Direction::ToClient, 15_200, 15_200, 32_768);
    rig.recorder.arrived(Direction::ToClient, 15_300, 15_300, 32_768);
    rig.recorder.buffer_filled(Direction::ToClient);
    rig.recorder.arrived(Direction::ToClient, 19_000, 19_000, 32_768);
    rig.recorder.arrived(Direction::ToClient, 19_100, 19_100, 16_384);
    rig.recorder.finished(&Summary { command: COM_QUERY, round_trips: 1, bytes_down: 180_224, ..Summary::default() });
    let records = rig.records().await;
    let r = records.into_iter().find(|r| r.command == COM_QUERY).expect("the query's record");
    assert_eq!((r.paced_us, r.paced_bytes), (300, 32_768 + 32_768 + 16_384));
}
