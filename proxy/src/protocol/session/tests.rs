//! The state machine driven through scripted conversations, on wire bytes.

use super::*;
use crate::protocol::constants::status::*;
use crate::protocol::framing::PacketScanner;

#[derive(Default)]
struct Log {
    commands: Vec<(u8, Vec<u8>)>,
    finished: Vec<Summary>,
    rows: usize,
    response_starts: usize,
    desyncs: Vec<&'static str>,
}

impl Observer for Log {
    fn command(&mut self, c: &CommandPacket<'_>) {
        self.commands.push((c.command, c.payload.to_vec()));
    }
    fn response_started(&mut self) {
        self.response_starts += 1;
    }
    fn row(&mut self, _prefix: &[u8]) {
        self.rows += 1;
    }
    fn finished(&mut self, s: &Summary) {
        self.finished.push(s.clone());
    }
    fn desync(&mut self, reason: &'static str) {
        self.desyncs.push(reason);
    }
}

struct Conn {
    session: Session,
    log: Log,
    client: PacketScanner,
    upstream: PacketScanner,
}

const MARIADB_CLI_CAPS: u64 = CLIENT_PROTOCOL_41
    | CLIENT_MULTI_RESULTS
    | CLIENT_PS_MULTI_RESULTS
    | CLIENT_LOCAL_FILES
    | MARIADB_CLIENT_PROGRESS
    | MARIADB_CLIENT_CACHE_METADATA;
const DEPRECATE_EOF_CAPS: u64 = CLIENT_PROTOCOL_41 | CLIENT_MULTI_RESULTS | CLIENT_DEPRECATE_EOF | CLIENT_MYSQL;

impl Conn {
    /// A connection whose handshake response (seq 1) has just gone upstream.
    fn new(caps: u64) -> Conn {
        let mut log = Log::default();
        let session = Session::after_handshake(Identity::default(), caps, 80, 1, 100, 1024, &mut log);
        Conn { session, log, client: PacketScanner::new(), upstream: PacketScanner::new() }
    }

    fn authenticated(caps: u64) -> Conn {
        let mut conn = Conn::new(caps);
        conn.server(&[pkt(2, &[0, 0, 0, 2, 0, 0, 0])]).unwrap();
        assert_eq!(conn.log.finished.len(), 1);
        conn.log = Log::default();
        conn
    }

    /// Feeds client packets; `Err` names the desync they caused, if any.
    fn client(&mut self, packets: &[Vec<u8>]) -> Result<(), &'static str> {
        let before = self.log.desyncs.len();
        let bytes = packets.concat();
        self.client.scan(&bytes, &mut self.session.client(&mut self.log));
        self.log.desyncs.get(before).map_or(Ok(()), |reason| Err(*reason))
    }

    /// Feeds server packets; `Err` names the desync they caused, if any.
    fn server(&mut self, packets: &[Vec<u8>]) -> Result<(), &'static str> {
        let before = self.log.desyncs.len();
        let bytes = packets.concat();
        // Feed byte by byte: the state machine must not care how reads split.
        for b in bytes.chunks(1) {
            self.upstream.scan(b, &mut self.session.upstream(&mut self.log));
            self.session.upstream_at_boundary(self.upstream.at_boundary());
        }
        self.log.desyncs.get(before).map_or(Ok(()), |reason| Err(*reason))
    }
}

use crate::protocol::test_util::{column_def, eof, err, ok, ok_eof, packet as pkt, query};

/// A one-value text row.
fn text_row(seq: u8, value: &str) -> Vec<u8> {
    crate::protocol::test_util::text_row(seq, &[value])
}

#[test]
fn connect_is_recorded_as_a_command() {
    let mut conn = Conn::new(MARIADB_CLI_CAPS);
    assert!(!conn.session.is_idle());
    // Captured from MariaDB 10.11: the OK that ends authentication.
    conn.server(&[vec![0x07, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0]]).unwrap();
    assert_eq!(conn.log.finished.len(), 1);
    let s = &conn.log.finished[0];
    // Charged for the greeting (80 + 4) and the auth OK (11) it received.
    assert_eq!((s.command, s.round_trips, s.bytes_up, s.bytes_down), (CONNECT, 1, 104, 84 + 11));
    assert!(conn.session.is_idle());
}

#[test]
fn text_result_set_as_the_mariadb_cli_sees_it() {
    let mut conn = Conn::authenticated(MARIADB_CLI_CAPS);
    conn.client(&[query("select 1")]).unwrap();
    assert_eq!(conn.log.commands, vec![(COM_QUERY, b"select 1".to_vec())]);
    // Column count 1 with MariaDB's "metadata follows" flag, one definition,
    // EOF, one row, EOF: the bytes MariaDB 10.11 sent.
    let response = [pkt(1, &[1, 1]), column_def(2, "1"), eof(3, 2), text_row(4, "1"), eof(5, 2)];
    conn.server(&response[..4]).unwrap();
    assert!(conn.log.finished.is_empty());
    conn.server(&response[4..]).unwrap();
    let s = &conn.log.finished[0];
    assert_eq!((s.rows, s.columns, s.results, s.round_trips), (1, 1, 1, 1));
    assert_eq!(s.bytes_down, response.iter().map(|p| p.len() as u64).sum::<u64>());
    assert_eq!(conn.log.response_starts, 1);
    assert!(conn.session.is_idle());
}

#[test]
fn a_response_is_under_way_from_its_first_packet_to_its_end() {
    let mut conn = Conn::authenticated(DEPRECATE_EOF_CAPS);
    assert!(!conn.session.response_under_way(), "idle");
    // Two pipelined: the second's answer is not under way when the first's ends.
    conn.client(&[query("select a from t"), query("select 1")]).unwrap();
    assert!(!conn.session.response_under_way(), "waiting for the first byte");
    conn.server(&[pkt(1, &[1]), column_def(2, "a"), text_row(3, "x")]).unwrap();
    assert!(conn.session.response_under_way(), "rows streaming");
    conn.server(&[ok_eof(4, 2)]).unwrap();
    assert!(!conn.session.response_under_way(), "the next answer has not begun");
    conn.server(&[pkt(1, &[1]), column_def(2, "1"), text_row(3, "1"), ok_eof(4, 2)]).unwrap();
    assert!(!conn.session.response_under_way());
    assert!(conn.session.is_idle());
}

#[test]
fn deprecate_eof_rows_end_with_an_ok() {
    let mut conn = Conn::authenticated(DEPRECATE_EOF_CAPS);
    conn.client(&[query("select a from t")]).unwrap();
    conn.server(&[pkt(1, &[1]), column_def(2, "a"), text_row(3, "x"), text_row(4, "y"), ok_eof(5, 2)]).unwrap();
    let s = &conn.log.finished[0];
    assert_eq!((s.rows, s.columns), (2, 1));
}

#[test]
fn multi_statement_results_follow_more_results_flags() {
    let mut conn = Conn::authenticated(DEPRECATE_EOF_CAPS | CLIENT_MULTI_STATEMENTS);
    conn.client(&[query("insert ...; select a from t; update ...")]).unwrap();
    conn.server(&[ok(1, 1, SERVER_MORE_RESULTS_EXISTS)]).unwrap();
    conn.server(&[pkt(2, &[1]), column_def(3, "a"), text_row(4, "x"), ok_eof(5, SERVER_MORE_RESULTS_EXISTS)]).unwrap();
    assert!(conn.log.finished.is_empty());
    conn.server(&[ok(6, 3, 2)]).unwrap();
    let s = &conn.log.finished[0];
    assert_eq!((s.results, s.rows, s.affected_rows), (3, 1, 4));
}

#[test]
fn error_ends_a_multi_result() {
    let mut conn = Conn::authenticated(DEPRECATE_EOF_CAPS);
    conn.client(&[query("call p()")]).unwrap();
    conn.server(&[ok(1, 0, SERVER_MORE_RESULTS_EXISTS), err(2, 1064)]).unwrap();
    let s = &conn.log.finished[0];
    assert_eq!(s.error.map(|e| e.code), Some(1064));
}

#[test]
fn pipelined_prepare_and_execute() {
    let mut conn = Conn::authenticated(DEPRECATE_EOF_CAPS);
    let mut prepare = vec![COM_STMT_PREPARE];
    prepare.extend_from_slice(b"select ?");
    let execute = [COM_STMT_EXECUTE, 0xFF, 0xFF, 0xFF, 0xFF, 0, 1, 0, 0, 0, 0, 1, 8, 0, 1, 0, 0, 0, 0, 0, 0, 0];
    conn.client(&[pkt(0, &prepare), pkt(0, &execute)]).unwrap();
    assert_eq!(conn.session.pending(), 2);
    // Prepare OK: id 7, 1 column, 1 param; then one param def and one column def.
    conn.server(&[pkt(1, &[0, 7, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0]), column_def(2, "?"), column_def(3, "?")]).unwrap();
    assert_eq!(conn.log.finished.len(), 1);
    assert_eq!(conn.log.finished[0].statement, Some(PreparedStatement { id: 7, params: 1, columns: 1 }));
    // The execute's binary result set; its sequence ids restart at 1.
    conn.server(&[pkt(1, &[1]), column_def(2, "?"), pkt(3, &[0, 0, 1, 0, 0, 0, 0, 0, 0, 0]), ok_eof(4, 2)]).unwrap();
    assert_eq!(conn.log.finished.len(), 2);
    assert_eq!(conn.log.finished[1].rows, 1);
    // The client waited once for both: the execute rode on the prepare's round trip.
    let round_trips: Vec<u32> = conn.log.finished.iter().map(|s| s.round_trips).collect();
    assert_eq!(round_trips, vec![1, 0]);
    assert!(conn.session.is_idle());
}

#[test]
fn prepare_without_deprecate_eof_has_eofs_after_each_definition_block() {
    let mut conn = Conn::authenticated(MARIADB_CLI_CAPS);
    conn.client(&[pkt(0, b"\x16select ?, ?")]).unwrap();
    conn.server(&[
        pkt(1, &[0, 1, 0, 0, 0, 2, 0, 2, 0, 0, 0, 0]),
        column_def(2, "?"),
        column_def(3, "?"),
        eof(4, 2),
        column_def(5, "a"),
        column_def(6, "b"),
        eof(7, 2),
    ])
    .unwrap();
    assert_eq!(conn.log.finished.len(), 1);
    assert!(conn.session.is_idle());
}

#[test]
fn cursor_open_then_fetch() {
    let mut conn = Conn::authenticated(MARIADB_CLI_CAPS & !MARIADB_CLIENT_CACHE_METADATA);
    conn.client(&[pkt(0, &[COM_STMT_EXECUTE, 1, 0, 0, 0, 1, 1, 0, 0, 0])]).unwrap();
    // Metadata, then an EOF saying a cursor exists: the response ends there.
    conn.server(&[pkt(1, &[1]), column_def(2, "a"), eof(3, SERVER_STATUS_CURSOR_EXISTS)]).unwrap();
    assert_eq!(conn.log.finished.len(), 1);
    assert_eq!(conn.log.finished[0].rows, 0);
    conn.client(&[pkt(0, &[COM_STMT_FETCH, 1, 0, 0, 0, 2, 0, 0, 0])]).unwrap();
    conn.server(&[pkt(1, &[0, 0, 1]), pkt(2, &[0, 0, 2]), eof(3, SERVER_STATUS_CURSOR_EXISTS)]).unwrap();
    conn.client(&[pkt(0, &[COM_STMT_FETCH, 1, 0, 0, 0, 2, 0, 0, 0])]).unwrap();
    conn.server(&[pkt(1, &[0, 0, 3]), eof(2, SERVER_STATUS_LAST_ROW_SENT)]).unwrap();
    let rows: Vec<u64> = conn.log.finished.iter().map(|s| s.rows).collect();
    assert_eq!(rows, vec![0, 2, 1]);
}

#[test]
fn local_infile_upload_is_its_own_round_trip() {
    let mut conn = Conn::authenticated(DEPRECATE_EOF_CAPS | CLIENT_LOCAL_FILES);
    conn.client(&[query("load data local infile 'x' into table t")]).unwrap();
    conn.server(&[pkt(1, b"\xFBx")]).unwrap();
    // The upload: data packets, then an empty one. None of it is a command.
    conn.client(&[pkt(2, b"1\n2\n"), pkt(3, b"3\n"), pkt(4, b"")]).unwrap();
    assert_eq!(conn.log.commands.len(), 1);
    conn.server(&[ok(5, 3, 2)]).unwrap();
    let s = &conn.log.finished[0];
    assert_eq!((s.round_trips, s.affected_rows, s.local_infile), (2, 3, true));
    assert_eq!(s.bytes_up, (query("load data local infile 'x' into table t").len() + 8 + 6 + 4) as u64);
}

#[test]
fn change_user_auth_exchange_is_opaque() {
    let mut conn = Conn::authenticated(DEPRECATE_EOF_CAPS);
    conn.client(&[pkt(0, b"\x11bob\0")]).unwrap();
    // Auth switch request; the client's reply starts with bytes that would
    // look like a COM_QUERY if read as a command.
    conn.server(&[pkt(1, b"\xFEclient_ed25519\0nonce")]).unwrap();
    conn.client(&[pkt(2, b"\x03signature")]).unwrap();
    assert_eq!(conn.log.commands.len(), 1);
    conn.server(&[ok(3, 0, 2)]).unwrap();
    let s = &conn.log.finished[0];
    assert_eq!((s.command, s.round_trips, s.error), (COM_CHANGE_USER, 2, None));
    conn.client(&[query("select 1")]).unwrap();
    assert_eq!(conn.log.commands.len(), 2);
}

#[test]
fn no_reply_commands_complete_in_order() {
    let mut conn = Conn::authenticated(DEPRECATE_EOF_CAPS);
    conn.client(&[query("do 1"), pkt(0, &[COM_STMT_CLOSE, 1, 0, 0, 0])]).unwrap();
    assert_eq!(conn.log.finished.len(), 0);
    conn.server(&[ok(1, 0, 2)]).unwrap();
    let commands: Vec<(u8, u32)> = conn.log.finished.iter().map(|s| (s.command, s.round_trips)).collect();
    assert_eq!(commands, vec![(COM_QUERY, 1), (COM_STMT_CLOSE, 0)]);
    conn.client(&[pkt(0, &[COM_STMT_CLOSE, 2, 0, 0, 0])]).unwrap();
    assert_eq!(conn.log.finished.len(), 3);
    assert_eq!(conn.log.finished[2].round_trips, 0, "a command without a reply is no round trip");
    assert!(conn.session.is_idle());
}

#[test]
fn field_list_statistics_and_ping() {
    let mut conn = Conn::authenticated(MARIADB_CLI_CAPS);
    conn.client(&[pkt(0, b"\x04t\0")]).unwrap();
    conn.server(&[column_def(1, "a"), column_def(2, "b"), eof(3, 2)]).unwrap();
    conn.client(&[pkt(0, &[COM_STATISTICS])]).unwrap();
    conn.server(&[pkt(1, b"Uptime: 5  Threads: 1")]).unwrap();
    conn.client(&[pkt(0, &[COM_PING])]).unwrap();
    conn.server(&[ok(1, 0, 2)]).unwrap();
    assert_eq!(conn.log.finished.len(), 3);
    assert_eq!(conn.log.finished[0].columns, 2);
}

#[test]
fn progress_reports_do_not_end_a_response() {
    let mut conn = Conn::authenticated(MARIADB_CLI_CAPS);
    conn.client(&[query("alter table t engine=innodb")]).unwrap();
    conn.server(&[pkt(1, &[0xFF, 0xFF, 0xFF, 1, 1, 3, 0x10, 0x27, 0, 0])]).unwrap();
    assert!(conn.log.finished.is_empty());
    conn.server(&[ok(2, 0, 2)]).unwrap();
    assert_eq!(conn.log.finished[0].error, None);
}

#[test]
fn a_progress_report_in_the_middle_of_a_result_ends_nothing() {
    // REPAIR TABLE of a pre-5.0 DECIMAL table (main.type_decimal): its result's metadata, a
    // progress report ("Enabling keys"), then the row and the EOF.
    let mut conn = Conn::authenticated(MARIADB_CLI_CAPS);
    conn.client(&[query("repair table t1")]).unwrap();
    let progress = pkt(4, &[0xFF, 0xFF, 0xFF, 1, 2, 2, 0, 0, 0, 4, b'k', b'e', b'y', b's']);
    conn.server(&[pkt(1, &[1]), column_def(2, "Table"), eof(3, 2), progress]).unwrap();
    assert!(conn.log.finished.is_empty(), "the progress report is not the end");
    conn.server(&[pkt(5, b"\x07test.t1"), eof(6, 2)]).unwrap();
    assert_eq!((conn.log.finished[0].rows, conn.log.finished[0].error), (1, None));
    // The same report while a LOCAL INFILE upload is answered.
    conn.client(&[query("load data local infile 'x' into table t")]).unwrap();
    conn.server(&[pkt(1, &[0xFB, b'x'])]).unwrap();
    conn.client(&[pkt(2, b"1\n"), pkt(3, b"")]).unwrap();
    conn.server(&[pkt(4, &[0xFF, 0xFF, 0xFF, 1, 1, 0, 0, 0, 0, 0]), ok(5, 0, 2)]).unwrap();
    assert_eq!(conn.log.finished.len(), 2);
    assert_eq!(conn.log.finished[1].error, None);
}

#[test]
fn binlog_stream_until_eof() {
    let mut conn = Conn::authenticated(MARIADB_CLI_CAPS);
    conn.client(&[pkt(0, &[COM_BINLOG_DUMP, 4, 0, 0, 0, 1, 0, 1, 0, 0, 0])]).unwrap();
    conn.server(&[pkt(1, &[0, 1, 2, 3]), pkt(2, &[0, 4, 5]), eof(3, 0)]).unwrap();
    assert_eq!(conn.log.finished[0].rows, 2);
}

#[test]
fn out_of_order_response_desyncs() {
    let mut conn = Conn::authenticated(DEPRECATE_EOF_CAPS);
    conn.client(&[query("select 1")]).unwrap();
    assert_eq!(conn.server(&[ok(3, 0, 2)]), Err("upstream_sequence"));
    // The command in flight is reported, as unparsed.
    assert!(conn.log.finished[0].unparsed);
}

#[test]
fn a_command_must_start_at_sequence_zero() {
    let mut conn = Conn::authenticated(DEPRECATE_EOF_CAPS);
    assert_eq!(conn.client(&[pkt(4, b"\x03select 1")]), Err("client_sequence"));
}

#[test]
fn a_lost_place_is_caught_by_the_catalog_check() {
    let mut conn = Conn::authenticated(DEPRECATE_EOF_CAPS);
    conn.client(&[query("select 1")]).unwrap();
    let e = conn.server(&[pkt(1, &[2]), column_def(2, "a"), text_row(3, "not a column def")]);
    assert_eq!(e, Err("upstream_malformed"));
}

#[test]
fn unsolicited_packets() {
    let mut conn = Conn::authenticated(DEPRECATE_EOF_CAPS);
    // A server closing for shutdown may say so between commands.
    conn.server(&[err(0, 1053)]).unwrap();
    assert_eq!(conn.server(&[ok(0, 0, 2)]), Err("unsolicited"));
}

#[test]
fn after_a_desync_the_next_command_resynchronises() {
    let mut conn = Conn::authenticated(DEPRECATE_EOF_CAPS);
    conn.client(&[query("select 1")]).unwrap();
    // The server answers with something the state machine cannot follow...
    assert_eq!(conn.server(&[pkt(1, &[2]), column_def(2, "a"), text_row(3, "junk")]), Err("upstream_malformed"));
    assert!(!conn.session.is_synced());
    // ... and goes on with it: ignored, whatever it is.
    conn.server(&[text_row(4, "more junk"), ok_eof(5, 2)]).unwrap();
    // The next command starts over, followed exactly.
    conn.client(&[query("select 2")]).unwrap();
    assert!(conn.session.is_synced());
    conn.server(&[pkt(1, &[1]), column_def(2, "2"), text_row(3, "2"), ok_eof(4, 2)]).unwrap();
    let last = conn.log.finished.last().unwrap();
    assert_eq!((last.rows, last.unparsed), (1, false));
    assert_eq!(conn.log.finished.len(), 2);
}

#[test]
fn no_resync_while_a_server_packet_is_half_read() {
    let mut conn = Conn::authenticated(DEPRECATE_EOF_CAPS);
    conn.client(&[query("select 1")]).unwrap();
    assert!(conn.server(&[ok(7, 0, 2)]).is_err());
    // Half a packet from the server, then a client command: not a safe point.
    let row = text_row(1, "partial");
    conn.server(&[row[..5].to_vec()]).unwrap();
    conn.client(&[query("select 2")]).unwrap();
    assert!(!conn.session.is_synced());
    conn.server(&[row[5..].to_vec()]).unwrap();
    conn.client(&[query("select 3")]).unwrap();
    assert!(conn.session.is_synced());
}

#[test]
fn a_procedures_cursor_does_not_cut_its_result_short() {
    // CALL p() where p loops over a cursor: the result sets it sends carry
    // SERVER_STATUS_CURSOR_EXISTS, and their rows still follow (no COM_STMT_FETCH).
    let mut conn = Conn::authenticated(MARIADB_CLI_CAPS);
    conn.client(&[query("call p()")]).unwrap();
    let flags = SERVER_STATUS_CURSOR_EXISTS | SERVER_MORE_RESULTS_EXISTS | 2;
    conn.server(&[pkt(1, &[1, 1]), column_def(2, "a"), eof(3, flags), text_row(4, "1"), eof(5, flags)]).unwrap();
    conn.server(&[ok(6, 0, 2)]).unwrap();
    let s = &conn.log.finished[0];
    assert_eq!((s.rows, s.results, s.unparsed), (1, 2, false));
    assert!(conn.log.desyncs.is_empty());
}

#[test]
fn an_err_after_column_definitions_ends_the_response() {
    // A prepared SELECT 1 < (SELECT a FROM t1) under a cursor: the subquery fails
    // when the cursor is materialised, after the metadata went out.
    let mut conn = Conn::authenticated(MARIADB_CLI_CAPS);
    conn.client(&[pkt(0, &[COM_STMT_EXECUTE, 1, 0, 0, 0, 1, 1, 0, 0, 0])]).unwrap();
    conn.server(&[pkt(1, &[1, 1]), column_def(2, "x"), err(3, 1242)]).unwrap();
    let s = &conn.log.finished[0];
    assert_eq!(s.error.map(|e| e.code), Some(1242));
    assert!(conn.session.is_idle());
    assert!(conn.log.desyncs.is_empty());
}

#[test]
fn optional_metadata_may_be_left_out() {
    // MySQL's CLIENT_OPTIONAL_RESULTSET_METADATA: a 0 after the column count
    // means no definitions follow.
    let mut conn = Conn::authenticated(DEPRECATE_EOF_CAPS | CLIENT_OPTIONAL_RESULTSET_METADATA);
    conn.client(&[query("select a from t")]).unwrap();
    conn.server(&[pkt(1, &[1, 0]), text_row(2, "x"), ok_eof(3, 2)]).unwrap();
    assert_eq!(conn.log.finished[0].rows, 1);
    conn.client(&[query("select a from t")]).unwrap();
    conn.server(&[pkt(1, &[1, 1]), column_def(2, "a"), text_row(3, "x"), ok_eof(4, 2)]).unwrap();
    assert_eq!(conn.log.finished[1].rows, 1);
    assert!(conn.log.desyncs.is_empty());
}

#[test]
fn command_starts_are_offsets_in_the_clients_stream() {
    let mut conn = Conn::authenticated(DEPRECATE_EOF_CAPS);
    conn.session.track_command_starts(true);
    let (first, second) = (query("select 1"), query("select 22"));
    conn.client(&[first.clone(), second]).unwrap();
    assert_eq!(conn.session.take_command_starts().collect::<Vec<_>>(), [0, first.len() as u64]);
    // LOCAL INFILE data is no command, even when its sequence ids wrap to 0.
    conn.server(&[ok(1, 0, 2), ok(1, 0, 2)]).unwrap();
    conn.client(&[query("load data local infile 'f' into table t")]).unwrap();
    let start = conn.session.take_command_starts().collect::<Vec<_>>();
    assert_eq!(start.len(), 1);
    conn.server(&[pkt(1, b"\xfbf")]).unwrap();
    conn.client(&[pkt(0, b"wrapped"), pkt(0, &[])]).unwrap();
    assert_eq!(conn.session.take_command_starts().count(), 0);
}

#[test]
fn unknown_commands_are_forwarded() {
    let mut conn = Conn::authenticated(DEPRECATE_EOF_CAPS);
    conn.client(&[pkt(0, &[0x99, 1, 2])]).unwrap();
    conn.server(&[err(1, 1047)]).unwrap();
    assert_eq!(conn.log.finished[0].error.map(|e| e.code), Some(1047));
    // Stray packets after an unknown command are tolerated.
    conn.server(&[ok(2, 0, 2)]).unwrap();
}

#[test]
fn column_count_and_lenenc_garbage_is_malformed() {
    for bad in [vec![0xFC, 1], vec![0xFD, 0xFF, 0xFF, 0xFF]] {
        let mut conn = Conn::authenticated(DEPRECATE_EOF_CAPS);
        conn.client(&[pkt(0, &[COM_STMT_EXECUTE, 1, 0, 0, 0, 0, 1, 0, 0, 0])]).unwrap();
        assert_eq!(conn.server(&[pkt(1, &bad)]), Err("upstream_malformed"), "{bad:?}");
    }
}

#[test]
fn sql_capture_is_capped() {
    let mut conn = Conn::authenticated(DEPRECATE_EOF_CAPS);
    let long = "x".repeat(5000);
    conn.client(&[query(&long)]).unwrap();
    assert_eq!(conn.log.commands[0].1.len(), 1024);
}

#[test]
fn an_execute_without_a_cursor_gets_its_rows_despite_a_procedures_cursor() {
    // CALL p() by COM_STMT_EXECUTE (flags 0: no cursor) where p loops over a cursor
    // (Connector/Python's prepared CALL): the flag is the procedure's, the rows follow.
    let mut conn = Conn::authenticated(MARIADB_CLI_CAPS & !MARIADB_CLIENT_CACHE_METADATA);
    conn.client(&[pkt(0, &[COM_STMT_EXECUTE, 1, 0, 0, 0, 0, 1, 0, 0, 0])]).unwrap();
    let flags = SERVER_STATUS_CURSOR_EXISTS | SERVER_MORE_RESULTS_EXISTS | 2;
    conn.server(&[pkt(1, &[1]), column_def(2, "a"), eof(3, flags), pkt(4, &[0, 0, 1]), eof(5, flags)]).unwrap();
    conn.server(&[ok(6, 0, 2)]).unwrap();
    let s = &conn.log.finished[0];
    assert_eq!((s.rows, s.results, s.unparsed), (1, 2, false));
    assert!(conn.log.desyncs.is_empty(), "{:?}", conn.log.desyncs);
}

#[test]
fn a_compressed_servers_ids_are_renumbered_for_the_plain_protocol() {
    // After a mid-response flush, a compressed MariaDB numbers the next packets from its
    // compressed id (here 7 onwards); the client expects 3 onwards.
    let mut conn = Conn::authenticated(MARIADB_CLI_CAPS);
    conn.session.renumber_upstream(true);
    conn.client(&[query("select 1")]).unwrap();
    let mut bytes = [pkt(1, &[1, 1]), column_def(2, "1"), eof(7, 2), text_row(8, "1"), eof(9, 2)].concat();
    for at in 0..bytes.len() {
        // Byte by byte, as the scanner may meet a header split across reads.
        conn.upstream.scan_mut(&mut bytes[at..=at], &mut conn.session.upstream(&mut conn.log));
    }
    assert!(conn.log.desyncs.is_empty(), "{:?}", conn.log.desyncs);
    let expected = [pkt(1, &[1, 1]), column_def(2, "1"), eof(3, 2), text_row(4, "1"), eof(5, 2)].concat();
    assert_eq!(bytes, expected);
    assert_eq!(conn.log.finished[0].rows, 1);
}

#[test]
fn a_prepared_load_data_local_uploads_as_a_query_does() {
    // mysqltest --ps-protocol: LOAD DATA LOCAL INFILE ? ... by COM_STMT_EXECUTE.
    let mut conn = Conn::authenticated(DEPRECATE_EOF_CAPS | CLIENT_LOCAL_FILES);
    conn.client(&[pkt(0, &[COM_STMT_EXECUTE, 1, 0, 0, 0, 0, 1, 0, 0, 0])]).unwrap();
    conn.server(&[pkt(1, b"\xFBdata.txt")]).unwrap();
    conn.client(&[pkt(2, b"1\n2\n"), pkt(3, b"")]).unwrap();
    conn.server(&[ok(4, 2, 2)]).unwrap();
    let s = &conn.log.finished[0];
    assert_eq!((s.affected_rows, s.local_infile), (2, true));
    assert!(conn.log.desyncs.is_empty(), "{:?}", conn.log.desyncs);
    conn.client(&[query("select 1")]).unwrap();
    assert_eq!(conn.log.commands.len(), 2, "the file's bytes are not commands");
}

#[test]
fn a_result_wider_than_65535_columns_is_followed() {
    // MariaDB's main.mysql test selects 68,001 columns.
    let mut conn = Conn::authenticated(DEPRECATE_EOF_CAPS);
    conn.client(&[query("select 1, 2, ...")]).unwrap();
    let wide: u32 = 68_001;
    let count = wide.to_le_bytes();
    let mut response = vec![pkt(1, &[0xFD, count[0], count[1], count[2]])];
    for i in 0..wide {
        response.push(column_def((2 + i) as u8, "c"));
    }
    let seq = (2 + wide) as u8;
    response.push(text_row(seq, "1"));
    response.push(ok_eof(seq.wrapping_add(1), 2));
    let bytes = response.concat();
    conn.upstream.scan(&bytes, &mut conn.session.upstream(&mut conn.log));
    assert!(conn.log.desyncs.is_empty(), "{:?}", conn.log.desyncs);
    let s = &conn.log.finished[0];
    assert_eq!((s.columns, s.rows), (wide, 1));
}
