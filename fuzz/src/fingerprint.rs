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
//!
//! Then under a set of modes not known for sure (`SqlModes`), the set, its
//! likely mode and the server chosen by the input's first byte, so that every
//! combination is reached: the same invariants but idempotence (a masked text may
//! read another way again), and that every word it keeps is part of a name under
//! each of the modes it may be, read alone by each server it may be (one that runs
//! every versioned comment, MariaDB and MySQL of some versions, when it is not
//! known): a name in every reading, never part of a literal.

use std::collections::HashSet;

use rttscope::fingerprint::{Fingerprinter, MAX_VALUES, Server, SqlMode, SqlModes, Tags, hash_value, names};

const MODES: [SqlMode; 4] = SqlMode::ALL;

/// The servers an input may pick. `Unknown` may be any of them; read alone, it runs every
/// versioned comment. MySQL 5.7.0 runs the fewest an unknown server is taken to run.
const SERVERS: [Server; 4] = [Server::Unknown, Server::MariaDb(101119), Server::MySql(80036), Server::MySql(50700)];

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
    let Some((&pick, sql)) = sql.split_first() else { return };
    let modes = modes_of(pick);
    let fp = reused.fingerprint_in(sql, modes);
    let (id, text) = (fp.id, fp.text.to_owned());
    assert_eq!(id.0, hash_value(text.as_bytes()));
    assert!(fp.values.len() <= MAX_VALUES);
    assert_eq!(text.trim_ascii(), text, "untrimmed text");
    assert_eq!(Fingerprinter::new().fingerprint_in(sql, modes).text, text, "a reused fingerprinter disagrees");
    let known = [modes.server()];
    let servers = if modes.server() == Server::Unknown { &SERVERS[..] } else { &known[..] };
    for (mode, server) in modes.iter().flat_map(|m| servers.iter().map(move |s| (m, *s))) {
        // Names, not the normalised text: it drops some (a partial VALUES tuple, say).
        let names: Vec<String> =
            names(sql, mode, server).iter().map(|n| String::from_utf8_lossy(n).into_owned()).collect();
        let alone = words(&names.join(" "));
        let extra: Vec<_> = words(&text).into_iter().filter(|w| !alone.contains(w)).collect();
        assert!(extra.is_empty(), "{extra:?} kept under {modes:?}, no word under {mode:?} on {server:?}: {text:?}");
    }
}

/// The modes a byte picks: its low four bits the set (never empty), the next two the likely,
/// the top two the server.
fn modes_of(pick: u8) -> SqlModes {
    let likely = MODES[usize::from(pick >> 4 & 3)];
    let mut modes = SqlModes::known(likely);
    for (i, mode) in MODES.into_iter().enumerate() {
        if pick & (1 << i) != 0 {
            modes = SqlModes::known(mode).or(modes);
        }
    }
    modes.on(SERVERS[usize::from(pick >> 6)])
}

/// The words of a normalised text, lower case: runs of letters, `_` and `$`, and runs of
/// digits, each a word of its own. Digits and letters apart because a number is masked up to
/// where its token ends: `0.4DM` is a number and the name `DM` in one reading and, inside a
/// quoted name, part of the name `4DM` in another; the `dm` kept is part of a name in both.
fn words(text: &str) -> HashSet<String> {
    // Lower case first and a character at a time, as the normaliser writes names: `İ` lowers
    // to `i` and a combining dot, and `Σ` to `σ` wherever it stands.
    let lower: String = text.chars().flat_map(char::to_lowercase).collect();
    let mut words = HashSet::new();
    let mut word = String::new();
    let mut digits = false;
    for c in lower.chars() {
        let in_word = c.is_alphanumeric() || c == '_' || c == '$';
        let is_digit = c.is_numeric();
        if !word.is_empty() && (!in_word || is_digit != digits) {
            words.insert(std::mem::take(&mut word));
        }
        if in_word {
            word.push(c);
            digits = is_digit;
        }
    }
    if !word.is_empty() {
        words.insert(word);
    }
    words
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

    // A normalised `SET sql_mode = ?` no longer says which mode it set: the text after it may
    // read under every mode, and a backslash in a name there is then masked.
    if !text.to_ascii_lowercase().contains("sql_mode") {
        let twice = reused.fingerprint_in(text.as_bytes(), mode);
        assert_eq!(twice.text, text, "normalising is not idempotent");
    }
}
