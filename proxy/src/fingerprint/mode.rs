//! The session's `sql_mode`, as far as it changes how SQL text is tokenized, and how a
//! client's `SET sql_mode = ...` changes it.

use super::lexer::{Kw, Lexer, Lit, Token};

/// The parts of the session's `sql_mode` that decide where a string literal ends.
///
/// Read under the wrong mode, part of a literal would come out as words, and words are kept:
/// `SELECT 'a\', 'secret'` is two strings under `NO_BACKSLASH_ESCAPES` and one unterminated
/// string otherwise. The server reports `NO_BACKSLASH_ESCAPES` in every OK/EOF status; whether
/// `"` quotes names (`ANSI_QUOTES`) it does not report, so a `"` token is `?` either way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SqlMode {
    /// A backslash in a string is an ordinary byte, not an escape.
    pub no_backslash_escapes: bool,
    /// `"` quotes identifiers (no backslash escapes in them), not strings.
    pub ansi_quotes: bool,
}

/// The `sql_mode` the last `SET` statement in `sql` gives the session, starting from
/// `before`, when one assigns it a literal or `DEFAULT` (taken to be the servers' default, with
/// neither flag). `None` for anything else, an expression (`CONCAT(@@sql_mode, ...)`) included:
/// the mode is then unknown and the caller keeps what it had. That is safe for `ANSI_QUOTES`,
/// because a `"` token is written as `?` either way, and `NO_BACKSLASH_ESCAPES` the server
/// reports in its answer.
pub fn sql_mode_assigned(sql: &[u8], before: SqlMode) -> Option<SqlMode> {
    let mut tracker = ModeTracker::default();
    let mut mode = None;
    let mut lexer = Lexer::new(sql, before);
    while let Some(token) = lexer.next() {
        if token != Token::Semicolon {
            tracker.step(&token);
        } else if let Some(m) = tracker.end() {
            lexer.set_mode(m);
            mode = Some(m);
        }
    }
    tracker.end().or(mode)
}

/// Combination modes that include `ANSI_QUOTES` (MySQL's and MariaDB's).
const WITH_ANSI_QUOTES: [&[u8]; 7] = [b"ANSI_QUOTES", b"ANSI", b"DB2", b"MAXDB", b"MSSQL", b"ORACLE", b"POSTGRESQL"];

/// The mode a `sql_mode` string sets.
fn parse_modes(list: &[u8]) -> SqlMode {
    let has = |names: &[&[u8]]| {
        list.split(|&c| c == b',').any(|m| names.iter().any(|n| m.trim_ascii().eq_ignore_ascii_case(n)))
    };
    SqlMode { no_backslash_escapes: has(&[b"NO_BACKSLASH_ESCAPES"]), ansi_quotes: has(&WITH_ANSI_QUOTES) }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Step {
    /// Before the statement's first token.
    #[default]
    Start,
    /// In a `SET` statement, between assignments or in one's value.
    InSet,
    /// Read `sql_mode`; `global` when it was the global one.
    Name {
        global: bool,
    },
    Equals {
        global: bool,
    },
    /// Not a `SET` that could change this session's mode.
    Other,
}

/// Follows one statement's tokens for a `SET [SESSION|LOCAL] sql_mode = ...`, as the
/// normaliser lexes it: a multi-statement query that sets the mode is read under the new mode
/// after the `;`, as the server reads it.
#[derive(Debug, Default)]
pub(super) struct ModeTracker {
    step: Step,
    /// `GLOBAL`, `PERSIST` or `@@global.` came since the last assignment.
    global: bool,
    found: Option<SqlMode>,
}

impl ModeTracker {
    pub(super) fn step(&mut self, token: &Token<'_>) {
        // A statement that did not start with SET stays out of it to its end: most of them.
        if matches!(self.step, Step::Other) {
            return;
        }
        let word = |w: &[u8], name: &str| w.eq_ignore_ascii_case(name.as_bytes());
        self.step = match (self.step, *token) {
            (_, Token::Space | Token::Comment(_)) => return,
            (Step::Start, Token::Word(_, Kw::Set)) => Step::InSet,
            (Step::Start | Step::Other, _) => Step::Other,
            // `SET STATEMENT sql_mode=... FOR ...` (MariaDB) changes one statement only.
            (Step::InSet, Token::Word(w, _)) if word(w, "statement") && self.found.is_none() => Step::Other,
            (Step::InSet, Token::Word(w, _)) if word(w, "global") || word(w, "persist") => {
                self.global = true;
                Step::InSet
            }
            (Step::InSet, Token::Word(w, _)) if word(w, "sql_mode") => {
                Step::Name { global: std::mem::take(&mut self.global) }
            }
            // `SET sql_mode = 'x', @@global.sql_mode = 'y'`: each assignment names its own scope.
            (Step::InSet, Token::Punct(b',')) => {
                self.global = false;
                Step::InSet
            }
            (Step::InSet, _) => Step::InSet,
            (Step::Name { global }, Token::Punct(b':')) => Step::Name { global },
            (Step::Name { global }, Token::Punct(b'=')) => Step::Equals { global },
            (Step::Equals { global }, Token::Literal { lit: Lit::Str { .. }, body, .. }) => {
                if !global {
                    self.found = Some(parse_modes(body));
                }
                Step::InSet
            }
            (Step::Equals { global }, Token::Word(w, _)) if word(w, "default") => {
                if !global {
                    self.found = Some(SqlMode::default());
                }
                Step::InSet
            }
            (Step::Name { .. } | Step::Equals { .. }, _) => Step::InSet,
        };
    }

    /// The statement ended: the mode it set, if it set one. Ready for the next statement.
    pub(super) fn end(&mut self) -> Option<SqlMode> {
        let found = self.found.take();
        *self = ModeTracker::default();
        found
    }
}

#[cfg(test)]
mod tests {
    use super::{SqlMode, sql_mode_assigned};

    fn ansi(sql: &[u8]) -> Option<bool> {
        sql_mode_assigned(sql, SqlMode::default()).map(|m| m.ansi_quotes)
    }

    #[test]
    fn reads_the_session_sql_mode_a_client_sets() {
        assert_eq!(ansi(b"SET sql_mode='ANSI_QUOTES'"), Some(true));
        assert_eq!(ansi(b"set SESSION sql_mode = 'STRICT_ALL_TABLES, ansi_quotes'"), Some(true));
        assert_eq!(ansi(b"SET @@session.sql_mode='ANSI'"), Some(true));
        assert_eq!(ansi(b"SET @@sql_mode := 'NO_BACKSLASH_ESCAPES'"), Some(false));
        assert_eq!(ansi(b"SET sql_mode = 'PIPES_AS_CONCAT,POSTGRESQL'"), Some(true));
        let both = sql_mode_assigned(b"SET sql_mode='ansi_quotes,no_backslash_escapes'", SqlMode::default());
        assert_eq!(both, Some(SqlMode { no_backslash_escapes: true, ansi_quotes: true }));
        // The last assignment of the last statement that makes one.
        assert_eq!(ansi(b"SET sql_mode='ANSI'; SELECT 1; SET sql_mode=DEFAULT; DO 1"), Some(false));
        assert_eq!(ansi(b"SET LOCAL sql_mode=DEFAULT"), Some(false));
        assert_eq!(ansi(b"SET NAMES utf8mb4, sql_mode = 'ANSI_QUOTES'"), Some(true));
        assert_eq!(ansi(b"/* app */ SET sql_mode=\"ANSI_QUOTES\""), Some(true));
    }

    #[test]
    fn ignores_what_does_not_change_this_session() {
        assert_eq!(ansi(b"SET GLOBAL sql_mode='ANSI_QUOTES'"), None);
        assert_eq!(ansi(b"SET @@global.sql_mode='ANSI_QUOTES'"), None);
        assert_eq!(ansi(b"SET STATEMENT sql_mode='ANSI_QUOTES' FOR SELECT 1"), None);
        assert_eq!(ansi(b"SET sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES')"), None);
        assert_eq!(ansi(b"SELECT 'sql_mode=ANSI_QUOTES'"), None);
        assert_eq!(ansi(b"SET @x = 1"), None);
        assert_eq!(ansi(b"SET sql_mode_x = 'ANSI'"), None);
    }
}
