//! Realistic starting inputs for each target, in each harness's input
//! format: captured MariaDB handshakes and the conversations of the session
//! unit tests. Built in code rather than committed as files so they follow
//! any change to a harness's format; `scripts/fuzz.sh` writes them into
//! `fuzz/corpus/<target>/` before a run, and the regression test replays them.

use rttscope::protocol::constants::capability::*;
use rttscope::protocol::constants::command::*;
use rttscope::protocol::test_util::{column_def, eof, err, ok, ok_eof, packet, query, text_row};

/// MariaDB 10.11.19's greeting payload (from `protocol/handshake/tests.rs`).
const GREETING: &str = "0a352e352e352d31302e31312e31392d4d6172696144422d302b64656231327531003400000057692a325a526b4400fef72d0200ff81150000000000001d0000005250772b6b5d6c2b2e45524c006d7973716c5f6e61746976655f70617373776f726400";
/// The `mariadb` CLI's handshake response to it.
const RESPONSE: &str = "84a2bf000000100021000000000000000000000000000000000000001d000000726f6f7400006d7973716c5f6e61746976655f70617373776f7264007f035f6f73054c696e75780c5f636c69656e745f6e616d650a6c69626d617269616462045f7069640531363036310f5f636c69656e745f76657273696f6e06332e332e3230095f706c6174666f726d067838365f36340c70726f6772616d5f6e616d65056d7973716c0c5f7365727665725f686f7374093132372e302e302e31";

const MARIADB_CLI_CAPS: u64 = CLIENT_PROTOCOL_41
    | CLIENT_MULTI_RESULTS
    | CLIENT_PS_MULTI_RESULTS
    | CLIENT_LOCAL_FILES
    | MARIADB_CLIENT_PROGRESS
    | MARIADB_CLIENT_CACHE_METADATA;
const DEPRECATE_EOF_CAPS: u64 = CLIENT_PROTOCOL_41 | CLIENT_MULTI_RESULTS | CLIENT_DEPRECATE_EOF | CLIENT_MYSQL;

/// Every seed as (target, name, bytes).
pub fn all() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    let mut seeds = Vec::new();
    let mut add = |target, name, bytes| seeds.push((target, name, bytes));

    let stream = [query("select 1"), ok(1, 0, 2), column_def(2, "a"), eof(3, 2), packet(4, b"")].concat();
    add("framing", "whole", [vec![0], stream.clone()].concat());
    add("framing", "split", [vec![3, 0, 4, 9], stream].concat());

    let masked = MASKED.to_le_bytes().to_vec();
    add("handshake", "greeting", [masked.clone(), hex(GREETING)].concat());
    add("handshake", "response", [masked, hex(RESPONSE)].concat());

    let ok_payload = [0x00, 0x01, 0xFC, 0x03, 0x02, 0x0A, 0x00, 0x01, 0x00];
    add("packets", "ok", [vec![9, 0, 0, 0], ok_payload.to_vec()].concat());
    add("packets", "eof", vec![5, 0, 0, 0, 0xFE, 0, 0, 0x22, 0]);
    add("packets", "column", [vec![0, 1, 0, 1], column_def(2, "emp_no")[4..].to_vec()].concat());
    add("packets", "err", [vec![20, 0, 0, 0], err(1, 1064)[4..].to_vec()].concat());

    // A zlib frame of eight queries (MySQL's own compress()), then a raw one.
    let zlib = [
        0x78, 0x9c, 0xe3, 0x64, 0x60, 0x60, 0x60, 0x2e, 0x4e, 0xcd, 0x49, 0x4d, 0x2e, 0x51, 0x30, 0xe4, 0xa4, 0x1d,
        0x07, 0x00, 0x89, 0x08, 0x16, 0xe9,
    ];
    let frames = [vec![24, 0, 0, 0, 104, 0, 0], zlib.to_vec(), vec![5, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0x0e]].concat();
    add("compress", "zlib", [vec![0, 2, 3, 7, 9, 1], frames.clone()].concat());
    add("compress", "zstd_garbage", [vec![5, 0], frames].concat());

    add("binary", "execute", binary_execute());
    add("binary", "row", binary_row());

    add("session", "text_result", session(MARIADB_CLI_CAPS, text_result()));
    add("session", "prepare_execute", session(DEPRECATE_EOF_CAPS, prepare_execute()));
    add("session", "infile_change_user", session(DEPRECATE_EOF_CAPS | CLIENT_LOCAL_FILES, infile_change_user()));
    add("session", "pipelined_pings", pipelined_pings());

    for (name, sql) in [
        ("in_list", "SELECT a FROM t WHERE b IN (1,2) AND c = 'x' LIMIT 5, 10"),
        ("values", "INSERT INTO t (a, b) VALUES (1, 'a'), (2, NOW()), (-3, x'0A')"),
        ("comments", "/*+ hint */ select `Odd Name`, 1e10 -- c\n from t # x\n where a-1 IS NOT NULL; select 2;"),
        ("trace", "/* traceparent='00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' */ UPDATE t SET a = ?"),
        ("truncated", "INSERT INTO t VALUES (1, 'abc'), (2, 'de"),
        // The first byte picks the modes not known for sure (all four here, or two).
        ("unsure_backslash", "\x0fSELECT 'a\\', 'b' FROM t WHERE c = \"d\\\"e\""),
        ("unsure_quotes", "\x05SELECT \"a\\\", 'b', c FROM t"),
        (
            "unknown_change",
            "\x01SET sql_mode = CONCAT(@@sql_mode, ',ANSI'); SELECT \"x\\\", 'y'; SET sql_mode=''; SELECT 1",
        ),
        ("executable", "\x0f/*!40101 SET SQL_MODE='ANSI_QUOTES' */; SELECT /*! 'a*/ b '*/, /*+ INDEX(t i) */ 'c\\'"),
        // The top two bits pick the server: MariaDB 10.11 skips the first two comments, runs
        // the third; an unknown server may do either.
        (
            "versioned_mariadb",
            "\x40SELECT 1 /*!99999 ' */, ' */ b '; SELECT /*!50701 /* x */ ' */, ' */ c ' /*M!100000 d */",
        ),
        ("versioned_unknown", "\x0fSELECT 1 /*!99999 ' */, ' */ b '; /*!40101 /*!40101 '*/ */ c '*/"),
    ] {
        add("fingerprint", name, sql.as_bytes().to_vec());
    }

    for (name, body) in [
        ("link", r#"{"rtt": "15ms", "jitter": "2ms", "bandwidth": "34mbit", "window": "64KiB"}"#),
        (
            "directions",
            r#"{"to_client": {"delay": "60s", "jitter": "1s", "bandwidth": "1kbit"}, "to_upstream": {"delay": "0"}}"#,
        ),
        ("scope", r#"{"rtt": "5ms", "scope": {"users": ["app"], "schemas": ["shop"], "percent": "25%"}}"#),
        ("huge", r#"{"rtt": "18446744073709551615s", "window": "16EiB", "bandwidth": "1bit"}"#),
        ("loss", r#"{"rtt": "20ms", "loss": "50%", "to_upstream": {"loss": "0.001%"}, "window": "512B"}"#),
        ("host", "localhost:6070"),
    ] {
        add("admin_inject", name, body.as_bytes().to_vec());
    }
    seeds
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap_or(0)).collect()
}

/// Four parameters (LONGLONG, VAR_STRING, TINY as NULL, unsigned LONG), new types bound.
fn binary_execute() -> Vec<u8> {
    let mut p = vec![4, 0, 0, 0, 4];
    p.extend_from_slice(&[1, 0, 0, 0, 0, 1, 0, 0, 0, 0b0000_0100, 1]);
    p.extend_from_slice(&[0x08, 0, 0xfd, 0, 0x01, 0, 0x03, 0x80]);
    p.extend_from_slice(&10001i64.to_le_bytes());
    p.extend_from_slice(&[3, b'a', b'b', b'c']);
    p.extend_from_slice(&u32::MAX.to_le_bytes());
    p
}

/// A binary row: LONG, LONGLONG (NULL), VAR_STRING.
fn binary_row() -> Vec<u8> {
    let mut p = vec![0, 0, 0, 3, 0x03, 0, 0x08, 0, 0xfd, 0, 4];
    p.extend_from_slice(&[0x00, 0b0000_1000]);
    p.extend_from_slice(&10001i32.to_le_bytes());
    p.extend_from_slice(&[6, b'G', b'e', b'o', b'r', b'g', b'i']);
    p
}

/// The session harness's input: capabilities, a 1024-byte capture limit,
/// response sequence id 1, then `(upstream, bytes)` reads as records.
fn session(caps: u64, reads: Vec<(bool, Vec<u8>)>) -> Vec<u8> {
    let mut out = caps.to_le_bytes().to_vec();
    out.extend_from_slice(&1024u16.to_le_bytes());
    out.push(1);
    for (upstream, bytes) in reads {
        record(&mut out, upstream, &bytes);
    }
    out
}

fn record(out: &mut Vec<u8>, upstream: bool, bytes: &[u8]) {
    // A record holds at most 127 bytes (`c >> 1` with `c` < 0xFF).
    for piece in bytes.chunks(126) {
        out.push((piece.len() as u8) << 1 | u8::from(upstream));
        out.extend_from_slice(piece);
    }
}

const CLIENT: bool = false;
const UPSTREAM: bool = true;
/// The OK that ends authentication (MariaDB 10.11).
fn auth_ok() -> (bool, Vec<u8>) {
    (UPSTREAM, packet(2, &[0, 0, 0, 2, 0, 0, 0]))
}

fn text_result() -> Vec<(bool, Vec<u8>)> {
    vec![
        auth_ok(),
        (CLIENT, query("select emp_no, first_name from employees where emp_no in (10001, 10002)")),
        (UPSTREAM, [packet(1, &[2, 1]), column_def(2, "emp_no"), column_def(3, "first_name"), eof(4, 2)].concat()),
        (UPSTREAM, [text_row(5, &["10001", "Georgi"]), text_row(6, &["10002", "Bezalel"]), eof(7, 2)].concat()),
        (CLIENT, packet(0, &[COM_PING])),
        (UPSTREAM, ok(1, 0, 2)),
    ]
}

fn prepare_execute() -> Vec<(bool, Vec<u8>)> {
    let prepare = [&[COM_STMT_PREPARE][..], b"select a from t where id = ?"].concat();
    let execute = [COM_STMT_EXECUTE, 7, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 8, 0, 1, 0, 0, 0, 0, 0, 0, 0];
    vec![
        auth_ok(),
        (CLIENT, [packet(0, &prepare), packet(0, &execute)].concat()),
        (UPSTREAM, [packet(1, &[0, 7, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0]), column_def(2, "?"), column_def(3, "a")].concat()),
        (UPSTREAM, [packet(1, &[1]), column_def(2, "a"), packet(3, &[0, 0, 1, 0, 0, 0]), ok_eof(4, 2)].concat()),
        (CLIENT, packet(0, &[COM_STMT_CLOSE, 7, 0, 0, 0])),
    ]
}

fn infile_change_user() -> Vec<(bool, Vec<u8>)> {
    vec![
        auth_ok(),
        (CLIENT, query("load data local infile 'x' into table t")),
        (UPSTREAM, packet(1, b"\xFBx")),
        (CLIENT, [packet(2, b"1\n2\n"), packet(3, b"")].concat()),
        (UPSTREAM, ok(4, 2, 2)),
        (CLIENT, packet(0, b"\x11bob\0")),
        (UPSTREAM, packet(1, b"\xFEclient_ed25519\0nonce")),
        (CLIENT, packet(2, b"\x03signature")),
        (UPSTREAM, ok(3, 0, 2)),
        (CLIENT, query("alter table t engine=innodb")),
        (UPSTREAM, [err(1, 1064), packet(0, &[0xFF, 0x15, 0x04, b'#'])].concat()),
    ]
}

/// 6400 pings (256 reads of 25) before any answer: past the pending bound,
/// where the harness stops reading the client until answers make room.
fn pipelined_pings() -> Vec<u8> {
    let pings = packet(0, &[COM_PING]).repeat(25);
    let mut out = session(DEPRECATE_EOF_CAPS, vec![auth_ok(), (CLIENT, pings)]);
    out.extend_from_slice(&[0xFF, 31]);
    record(&mut out, UPSTREAM, &ok(1, 0, 2).repeat(10));
    out.extend_from_slice(&[0xFF, 31]);
    out
}
