//! `Fingerprinter::fingerprint` on arbitrary SQL bytes (a `COM_QUERY`
//! payload is whatever the client sent, cut at the capture limit).
//!
//! Besides not panicking: the id is the hash of the text; the text is
//! trimmed; normalising the normalised text gives it back (idempotence, which
//! the unit tests already promise); and a fingerprinter that has just
//! handled other SQL gives the same answer as a fresh one, since the relay
//! keeps one per connection and reuses its buffers. All of it under each
//! `sql_mode` that changes tokenizing, and the sqlcommenter comment it points
//! at lies within the input and reads as one.

use rttscope::fingerprint::{Fingerprinter, MAX_VALUES, SqlMode, Tags, hash_value};

const MODES: [SqlMode; 4] = [
    SqlMode { no_backslash_escapes: false, ansi_quotes: false },
    SqlMode { no_backslash_escapes: true, ansi_quotes: false },
    SqlMode { no_backslash_escapes: false, ansi_quotes: true },
    SqlMode { no_backslash_escapes: true, ansi_quotes: true },
];

/// Unrelated SQL run first through the reused fingerprinter, long enough to
/// leave values, a trace id and a grown buffer behind.
const WARM_UP: &[u8] = b"/* traceparent='00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' */ \
    INSERT INTO t (a, b) VALUES (1, 'x'), (2, 'y'), (3, 'z') LIMIT 5, 10";

pub fn run(sql: &[u8]) {
    // One reused fingerprinter for every mode, warmed up once: by the second mode it has
    // also handled the input and its text under another mode, which is other SQL too.
    let mut reused = Fingerprinter::new();
    reused.fingerprint(WARM_UP);
    for mode in MODES {
        run_in(sql, mode, &mut reused);
    }
}

fn run_in(sql: &[u8], mode: SqlMode, reused: &mut Fingerprinter) {
    let mut fresh = Fingerprinter::new();
    let fp = fresh.fingerprint_in(sql, mode);
    if let Some((from, to)) = fp.tags {
        let comment = sql.get(from..to).expect("the tags lie within the input");
        assert!(Tags::of(comment).is_some(), "{comment:?} is no sqlcommenter comment");
    }
    let (id, text, kind, values, limit, rows, trace) = (
        fp.id,
        fp.text.to_owned(),
        fp.kind,
        fp.values.to_vec(),
        fp.paging,
        fp.rows_in_values,
        fp.trace.map(str::to_owned),
    );

    assert_eq!(id.0, hash_value(text.as_bytes()));
    assert!(values.len() <= MAX_VALUES);
    assert_eq!(text.trim_ascii(), text, "untrimmed text");
    if let Some(trace) = &trace {
        assert!(trace.len() == 32 && trace.bytes().all(|b| b.is_ascii_hexdigit()), "{trace:?}");
    }

    let again = reused.fingerprint_in(sql, mode);
    assert_eq!(
        (again.id, again.text, again.kind, again.values, again.paging, again.rows_in_values, again.trace),
        (id, text.as_str(), kind, values.as_slice(), limit, rows, trace.as_deref()),
        "a reused fingerprinter disagrees with a fresh one"
    );

    let twice = reused.fingerprint_in(text.as_bytes(), mode);
    assert_eq!(twice.text, text, "normalising is not idempotent");
}
