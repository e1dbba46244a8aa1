//! Per-statement facts read off the token stream: the statement kind and a trailing LIMIT.

use super::lexer::{Kw, Lit, Token};
use super::{Limit, StatementKind};

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

/// Follows `LIMIT n`, `LIMIT k, n` and `LIMIT n OFFSET k` at the top level of a statement.
#[derive(Clone, Copy)]
pub(super) enum LimitTracker {
    Idle,
    Keyword,
    First(u64),
    Comma(u64),
    Offset(u64),
}

impl LimitTracker {
    /// Feeds one top-level token; returns a LIMIT it completes. Callers keep the last one,
    /// since only a trailing LIMIT pages the result.
    pub(super) fn step(&mut self, token: &Token<'_>) -> Option<Limit> {
        let number = match *token {
            Token::Literal {
                lit: Lit::Number,
                negative: false,
                body,
            } => parse_u64(body),
            _ => None,
        };
        let (next, found) = match (*self, token) {
            (_, Token::Word(_, Kw::Limit)) => (Self::Keyword, None),
            (Self::Keyword, _) => (number.map_or(Self::Idle, Self::First), None),
            (Self::First(n), Token::Punct(b',')) => (Self::Comma(n), None),
            (Self::First(n), Token::Word(_, Kw::Offset)) => (Self::Offset(n), None),
            (Self::First(count), _) => (Self::Idle, Some(Limit { count, offset: 0 })),
            (Self::Comma(offset), _) => (Self::Idle, number.map(|count| Limit { count, offset })),
            (Self::Offset(count), _) => (Self::Idle, number.map(|offset| Limit { count, offset })),
            (Self::Idle, _) => (Self::Idle, None),
        };
        *self = next;
        found
    }

    /// The statement ended: `LIMIT n` as its last words is complete.
    pub(super) fn finish(&mut self) -> Option<Limit> {
        let found = match *self {
            Self::First(count) => Some(Limit { count, offset: 0 }),
            _ => None,
        };
        *self = Self::Idle;
        found
    }
}

fn parse_u64(digits: &[u8]) -> Option<u64> {
    digits.iter().try_fold(0u64, |acc, &d| {
        let d = char::from(d).to_digit(10)?;
        acc.checked_mul(10)?.checked_add(u64::from(d))
    })
}
