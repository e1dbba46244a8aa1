//! Byte-level MySQL tokenizer for fingerprinting: one pass, no allocation, never fails.
//!
//! It knows just enough SQL to tell literals from identifiers: quoting and escapes, comment
//! syntax, number shapes, and whether a `-` can be a sign. Anything it does not recognise is
//! passed through as punctuation, so malformed or truncated input still tokenizes.
//!
//! Where a string ends depends on the session's [`SqlMode`]: read under the wrong mode, the
//! rest of a string (`'a\', 'secret'` without backslash escapes) would come out as words, and
//! words are kept in the normalised text. So the caller says which mode the server is in, and
//! which server it is: that decides which versioned comments are SQL ([`Server`]).

use super::SqlMode;
use super::server::Server;

mod comments;

/// The few keywords the normaliser acts on, plus the two classes every other word falls in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kw {
    /// An identifier, or a keyword that ends an operand (a following `-` is binary).
    Ident,
    /// A keyword after which an expression starts (a following `-1` is a negative literal).
    Expr,
    In,
    Values,
    Value,
    Limit,
    Offset,
    Select,
    Insert,
    Update,
    Delete,
    Replace,
    Call,
    With,
    Set,
    Is,
    Not,
    Null,
    True,
    False,
}

/// Which literal a `?` stands for; decides how its value is made canonical before hashing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Lit {
    Number,
    /// `escaped` is set when the body holds a backslash or a doubled quote to undo;
    /// `backslash` when backslashes were escapes (not under `NO_BACKSLASH_ESCAPES`).
    Str {
        quote: u8,
        escaped: bool,
        backslash: bool,
    },
    Hex,
    Bits,
    True,
    False,
    Null,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Token<'a> {
    /// A run of whitespace or control bytes.
    Space,
    /// The text between the comment markers.
    Comment(&'a [u8]),
    Word(&'a [u8], Kw),
    /// A backtick-quoted identifier, without its backticks.
    Quoted(&'a [u8]),
    /// `body` is the literal without quotes, `0x`/`x'` prefixes or sign.
    Literal {
        lit: Lit,
        negative: bool,
        body: &'a [u8],
    },
    Placeholder,
    /// A `/*+ ... */` optimizer hint, body without the `+`: part of the statement, not a comment.
    Hint(&'a [u8]),
    /// Any other single ASCII byte: operators, parentheses, commas, dots.
    Punct(u8),
    Semicolon,
}

/// What came before, which is all the context MySQL's own lexer needs for the same decisions.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Prev {
    /// Start of a statement, an operator, `(`, `,` or an expression keyword.
    Operator,
    /// An operand: identifier, literal, `)`.
    Value,
    /// A `.` right after an operand, so the next word is a qualified name even if it is digits.
    Qualifier,
    /// `IS` or `NOT`: like an operator, but `NULL`/`TRUE`/`FALSE` after it are keywords.
    IsNot,
}

pub(super) struct Lexer<'a> {
    src: &'a [u8],
    pos: usize,
    prev: Prev,
    /// Backslashes escape the next byte in strings (no `NO_BACKSLASH_ESCAPES`).
    backslash: bool,
    /// `"` quotes identifiers (`ANSI_QUOTES`).
    ansi_quotes: bool,
    /// Inside an executable comment (`/*! ... */`): its body is SQL, lexed as such, so a
    /// `*/` inside one of its strings does not end it; the first `*/` outside one does.
    executable: bool,
    /// Whose lexer this one stands in for: which versioned comments are SQL.
    server: Server,
    /// Where the first comment is that the server may read as SQL or as a comment: what
    /// follows it may read either way.
    doubt: Option<usize>,
    /// Where the last word or backquoted name ended: a `.` exactly there qualifies it (`t.1col`),
    /// anywhere else a `.` before a digit starts a number (`t /**/.4`, `'a'.4`, `(1).4`), as in
    /// MySQL's lexer, which looks for the separator only right after a name.
    name_end: Option<usize>,
}

/// Where a lexer can stop and another start again: after a `;` the lexer's only state is
/// its position and whether it is inside an executable comment (`/*!40101 SET a=1; ...`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Resume {
    pub(super) pos: usize,
    pub(super) executable: bool,
}

impl<'a> Lexer<'a> {
    pub(super) fn new(src: &'a [u8], mode: SqlMode) -> Self {
        Self::resume(src, Resume { pos: 0, executable: false }, mode)
    }

    /// A lexer that starts at `at` (a statement boundary another lexer reached) under `mode`.
    pub(super) fn resume(src: &'a [u8], at: Resume, mode: SqlMode) -> Self {
        Self {
            src,
            pos: at.pos,
            prev: Prev::Operator,
            backslash: !mode.no_backslash_escapes,
            ansi_quotes: mode.ansi_quotes,
            executable: at.executable,
            server: Server::Unknown,
            doubt: None,
            name_end: None,
        }
    }

    /// Reads versioned comments as `server` does.
    pub(super) fn on(mut self, server: Server) -> Self {
        self.server = server;
        self
    }

    /// Where the first comment is that the server may read either as SQL or as a comment,
    /// if one has been read: every byte from there on may read another way.
    pub(super) fn doubt(&self) -> Option<usize> {
        self.doubt
    }

    /// Where the next token starts, to resume from.
    pub(super) fn resume_point(&self) -> Resume {
        Resume { pos: self.pos, executable: self.executable }
    }

    /// Offset of the next token in the input.
    pub(super) fn pos(&self) -> usize {
        self.pos
    }

    /// The last token came from inside an executable comment's body.
    pub(super) fn in_executable_comment(&self) -> bool {
        self.executable
    }

    /// Reads what follows under `mode`: the `;` of a statement that changed it has been read.
    pub(super) fn set_mode(&mut self, mode: SqlMode) {
        self.backslash = !mode.no_backslash_escapes;
        self.ansi_quotes = mode.ansi_quotes;
    }

    fn at(&self, i: usize) -> Option<u8> {
        self.src.get(i).copied()
    }

    fn slice(&self, from: usize, to: usize) -> &'a [u8] {
        self.src.get(from..to).unwrap_or_default()
    }

    fn run(&self, from: usize, pred: impl Fn(u8) -> bool) -> usize {
        let mut i = from;
        while self.at(i).is_some_and(&pred) {
            i += 1;
        }
        i
    }

    /// Scans a quoted string from the opening quote at `start`; returns (end, body end, escaped).
    /// An unterminated string runs to the end of the input: that is what truncation looks like.
    fn string(&self, start: usize, quote: u8, backslash: bool) -> (usize, usize, bool) {
        let mut i = start + 1;
        let mut escaped = false;
        while let Some(c) = self.at(i) {
            if backslash && c == b'\\' {
                escaped = true;
                i += 2;
            } else if c == quote {
                if self.at(i + 1) == Some(quote) {
                    escaped = true;
                    i += 2;
                } else {
                    return (i + 1, i, escaped);
                }
            } else {
                i += 1;
            }
        }
        let end = self.src.len();
        (end, end, escaped)
    }

    /// Scans a number at `i` (a digit, or `.` before a digit). `None` when the bytes are really
    /// an identifier: MySQL allows names such as `1st` or `0xfg` that begin like numbers.
    fn number(&self, i: usize) -> Option<(Lit, usize, usize)> {
        // Only lower-case 0x/0b are literals; MySQL reads `0X1F` as an identifier.
        let radix = match (self.at(i), self.at(i + 1)) {
            (Some(b'0'), Some(b'x')) => Some(Lit::Hex),
            (Some(b'0'), Some(b'b')) => Some(Lit::Bits),
            _ => None,
        };
        if let Some(lit) = radix {
            let end = self.run(i + 2, |c| match lit {
                Lit::Hex => c.is_ascii_hexdigit(),
                _ => matches!(c, b'0' | b'1'),
            });
            let literal = end > i + 2 && !self.at(end).is_some_and(is_ident);
            return literal.then_some((lit, i + 2, end));
        }
        let mut end = self.run(i, |c| c.is_ascii_digit());
        let mut plain = true;
        if self.at(end) == Some(b'.') {
            end = self.run(end + 1, |c| c.is_ascii_digit());
            plain = false;
        }
        if matches!(self.at(end), Some(b'e' | b'E')) {
            let mut k = end + 1;
            if matches!(self.at(k), Some(b'+' | b'-')) {
                k += 1;
            }
            if self.at(k).is_some_and(|c| c.is_ascii_digit()) {
                end = self.run(k, |c| c.is_ascii_digit());
            }
        }
        // `.1abc` is `.` then the name `1abc`; `1.5abc` is `1.5 abc`, as MySQL reads them.
        let leading_dot = self.at(i) == Some(b'.');
        if (plain || leading_dot) && self.at(end).is_some_and(is_ident) {
            return None;
        }
        Some((Lit::Number, i, end))
    }

    /// Whether a literal that a charset introducer (`_utf8mb4`) can prefix starts at `i`.
    fn introduced_literal_at(&self, i: usize) -> bool {
        match (self.at(i), self.at(i + 1)) {
            (Some(b'\'' | b'"'), _) => true,
            (Some(b'x' | b'X' | b'b' | b'B'), Some(b'\'')) => true,
            (Some(b'0'), Some(b'x' | b'b')) => self.number(i).is_some(),
            _ => false,
        }
    }

    fn word(&mut self, start: usize) -> Token<'a> {
        let end = self.run(start, is_ident);
        let word = self.slice(start, end);
        if end == start + 1 && self.at(end) == Some(b'\'') {
            let lit = match self.at(start).map(|c| c.to_ascii_lowercase()) {
                Some(b'x') => Some(Lit::Hex),
                Some(b'b') => Some(Lit::Bits),
                Some(b'n') => Some(Lit::Str { quote: b'\'', escaped: false, backslash: self.backslash }),
                _ => None,
            };
            if let Some(lit) = lit {
                let backslash = matches!(lit, Lit::Str { .. }) && self.backslash;
                let (stop, body_end, escaped) = self.string(end, b'\'', backslash);
                let lit = match lit {
                    Lit::Str { quote, .. } => Lit::Str { quote, escaped, backslash },
                    other => other,
                };
                return self.literal(lit, false, end + 1, body_end, stop);
            }
        }
        if word.len() > 1 && word.first() == Some(&b'_') {
            let next = self.run(end, is_space);
            if self.introduced_literal_at(next) {
                // The introducer only says how to read the literal; the value is what matters.
                self.pos = next;
                return self.next().unwrap_or(Token::Space);
            }
        }
        let kw = keyword(word);
        self.pos = end;
        if matches!(kw, Kw::Null | Kw::True | Kw::False) && self.prev != Prev::IsNot {
            let lit = match kw {
                Kw::Null => Lit::Null,
                Kw::True => Lit::True,
                _ => Lit::False,
            };
            self.prev = Prev::Value;
            return Token::Literal { lit, negative: false, body: word };
        }
        self.prev = match kw {
            Kw::Is | Kw::Not => Prev::IsNot,
            Kw::Ident | Kw::Value | Kw::Offset | Kw::Null | Kw::True | Kw::False => Prev::Value,
            _ => Prev::Operator,
        };
        self.name_end = Some(end);
        Token::Word(word, kw)
    }

    fn literal(&mut self, lit: Lit, negative: bool, from: usize, to: usize, end: usize) -> Token<'a> {
        self.pos = end;
        self.prev = Prev::Value;
        Token::Literal { lit, negative, body: self.slice(from, to) }
    }

    fn punct(&mut self, b: u8, start: usize) -> Token<'a> {
        self.pos = start + 1;
        self.prev = match b {
            b')' => Prev::Value,
            b'.' if self.prev == Prev::Value => Prev::Qualifier,
            _ => Prev::Operator,
        };
        Token::Punct(b)
    }
}

impl<'a> Iterator for Lexer<'a> {
    type Item = Token<'a>;

    fn next(&mut self) -> Option<Token<'a>> {
        let start = self.pos;
        let b = self.at(start)?;
        let next = self.at(start + 1);
        let digit_after = |i: usize| self.at(i).is_some_and(|c| c.is_ascii_digit());
        let tok = match b {
            _ if is_space(b) => {
                self.pos = self.run(start, is_space);
                Token::Space
            }
            b'#' => self.line_comment(start + 1),
            // MySQL needs a space or control byte after `--`, so `1--1` is one minus minus one.
            b'-' if next == Some(b'-') && self.at(start + 2).is_none_or(|c| c <= b' ') => self.line_comment(start + 2),
            b'*' if next == Some(b'/') && self.executable => {
                self.pos = start + 2;
                self.executable = false;
                Token::Space
            }
            b'/' if next == Some(b'*') => self.comment(start + 2),
            // Under ANSI_QUOTES `"` quotes an identifier, where a backslash is an ordinary
            // byte. It still becomes `?`: whether a `"` token is a name or a value depends on
            // a mode rttscope may not have seen set, and a value must never be written out.
            b'\'' | b'"' => {
                let backslash = self.backslash && !(b == b'"' && self.ansi_quotes);
                let (end, body_end, escaped) = self.string(start, b, backslash);
                self.literal(Lit::Str { quote: b, escaped, backslash }, false, start + 1, body_end, end)
            }
            b'`' => {
                let (end, body_end, _) = self.string(start, b'`', false);
                self.pos = end;
                self.prev = Prev::Value;
                self.name_end = Some(end);
                Token::Quoted(self.slice(start + 1, body_end))
            }
            // Digits are a qualified name's only right after its dot (`t.1col`): after a space
            // or a comment's end they are a number, whatever came before.
            b'0'..=b'9' if self.prev != Prev::Qualifier || start == 0 || self.src[start - 1] != b'.' => {
                match self.number(start) {
                    Some((lit, from, to)) => self.literal(lit, false, from, to, to),
                    None => self.word(start),
                }
            }
            b'.' if self.name_end != Some(start) && digit_after(start + 1) => match self.number(start) {
                Some((lit, from, to)) => self.literal(lit, false, from, to, to),
                None => self.punct(b, start),
            },
            b'-' | b'+'
                if matches!(self.prev, Prev::Operator | Prev::IsNot)
                    && (digit_after(start + 1) || (next == Some(b'.') && digit_after(start + 2))) =>
            {
                match self.number(start + 1) {
                    // A sign belongs to decimal numbers only; `-0x1F` stays an operator and a literal.
                    Some((Lit::Number, from, to)) => self.literal(Lit::Number, b == b'-', from, to, to),
                    _ => self.punct(b, start),
                }
            }
            b'?' => {
                self.pos = start + 1;
                self.prev = Prev::Value;
                Token::Placeholder
            }
            b';' => {
                self.pos = start + 1;
                self.prev = Prev::Operator;
                Token::Semicolon
            }
            _ if is_ident(b) => self.word(start),
            _ => self.punct(b, start),
        };
        Some(tok)
    }
}

/// Bytes that can be part of an unquoted identifier. Every byte of a multi-byte UTF-8
/// sequence is >= 0x80, so a character is never split between a word and what follows.
pub(super) fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c >= 0x80
}

fn is_space(c: u8) -> bool {
    c <= b' ' || c == 0x7f
}

pub(super) fn keyword(word: &[u8]) -> Kw {
    let mut buf = [0u8; 12];
    let Some(lower) = buf.get_mut(..word.len()) else {
        return Kw::Ident;
    };
    for (d, s) in lower.iter_mut().zip(word) {
        *d = s.to_ascii_lowercase();
    }
    match &*lower {
        b"in" => Kw::In,
        b"values" => Kw::Values,
        b"value" => Kw::Value,
        b"limit" => Kw::Limit,
        b"offset" => Kw::Offset,
        b"select" => Kw::Select,
        b"insert" => Kw::Insert,
        b"update" => Kw::Update,
        b"delete" => Kw::Delete,
        b"replace" => Kw::Replace,
        b"call" => Kw::Call,
        b"with" => Kw::With,
        b"set" => Kw::Set,
        b"is" => Kw::Is,
        b"not" => Kw::Not,
        b"null" => Kw::Null,
        b"true" => Kw::True,
        b"false" => Kw::False,
        b"where" | b"and" | b"or" | b"xor" | b"on" | b"when" | b"then" | b"else" | b"elseif" | b"having" | b"by"
        | b"return" | b"like" | b"between" | b"case" | b"interval" | b"div" | b"mod" | b"distinct" | b"all"
        | b"any" | b"some" | b"regexp" | b"rlike" | b"escape" | b"default" | b"binary" | b"union" | b"while"
        | b"until" | b"exists" => Kw::Expr,
        _ => Kw::Ident,
    }
}
