//! `Fingerprinter::fingerprint` on arbitrary SQL bytes (a `COM_QUERY`
//! payload is whatever the client sent, cut at the capture limit).
//!
//! Besides not panicking: the id is the hash of the text; the text is
//! trimmed; normalising the normalised text gives it back (idempotence, which
//! the unit tests already promise); and a fingerprinter that has just
//! handled other SQL gives the same answer as a fresh one, since the relay
//! keeps one per connection and reuses its buffers.

use rttscope::fingerprint::{hash_value, Fingerprinter, MAX_VALUES};

/// Unrelated SQL run first through the reused fingerprinter, long enough to
/// leave values, a trace id and a grown buffer behind.
const WARM_UP: &[u8] = b"/* traceparent='00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' */ \
    INSERT INTO t (a, b) VALUES (1, 'x'), (2, 'y'), (3, 'z') LIMIT 5, 10";

pub fn run(sql: &[u8]) {
    let mut fresh = Fingerprinter::new();
    let fp = fresh.fingerprint(sql);
    let (id, text, kind, values, limit, rows, trace) =
        (fp.id, fp.text.to_owned(), fp.kind, fp.values.to_vec(), fp.limit, fp.rows_in_values, fp.trace.map(str::to_owned));

    assert_eq!(id.0, hash_value(text.as_bytes()));
    assert!(values.len() <= MAX_VALUES);
    assert_eq!(text.trim_ascii(), text, "untrimmed text");
    if let Some(trace) = &trace {
        assert!(trace.len() == 32 && trace.bytes().all(|b| b.is_ascii_hexdigit()), "{trace:?}");
    }

    let mut reused = Fingerprinter::new();
    reused.fingerprint(WARM_UP);
    let again = reused.fingerprint(sql);
    assert_eq!(
        (again.id, again.text, again.kind, again.values, again.limit, again.rows_in_values, again.trace),
        (id, text.as_str(), kind, values.as_slice(), limit, rows, trace.as_deref()),
        "a reused fingerprinter disagrees with a fresh one"
    );

    let twice = reused.fingerprint(text.as_bytes());
    assert_eq!(twice.text, text, "normalising is not idempotent");
}
