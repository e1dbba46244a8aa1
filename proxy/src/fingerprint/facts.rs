//! Per-statement facts read off the token stream: the statement kind and a trailing LIMIT.

use super::lexer::{Kw, Lit, Token};
use super::{LimitArg, LimitParams, Paging, StatementKind};

/// Finds the statement kind from its first keyword, looking past leading `(` and `WITH`.
#[derive(Clone, Copy)]
pub(super) enum KindTracker {
    /// Nothing but `(` seen yet in this statement.
    Start,
    /// Inside `WITH`: the kind is the first DML keyword back at this depth.
    With(u32),
    Done(StatementKind),
}

impl KindTracker {
    /// Feeds one significant token seen at paren `depth` (before the token's own effect).
    pub(super) fn step(&mut self, token: &Token<'_>, depth: u32) {
        *self = match (*self, token) {
            (Self::Start, Token::Punct(b'(')) => Self::Start,
            (Self::Start, Token::Word(_, Kw::With)) => Self::With(depth),
            (Self::Start, Token::Word(_, kw)) => Self::Done(kind_of(*kw)),
            (Self::Start, _) => Self::Done(StatementKind::Other),
            (Self::With(at), Token::Word(_, kw)) if at == depth => match kind_of(*kw) {
                StatementKind::Other | StatementKind::Call => Self::With(at),
                kind => Self::Done(kind),
            },
            (state, _) => state,
        };
    }

    pub(super) fn kind(self) -> Option<StatementKind> {
        match self {
            Self::Done(kind) => Some(kind),
            _ => None,
        }
    }
}

fn kind_of(kw: Kw) -> StatementKind {
    match kw {
        Kw::Select => StatementKind::Select,
        Kw::Insert => StatementKind::Insert,
        Kw::Update => StatementKind::Update,
        Kw::Delete => StatementKind::Delete,
        Kw::Replace => StatementKind::Replace,
        Kw::Call => StatementKind::Call,
        _ => StatementKind::Other,
    }
}

/// Follows `LIMIT n`, `LIMIT k, n` and `LIMIT n OFFSET k` at the top level of a statement,
/// each number a literal or a `?` placeholder.
#[derive(Clone, Copy)]
pub(super) enum LimitTracker {
    Idle,
    Keyword,
    First(LimitArg),
    Comma(LimitArg),
    Offset(LimitArg),
}

impl LimitTracker {
    /// Feeds one top-level token; `placeholder` is its index among the statement's `?`s when it
    /// is one. Returns a LIMIT it completes. Callers keep the last one, since only a trailing
    /// LIMIT pages the result.
    pub(super) fn step(&mut self, token: &Token<'_>, placeholder: Option<u16>) -> Option<Limit> {
        // Most tokens are nowhere near a LIMIT: decided before any number is parsed.
        if matches!(self, Self::Idle) && !matches!(token, Token::Word(_, Kw::Limit)) {
            return None;
        }
        let arg = match *token {
            Token::Literal { lit: Lit::Number, negative: false, body } => parse_u64(body).map(LimitArg::Literal),
            Token::Placeholder => placeholder.map(LimitArg::Param),
            _ => None,
        };
        let (next, found) = match (*self, token) {
            (_, Token::Word(_, Kw::Limit)) => (Self::Keyword, None),
            (Self::Keyword, _) => (arg.map_or(Self::Idle, Self::First), None),
            (Self::First(n), Token::Punct(b',')) => (Self::Comma(n), None),
            (Self::First(n), Token::Word(_, Kw::Offset)) => (Self::Offset(n), None),
            (Self::First(count), _) => (Self::Idle, Some(Limit { count, offset: LimitArg::Literal(0) })),
            (Self::Comma(offset), _) => (Self::Idle, arg.map(|count| Limit { count, offset })),
            (Self::Offset(count), _) => (Self::Idle, arg.map(|offset| Limit { count, offset })),
            (Self::Idle, _) => (Self::Idle, None),
        };
        *self = next;
        found
    }

    /// The statement ended: `LIMIT n` as its last words is complete.
    pub(super) fn finish(&mut self) -> Option<Limit> {
        let found = match *self {
            Self::First(count) => Some(Limit { count, offset: LimitArg::Literal(0) }),
            _ => None,
        };
        *self = Self::Idle;
        found
    }
}

/// A trailing LIMIT as written: literals, placeholders, or both.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) struct Limit {
    pub(super) count: LimitArg,
    pub(super) offset: LimitArg,
}

impl Limit {
    /// The paging, when both numbers are literals.
    pub(super) fn literal(self) -> Option<Paging> {
        match (self.count, self.offset) {
            (LimitArg::Literal(count), LimitArg::Literal(offset)) => Some(Paging { count, offset }),
            _ => None,
        }
    }

    /// Which parameters decide it, when one or both are placeholders.
    pub(super) fn params(self) -> Option<LimitParams> {
        self.literal().is_none().then_some(LimitParams { count: self.count, offset: self.offset })
    }
}

/// A non-negative decimal number (a LIMIT's, or a parameter's canonical digits).
pub fn parse_u64(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u64, |acc, &d| {
        let d = char::from(d).to_digit(10)?;
        acc.checked_mul(10)?.checked_add(u64::from(d))
    })
}
