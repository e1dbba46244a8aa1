//! The single pass: lexer tokens in, normalised text and per-statement facts out.
//!
//! Lists are collapsed without lookahead: a list is written out as it arrives, and when its
//! closing `)` shows it held only literals, the text written since the opening `(` is cut back
//! and replaced by `(?+)`. Cut points are always token boundaries in the output, so cutting
//! never splits a character.

use super::assign::{Change, Tracker};
use super::facts::{KindTracker, Limit, LimitTracker};
use super::lexer::{Kw, Lexer, Lit, Token};
use super::readings::Mask;
use super::server::Server;
use super::sqlcommenter::Tags;
use super::value::hash_literal;
use super::write::push_token;

mod hint;
use super::{MAX_VALUES, SqlMode, StatementKind, trace};

/// The reusable buffers a pass writes into; all owned by the `Fingerprinter`.
pub(super) struct Buffers<'s> {
    pub(super) text: &'s mut Vec<u8>,
    pub(super) values: &'s mut Vec<u64>,
    pub(super) scratch: &'s mut Vec<u8>,
    pub(super) trace: &'s mut [u8; 32],
}

/// What the pass learned about the first statement, besides the text.
pub(super) struct Summary {
    pub(super) kind: StatementKind,
    pub(super) limit: Option<Limit>,
    pub(super) rows_in_values: u32,
    pub(super) trace: bool,
    /// Where in the input the first sqlcommenter comment's body is.
    pub(super) tags: Option<(usize, usize)>,
    /// A statement changed the mode in a way the text cannot tell, and more text followed:
    /// read under one guess, which a mask over every reading must back up.
    pub(super) guessed: bool,
    /// A comment the server may read as SQL or as a comment ([`Lexer::doubt`]): read as SQL
    /// here, which a mask must back up.
    pub(super) doubt: bool,
}

/// Normalises `sql` read under `mode` by `server`; with a `mask`, every token it hides is
/// written as `?` (a run of them as one), whatever this reading makes of it.
pub(super) fn normalise(
    sql: &[u8],
    mode: SqlMode,
    server: Server,
    mask: Option<&Mask>,
    buffers: Buffers<'_>,
) -> Summary {
    let mut n = Normaliser::new(buffers, mode, mask);
    n.input = sql.as_ptr() as usize;
    let mut lexer = Lexer::new(sql, mode).on(server);
    loop {
        let from = lexer.pos();
        let Some(token) = lexer.next() else { break };
        n.feed(token, from, lexer.pos(), lexer.in_executable_comment());
        if let Some(mode) = n.mode_set.take() {
            lexer.set_mode(mode);
            n.mode = mode;
        }
    }
    n.end_statement();
    Summary {
        kind: n.first_kind.unwrap_or(StatementKind::Other),
        limit: n.limit,
        rows_in_values: n.rows,
        trace: n.trace_found,
        tags: n.tags,
        guessed: n.guessed,
        doubt: lexer.doubt().is_some(),
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    Open,
    Close,
    Comma,
    /// A literal or placeholder; `+` counts too so that `in(?+)` normalises to itself.
    Literal,
    Other,
}

/// An `IN (` list that has held nothing but literals so far.
#[derive(Clone, Copy)]
struct InList {
    /// Output length right after `in`: where `(?+)` goes.
    prefix: usize,
    /// Depth inside the list's own parentheses.
    depth: u32,
    any: bool,
}

/// One `(...)` tuple of a `VALUES` clause.
#[derive(Clone, Copy)]
struct Tuple {
    /// Where a collapsed first tuple's `(?+)` goes (right after `values`).
    prefix: usize,
    /// Where this tuple's `(` was written.
    paren: usize,
    /// Where the `,` before this tuple was written: a repeat is cut back to here.
    comma: Option<usize>,
    depth: u32,
    any: bool,
    pure: bool,
}

#[derive(Clone, Copy)]
struct Clause {
    /// Output range of the first tuple, which later tuples are compared with.
    first: Option<(usize, usize)>,
    open: Option<Tuple>,
    /// Between tuples: where the separating comma was written, once seen.
    comma: Option<usize>,
    counts_rows: bool,
}

struct Normaliser<'s> {
    mode: SqlMode,
    /// The address of the input's first byte: a comment's offset is its address less this.
    input: usize,
    /// Follows each statement for a `SET sql_mode` that changes how the next ones read.
    mode_tracker: Tracker,
    /// The mode the statement just ended set: what the rest of the input is read under.
    mode_set: Option<SqlMode>,
    guessed: bool,
    /// What some reading of the text hides: never written.
    mask: Option<&'s Mask>,
    /// The last significant token was hidden: a hidden token right after it writes nothing.
    hidden_run: bool,
    tags: Option<(usize, usize)>,
    out: &'s mut Vec<u8>,
    values: &'s mut Vec<u64>,
    scratch: &'s mut Vec<u8>,
    trace: &'s mut [u8; 32],
    trace_found: bool,
    /// Whitespace or a comment came since the last token.
    space: bool,
    /// A non-empty statement ended with `;`; the separator is written before the next token.
    separator: bool,
    /// Index of the current statement among the non-empty ones.
    stmt: u32,
    empty: bool,
    depth: u32,
    kind: KindTracker,
    first_kind: Option<StatementKind>,
    /// A depth-0 `SELECT`/`UPDATE`/`SET` has shown that a later `VALUES` is not the row source.
    rows_blocked: bool,
    rows_counted: bool,
    rows: u32,
    limit_state: LimitTracker,
    limit: Option<Limit>,
    /// `?` placeholders seen in the first statement: the next one's parameter index.
    placeholders: u16,
    expect_in: Option<usize>,
    in_list: Option<InList>,
    expect_values: Option<usize>,
    clause: Option<Clause>,
}

impl<'s> Normaliser<'s> {
    fn new(b: Buffers<'s>, mode: SqlMode, mask: Option<&'s Mask>) -> Self {
        Self {
            mode,
            input: 0,
            mode_tracker: Tracker::default(),
            mode_set: None,
            guessed: false,
            mask,
            hidden_run: false,
            tags: None,
            out: b.text,
            values: b.values,
            scratch: b.scratch,
            trace: b.trace,
            trace_found: false,
            space: false,
            separator: false,
            stmt: 0,
            empty: true,
            depth: 0,
            kind: KindTracker::Start,
            first_kind: None,
            rows_blocked: false,
            rows_counted: false,
            rows: 0,
            limit_state: LimitTracker::Idle,
            limit: None,
            placeholders: 0,
            expect_in: None,
            in_list: None,
            expect_values: None,
            clause: None,
        }
    }

    /// One token, at `from..to` in the input; `executable` when it is in a `/*! */` comment.
    fn feed(&mut self, token: Token<'_>, from: usize, to: usize, executable: bool) {
        let hidden = self.mask.is_some_and(|m| m.hides(from, to));
        match token {
            Token::Space => self.space = true,
            // Its body is SQL the server runs, but as a comment it is not written: only what
            // it does to the mode counts.
            Token::Semicolon => self.statement_ended(),
            token if executable => {
                self.space = true;
                self.mode_tracker.step(&token);
            }
            Token::Comment(body) => {
                self.space = true;
                // A comment in one reading may be a literal in another: no tags from it then.
                if self.mask.is_some_and(|m| m.in_literal(from, to)) {
                    return;
                }
                if !self.trace_found
                    && let Some(id) = trace::trace_id(body)
                {
                    *self.trace = id;
                    self.trace_found = true;
                }
                if self.tags.is_none() && Tags::of(body).is_some() {
                    let start = (body.as_ptr() as usize).wrapping_sub(self.input);
                    self.tags = Some((start, start + body.len()));
                }
            }
            Token::Hint(body) => self.hint(body),
            token => {
                self.mode_tracker.step(&token);
                if !hidden {
                    self.hidden_run = false;
                    self.significant(token);
                } else {
                    self.hidden(token);
                }
            }
        }
    }

    /// A token some reading hides: the first of a run is written as `?`, the rest not at all.
    /// A literal's value is kept either way (only its hash, for linking loops to parents).
    fn hidden(&mut self, token: Token<'_>) {
        let in_run = std::mem::replace(&mut self.hidden_run, true);
        match token {
            Token::Literal { lit, negative, body } if in_run => {
                if self.values.len() < MAX_VALUES {
                    self.values.push(hash_literal(lit, negative, body, self.scratch));
                }
            }
            Token::Literal { .. } => self.significant(token),
            _ if in_run => {}
            _ => {
                let lit = Lit::Str { quote: b'\'', escaped: false, backslash: false };
                self.significant(Token::Literal { lit, negative: false, body: &[] });
            }
        }
    }

    /// A `;`: the statement's change to the mode holds for the rest of the text.
    fn statement_ended(&mut self) {
        let change = self.mode_tracker.end();
        self.guessed |= matches!(change, Change::Unknown { .. });
        if change != Change::None {
            self.mode_set = Some(change.likely(self.mode));
        }
        self.hidden_run = false;
        self.end_statement();
    }

    fn significant(&mut self, token: Token<'_>) {
        if self.separator {
            self.out.extend_from_slice(b"; ");
            self.separator = false;
            self.space = false;
        }
        self.empty = false;
        let shape = match token {
            Token::Punct(b'(') => Shape::Open,
            Token::Punct(b')') => Shape::Close,
            Token::Punct(b',') => Shape::Comma,
            Token::Literal { .. } | Token::Placeholder | Token::Punct(b'+') => Shape::Literal,
            _ => Shape::Other,
        };
        let placeholder = match token {
            Token::Placeholder if self.stmt == 0 => {
                let index = self.placeholders;
                self.placeholders = self.placeholders.saturating_add(1);
                Some(index)
            }
            _ => None,
        };
        if self.stmt == 0
            && self.depth == 0
            && let Some(limit) = self.limit_state.step(&token, placeholder)
        {
            self.limit = Some(limit);
        }
        if self.depth == 0
            && self.kind.kind().is_some()
            && matches!(token, Token::Word(_, Kw::Select | Kw::Update | Kw::Set))
        {
            self.rows_blocked = true;
        }
        self.kind.step(&token, self.depth);
        let before = self.out.len();
        let expect_in = self.expect_in.take();
        let expect_values = self.expect_values.take();

        let start = self.write(&token);
        match shape {
            Shape::Open => self.depth += 1,
            Shape::Close => self.depth = self.depth.saturating_sub(1),
            _ => {}
        }

        self.step_in_list(shape, expect_in);
        self.step_values(shape, before, start, expect_values);
        match token {
            Token::Word(_, Kw::In) => self.expect_in = Some(self.out.len()),
            Token::Word(_, Kw::Values) if self.clause.is_none() => self.expect_values = Some(self.out.len()),
            // `value` is also a common column name; read it as a clause only in an insert.
            Token::Word(_, Kw::Value)
                if self.clause.is_none()
                    && matches!(self.kind.kind(), Some(StatementKind::Insert | StatementKind::Replace)) =>
            {
                self.expect_values = Some(self.out.len());
            }
            Token::Literal { lit, negative, body } if self.values.len() < MAX_VALUES => {
                self.values.push(hash_literal(lit, negative, body, self.scratch));
            }
            _ => {}
        }
    }

    /// Writes the token, preceded by one space if the input had whitespace there (never after
    /// `(` nor before `,` or `)`); returns where the token's own text starts.
    fn write(&mut self, token: &Token<'_>) -> usize {
        let tight = matches!(token, Token::Punct(b',' | b')'));
        // Two minus tokens always get a space: written together they would read as a `--`
        // comment when the text is normalised again.
        let minus_minus = matches!(token, Token::Punct(b'-')) && self.out.ends_with(b"-");
        if (self.space && !tight && !self.out.is_empty() && !self.out.ends_with(b"(")) || minus_minus {
            self.out.push(b' ');
        }
        let start = self.out.len();
        self.space = push_token(self.out, token);
        start
    }

    fn step_in_list(&mut self, shape: Shape, expect_in: Option<usize>) {
        if let Some(list) = &mut self.in_list {
            match shape {
                Shape::Literal => list.any = true,
                Shape::Comma | Shape::Open => {}
                Shape::Close if self.depth < list.depth => {
                    let list = *list;
                    self.in_list = None;
                    if list.any {
                        self.collapse(list.prefix);
                    }
                }
                Shape::Close => {}
                Shape::Other => self.in_list = None,
            }
        } else if let (Shape::Open, Some(prefix)) = (shape, expect_in) {
            self.in_list = Some(InList { prefix, depth: self.depth, any: false });
        }
    }

    /// `before` is the output length before this token (and its space); `start` is where the
    /// token's own text begins.
    fn step_values(&mut self, shape: Shape, before: usize, start: usize, expect: Option<usize>) {
        let Some(mut clause) = self.clause.take() else {
            if let (Shape::Open, Some(prefix)) = (shape, expect) {
                let counts_rows = self.stmt == 0
                    && self.depth == 1
                    && !self.rows_counted
                    && !self.rows_blocked
                    && matches!(self.kind.kind(), Some(StatementKind::Insert | StatementKind::Replace));
                self.rows_counted |= counts_rows;
                let tuple = Tuple { prefix, paren: start, comma: None, depth: self.depth, any: false, pure: true };
                self.clause = Some(Clause { first: None, open: Some(tuple), comma: None, counts_rows });
            }
            return;
        };
        match (clause.open.as_mut(), clause.comma) {
            (Some(tuple), _) => match shape {
                Shape::Literal => tuple.any = true,
                Shape::Comma | Shape::Open => {}
                Shape::Close if self.depth < tuple.depth => {
                    let tuple = *tuple;
                    clause.open = None;
                    self.close_tuple(&mut clause, tuple);
                }
                Shape::Close => {}
                Shape::Other => tuple.pure = false,
            },
            (None, None) if shape == Shape::Comma => clause.comma = Some(before),
            (None, Some(comma)) if shape == Shape::Open => {
                clause.comma = None;
                let tuple = Tuple {
                    prefix: comma,
                    paren: start,
                    comma: Some(comma),
                    depth: self.depth,
                    any: false,
                    pure: true,
                };
                clause.open = Some(tuple);
            }
            // Anything else between tuples ends the clause.
            _ => return,
        }
        self.clause = Some(clause);
    }

    fn close_tuple(&mut self, clause: &mut Clause, tuple: Tuple) {
        let text = if tuple.pure && tuple.any {
            // A first tuple hugs the keyword (`values(?+)`); a later one keeps its place.
            let at = if tuple.comma.is_some() { tuple.paren } else { tuple.prefix };
            self.collapse(at);
            at
        } else {
            tuple.paren
        };
        match (clause.first, tuple.comma) {
            (None, _) => clause.first = Some((text, self.out.len())),
            (Some((from, to)), Some(comma)) => {
                if self.out.get(from..to) == self.out.get(text..) {
                    self.cut(comma);
                }
            }
            (Some(_), None) => {}
        }
        if clause.counts_rows {
            self.rows = self.rows.saturating_add(1);
        }
    }

    fn collapse(&mut self, at: usize) {
        self.cut(at);
        self.out.extend_from_slice(b"(?+)");
    }

    fn cut(&mut self, at: usize) {
        // Cut points are token boundaries; a continuation byte there would be a bug, and the
        // text is left whole rather than split inside a character.
        if self.out.get(at).is_none_or(|&b| b & 0xC0 != 0x80) {
            self.out.truncate(at);
        }
    }

    /// Closes the statement at `;` or end of input. Lists still open here were cut off by
    /// the capture limit: an all-literal list collapses as if it had closed, and a partial
    /// extra `VALUES` tuple is dropped, so a truncated bulk insert keeps its full id.
    fn end_statement(&mut self) {
        if let Some(list) = self.in_list.take()
            && list.any
        {
            self.collapse(list.prefix);
        }
        if let Some(clause) = self.clause.take() {
            match (clause.open, clause.comma) {
                (Some(Tuple { comma: Some(comma), .. }), _) | (None, Some(comma)) => self.cut(comma),
                (Some(t), None) if t.pure && t.any => self.collapse(t.prefix),
                _ => {}
            }
        }
        if self.stmt == 0 {
            if let Some(limit) = self.limit_state.finish() {
                self.limit = Some(limit);
            }
            if !self.empty {
                self.first_kind = Some(self.kind.kind().unwrap_or(StatementKind::Other));
            }
        }
        if !self.empty {
            self.stmt = self.stmt.saturating_add(1);
            self.separator = true;
        }
        self.empty = true;
        self.space = false;
        self.depth = 0;
        self.kind = KindTracker::Start;
        self.rows_blocked = false;
        self.expect_in = None;
        self.expect_values = None;
    }
}
