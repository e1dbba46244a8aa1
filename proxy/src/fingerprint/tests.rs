//! Fingerprint cases: a table of tricky inputs, the extracted facts, and a no-panic sweep.

use super::*;

fn text(sql: &[u8]) -> String {
    Fingerprinter::new().fingerprint(sql).text.to_owned()
}

fn id(sql: &str) -> FingerprintId {
    Fingerprinter::new().fingerprint(sql.as_bytes()).id
}

#[test]
fn normalises_tricky_cases() {
    let cases: &[(&[u8], &str)] = &[
        // Strings, escapes and quotes.
        (b"SELECT 'it\\'s'", "select ?"),
        (b"SELECT 'it''s', 'x'", "select ?, ?"),
        (b"SELECT \"dq\" FROM t", "select ? from t"),
        (b"SELECT 'a\\\\' , 'b'", "select ?, ?"),
        (b"SELECT `First Name` FROM `My Table`", "select `First Name` from `My Table`"),
        (b"SELECT `a``b` FROM T", "select `a``b` from t"),
        // Comments.
        (b"SELECT 1 -- trailing\nFROM t", "select ? from t"),
        (b"SELECT 1--1", "select ?-?"),
        (b"SELECT a --1 FROM t", "select a -? from t"),
        (b"SELECT a--b, c--/**/d", "select a- -b, c- - d"),
        (b"SELECT /* c */ a /*! 40001 x */ FROM t # end", "select a from t"),
        (b"SELECT/**/a/*+ BKA(t) */FROM t", "select a /*+ bka(t) */ from t"),
        (
            b"SELECT /*+ MAX_EXECUTION_TIME(1000) SET_VAR(x='s') */ a",
            "select /*+ max_execution_time(?) set_var(x=?) */ a",
        ),
        (b"/* lead */ SELECT 1", "select ?"),
        // Numbers and signs.
        (b"SELECT a-1, a - 1 FROM t", "select a-?, a - ? from t"),
        (b"SELECT * FROM t WHERE x = -1 AND y=-2.5", "select * from t where x = ? and y=?"),
        (b"SELECT -1, +2, (-3), 4 - -5", "select ?, ?, (?), ? - ?"),
        (b"SELECT 1e10, 1.5E-3, .5, 2.", "select ?, ?, ?, ?"),
        (b"SELECT x'0AFF', X'0aff', 0x1F, b'0101', 0b01, N'n'", "select ?, ?, ?, ?, ?, ?"),
        (b"SELECT 0X1F, 1ST, t1.2col, .1e FROM t1", "select 0X1F, 1st, t1.2col, .1e from t1"),
        (b"SELECT _utf8mb4'x', _binary 0x41 COLLATE utf8mb4_bin", "select ?, ? collate utf8mb4_bin"),
        (b"SELECT TRUE, false, NULL", "select ?, ?, ?"),
        (b"SELECT a IS NULL, b IS NOT NULL, c = NULL, d IS TRUE", "select a is null, b is not null, c = ?, d is true"),
        (b"CREATE TABLE t (a INT NOT NULL DEFAULT 0)", "create table t (a int not null default ?)"),
        // Placeholders and non-MySQL parameter styles.
        (b"SELECT * FROM t WHERE a = ? AND b = :b AND c = $1", "select * from t where a = ? and b = :b and c = $1"),
        // Lists.
        (b"SELECT * FROM t WHERE id IN (1,2,3)", "select * from t where id in(?+)"),
        (b"SELECT * FROM t WHERE id IN ( ? , ? )", "select * from t where id in(?+)"),
        (b"SELECT * FROM t WHERE id NOT IN ('a')", "select * from t where id not in(?+)"),
        (b"SELECT * FROM t WHERE (a,b) IN ((1,2),(3,4))", "select * from t where (a, b) in(?+)"),
        (
            b"SELECT * FROM t WHERE id IN (SELECT id FROM u WHERE k IN (1, 2))",
            "select * from t where id in (select id from u where k in(?+))",
        ),
        (b"SELECT * FROM t WHERE id IN (a, 1)", "select * from t where id in (a, ?)"),
        (b"INSERT INTO t (a,b) VALUES (1,'x'),(2,'y') , (3, 'z')", "insert into t (a, b) values(?+)"),
        (b"INSERT INTO t VALUES(1)", "insert into t values(?+)"),
        (b"INSERT INTO t VALUES (1, NOW()), (2, NOW())", "insert into t values (?, now())"),
        (
            b"INSERT INTO t (a) VALUES (1) ON DUPLICATE KEY UPDATE a = VALUES(a)",
            "insert into t (a) values(?+) on duplicate key update a = values(a)",
        ),
        (b"SELECT value-1 FROM t", "select value-? from t"),
        // Whitespace and statements.
        (b"  SELECT\t a ,\n b  FROM t ;  ", "select a, b from t"),
        (b"SELECT f( a )", "select f(a)"),
        (b"SELECT 1; SELECT 'two';;", "select ?; select ?"),
        (b";; SELECT 1", "select ?"),
        // LIMIT.
        (b"SELECT * FROM t LIMIT 10", "select * from t limit ?"),
        (b"SELECT * FROM t LIMIT 20, 10", "select * from t limit ?, ?"),
        (b"SELECT * FROM t LIMIT 10 OFFSET 20", "select * from t limit ? offset ?"),
        // Invalid UTF-8: part of a string literal, replaced elsewhere.
        (b"SELECT '\xff\xfe' FROM t\xff", "select ? from t\u{fffd}"),
        (b"SELECT caf\xc3\xa9, CAF\xc3\x89 FROM t", "select caf\u{e9}, caf\u{e9} from t"),
        (b"SELECT `Stra\xc3\x9fe\xff` FROM \xc3\x9cBER\xff", "select `Stra\u{df}e\u{fffd}` from \u{fc}ber\u{fffd}"),
        // Truncated input.
        (b"SELECT * FROM t WHERE a = 'unterminated", "select * from t where a = ?"),
        (b"SELECT * FROM t /* unterminated", "select * from t"),
        (b"SELECT * FROM t WHERE id IN (1, 2, 3", "select * from t where id in(?+)"),
        (b"INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c", "insert into t values(?+)"),
        (b"SELECT `unterminated", "select `unterminated`"),
        (b"SELECT 'a\\", "select ?"),
        (b"SELECT 1 --", "select ?"),
        // Empty.
        (b"", ""),
        (b"  \n ; ", ""),
        (b"/* only a comment */", ""),
    ];
    let mut failures = Vec::new();
    for (sql, want) in cases {
        let got = text(sql);
        if got != *want {
            failures.push(format!("{:?}\n   got: {got:?}\n  want: {want:?}", String::from_utf8_lossy(sql)));
        }
    }
    assert!(failures.is_empty(), "{} cases differ:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn list_lengths_share_an_id() {
    assert_eq!(id("SELECT * FROM t WHERE id IN (1)"), id("select * from t where id in (1, 2, 3)"));
    assert_eq!(id("SELECT * FROM t WHERE id IN (?)"), id("SELECT * FROM t WHERE id IN (?, ?, ?)"));
    assert_eq!(id("INSERT INTO t VALUES (1,2)"), id("INSERT INTO t VALUES (1,2),(3,4),(5,6)"));
    assert_ne!(id("SELECT * FROM t WHERE id IN (1)"), id("SELECT * FROM t WHERE id IN (SELECT 1)"));
    assert_eq!(id("SELECT * FROM t LIMIT 0, 10"), id("SELECT * FROM t LIMIT 990, 10"));
}

#[test]
fn normalised_text_normalises_to_itself() {
    let mut f = Fingerprinter::new();
    for sql in ["SELECT a FROM t WHERE b IN (1,2) AND c = 'x' LIMIT 5, 10", "INSERT INTO t VALUES (1),(2)"] {
        let once = f.fingerprint(sql.as_bytes()).text.to_owned();
        assert_eq!(f.fingerprint(once.as_bytes()).text, once);
    }
}

#[test]
fn ids_are_stable() {
    // Pinned: if this changes, every stored report and dashboard loses its history.
    let fp = Fingerprinter::new().fingerprint(b"SELECT * FROM salaries WHERE emp_no = 10001").id;
    assert_eq!(fp, FingerprintId(hash_value(b"select * from salaries where emp_no = ?")));
    assert_eq!(fp.to_string(), "1d293743bce17631");
    assert_eq!(fp.to_string().parse::<FingerprintId>(), Ok(fp));
    assert_eq!(FingerprintId(0xab).to_string(), "00000000000000ab");
    assert_eq!("00000000000000AB".parse::<FingerprintId>(), Ok(FingerprintId(0xab)));
    assert!("ab".parse::<FingerprintId>().is_err());
    assert!("+000000000000000".parse::<FingerprintId>().is_err());
    assert!("000000000000000g".parse::<FingerprintId>().is_err());
}

#[test]
fn values_hash_canonical_literals() {
    let mut f = Fingerprinter::new();
    let fp = f.fingerprint(b"SELECT * FROM salaries WHERE emp_no = 10001");
    assert_eq!(fp.values, [hash_value(b"10001")]);
    assert_eq!(fp.kind, StatementKind::Select);
    let fp = f.fingerprint(b"SELECT * FROM salaries WHERE emp_no = '10001'");
    assert_eq!(fp.values, [hash_value(b"10001")]);
    let fp = f.fingerprint(b"SELECT * FROM e WHERE name = 'O''Brien' OR name = \"O\\\"B\" OR n = 'a\\nb'");
    assert_eq!(fp.values, [hash_value(b"O'Brien"), hash_value(b"O\"B"), hash_value(b"a\nb")]);
    let fp = f.fingerprint(b"SELECT x'4142', 0x4142, 0x142, b'01000001', _utf8mb4'\xff', -7, +7, TRUE, NULL, ?");
    let want: [&[u8]; 8] = [b"AB", b"AB", b"\x01\x42", b"A", b"\xff", b"-7", b"7", b"1"];
    let mut want: Vec<u64> = want.iter().map(|v| hash_value(v)).collect();
    want.push(hash_value(b"NULL"));
    assert_eq!(fp.values, want.as_slice());
    let many = format!("SELECT * FROM t WHERE id IN ({})", vec!["1"; 40].join(","));
    assert_eq!(f.fingerprint(many.as_bytes()).values.len(), MAX_VALUES);
}

#[test]
fn extracts_limit() {
    let mut f = Fingerprinter::new();
    let mut limit = |sql: &str| f.fingerprint(sql.as_bytes()).paging;
    assert_eq!(limit("SELECT * FROM t LIMIT 10 OFFSET 20"), Some(Paging { count: 10, offset: 20 }));
    assert_eq!(limit("SELECT * FROM t LIMIT 20, 10"), Some(Paging { count: 10, offset: 20 }));
    assert_eq!(limit("SELECT * FROM t LIMIT 10"), Some(Paging { count: 10, offset: 0 }));
    assert_eq!(limit("SELECT * FROM t LIMIT 10 FOR UPDATE"), Some(Paging { count: 10, offset: 0 }));
    assert_eq!(limit("SELECT * FROM t LIMIT ?"), None);
    assert_eq!(limit("SELECT * FROM (SELECT * FROM t LIMIT 5) x"), None);
    assert_eq!(limit("SELECT 1; SELECT * FROM t LIMIT 5"), None);
    assert_eq!(limit("SELECT * FROM t"), None);
}

#[test]
fn finds_which_placeholders_page_a_prepared_statement() {
    use crate::fingerprint::{LimitArg::*, LimitParams};
    let mut f = Fingerprinter::new();
    let mut params = |sql: &str| {
        let fp = f.fingerprint(sql.as_bytes());
        (fp.paging, fp.limit_params)
    };
    // Placeholders are numbered through the whole statement, IN lists and subqueries included.
    assert_eq!(
        params("SELECT * FROM t WHERE a = ? AND b IN (?, ?) ORDER BY id LIMIT ? OFFSET ?"),
        (None, Some(LimitParams { count: Param(3), offset: Param(4) }))
    );
    assert_eq!(params("SELECT * FROM t LIMIT ?, ?"), (None, Some(LimitParams { count: Param(1), offset: Param(0) })));
    assert_eq!(
        params("SELECT * FROM t WHERE x = ? LIMIT ?"),
        (None, Some(LimitParams { count: Param(1), offset: Literal(0) }))
    );
    assert_eq!(
        params("SELECT * FROM t LIMIT 50 OFFSET ?"),
        (None, Some(LimitParams { count: Literal(50), offset: Param(0) }))
    );
    assert_eq!(
        params("SELECT * FROM (SELECT * FROM t WHERE a = ? LIMIT ?) x LIMIT ? OFFSET ?"),
        (None, Some(LimitParams { count: Param(2), offset: Param(3) }))
    );
    // All literals: the paging itself, no parameters.
    assert_eq!(
        params("SELECT * FROM t WHERE a = ? LIMIT 10 OFFSET 20"),
        (Some(Paging { count: 10, offset: 20 }), None)
    );
    assert_eq!(params("SELECT * FROM t WHERE a = ?"), (None, None));
    // An execution's parameters give its page.
    let p = LimitParams { count: Param(3), offset: Param(4) };
    assert_eq!(p.placeholders(), [Some(3), Some(4)]);
    assert_eq!(p.resolve([Some(50), Some(100)]), Some(Paging { count: 50, offset: 100 }));
    assert_eq!(p.resolve([Some(50), None]), None);
    let p = LimitParams { count: Literal(50), offset: Param(0) };
    assert_eq!(p.resolve([None, Some(150)]), Some(Paging { count: 50, offset: 150 }));
    assert_eq!(crate::fingerprint::limit_number(b"150"), Some(150));
    assert_eq!(
        [b"-1".as_slice(), b"", b"1.5", b"99999999999999999999"].map(crate::fingerprint::limit_number),
        [None; 4]
    );
}

#[test]
fn classifies_statements() {
    let mut f = Fingerprinter::new();
    let mut kind = |sql: &str| f.fingerprint(sql.as_bytes()).kind;
    assert_eq!(kind("/* c */ (SELECT 1) UNION (SELECT 2)"), StatementKind::Select);
    assert_eq!(kind("WITH a AS (SELECT 1), b AS (DELETE) SELECT * FROM a"), StatementKind::Select);
    assert_eq!(kind("with recursive c (n) as (select 1) update t set x = 1"), StatementKind::Update);
    assert_eq!(kind("insert into t values (1)"), StatementKind::Insert);
    assert_eq!(kind("REPLACE t SET a = 1"), StatementKind::Replace);
    assert_eq!(kind("DELETE FROM t"), StatementKind::Delete);
    assert_eq!(kind("CALL p(1)"), StatementKind::Call);
    assert_eq!(kind("SHOW TABLES; SELECT 1"), StatementKind::Other);
    assert_eq!(kind(""), StatementKind::Other);
}

#[test]
fn counts_insert_rows() {
    let mut f = Fingerprinter::new();
    let mut rows = |sql: &str| f.fingerprint(sql.as_bytes()).rows_in_values;
    assert_eq!(rows("INSERT INTO t VALUES (1, 'a')"), 1);
    assert_eq!(rows("INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, NOW())"), 3);
    assert_eq!(rows("REPLACE INTO t (a) VALUE (1), (2)"), 2);
    assert_eq!(rows("INSERT INTO t (a) VALUES (1) ON DUPLICATE KEY UPDATE a = VALUES(a)"), 1);
    assert_eq!(rows("INSERT INTO t SELECT * FROM u ON DUPLICATE KEY UPDATE a = VALUES(a)"), 0);
    assert_eq!(rows("INSERT INTO t SET a = 1"), 0);
    assert_eq!(rows("SELECT 1"), 0);
}

#[test]
fn reads_traceparent() {
    const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
    let mut f = Fingerprinter::new();
    let plain = f.fingerprint(b"SELECT * FROM t WHERE id = 1").id;
    for sql in [
        "SELECT * FROM t WHERE id = 1 /*traceparent='00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'*/",
        "/*action='x',traceparent='00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'*/ SELECT * FROM t WHERE id = 1",
        "SELECT * FROM t WHERE id = 1 /* traceparent = 00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01 */",
        "SELECT * FROM t WHERE id = 1 /*traceparent=%2700-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01%27*/",
        "SELECT * FROM t WHERE id = 1 -- traceparent='00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'",
    ] {
        let fp = f.fingerprint(sql.as_bytes());
        assert_eq!(fp.trace, Some(TRACE), "{sql}");
        assert_eq!(fp.id, plain, "{sql}");
    }
    for sql in [
        "SELECT 1 /* traceparent='00-00000000000000000000000000000000-00f067aa0ba902b7-01' */",
        "SELECT 1 /* traceparent='00-4bf92f3577b34da6a3ce929d0e0e47-00f067aa0ba902b7-01' */",
        "SELECT '/* traceparent=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 */'",
    ] {
        assert_eq!(f.fingerprint(sql.as_bytes()).trace, None, "{sql}");
    }
}

#[test]
fn buffers_are_reused() {
    let mut f = Fingerprinter::new();
    let big = format!("SELECT * FROM t WHERE a = '{}' AND b IN (1, 2)", "x\\'".repeat(2000));
    f.fingerprint(big.as_bytes());
    let capacity = (f.text.capacity(), f.values.capacity(), f.scratch.capacity());
    for _ in 0..3 {
        f.fingerprint(big.as_bytes());
        f.fingerprint(b"SELECT 1");
    }
    assert_eq!((f.text.capacity(), f.values.capacity(), f.scratch.capacity()), capacity);
}

/// Deterministic xorshift, so a failure reproduces without a fuzzing crate.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn survives_random_input() {
    const PIECES: &[&[u8]] = &[
        b"SELECT ",
        b"INSERT INTO t VALUES ",
        b" IN (",
        b"(",
        b")",
        b",",
        b"'",
        b"\"",
        b"`",
        b"\\",
        b"''",
        b"--",
        b"-- ",
        b"#",
        b"/*",
        b"*/",
        b"/*!",
        b"/*+",
        b"-",
        b"+",
        b".",
        b"1",
        b"0x",
        b"0b",
        b"x'",
        b"b'",
        b"_utf8mb4",
        b"e5",
        b" ",
        b"\n",
        b";",
        b"?",
        b"NULL",
        b"IS ",
        b"NOT ",
        b"LIMIT ",
        b" OFFSET ",
        b"WITH ",
        b"values",
        b"\xff",
        b"\xc3",
        b"\xa9",
        b"traceparent=",
        b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    ];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut f = Fingerprinter::new();
    let mut input = Vec::new();
    for round in 0..6000 {
        input.clear();
        let len = rng.below(64);
        for _ in 0..len {
            if round % 3 == 0 {
                input.push(rng.next() as u8);
            } else {
                input.extend_from_slice(PIECES.get(rng.below(PIECES.len())).copied().unwrap_or_default());
            }
        }
        let fp = f.fingerprint(&input);
        let lossy = String::from_utf8_lossy(&input);
        assert!(fp.values.len() <= MAX_VALUES);
        assert_eq!(fp.text.trim_ascii(), fp.text, "{lossy:?}");
        // Backticked names are verbatim, so only text without them must have single spaces.
        assert!(fp.text.contains('`') || !fp.text.contains("  "), "{lossy:?} -> {:?}", fp.text);
        let once = fp.text.to_owned();
        assert_eq!(f.fingerprint(once.as_bytes()).text, once, "not idempotent for {lossy:?}");
    }
}

#[test]
fn a_traceparent_value_alone() {
    let id = super::traceparent(b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
    assert_eq!(id, Some(0x0af7_6519_16cd_43dd_8448_eb21_1c80_319c));
    assert_eq!(super::traceparent(b"00-00000000000000000000000000000000-b7ad6b7169203331-01"), None);
    assert_eq!(super::traceparent(b"not a traceparent"), None);
}

#[test]
fn the_mode_scan_finds_either_word_wherever_it_is() {
    // What the scan must answer: either word at any offset, in any case.
    let reference = |sql: &[u8]| {
        [&b"sql_mode"[..], b"execute"].iter().any(|word| sql.windows(word.len()).any(|w| w.eq_ignore_ascii_case(word)))
    };
    let texts: [&[u8]; 12] = [
        b"SET SQL_MODE='ANSI_QUOTES'",
        b"set @@session.sql_mode = ''",
        b"EXECUTE stmt USING @a",
        b"execute",
        b"sql_mode",
        b"SELECT c FROM sbtest WHERE id = 4242",
        b"SELECT 'sqlmode', x FROM t",
        b"SELECT executed FROM jobs",
        b"sql_mod",
        b"xecute",
        b"q",
        b"",
    ];
    for sql in texts {
        assert_eq!(super::names_sql_mode_or_execute(sql), reference(sql), "{:?}", String::from_utf8_lossy(sql));
    }
}
