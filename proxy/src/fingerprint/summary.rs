//! OpenTelemetry's `db.query.summary` from a normalised statement: its operations and the
//! tables they name, in order (`SELECT shop_author`, `INSERT orders SELECT carts`), as the
//! database conventions' "Generating a summary" describes.
//!
//! It reads the fingerprinter's text, where every literal is already `?`, and keeps only
//! operation keywords (upper case) and the names that follow `FROM`, `JOIN`, `INTO`, `UPDATE`
//! and `TABLE`: a `?`, a number or anything quoted as a string can never reach it. Computed
//! once per statement when its metrics series is made, never per execution.

/// Longest summary, in bytes (OpenTelemetry's recommended bound).
pub const MAX_SUMMARY: usize = 255;
/// Most operations and tables a summary names: the main ones, so that it stays low-cardinality.
const MAX_PARTS: usize = 6;

/// Words that start an operation of their own after the first (a subquery's, `INSERT ...
/// SELECT`'s, a `UNION`'s): elsewhere `UPDATE` and `REPLACE` are clauses
/// (`ON DUPLICATE KEY UPDATE`, `FOR UPDATE`, `CREATE OR REPLACE`).
const LATER_OPERATIONS: &[&str] = &["select"];
/// Words after which a table name comes.
const TABLE_BEFORE: &[&str] = &["from", "join", "into", "table", "straight_join"];
/// Words that end a `FROM a, b` list or follow a table instead of an alias.
const CLAUSES: &[&str] = &[
    "where",
    "group",
    "order",
    "limit",
    "having",
    "on",
    "using",
    "join",
    "inner",
    "left",
    "right",
    "cross",
    "natural",
    "straight_join",
    "set",
    "values",
    "value",
    "select",
    "union",
    "for",
    "lock",
    "partition",
    "as",
    "force",
    "use",
    "ignore",
    "window",
    "into",
    "outer",
    "returning",
    "procedure",
    "outfile",
    "dumpfile",
    "if",
    "not",
    "exists",
];

/// The summary of normalised SQL `text`: its first word and every later operation upper case,
/// each followed by the tables it names; `OTHER` when the text starts with no word.
pub fn summary(text: &str) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut tokens = Tokens::new(text);
    let mut expect_table = false;
    let mut in_from_list = false;
    let mut after_table = false;
    let mut first = true;
    while let Some(token) = tokens.next() {
        if parts.len() >= MAX_PARTS {
            break;
        }
        let Token::Word(word) = token else {
            // `FROM a, b`: a comma after a table (and its alias) names another one.
            expect_table = in_from_list && token == Token::Comma && after_table;
            after_table = false;
            // Only a word that starts the text is its operation.
            first = false;
            continue;
        };
        let lower = word.to_ascii_lowercase();
        if first {
            first = false;
            if word.bytes().all(|b| b.is_ascii_alphabetic()) && word.len() <= 20 {
                parts.push(lower.to_ascii_uppercase());
            } else {
                parts.push("OTHER".to_owned());
            }
            // `UPDATE t`: the first word is the one place `UPDATE` names a table.
            expect_table = TABLE_BEFORE.contains(&lower.as_str()) || lower == "update";
            continue;
        }
        if expect_table && matches!(lower.as_str(), "if" | "not" | "exists" | "ignore" | "low_priority" | "quick") {
            // `CREATE TABLE IF NOT EXISTS t`, `INSERT IGNORE INTO t`: the name is still to come.
            continue;
        }
        if expect_table && is_name(word) && !CLAUSES.contains(&lower.as_str()) {
            // A backticked name keeps its backticks: `My Table` is one name.
            let name = word;
            if parts.last().map(String::as_str) != Some(name) {
                parts.push(name.to_owned());
            }
            expect_table = false;
            after_table = true;
            continue;
        }
        if LATER_OPERATIONS.contains(&lower.as_str()) {
            parts.push(lower.to_ascii_uppercase());
        }
        if lower == "from" {
            in_from_list = true;
        } else if CLAUSES.contains(&lower.as_str()) && lower != "as" {
            in_from_list = false;
        }
        if !(after_table && lower == "as") {
            after_table = after_table && !CLAUSES.contains(&lower.as_str());
        }
        expect_table = TABLE_BEFORE.contains(&lower.as_str());
    }
    if parts.is_empty() {
        parts.push("OTHER".to_owned());
    }
    let mut out = parts.join(" ");
    if out.len() > MAX_SUMMARY {
        let mut end = MAX_SUMMARY;
        while !out.is_char_boundary(end) {
            end -= 1;
        }
        out.truncate(end);
    }
    out
}

/// A table name as the normalised text writes it: an unquoted identifier (possibly
/// `schema.table`) that does not start with a digit, or a backticked one. Never `?`.
fn is_name(word: &str) -> bool {
    if word.starts_with('`') {
        return word.len() > 2 && word.ends_with('`');
    }
    word.bytes().next().is_some_and(|b| b.is_ascii_alphabetic() || b == b'_' || b == b'$')
        && word.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b == b'.')
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Token<'a> {
    Word(&'a str),
    Comma,
    Other,
}

/// Words (identifiers, keywords, backticked names), commas, and one token for anything else;
/// optimizer hints (`/*+ ... */`) are skipped whole.
struct Tokens<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Tokens<'a> {
    fn new(text: &'a str) -> Tokens<'a> {
        Tokens { text, at: 0 }
    }

    fn next(&mut self) -> Option<Token<'a>> {
        let bytes = self.text.as_bytes();
        while self.at < bytes.len() && bytes[self.at].is_ascii_whitespace() {
            self.at += 1;
        }
        let start = self.at;
        let &b = bytes.get(start)?;
        let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b == b'.' || b >= 0x80;
        if self.text[start..].starts_with("/*") {
            self.at = self.text[start..].find("*/").map_or(bytes.len(), |end| start + end + 2);
            return Some(Token::Other);
        }
        if b == b'`' {
            // A backticked name ends at the next lone backtick (`` `` `` is an escaped one).
            let mut i = start + 1;
            while i < bytes.len() {
                if bytes[i] == b'`' {
                    if bytes.get(i + 1) == Some(&b'`') {
                        i += 2;
                        continue;
                    }
                    break;
                }
                i += 1;
            }
            self.at = (i + 1).min(bytes.len());
            return Some(Token::Word(&self.text[start..self.at]));
        }
        if word(b) {
            while self.at < bytes.len() && word(bytes[self.at]) {
                self.at += 1;
            }
            return Some(Token::Word(&self.text[start..self.at]));
        }
        self.at += self.text[start..].chars().next().map_or(1, char::len_utf8);
        Some(if b == b',' { Token::Comma } else { Token::Other })
    }
}

#[cfg(test)]
mod tests {
    use super::super::Fingerprinter;
    use super::*;

    fn of(sql: &str) -> String {
        summary(Fingerprinter::new().fingerprint(sql.as_bytes()).text)
    }

    #[test]
    fn operations_and_their_tables() {
        let cases = [
            ("SELECT * FROM shop_author WHERE id = 42", "SELECT shop_author"),
            ("select a.name from shop_book b join shop_author a on a.id = b.author_id", "SELECT shop_book shop_author"),
            ("SELECT * FROM a x, b AS y WHERE x.id = y.id", "SELECT a b"),
            (
                "INSERT INTO shipping_details (id) SELECT id FROM orders WHERE total > 100",
                "INSERT shipping_details SELECT orders",
            ),
            ("UPDATE accounts SET balance = 10 WHERE id = 7", "UPDATE accounts"),
            ("DELETE FROM sessions WHERE expires < '2024-01-01'", "DELETE sessions"),
            ("SELECT 1", "SELECT"),
            ("SET NAMES utf8mb4", "SET"),
            ("SELECT * FROM `My Table` WHERE x = 'y'", "SELECT `My Table`"),
            ("SELECT /*+ INDEX(t i) */ a FROM app.t WHERE b IN (1, 2, 3)", "SELECT app.t"),
            ("SELECT * FROM (SELECT id FROM t1) AS d", "SELECT SELECT t1"),
            ("CREATE TABLE t2 (id INT)", "CREATE t2"),
            ("CREATE OR REPLACE TABLE IF NOT EXISTS t3 (id INT)", "CREATE t3"),
            ("INSERT INTO t4 (a) VALUES (1) ON DUPLICATE KEY UPDATE a = 2", "INSERT t4"),
            ("REPLACE INTO t5 VALUES (1)", "REPLACE t5"),
            ("SELECT a FROM t6 WHERE id = 1 FOR UPDATE", "SELECT t6"),
            ("SELECT a FROM t7 UNION SELECT b FROM t8", "SELECT t7 SELECT t8"),
            ("DELETE FROM t9 WHERE id IN (SELECT id FROM t10)", "DELETE t9 SELECT t10"),
            ("(( 1", "OTHER"),
        ];
        for (sql, want) in cases {
            assert_eq!(of(sql), want, "{sql}");
        }
    }

    #[test]
    fn no_literal_ever_reaches_a_summary() {
        let secrets = ["'hunter2'", "\"hunter2\"", "424242", "x'4242'", "0x4242", "'hunter'", "_utf8mb4'hunter2'"];
        let shapes = [
            "SELECT * FROM t WHERE a = {}",
            "SELECT {} FROM t",
            "INSERT INTO t VALUES ({})",
            "UPDATE t SET a = {}",
            "SELECT * FROM {}",
            "SELECT * FROM t, {}",
            "DELETE FROM t WHERE {}",
            "{} FROM t",
            "SELECT * FROM t WHERE a IN ({}, {})",
            "INSERT INTO t SET a = {}",
        ];
        for shape in shapes {
            for secret in secrets {
                let sql = shape.replace("{}", secret);
                // Normalised first, as the metrics do it; and raw, should a caller ever forget.
                for s in [of(&sql), summary(&sql)] {
                    assert!(!s.to_lowercase().contains("hunter") && !s.contains("4242"), "{sql} -> {s}");
                }
            }
        }
    }

    #[test]
    fn summaries_are_bounded() {
        let sql = format!("SELECT * FROM {}", (0..200).map(|i| format!("t{i}")).collect::<Vec<_>>().join(", "));
        let s = of(&sql);
        assert!(s.len() <= MAX_SUMMARY && s.split(' ').count() <= MAX_PARTS, "{s}");
        assert!(summary(&"x".repeat(10_000)).len() <= MAX_SUMMARY);
    }
}
