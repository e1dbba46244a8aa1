//! How one statement changes the session's `sql_mode`, followed token by token: a
//! `SET [SESSION] sql_mode = 'literal'` it can read, and everything it cannot.
//!
//! Reading a change wrongly as known is what leaks a literal, so anything but a plain
//! assignment of one literal or name (`'ANSI_QUOTES'`, `ANSI_QUOTES`) is [`Change::Unknown`]:
//! an expression, a number, a hex string, a user variable, `DEFAULT` (the global mode, which
//! rttscope cannot see), an `EXECUTE`, and any other statement that names `sql_mode` outside a
//! string and is not a query.

use super::lexer::{Kw, Lit, Token};
use super::mode::{SqlMode, parse_modes};

/// What a statement, if the server runs it, does to the session's mode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum Change {
    #[default]
    None,
    /// Sets exactly this mode.
    To(SqlMode),
    /// May set any mode; `guess` is the likeliest, where there is one (`DEFAULT`).
    Unknown { guess: Option<SqlMode> },
}

impl Change {
    /// A later assignment replaces an earlier one; an unknown one keeps the guess it had.
    fn then(self, later: Change) -> Change {
        match (self, later) {
            (_, Change::None) => self,
            (Change::To(m), Change::Unknown { guess: None }) => Change::Unknown { guess: Some(m) },
            (_, later) => later,
        }
    }

    /// The likely mode after it, from `before`.
    pub(super) fn likely(self, before: SqlMode) -> SqlMode {
        match self {
            Change::None | Change::Unknown { guess: None } => before,
            Change::To(m) | Change::Unknown { guess: Some(m) } => m,
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Step {
    /// Before the statement's first token.
    #[default]
    Start,
    /// In a `SET`, where an assignment's target comes: `at` counts the `@`s read, `global`
    /// says a `GLOBAL`/`PERSIST` scope was named, `first` that no assignment came yet.
    Target { at: u8, global: bool, first: bool },
    /// Read the target `sql_mode`.
    Name { global: bool },
    /// Read `=`: the value comes.
    Value { global: bool },
    /// Read a value that names a mode: it holds if the assignment ends here.
    Valued { change: Change },
    /// In the value of an assignment that does not change this session's mode.
    Skip { depth: u32 },
    /// A statement that names `sql_mode` only to change it: anywhere it does, unknown.
    Watch,
    /// A query or DML statement: it cannot change the mode (a stored routine restores it).
    Other,
}

/// Follows one statement; [`Tracker::end`] at its `;` or the end of input.
#[derive(Debug, Default)]
pub(super) struct Tracker {
    step: Step,
    found: Change,
}

impl Tracker {
    /// Feeds one significant token (no space, no comment).
    pub(super) fn step(&mut self, token: &Token<'_>) {
        self.step = match (self.step, *token) {
            (Step::Other, _) => return,
            (Step::Start, token) => self.start(token),
            (Step::Watch, token) => self.watch(token),
            (Step::Target { at, global, first }, token) => target(at, global, first, token),
            (Step::Name { .. }, Token::Punct(b':')) => self.step,
            (Step::Name { global }, Token::Punct(b'=')) => Step::Value { global },
            (Step::Name { global }, token) => self.unknown(global, token),
            (Step::Value { global: true }, token) => skip(0, token),
            (Step::Value { global: false }, token) => match value(token) {
                Some(change) => Step::Valued { change },
                None => self.unknown(false, token),
            },
            (Step::Valued { change }, Token::Punct(b',')) => {
                self.found = self.found.then(change);
                Step::Target { at: 0, global: false, first: false }
            }
            (Step::Valued { .. }, token) => self.unknown(false, token),
            (Step::Skip { depth }, token) => skip(depth, token),
        };
    }

    /// The statement ended: what it does to the mode. Ready for the next statement.
    pub(super) fn end(&mut self) -> Change {
        match self.step {
            Step::Valued { change } => self.found = self.found.then(change),
            // Cut off before its value: the capture limit, or an error; either way unknown.
            Step::Name { global: false } | Step::Value { global: false } => {
                self.found = self.found.then(Change::Unknown { guess: None });
            }
            _ => {}
        }
        std::mem::take(self).found
    }

    fn start(&mut self, token: Token<'_>) -> Step {
        match token {
            Token::Word(_, Kw::Set) => Step::Target { at: 0, global: false, first: true },
            Token::Word(w, _) if w.eq_ignore_ascii_case(b"execute") => {
                // `EXECUTE stmt`, `EXECUTE IMMEDIATE ...`: SQL rttscope never sees the text of.
                self.found = Change::Unknown { guess: None };
                Step::Other
            }
            Token::Word(_, Kw::Select | Kw::Insert | Kw::Update | Kw::Delete | Kw::Replace | Kw::Call | Kw::With)
            | Token::Punct(b'(') => Step::Other,
            token => self.watch(token),
        }
    }

    fn watch(&mut self, token: Token<'_>) -> Step {
        if names_sql_mode(&token) {
            self.found = self.found.then(Change::Unknown { guess: None });
        }
        Step::Watch
    }

    /// An assignment to this session's mode that cannot be read: unknown, and its value skipped.
    fn unknown(&mut self, global: bool, token: Token<'_>) -> Step {
        if !global {
            self.found = self.found.then(Change::Unknown { guess: None });
        }
        skip(0, token)
    }
}

fn target(at: u8, global: bool, first: bool, token: Token<'_>) -> Step {
    let word = |w: &[u8], names: &[&str]| names.iter().any(|n| w.eq_ignore_ascii_case(n.as_bytes()));
    match token {
        Token::Punct(b'@') => Step::Target { at: at + 1, global, first },
        Token::Punct(b'.') => Step::Target { at, global, first },
        // `SET STATEMENT sql_mode = ... FOR ...` (MariaDB): for one statement, but unknown.
        Token::Word(w, _) if first && at == 0 && word(w, &["statement"]) => Step::Watch,
        Token::Word(w, _) if at != 1 && word(w, &["session", "local"]) => Step::Target { at, global, first },
        Token::Word(w, _) if at != 1 && word(w, &["global", "persist", "persist_only"]) => {
            Step::Target { at, global: true, first }
        }
        // `@sql_mode` is a user variable.
        token if at != 1 && names_sql_mode(&token) => Step::Name { global },
        token => skip(0, token),
    }
}

/// What a value token sets, when it can be read: one literal or one name.
fn value(token: Token<'_>) -> Option<Change> {
    match token {
        Token::Word(w, _) if w.eq_ignore_ascii_case(b"default") => {
            // The global mode, which may hold anything; most likely the servers' default.
            Some(Change::Unknown { guess: Some(SqlMode::default()) })
        }
        Token::Literal { lit: Lit::Str { escaped: false, .. }, body, .. } => Some(Change::To(parse_modes(body))),
        Token::Word(w, Kw::Ident) | Token::Quoted(w) => Some(Change::To(parse_modes(w))),
        _ => None,
    }
}

/// Skips an assignment's value: an assignment ends at a comma outside parentheses.
fn skip(depth: u32, token: Token<'_>) -> Step {
    match token {
        Token::Punct(b'(') => Step::Skip { depth: depth + 1 },
        Token::Punct(b')') => Step::Skip { depth: depth.saturating_sub(1) },
        Token::Punct(b',') if depth == 0 => Step::Target { at: 0, global: false, first: false },
        _ => Step::Skip { depth },
    }
}

fn names_sql_mode(token: &Token<'_>) -> bool {
    matches!(token, Token::Word(w, _) | Token::Quoted(w) if w.eq_ignore_ascii_case(b"sql_mode"))
}

#[cfg(test)]
mod tests {
    use super::super::lexer::Lexer;
    use super::*;

    const ANSI: SqlMode = SqlMode { no_backslash_escapes: false, ansi_quotes: true };
    const NBE: SqlMode = SqlMode { no_backslash_escapes: true, ansi_quotes: false };
    const UNKNOWN: Change = Change::Unknown { guess: None };

    fn change(sql: &str) -> Change {
        let mut tracker = Tracker::default();
        for token in Lexer::new(sql.as_bytes(), SqlMode::default()) {
            if !matches!(token, Token::Space | Token::Comment(_)) {
                tracker.step(&token);
            }
        }
        tracker.end()
    }

    #[test]
    fn reads_a_literal_assignment_to_this_session() {
        assert_eq!(change("SET sql_mode='ANSI_QUOTES'"), Change::To(ANSI));
        assert_eq!(change("set SESSION sql_mode = 'STRICT_ALL_TABLES, ansi_quotes'"), Change::To(ANSI));
        assert_eq!(change("SET @@session.sql_mode='ANSI'"), Change::To(ANSI));
        assert_eq!(change("SET @@sql_mode := 'NO_BACKSLASH_ESCAPES'"), Change::To(NBE));
        assert_eq!(change("SET sql_mode=ANSI_QUOTES"), Change::To(ANSI));
        assert_eq!(change("SET LOCAL sql_mode=`ansi`"), Change::To(ANSI));
        assert_eq!(change("SET NAMES utf8mb4, sql_mode = 'ANSI_QUOTES'"), Change::To(ANSI));
        assert_eq!(change("SET @a = f(1, 2), sql_mode = ''"), Change::To(SqlMode::default()));
        assert_eq!(change("SET sql_mode = 'ANSI', @@global.sql_mode = ''"), Change::To(ANSI));
        assert_eq!(change("/*!40101 SET SQL_MODE='ANSI_QUOTES' */"), Change::To(ANSI));
        let dump = "/*!40101 SET @OLD_SQL_MODE=@@SQL_MODE, SQL_MODE='NO_AUTO_VALUE_ON_ZERO' */";
        assert_eq!(change(dump), Change::To(SqlMode::default()));
    }

    #[test]
    fn anything_it_cannot_read_is_unknown() {
        for sql in [
            "SET sql_mode=4",
            "SET sql_mode=0x414e5349",
            "SET sql_mode=x'414e5349'",
            "SET sql_mode=@m",
            "SET sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES')",
            "SET sql_mode = 'ANSI' 'QUOTES'",
            "SET sql_mode = 'ANSI\\_QUOTES'",
            "SET SQL_MODE=@OLD_SQL_MODE",
            "EXECUTE s",
            "EXECUTE IMMEDIATE 'SET sql_mode=''ANSI_QUOTES'''",
            "SET STATEMENT sql_mode='ANSI' FOR SELECT 1",
            "BEGIN NOT ATOMIC SET sql_mode='ANSI'; END",
            "SET sql_mode='ANSI', sql_mode=@m",
        ] {
            assert!(matches!(change(sql), Change::Unknown { .. }), "{sql}");
        }
        assert_eq!(change("SET sql_mode=DEFAULT"), Change::Unknown { guess: Some(SqlMode::default()) });
        assert_eq!(change("SET sql_mode='ANSI', sql_mode=@m"), Change::Unknown { guess: Some(ANSI) });
        assert_eq!(change("SET sql_mode=@m, sql_mode='ANSI'"), Change::To(ANSI));
        assert_eq!(change("SET sql_mode="), UNKNOWN);
    }

    #[test]
    fn ignores_what_does_not_change_this_session() {
        for sql in [
            "SET GLOBAL sql_mode='ANSI_QUOTES'",
            "SET @@global.sql_mode='ANSI_QUOTES'",
            "SET PERSIST sql_mode=CONCAT(@@sql_mode, 'x')",
            "SET @sql_mode='ANSI_QUOTES'",
            "SELECT 'sql_mode=ANSI_QUOTES'",
            "SELECT @@sql_mode",
            "SET @x = @@sql_mode",
            "SET sql_mode_x = 'ANSI'",
            "PREPARE s FROM 'SET sql_mode=''ANSI'''",
            "CALL p(@@sql_mode)",
        ] {
            assert_eq!(change(sql), Change::None, "{sql}");
        }
    }
}
