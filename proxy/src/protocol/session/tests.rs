//! The state machine driven through scripted conversations, on wire bytes.

use super::*;
use crate::protocol::framing::PacketScanner;
use crate::protocol::constants::status::*;

#[derive(Default)]
struct Log {
    commands: Vec<(u8, Vec<u8>)>,
    finished: Vec<Summary>,
    rows: usize,
    response_starts: usize,
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
}

struct Conn {
    session: Session,
    log: Log,
    client: PacketScanner,
    upstream: PacketScanner,
}

const MARIADB_CLI_CAPS: u64 = CLIENT_PROTOCOL_41 | CLIENT_MULTI_RESULTS | CLIENT_PS_MULTI_RESULTS
    | CLIENT_LOCAL_FILES | MARIADB_CLIENT_PROGRESS | MARIADB_CLIENT_CACHE_METADATA;
const DEPRECATE_EOF_CAPS: u64 = CLIENT_PROTOCOL_41 | CLIENT_MULTI_RESULTS | CLIENT_DEPRECATE_EOF | CLIENT_MYSQL;

impl Conn {
    /// A connection whose handshake response (seq 1) has just gone upstream.
    fn new(caps: u64) -> Conn {
        let mut log = Log::default();
        let session = Session::after_handshake(caps, 80, 1, 100, 1024, &mut log);
        Conn { session, log, client: PacketScanner::new(), upstream: PacketScanner::new() }
    }

    fn authenticated(caps: u64) -> Conn {
        let mut conn = Conn::new(caps);
        conn.server(&[pkt(2, &[0, 0, 0, 2, 0, 0, 0])]).unwrap();
        assert_eq!(conn.log.finished.len(), 1);
        conn.log = Log::default();
        conn
    }

    fn client(&mut self, packets: &[Vec<u8>]) -> Result<(), DecodeError> {
        let bytes = packets.concat();
        self.client.scan(&bytes, &mut self.session.client(&mut self.log))
    }

    fn server(&mut self, packets: &[Vec<u8>]) -> Result<(), DecodeError> {
        let bytes = packets.concat();
        // Feed byte by byte: the state machine must not care how reads split.
        for b in bytes.chunks(1) {
            self.upstream.scan(b, &mut self.session.upstream(&mut self.log))?;
        }
        Ok(())
    }
}

use crate::protocol::wire::{column_def, eof, err, ok, ok_eof, packet as pkt, query};

/// A one-value text row.
fn text_row(seq: u8, value: &str) -> Vec<u8> {
    crate::protocol::wire::text_row(seq, &[value])
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
    let response = [
        pkt(1, &[1, 1]),
        column_def(2, "1"),
        eof(3, 2),
        text_row(4, "1"),
        eof(5, 2),
    ];
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
        column_def(2, "?"), column_def(3, "?"), eof(4, 2),
        column_def(5, "a"), column_def(6, "b"), eof(7, 2),
    ]).unwrap();
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
fn binlog_stream_until_eof() {
    let mut conn = Conn::authenticated(MARIADB_CLI_CAPS);
    conn.client(&[pkt(0, &[COM_BINLOG_DUMP, 4, 0, 0, 0, 1, 0, 1, 0, 0, 0])]).unwrap();
    conn.server(&[pkt(1, &[0, 1, 2, 3]), pkt(2, &[0, 4, 5]), eof(3, 0)]).unwrap();
    assert_eq!(conn.log.finished[0].rows, 2);
}

#[test]
fn out_of_order_response_is_an_error() {
    let mut conn = Conn::authenticated(DEPRECATE_EOF_CAPS);
    conn.client(&[query("select 1")]).unwrap();
    let e = conn.server(&[ok(3, 0, 2)]).unwrap_err();
    assert_eq!(e, DecodeError::OutOfOrder { from: Peer::Upstream, expected: 1, got: 3 });
}

#[test]
fn a_command_must_start_at_sequence_zero() {
    let mut conn = Conn::authenticated(DEPRECATE_EOF_CAPS);
    let e = conn.client(&[pkt(4, b"\x03select 1")]).unwrap_err();
    assert_eq!(e, DecodeError::OutOfOrder { from: Peer::Client, expected: 0, got: 4 });
}

#[test]
fn a_lost_place_is_caught_by_the_catalog_check() {
    let mut conn = Conn::authenticated(DEPRECATE_EOF_CAPS);
    conn.client(&[query("select 1")]).unwrap();
    let e = conn.server(&[pkt(1, &[2]), column_def(2, "a"), text_row(3, "not a column def")]).unwrap_err();
    assert!(matches!(e, DecodeError::Malformed { what: "column definition", .. }), "{e}");
}

#[test]
fn unsolicited_packets() {
    let mut conn = Conn::authenticated(DEPRECATE_EOF_CAPS);
    // A server closing for shutdown may say so between commands.
    conn.server(&[err(0, 1053)]).unwrap();
    let e = conn.server(&[ok(0, 0, 2)]).unwrap_err();
    assert_eq!(e, DecodeError::Unsolicited { first: 0 });
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
    for bad in [vec![0xFC, 1], vec![0xFB], vec![0xFD, 0xFF, 0xFF, 0xFF]] {
        let mut conn = Conn::authenticated(DEPRECATE_EOF_CAPS);
        conn.client(&[pkt(0, &[COM_STMT_EXECUTE, 1, 0, 0, 0, 0, 1, 0, 0, 0])]).unwrap();
        assert!(conn.server(&[pkt(1, &bad)]).is_err(), "{bad:?}");
    }
}

#[test]
fn sql_capture_is_capped() {
    let mut conn = Conn::authenticated(DEPRECATE_EOF_CAPS);
    let long = "x".repeat(5000);
    conn.client(&[query(&long)]).unwrap();
    assert_eq!(conn.log.commands[0].1.len(), 1024);
}
