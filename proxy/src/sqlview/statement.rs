//! The SQL view's grammar: which statements are addressed to rttscope, and what they ask.
//!
//! ```text
//! SHOW RTTSCOPE { STATEMENTS | FINDINGS | LINK | INJECT } [;]
//! SET RTTSCOPE key = value [, key = value ...] [;]
//! ```
//!
//! Keywords are case-insensitive; comments (`/* */`, `-- `, `#`) may lead, as
//! sqlcommenter and ORMs put them. A key is an `inject` setting's path (`rtt`,
//! `to_upstream.delay`, `scope.percent`); a value is a quoted string, a bare word or
//! number, or `DEFAULT`.

/// What a statement addressed to rttscope asks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Statement {
    /// `SHOW RTTSCOPE <table>`.
    Show(Table),
    /// `SET RTTSCOPE key = value, ...`: changes to the emulated link.
    Set(Vec<(String, Value)>),
}

/// The tables `SHOW RTTSCOPE` has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Table {
    /// Statement classes by total time, slowest first: the report's `queries`.
    Statements,
    /// Findings, worst first, each with its sentence and its fix.
    Findings,
    /// The link verdicts of recent large transfers, newest last.
    Link,
    /// The emulated link's settings, one per row as `SHOW VARIABLES` has them, in the keys
    /// `SET RTTSCOPE` takes.
    Inject,
}

impl Table {
    /// The table names, for error messages (`SHOW RTTSCOPE what? One of ...`).
    pub const NAMES: &'static str = "STATEMENTS, FINDINGS, LINK or INJECT";
}

/// A value in `SET RTTSCOPE`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// Quoted: always a string (`'15ms'`).
    Quoted(String),
    /// A bare word or number (`15ms`, `0`, `true`).
    Bare(String),
    /// `DEFAULT`: the setting's default.
    Default,
}

/// Why a statement addressed to rttscope could not be read; shown to the client.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SyntaxError(pub String);

/// Whether `sql` is addressed to rttscope: `SHOW RTTSCOPE` or `SET RTTSCOPE` after any
/// leading blanks and comments. Looks at the first few words only.
pub fn claims(sql: &[u8]) -> bool {
    // Asked of every statement: one that starts with a letter (no blank or comment first),
    // as almost all do, is decided by its first three.
    if let Some(&[a, b, c]) = sql.get(..3)
        && a.is_ascii_alphabetic()
        && !matches!([a | 0x20, b | 0x20, c | 0x20], [b's', b'h', b'o'] | [b's', b'e', b't'])
    {
        return false;
    }
    let mut cursor = Cursor::new(sql);
    cursor.skip_blanks();
    (cursor.keyword("SHOW") || cursor.keyword("SET")) && cursor.keyword("RTTSCOPE")
}

/// Reads a statement [`claims`] said yes to.
pub fn parse(sql: &[u8]) -> Result<Statement, SyntaxError> {
    let mut cursor = Cursor::new(sql);
    cursor.skip_blanks();
    let statement = if cursor.keyword("SHOW") {
        cursor.expect_keyword("RTTSCOPE")?;
        let table = match cursor.word().to_ascii_uppercase().as_str() {
            "STATEMENTS" | "QUERIES" => Table::Statements,
            "FINDINGS" => Table::Findings,
            "LINK" | "LINKS" => Table::Link,
            "INJECT" => Table::Inject,
            "" => return Err(SyntaxError(format!("SHOW RTTSCOPE what? One of {}", Table::NAMES))),
            other => return Err(SyntaxError(format!("no SHOW RTTSCOPE {other}; there are {}", Table::NAMES))),
        };
        Statement::Show(table)
    } else if cursor.keyword("SET") {
        cursor.expect_keyword("RTTSCOPE")?;
        let mut assignments = Vec::new();
        loop {
            let key = cursor.key();
            if key.is_empty() {
                return Err(SyntaxError("SET RTTSCOPE expects key = value (e.g. rtt = '15ms')".into()));
            }
            cursor.skip_blanks();
            if !cursor.eat(b'=') {
                return Err(SyntaxError(format!("expected = after {key}")));
            }
            cursor.skip_blanks();
            let value = cursor.value().ok_or_else(|| SyntaxError(format!("expected a value for {key}")))?;
            assignments.push((key.to_ascii_lowercase(), value));
            cursor.skip_blanks();
            if !cursor.eat(b',') {
                break;
            }
            cursor.skip_blanks();
        }
        Statement::Set(assignments)
    } else {
        return Err(SyntaxError("not a statement for rttscope".into()));
    };
    cursor.skip_blanks();
    cursor.eat(b';');
    cursor.skip_blanks();
    match cursor.rest() {
        [] => Ok(statement),
        rest => Err(SyntaxError(format!(
            "unexpected {:?} at the end (one statement at a time)",
            String::from_utf8_lossy(&rest[..rest.len().min(40)])
        ))),
    }
}

/// A position in the statement's bytes.
struct Cursor<'a> {
    sql: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn new(sql: &'a [u8]) -> Cursor<'a> {
        Cursor { sql, at: 0 }
    }

    fn rest(&self) -> &'a [u8] {
        self.sql.get(self.at..).unwrap_or_default()
    }

    fn peek(&self) -> Option<u8> {
        self.sql.get(self.at).copied()
    }

    fn eat(&mut self, byte: u8) -> bool {
        let eaten = self.peek() == Some(byte);
        self.at += usize::from(eaten);
        eaten
    }

    /// Skips whitespace and comments.
    fn skip_blanks(&mut self) {
        loop {
            let rest = self.rest();
            if let Some(&b) = rest.first()
                && b.is_ascii_whitespace()
            {
                self.at += 1;
            } else if rest.starts_with(b"/*") {
                self.at += rest[2..].windows(2).position(|w| w == b"*/").map_or(rest.len(), |end| end + 4);
            } else if rest.starts_with(b"#") || rest.starts_with(b"-- ") || rest == b"--" {
                self.at += rest.iter().position(|&b| b == b'\n').map_or(rest.len(), |end| end + 1);
            } else {
                return;
            }
        }
    }

    /// The word here (letters, digits, `_`), consumed, and the blanks after it.
    fn word(&mut self) -> String {
        self.take_while(|b| b.is_ascii_alphanumeric() || b == b'_')
    }

    /// A setting's path (`to_upstream.delay`).
    fn key(&mut self) -> String {
        self.take_while(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.')
    }

    fn take_while(&mut self, keep: impl Fn(u8) -> bool) -> String {
        let rest = self.rest();
        let len = rest.iter().position(|&b| !keep(b)).unwrap_or(rest.len());
        self.at += len;
        String::from_utf8_lossy(&rest[..len]).into_owned()
    }

    /// Consumes `keyword` (case-insensitive, as a whole word) and the blanks after it.
    fn keyword(&mut self, keyword: &str) -> bool {
        let rest = self.rest();
        let matches = rest.len() >= keyword.len()
            && rest[..keyword.len()].eq_ignore_ascii_case(keyword.as_bytes())
            && rest.get(keyword.len()).is_none_or(|&b| !(b.is_ascii_alphanumeric() || b == b'_'));
        if matches {
            self.at += keyword.len();
            self.skip_blanks();
        }
        matches
    }

    fn expect_keyword(&mut self, keyword: &str) -> Result<(), SyntaxError> {
        self.keyword(keyword).then_some(()).ok_or_else(|| SyntaxError(format!("expected {keyword}")))
    }

    /// A quoted string (`'...'` or `"..."`, doubled or backslashed quotes inside), a
    /// bare word or number, or `DEFAULT`.
    fn value(&mut self) -> Option<Value> {
        if !matches!(self.peek(), Some(b'\'' | b'"')) {
            let token = self.take_while(|b| b.is_ascii_alphanumeric() || b"_.%+-".contains(&b));
            return match token.as_str() {
                "" => None,
                t if t.eq_ignore_ascii_case("DEFAULT") => Some(Value::Default),
                _ => Some(Value::Bare(token)),
            };
        }
        self.quoted()
    }

    /// A quoted string, the quote it starts with under the cursor.
    fn quoted(&mut self) -> Option<Value> {
        let quote = self.peek()?;
        self.at += 1;
        let mut text = Vec::new();
        loop {
            let b = self.peek()?;
            self.at += 1;
            match b {
                b'\\' => {
                    text.push(self.peek()?);
                    self.at += 1;
                }
                _ if b == quote && self.peek() == Some(quote) => {
                    text.push(quote);
                    self.at += 1;
                }
                _ if b == quote => return Some(Value::Quoted(String::from_utf8_lossy(&text).into_owned())),
                _ => text.push(b),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_show_and_set_rttscope_only() {
        for ours in [
            "SHOW RTTSCOPE STATEMENTS",
            "show rttscope findings;",
            "  /* app=shop */ SHOW\n\tRttScope LINK",
            "-- why\nSET RTTSCOPE rtt = '15ms'",
            "# note\nset rttscope rtt=0",
        ] {
            assert!(claims(ours.as_bytes()), "{ours:?}");
        }
        for theirs in
            ["SHOW TABLES", "SELECT 'SHOW RTTSCOPE LINK'", "SHOW RTTSCOPES", "SET rtt = 1", "SHOWRTTSCOPE", ""]
        {
            assert!(!claims(theirs.as_bytes()), "{theirs:?}");
        }
    }

    #[test]
    fn show_names_a_table() {
        assert_eq!(parse(b"SHOW RTTSCOPE statements"), Ok(Statement::Show(Table::Statements)));
        assert_eq!(parse(b"show rttscope FINDINGS ;  "), Ok(Statement::Show(Table::Findings)));
        assert_eq!(parse(b"SHOW RTTSCOPE LINK"), Ok(Statement::Show(Table::Link)));
        assert_eq!(parse(b"SHOW RTTSCOPE INJECT"), Ok(Statement::Show(Table::Inject)));
        let unknown = parse(b"SHOW RTTSCOPE TABLES").unwrap_err().0;
        assert!(unknown.contains("TABLES") && unknown.contains("STATEMENTS"), "{unknown}");
        assert!(parse(b"SHOW RTTSCOPE").is_err());
        assert!(parse(b"SHOW RTTSCOPE LINK; SELECT 1").unwrap_err().0.contains("one statement"));
    }

    #[test]
    fn set_reads_assignments() {
        let parsed =
            parse(b"SET RTTSCOPE rtt = '15ms', Bandwidth=34mbit, to_upstream.delay = DEFAULT, scope.percent = 50%");
        assert_eq!(
            parsed,
            Ok(Statement::Set(vec![
                ("rtt".into(), Value::Quoted("15ms".into())),
                ("bandwidth".into(), Value::Bare("34mbit".into())),
                ("to_upstream.delay".into(), Value::Default),
                ("scope.percent".into(), Value::Bare("50%".into())),
            ]))
        );
        assert_eq!(
            parse(b"SET RTTSCOPE k = 'it''s'"),
            Ok(Statement::Set(vec![("k".into(), Value::Quoted("it's".into()))]))
        );
        assert_eq!(
            parse(br#"SET RTTSCOPE k = "a\"b""#),
            Ok(Statement::Set(vec![("k".into(), Value::Quoted("a\"b".into()))]))
        );
        assert!(parse(b"SET RTTSCOPE").is_err());
        assert!(parse(b"SET RTTSCOPE rtt").is_err());
        assert!(parse(b"SET RTTSCOPE rtt = ").is_err());
        assert!(parse(b"SET RTTSCOPE rtt = 'unterminated").is_err());
    }
}
