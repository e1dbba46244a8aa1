//! Every way the server may read a text when its `sql_mode` is not known for sure: which bytes
//! any reading puts inside a literal or a comment (never to be written out), and the modes the
//! session may be in after it.
//!
//! A reading is a path through the text: a lexer from a statement boundary under one mode to
//! the next `;`, where the statement's [`Change`] gives the modes the next statement may be read
//! under. Paths that reach the same boundary in modes that lex alike are merged, so the work is
//! a few passes over the text, not one per combination of statements. Modes lex alike unless the
//! text has a backslash: `NO_BACKSLASH_ESCAPES` and `ANSI_QUOTES` change only how a backslash in
//! a string reads (and `ANSI_QUOTES` only in a `"` string), which keeps most texts one path.
//!
//! A versioned comment the server may run or skip ([`Lexer::doubt`]) is not followed both ways:
//! every byte from it on is hidden, as in a text too tangled to follow.

use super::assign::{Change, Tracker};
use super::lexer::{Lexer, Resume, Token};
use super::mode::{SqlMode, SqlModes};
use super::server::Server;

/// Bytes hidden by some reading, one bit a byte; buffers kept by the `Fingerprinter`.
#[derive(Debug, Default)]
pub(super) struct Mask {
    literal: Vec<u64>,
    comment: Vec<u64>,
}

impl Mask {
    fn reset(&mut self, len: usize) {
        for bits in [&mut self.literal, &mut self.comment] {
            bits.clear();
            bits.resize(len.div_ceil(64), 0);
        }
    }

    fn mark(bits: &mut [u64], from: usize, to: usize) {
        for i in from..to {
            if let Some(word) = bits.get_mut(i / 64) {
                *word |= 1 << (i % 64);
            }
        }
    }

    fn any(bits: &[u64], from: usize, to: usize) -> bool {
        (from..to).any(|i| bits.get(i / 64).is_some_and(|w| w & (1 << (i % 64)) != 0))
    }

    /// Some reading puts a byte of `from..to` in a literal or a comment.
    pub(super) fn hides(&self, from: usize, to: usize) -> bool {
        Self::any(&self.literal, from, to) || Self::any(&self.comment, from, to)
    }

    /// Some reading puts a byte of `from..to` in a literal.
    pub(super) fn in_literal(&self, from: usize, to: usize) -> bool {
        Self::any(&self.literal, from, to)
    }

    fn mark_token(&mut self, sql: &[u8], token: &Token<'_>, from: usize, to: usize, mode: SqlMode) {
        match token {
            Token::Literal { .. } => Self::mark(&mut self.literal, from, to),
            Token::Comment(_) => Self::mark(&mut self.comment, from, to),
            // A hint's words are names in every reading that has the hint; its literals are not,
            // nor what the hint writer drops (a comment or a second `/*+` inside it). It ends at
            // its first `*/` on every server, so every server reads what is inside it alike.
            Token::Hint(body) => {
                let start = (body.as_ptr() as usize).wrapping_sub(sql.as_ptr() as usize);
                let mut lexer = Lexer::new(body, mode);
                loop {
                    let at = lexer.pos();
                    let Some(t) = lexer.next() else { break };
                    if matches!(t, Token::Literal { .. } | Token::Comment(_) | Token::Hint(_)) {
                        Self::mark(&mut self.literal, start + at, start + lexer.pos());
                    }
                }
            }
            _ => {}
        }
    }
}

/// What reading a text under every possible mode gave.
#[derive(Clone, Copy, Debug)]
pub(super) struct Outcome {
    /// The modes the session may be in once the text has run.
    pub(super) after: SqlModes,
    /// Some readings split the text differently, so a mask is needed.
    pub(super) forked: bool,
    /// Some statement may change the mode (even back to what it was).
    pub(super) changes: bool,
}

/// Paths waiting at a boundary at once, and paths read in all: past either, the text is too
/// tangled to follow and everything from the earliest boundary left on is hidden.
const MAX_PENDING: usize = 8;
const MAX_PATHS: usize = 64;

#[derive(Clone, Copy, Debug)]
struct Path {
    at: Resume,
    /// The mode it is lexed under: only the flags that change how this text lexes.
    lex: SqlMode,
    /// The modes the session may be in on this path ([`SqlModes`] bits, by mode).
    possible: [bool; 4],
    /// The path the normalised text follows, in this mode.
    likely: Option<SqlMode>,
}

/// Reads `sql` under every mode of `start` and every mode a statement may leave; marks what any
/// reading hides into `mask` (reset first), if given.
pub(super) fn read_all(sql: &[u8], start: SqlModes, mut mask: Option<&mut Mask>) -> Outcome {
    if let Some(mask) = mask.as_deref_mut() {
        mask.reset(sql.len());
    }
    let lexes = Lexes::of(sql);
    let mut pending: [Option<Path>; MAX_PENDING] = [None; MAX_PENDING];
    let begin = Resume { pos: 0, executable: false };
    let mut forked = false;
    for mode in start.iter() {
        let likely = (mode == start.likely()).then_some(mode);
        add(&mut pending, Path { at: begin, lex: lexes.key(mode), possible: only(mode), likely });
    }
    let mut after = [false; 4];
    let mut likely_after = start.likely();
    let mut changes = false;
    let server = start.server();
    for _ in 0..MAX_PATHS {
        let Some(path) = take_first(&mut pending) else {
            return Outcome { after: modes(after, likely_after).on(server), forked, changes };
        };
        forked |= pending.iter().any(|p| p.is_some_and(|p| p.lex != path.lex));
        let (end, change, doubt) = read_statement(sql, path, server, mask.as_deref_mut());
        if let Some(doubt) = doubt {
            let from = pending.iter().flatten().map(|p| p.at.pos).fold(doubt, usize::min);
            return give_up(sql, from, mask, likely_after, server);
        }
        changes |= change != Change::None;
        let (possible, likely) = apply(change, path.possible, path.likely);
        let Some(at) = end else {
            for (a, p) in after.iter_mut().zip(possible) {
                *a |= p;
            }
            likely_after = likely.unwrap_or(likely_after);
            continue;
        };
        for lex in SqlMode::ALL.into_iter().filter(|m| lexes.key(*m) == *m) {
            let mut group = [false; 4];
            for (i, mode) in SqlMode::ALL.into_iter().enumerate() {
                group[i] = possible[i] && lexes.key(mode) == lex;
            }
            let likely = likely.filter(|m| lexes.key(*m) == lex);
            if group.contains(&true) && !add(&mut pending, Path { at, lex, possible: group, likely }) {
                let from = pending.iter().flatten().map(|p| p.at.pos).fold(at.pos, usize::min);
                return give_up(sql, from, mask, likely_after, server);
            }
        }
    }
    let from = pending.iter().flatten().map(|p| p.at.pos).min().unwrap_or(sql.len());
    give_up(sql, from, mask, likely_after, server)
}

/// Reads one statement of `path`; returns where the next starts (`None` at the end of the
/// text), the statement's change to the mode, and where a comment is that `server` may read
/// either way, if there is one.
fn read_statement(
    sql: &[u8],
    path: Path,
    server: Server,
    mut mask: Option<&mut Mask>,
) -> (Option<Resume>, Change, Option<usize>) {
    let mut lexer = Lexer::resume(sql, path.at, path.lex).on(server);
    let mut tracker = Tracker::default();
    loop {
        let from = lexer.pos();
        let Some(token) = lexer.next() else { return (None, tracker.end(), lexer.doubt()) };
        match token {
            Token::Semicolon => return (Some(lexer.resume_point()), tracker.end(), lexer.doubt()),
            Token::Space => {}
            Token::Comment(_) | Token::Hint(_) => {}
            ref t => tracker.step(t),
        }
        if let Some(mask) = mask.as_deref_mut() {
            // What an executable comment holds is never written: as good as a comment here.
            if lexer.in_executable_comment() {
                Mask::mark(&mut mask.comment, from, lexer.pos());
            }
            mask.mark_token(sql, &token, from, lexer.pos(), path.lex);
        }
    }
}

/// The modes after a statement that made `change`, on a path in `possible`.
fn apply(change: Change, possible: [bool; 4], likely: Option<SqlMode>) -> ([bool; 4], Option<SqlMode>) {
    match change {
        Change::None => (possible, likely),
        Change::To(m) => (only(m), likely.map(|_| m)),
        Change::Unknown { .. } => ([true; 4], likely.map(|l| change.likely(l))),
    }
}

/// Gives up on a text too tangled to follow: every byte from `from` on is hidden, and the
/// session may be in any mode after it.
fn give_up(sql: &[u8], from: usize, mask: Option<&mut Mask>, likely: SqlMode, server: Server) -> Outcome {
    if let Some(mask) = mask {
        Mask::mark(&mut mask.literal, from, sql.len());
    }
    Outcome { after: SqlModes::unknown(likely).on(server), forked: true, changes: true }
}

/// Adds `path` to the paths waiting, merged into one at the same boundary under the same
/// lexing mode; `false` when there is no room.
fn add(pending: &mut [Option<Path>], path: Path) -> bool {
    for slot in pending.iter_mut() {
        match slot {
            Some(p) if p.at == path.at && p.lex == path.lex => {
                for (a, b) in p.possible.iter_mut().zip(path.possible) {
                    *a |= b;
                }
                p.likely = p.likely.or(path.likely);
                return true;
            }
            Some(_) => {}
            None => {
                *slot = Some(path);
                return true;
            }
        }
    }
    false
}

/// The waiting path with the earliest boundary: every path that can reach a boundary has
/// been merged into it by then, since lexing only moves forward.
fn take_first(pending: &mut [Option<Path>]) -> Option<Path> {
    let first = pending.iter().enumerate().filter_map(|(i, p)| p.map(|p| (p.at.pos, i))).min()?.1;
    pending.get_mut(first)?.take()
}

fn only(mode: SqlMode) -> [bool; 4] {
    let mut bits = [false; 4];
    for (i, m) in SqlMode::ALL.into_iter().enumerate() {
        bits[i] = m == mode;
    }
    bits
}

fn modes(possible: [bool; 4], likely: SqlMode) -> SqlModes {
    let mut modes = SqlModes::known(likely);
    for (i, m) in SqlMode::ALL.into_iter().enumerate() {
        if possible[i] {
            modes = SqlModes::known(m).or(modes);
        }
    }
    modes
}

/// Which flags change how a text lexes.
struct Lexes {
    backslash: bool,
    double_quote: bool,
}

impl Lexes {
    fn of(sql: &[u8]) -> Lexes {
        let backslash = sql.contains(&b'\\');
        Lexes { backslash, double_quote: backslash && sql.contains(&b'"') }
    }

    /// The mode that lexes this text as `mode` does, with the flags that do not matter off.
    fn key(&self, mode: SqlMode) -> SqlMode {
        SqlMode {
            no_backslash_escapes: self.backslash && mode.no_backslash_escapes,
            ansi_quotes: self.double_quote && mode.ansi_quotes,
        }
    }
}

/// Every name (word, backticked name, hint word) in `sql` read under `mode` alone by `server`,
/// following the modes its statements set as the normaliser does: what a fuzz oracle checks
/// that a text read under several modes keeps only names of each reading.
#[cfg(feature = "test-util")]
pub(super) fn names(sql: &[u8], mode: SqlMode, server: Server) -> Vec<Vec<u8>> {
    let mut names = Vec::new();
    let mut lexer = Lexer::new(sql, mode).on(server);
    let mut tracker = Tracker::default();
    let mut mode = mode;
    let hint_names = |body: &[u8], mode: SqlMode, names: &mut Vec<Vec<u8>>| {
        for t in Lexer::new(body, mode) {
            if let Token::Word(w, _) | Token::Quoted(w) = t {
                names.push(w.to_vec());
            }
        }
    };
    while let Some(token) = lexer.next() {
        match token {
            Token::Semicolon => {
                mode = tracker.end().likely(mode);
                lexer.set_mode(mode);
            }
            Token::Word(w, _) | Token::Quoted(w) => {
                tracker.step(&token);
                names.push(w.to_vec());
            }
            Token::Hint(body) => hint_names(body, mode, &mut names),
            Token::Space | Token::Comment(_) => {}
            ref t => tracker.step(t),
        }
    }
    names
}
