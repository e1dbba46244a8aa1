//! Comments: ordinary, line, optimizer hints, and executable ones, whose body the server reads
//! as SQL or skips as a comment as its version decides.

use super::super::server::Reading;
use super::{Lexer, Token};

/// What follows `/*!` or `/*M!`.
struct Marker {
    /// Where the body starts when it is SQL: past the version, if there is one.
    sql: usize,
    /// Digits right after the marker: five or more are a version.
    digits: usize,
    /// The version they hold: their first five, or six, as MySQL and MariaDB read them.
    version: u32,
    mariadb_only: bool,
}

impl<'a> Lexer<'a> {
    /// A comment whose body starts at `body` (just past `/*`): an optimizer hint, an
    /// executable comment whose body is SQL (the lexer goes on inside it), or a comment.
    pub(super) fn comment(&mut self, body: usize) -> Token<'a> {
        let mut nested = false;
        if let Some(marker) = self.executable_marker(body) {
            let reading = self.server.reads(marker.mariadb_only, marker.digits, marker.version);
            // Inside another, the server may run it and end both at its `*/`: read it as a
            // comment here, and every reading from it on is masked.
            if self.executable || reading == Reading::Either {
                self.doubt.get_or_insert(body - 2);
            }
            match reading {
                _ if self.executable => {}
                // Either: read as SQL, but nothing from here on is written ([`Lexer::doubt`]).
                Reading::Sql | Reading::Either => {
                    self.pos = marker.sql;
                    self.executable = true;
                    return Token::Space;
                }
                Reading::Comment { nested: n } => nested = n,
            }
        }
        let (body_end, end) = self.comment_end(body, nested);
        self.pos = end;
        match self.at(body) {
            Some(b'+') => Token::Hint(self.slice(body + 1, body_end)),
            _ => Token::Comment(self.slice(body, body_end)),
        }
    }

    /// Where a comment whose body starts at `i` ends: (end of body, past its `*/`), skipping
    /// one nested `/* ... */` if `nested`, as a server skips a versioned comment.
    fn comment_end(&self, mut i: usize, nested: bool) -> (usize, usize) {
        while let Some(c) = self.at(i) {
            if nested && c == b'/' && self.at(i + 1) == Some(b'*') {
                i = self.comment_end(i + 2, false).1;
            } else if c == b'*' && self.at(i + 1) == Some(b'/') {
                return (i, i + 2);
            } else {
                i += 1;
            }
        }
        (self.src.len(), self.src.len())
    }

    /// After `/*` at `i`: the `!` or MariaDB's `M!` of an executable comment, and the version
    /// after it; `None` for any other comment.
    fn executable_marker(&self, i: usize) -> Option<Marker> {
        let (after, mariadb_only) = match (self.at(i), self.at(i + 1)) {
            (Some(b'!'), _) => (i + 1, false),
            (Some(b'M'), Some(b'!')) => (i + 2, true),
            _ => return None,
        };
        let digits = self.run(after, |c| c.is_ascii_digit()) - after;
        let read = if digits >= 5 { digits.min(6) } else { 0 };
        let version = self.slice(after, after + read).iter().fold(0, |v, d| v * 10 + u32::from(d - b'0'));
        Some(Marker { sql: after + read, digits, version, mariadb_only })
    }

    pub(super) fn line_comment(&mut self, body: usize) -> Token<'a> {
        let end = self.run(body, |c| c != b'\n');
        self.pos = end;
        Token::Comment(self.slice(body, end))
    }
}
