//! No literal survives fingerprinting, whatever the session's `sql_mode`: random SQL with a
//! marker inside every literal, written as a client would write it under each mode, and read
//! under that mode, or under a set of modes that holds it when the mode is not known for sure.

use proptest::prelude::*;

use super::{Fingerprinter, Server, SqlMode, SqlModes, sql_mode_after};

/// Put in every literal and comment; must never appear in a normalised text.
const MARKER: &str = "LeakMark";

/// One byte or run of a literal's or comment's content, before quoting.
fn content() -> impl Strategy<Value = Vec<&'static str>> {
    let piece = prop_oneof![
        Just(MARKER),
        Just("'"),
        Just("\""),
        Just("\\"),
        Just("\\'"),
        Just("\\\""),
        Just("\\\\"),
        Just("`"),
        Just(" "),
        Just("\n"),
        Just("\r"),
        Just("\u{1b}"),
        Just("*"),
        Just("/"),
        Just("--"),
        Just("#"),
        Just(";"),
        Just("a"),
        Just("é"),
    ];
    prop::collection::vec(piece, 0..12).prop_map(|mut v| {
        v.push(MARKER);
        v
    })
}

/// `body` quoted with `quote` as the server reads it under `mode`: a quote is doubled or
/// (where backslashes escape) backslashed, a backslash doubled where it escapes.
fn quoted(body: &[&str], quote: char, mode: SqlMode, backslash_quote: bool) -> String {
    let name = quote == '"' && mode.ansi_quotes;
    let backslash = !(mode.no_backslash_escapes || name);
    let mut out = String::from(quote);
    for c in body.concat().chars() {
        match c {
            '\\' if backslash => out.push_str("\\\\"),
            c if c == quote && backslash && backslash_quote => {
                out.push('\\');
                out.push(c);
            }
            c if c == quote => {
                out.push(c);
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// What a comment body may hold: anything but its own end.
fn comment_safe(body: &[&str], end: &str) -> String {
    body.concat().replace(end, " ")
}

fn statement(mode: SqlMode) -> impl Strategy<Value = String> {
    let token = prop_oneof![
        3 => prop::sample::select(vec![
            "SELECT", "a", "t.b", "FROM", "t", "WHERE", "=", "AND", "IN", "(", ")", ",", "VALUES", "INSERT INTO t",
            "LIMIT", "1", "-2", "0x1F", "?", ";", "NULL", "`c`", "+", "-", "/", "*", ".",
        ])
        .prop_map(String::from),
        2 => (content(), any::<bool>(), 0..3u8).prop_map(move |(body, bq, prefix)| {
            let lit = quoted(&body, '\'', mode, bq);
            match prefix {
                0 => lit,
                1 => format!("N{lit}"),
                _ => format!("_utf8mb4 {lit}"),
            }
        }),
        1 => (content(), any::<bool>()).prop_map(move |(body, bq)| quoted(&body, '"', mode, bq)),
        1 => content().prop_map(|body| format!("/* {} */", comment_safe(&body, "*/"))),
        // An executable comment's body is SQL: a `*/` in one of its strings does not end it.
        1 => (content(), any::<bool>()).prop_map(move |(body, bq)| format!("/*!40101 {} */", quoted(&body, '\'', mode, bq))),
        // A hint's words are names, kept like the statement's; only its literals are values.
        1 => Just("/*+ INDEX(t i) */".to_string()),
        1 => (content(), any::<bool>())
            .prop_map(move |(body, bq)| format!("/*+ SET_VAR(x={}) */", quoted(&[&comment_safe(&body, "*/")], '\'', mode, bq))),
        1 => content().prop_map(|body| format!("-- {}\n", comment_safe(&body, "\n"))),
        1 => content().prop_map(|body| format!("# {}\n", comment_safe(&body, "\n"))),
    ];
    prop::collection::vec(token, 1..16).prop_map(|tokens| tokens.join(" "))
}

fn any_mode() -> impl Strategy<Value = SqlMode> {
    (any::<bool>(), any::<bool>())
        .prop_map(|(no_backslash_escapes, ansi_quotes)| SqlMode { no_backslash_escapes, ansi_quotes })
}

fn mode_and_statement() -> impl Strategy<Value = (SqlMode, String)> {
    any_mode().prop_flat_map(|mode| statement(mode).prop_map(move |sql| (mode, sql)))
}

/// Modes rttscope may believe possible when the server is in `mode`: `mode` and any others,
/// any one of them the likely reading.
fn modes_holding(mode: SqlMode) -> impl Strategy<Value = SqlModes> {
    (any::<[bool; 4]>(), 0..4usize).prop_map(move |(others, likely)| {
        let mut modes = SqlModes::known(mode);
        for (m, on) in SqlMode::ALL.into_iter().zip(others) {
            if on {
                modes = modes.or(SqlModes::known(m));
            }
        }
        let likely = SqlMode::ALL[likely];
        if modes.may_be(likely) { modes.or(SqlModes::known(likely)) } else { modes }
    })
}

/// A statement written for the server's mode, and what rttscope believes possible.
fn uncertain_modes_and_statement() -> impl Strategy<Value = (SqlModes, String)> {
    any_mode().prop_flat_map(|mode| (modes_holding(mode), statement(mode)))
}

/// A `SET sql_mode` rttscope cannot read, half way through a query: the rest is written for
/// whichever mode it set.
fn unknown_change_and_statements() -> impl Strategy<Value = (SqlMode, String)> {
    let unreadable = prop::sample::select(vec![
        "SET sql_mode = @saved",
        "SET sql_mode = CONCAT(@@sql_mode, ',NO_BACKSLASH_ESCAPES')",
        "SET sql_mode = 4",
        "SET sql_mode = DEFAULT",
        "EXECUTE s",
        "/*!40101 SET sql_mode = @m */",
    ]);
    (any_mode(), any_mode(), unreadable).prop_flat_map(|(before, after, set)| {
        (statement(before), statement(after))
            .prop_map(move |(first, second)| (before, format!("{first}; {set}; {second}")))
    })
}

/// A multi-statement query that changes the mode half way: the rest is written for the new one.
fn mode_change_and_statements() -> impl Strategy<Value = (SqlMode, String)> {
    (any_mode(), any_mode()).prop_flat_map(|(before, after)| {
        (statement(before), statement(after)).prop_map(move |(first, second)| {
            let mut modes = Vec::new();
            if after.no_backslash_escapes {
                modes.push("NO_BACKSLASH_ESCAPES");
            }
            if after.ansi_quotes {
                modes.push("ANSI_QUOTES");
            }
            (before, format!("{first}; SET SESSION sql_mode = '{}'; {second}", modes.join(",")))
        })
    })
}

/// Whether the marker is in `text`, as the reports would show it.
fn leaks(text: &str) -> bool {
    text.to_ascii_lowercase().contains(&MARKER.to_ascii_lowercase())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn no_marker_survives_a_mode_not_known_for_sure((modes, sql) in uncertain_modes_and_statement()) {
        let mut f = Fingerprinter::new();
        let fp = f.fingerprint_in(sql.as_bytes(), modes);
        prop_assert!(!leaks(fp.text), "{modes:?} {sql:?} -> {:?}", fp.text);
    }

    #[test]
    fn no_marker_survives_a_mode_set_unreadably_in_the_same_query((mode, sql) in unknown_change_and_statements()) {
        let mut f = Fingerprinter::new();
        let fp = f.fingerprint_in(sql.as_bytes(), mode);
        prop_assert!(!leaks(fp.text), "{mode:?} {sql:?} -> {:?}", fp.text);
    }

    #[test]
    fn no_marker_survives_under_any_mode((mode, sql) in mode_and_statement()) {
        let mut f = Fingerprinter::new();
        let fp = f.fingerprint_in(sql.as_bytes(), mode);
        prop_assert!(
            !fp.text.to_ascii_lowercase().contains(&MARKER.to_ascii_lowercase()),
            "{mode:?} {sql:?} -> {:?}", fp.text
        );
    }

    #[test]
    fn no_marker_survives_a_mode_set_in_the_same_query((mode, sql) in mode_change_and_statements()) {
        let mut f = Fingerprinter::new();
        let fp = f.fingerprint_in(sql.as_bytes(), mode);
        prop_assert!(
            !fp.text.to_ascii_lowercase().contains(&MARKER.to_ascii_lowercase()),
            "{mode:?} {sql:?} -> {:?}", fp.text
        );
    }
}

#[test]
fn a_mode_set_earlier_in_the_query_holds_for_the_rest() {
    let mut f = Fingerprinter::new();
    let sql = br"SET sql_mode='NO_BACKSLASH_ESCAPES'; SELECT 'a\', 'LEAKC1'";
    assert_eq!(f.fingerprint(sql).text, "set sql_mode=?; select ?, ?");
    let sql = br#"SET sql_mode = 'ANSI'; SELECT 1 AS "a\", 'x"LEAKC2'; SET sql_mode = DEFAULT; SELECT "\"LEAKC3""#;
    assert_eq!(f.fingerprint(sql).text, "set sql_mode = ?; select ? as ?, ?; set sql_mode = default; select ?");
}

#[test]
fn a_trailing_backslash_is_a_character_without_backslash_escapes() {
    let mode = SqlMode { no_backslash_escapes: true, ansi_quotes: false };
    let mut f = Fingerprinter::new();
    assert_eq!(f.fingerprint_in(br"SELECT 'a\', 'LEAKC1'", mode).text, "select ?, ?");
    assert_eq!(f.fingerprint_in(br#"SELECT "a\", "LEAKC1""#, mode).text, "select ?, ?");
    assert_eq!(f.fingerprint_in(br"SELECT N'a\', 'LEAKC1'", mode).text, "select ?, ?");
    // With backslash escapes the server reads the same bytes as a string, a name and an
    // unterminated string: only the mode tells which.
    assert_eq!(f.fingerprint(br"SELECT 'a\', 'LEAKC1'").text, "select ?leakc1?");
}

#[test]
fn a_double_quoted_name_is_read_without_escapes_and_hidden() {
    let mode = SqlMode { no_backslash_escapes: false, ansi_quotes: true };
    let mut f = Fingerprinter::new();
    assert_eq!(f.fingerprint_in(br#"SELECT "a\", 'LEAK"C1' FROM t"#, mode).text, "select ?, ? from t");
    let as_name = f.fingerprint_in(br#"SELECT "col" FROM t"#, mode).id;
    assert_eq!(as_name, f.fingerprint(br#"SELECT "col" FROM t"#).id);
}

#[test]
fn literal_values_hash_as_the_mode_reads_them() {
    let mut f = Fingerprinter::new();
    let plain = SqlMode { no_backslash_escapes: true, ansi_quotes: false };
    let raw = f.fingerprint_in(br"SELECT 'a\n'''", plain).values.to_vec();
    assert_eq!(raw, [super::hash_value(b"a\\n'")]);
    let escaped = f.fingerprint(br"SELECT 'a\n'''").values.to_vec();
    assert_eq!(escaped, [super::hash_value(b"a\n'")]);
}

#[test]
fn an_executable_comment_ends_outside_its_strings() {
    let mut f = Fingerprinter::new();
    assert_eq!(f.fingerprint(b"SELECT /*! 'a*/ LEAKC1 '*/").text, "select");
    assert_eq!(f.fingerprint(b"SELECT /*!40001 SQL_NO_CACHE */ * FROM t").text, "select * from t");
    let mariadb = SqlModes::known(SqlMode::default()).on(Server::MariaDb(101119));
    assert_eq!(f.fingerprint_in(b"SELECT 1 /*M!100101 , 'x*/' */, 2", mariadb).text, "select ?, ?");
    // mysqldump's preamble sets the mode for what follows.
    let dump = br#"/*!40101 SET SQL_MODE='ANSI_QUOTES' */; SELECT "a\", 'LEAKC2'"#;
    assert_eq!(f.fingerprint(dump).text, "select ?, ?");
}

#[test]
fn a_versioned_comment_reads_as_the_server_reads_it() {
    let on = |server| SqlModes::known(SqlMode::default()).on(server);
    let (mariadb, mysql) = (on(Server::MariaDb(101119)), on(Server::MySql(80036)));
    let mut f = Fingerprinter::new();
    // A version above the server's is a comment to the first `*/`: the string after it is one.
    // Read as SQL, the comment would end at the second `*/` and the marker would be a word.
    let future = b"SELECT 1 /*!99999 ' */, ' */ LEAKV1 '";
    assert_eq!(f.fingerprint_in(future, mariadb).text, "select ?, ?");
    assert_eq!(f.fingerprint_in(future, mysql).text, "select ?, ?");
    // MariaDB skips MySQL 5.7's and 8's versions, unless its own `/*M!` says them; MySQL runs
    // them, and reads `/*M!` as an ordinary comment.
    let mysql8 = b"SELECT 1 /*!80000 ' */, ' */ LEAKV2 '";
    assert_eq!(f.fingerprint_in(mysql8, mariadb).text, "select ?, ?");
    assert_eq!(f.fingerprint_in(mysql8, mysql).text, "select ? leakv2 ?", "a name, as MySQL reads it");
    let mariadb_only = b"SELECT 1 /*M!80000 ' */, ' */ LEAKV3 '";
    assert_eq!(f.fingerprint_in(mariadb_only, mariadb).text, "select ? leakv3 ?", "a name, as MariaDB reads it");
    assert_eq!(f.fingerprint_in(mariadb_only, mysql).text, "select ?, ?");
    // A skipped versioned comment holds one nested comment.
    let nested = b"SELECT 1 /*!99999 /* x */ ' */, ' */ LEAKV4 '";
    assert_eq!(f.fingerprint_in(nested, mariadb).text, "select ?, ?");
    // mysqldump's preamble runs on both, and sets the mode for what follows.
    let dump = br#"/*!40101 SET SQL_MODE='ANSI_QUOTES' */; SELECT "a\", 'LEAKV5'"#;
    assert_eq!(f.fingerprint_in(dump, mariadb).text, "select ?, ?");
    assert_eq!(sql_mode_after(b"/*!99999 SET sql_mode='ANSI_QUOTES' */", mariadb), None);
}

#[test]
fn a_versioned_comment_the_server_may_skip_hides_the_rest() {
    let mut f = Fingerprinter::new();
    // Not known which server: every reading from the comment on is masked.
    for sql in [
        &b"SELECT 1 /*!99999 ' */, ' */ LEAKV1 '"[..],
        b"SELECT 1 /*M! ' */, ' */ LEAKV2 '",
        b"SELECT a /*!50700 ' */, ' */ LEAKV3 ' FROM t; SELECT 2",
    ] {
        let text = f.fingerprint(sql).text.to_owned();
        assert!(text.starts_with("select ") && !text.contains("leak"), "{text}");
    }
    // Nor which versioned comment one inside another is.
    let inside = SqlModes::known(SqlMode::default()).on(Server::MariaDb(101119));
    let text = f.fingerprint_in(b"SELECT 1 /*!40101 /*!40101 '*/ */ LEAKV4 '*/", inside).text;
    assert!(!text.contains("leak"), "{text}");
    // A mode it may set is not known either.
    let after = sql_mode_after(b"/*!80000 SET sql_mode='ANSI_QUOTES' */", SqlModes::default());
    assert!(after.is_some_and(|modes| !modes.is_known()));
}

#[test]
fn a_mode_not_known_for_sure_masks_what_any_reading_hides() {
    let unsure = SqlModes::unknown(SqlMode::default());
    let mut f = Fingerprinter::new();
    // Read with backslash escapes, the rest of the text is in a string.
    assert_eq!(f.fingerprint_in(br"SELECT 'a\', 'LEAKC1' FROM t", unsure).text, "select ?");
    assert_eq!(f.fingerprint_in(br#"SELECT "a\", 'LEAKC2' FROM t"#, unsure).text, "select ?");
    // Only the backslash escapes are known (the status flags say so); `ANSI_QUOTES` is not.
    let quotes = SqlModes::unknown(SqlMode::default()).with_backslash_status(false);
    assert_eq!(f.fingerprint_in(br#"SELECT "a\", 'LEAKC3', b FROM t"#, quotes).text, "select ?");
    // Where every reading agrees, the text is the one a known mode gives: ids do not move.
    let agree: [(&[u8], SqlModes); 3] = [
        (br"SELECT * FROM t WHERE a = 'O\'Brien' AND b IN (1, 2)", quotes),
        (br#"SELECT "x" FROM t WHERE a = 'b'"#, unsure),
        (br"SELECT /*+ INDEX(t i) */ a FROM t WHERE b = 'c'; SELECT 1", unsure),
    ];
    for (sql, modes) in agree {
        let known = f.fingerprint(sql).id;
        assert_eq!(f.fingerprint_in(sql, modes).id, known, "{}", String::from_utf8_lossy(sql));
    }
}

#[test]
fn an_unreadable_mode_change_masks_the_statements_after_it() {
    let mut f = Fingerprinter::new();
    let sql = br"SET sql_mode = CONCAT(@@sql_mode, ',NO_BACKSLASH_ESCAPES'); SELECT 'a\', 'LEAKC1'";
    assert_eq!(f.fingerprint(sql).text, "set sql_mode = concat(@@sql_mode, ?); select ?");
    let sql = br"SET sql_mode = @m; SELECT 1; SET sql_mode = 'NO_BACKSLASH_ESCAPES'; SELECT 'a\', 'b'";
    assert_eq!(f.fingerprint(sql).text, "set sql_mode = @m; select ?; set sql_mode = ?; select ?, ?");
}

#[test]
fn what_precedes_a_hidden_run_is_kept() {
    let quotes = SqlModes::unknown(SqlMode::default()).with_backslash_status(false);
    let mut f = Fingerprinter::new();
    let sql = br#"SELECT 5 AS n, d.* FROM (SELECT 1 AS "a\", 'x"LEAKC1') AS d"#;
    let fp = f.fingerprint_in(sql, quotes);
    assert_eq!(fp.text, "select ? as n, d.* from (select ? as ?");
    // The numbers before it are still values, which link a loop to its parent's rows.
    assert_eq!(fp.values.get(..2), Some(&[super::hash_value(b"5"), super::hash_value(b"1")][..]));
}

#[test]
fn digits_after_a_dot_and_a_gap_are_a_number() {
    // A fuzzed statement: the dot inside an executable comment made the digits after the
    // comment a qualified name's, and they were kept.
    let mut f = Fingerprinter::new();
    let sql = b"/*!40101 SET SQL_MODE='x'. */1(a";
    assert_eq!(f.fingerprint_in(sql, SqlModes::known(SqlMode::default())).text, "?(a");
    assert_eq!(f.fingerprint(b"SET SQL_MODE='x'. 1(a").text, "set sql_mode=?. ?(a");
    assert_eq!(f.fingerprint(b"SELECT t.1c FROM t").text, "select t.1c from t", "a name that starts with digits");
}

#[test]
fn a_dot_qualifies_only_the_name_right_before_it() {
    // A fuzzed statement: a hint between a word and `.4` left the word's qualifier context
    // standing, so `.4` read as a qualified name's part and was kept.
    let mut f = Fingerprinter::new();
    assert_eq!(f.fingerprint(b"SELECT a/*+ BKA(t) */.4 b").text, "select a /*+ bka(t) */ ? b");
    assert_eq!(f.fingerprint(b"SELECT a/**/.4, 'x'.5, (1).6, a .7").text, "select a ?, ??, (?)?, a ?");
    assert_eq!(f.fingerprint(b"SELECT t.4, `t`.5e1 FROM t").text, "select t.4, `t`.5e1 from t", "qualified names");
}
