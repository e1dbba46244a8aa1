//! Chatty sessions: many small round trips that do no work on data — a ping before every use,
//! `SET` after `SET`, `SELECT 1`, `SHOW`, `USE` — dense in time. Each is cheap here and a full
//! RTT over a long link.
//!
//! A session is judged over a sliding window, not over its lifetime: a pooled connection
//! that lives for hours sends hundreds of pings sooner or later, which says nothing. A run
//! (an episode) starts when `min_round_trips` such round trips fall within `window`, takes in
//! those and every one after, and ends when the last `min_round_trips` no longer fit in a
//! window (or the connection closes). Statements that read or write data are never chatty:
//! the loop detectors judge those. Findings are kept per application (`user@host`) and
//! dominant statement, so a pool's connections make one finding, not one each.

use std::collections::VecDeque;
use std::sync::Arc;

use rustc_hash::FxHashMap as HashMap;

use rttscope_config::ChattyConfig;

use super::run::{Bar, Context, Detector, Role, Run, Step, merge_top, outranks};
use super::{Detail, Kind, PatternScope};
use crate::fingerprint::FingerprintId;
use crate::record::CommandRecord;

/// Scopes followed at once; past this, the quietest is forgotten (its episode ends).
const MAX_SCOPES: usize = 1024;
/// Statements counted per episode for its evidence.
const TOP_TRACKED: usize = 64;

/// One housekeeping round trip, as the window remembers it until an episode starts.
#[derive(Clone, Debug)]
struct Seen {
    step: Step,
    fingerprint: FingerprintId,
    text: Arc<str>,
}

/// When a round trip began and ended: all the window needs of it while an episode runs,
/// as the episode has counted the rest. (A whole [`Seen`], 80-odd bytes and a reference
/// count, went in and out of the window for every command of a long episode.)
#[derive(Clone, Copy, Debug)]
struct Span {
    request_us: u64,
    last_byte_us: u64,
}

impl Span {
    fn of(step: &Step) -> Span {
        Span { request_us: step.request_us, last_byte_us: step.last_byte_us }
    }
}

trait Timed {
    fn span(&self) -> Span;
}

impl Timed for Span {
    fn span(&self) -> Span {
        *self
    }
}

impl Timed for Seen {
    fn span(&self) -> Span {
        Span::of(&self.step)
    }
}

struct Episode {
    run: Run,
    /// Each statement counted and its count, in the order first seen: at most [`TOP_TRACKED`].
    counted: Vec<(FingerprintId, Arc<str>, u64)>,
    /// Where each statement is in `counted`.
    by_statement: HashMap<FingerprintId, usize>,
    /// The statement counted last, looked at before the map: an episode mostly repeats one
    /// statement (a ping, `SELECT 1`), and a hit saves hashing it.
    last: usize,
    /// The most frequent statement and its count (of equals, the smaller id): the one
    /// `run.fingerprint` names, kept as counts grow so that a command need not look at them all.
    best: Option<(FingerprintId, u64)>,
}

impl Episode {
    fn new(run: Run) -> Episode {
        Episode { run, counted: Vec::new(), by_statement: HashMap::default(), last: 0, best: None }
    }

    #[inline(always)]
    fn add(&mut self, step: &Step, id: FingerprintId, text: &Arc<str>, ctx: &Context) {
        self.run.add_step(step, ctx);
        // A statement's text is the same whichever of its commands brought it: `text`
        // stands for the one kept, so nothing is cloned for a statement already counted.
        let at = match self.counted.get(self.last) {
            Some((last, _, _)) if *last == id => Some(self.last),
            _ => self.by_statement.get(&id).copied(),
        };
        let count = match at {
            Some(i) if i < self.counted.len() => {
                self.last = i;
                let n = &mut self.counted[i].2;
                *n += 1;
                *n
            }
            _ if self.counted.len() < TOP_TRACKED => {
                self.last = self.counted.len();
                self.by_statement.insert(id, self.last);
                self.counted.push((id, text.clone(), 1));
                1
            }
            // Not counted: the statement and the top stay as they were.
            _ => return,
        };
        // The finding is about its most frequent statement. Only this one's count moved, so
        // the most frequent is either the one before or this one.
        if self.best.is_none_or(|(best, n)| best == id || count > n || (count == n && id < best)) {
            if self.best.is_none_or(|(best, _)| best != id) {
                self.run.fingerprint = id;
                self.run.text = text.clone();
            }
            self.best = Some((id, count));
        }
        if let Detail::Chatty { top, .. } = &mut self.run.detail {
            // Texts are shared by statement: the same text is usually the same allocation.
            match top.iter().position(|(t, _)| Arc::ptr_eq(t, text) || t == text) {
                // Already among the top: only its place in it can change, towards the front.
                Some(mut at) => {
                    top[at].1 += 1;
                    while at > 0 && outranks(&top[at], &top[at - 1]) {
                        top.swap(at, at - 1);
                        at -= 1;
                    }
                }
                None => {
                    top.clear();
                    let all: Vec<(Arc<str>, u64)> = self.counted.iter().map(|(_, t, n)| (t.clone(), *n)).collect();
                    merge_top(top, &all);
                }
            }
        }
    }
}

/// An episode's latest round trips, oldest first, as [`push_dense`] keeps them: at most
/// `min_round_trips`, in a ring of that many made when the episode starts (it starts with
/// that many) and let go when it ends. Once full, the newest takes the oldest's place. (A
/// `VecDeque` paid for a push, a pop and their checks on every command of a long episode.)
#[derive(Default)]
struct Spans {
    ring: Vec<Span>,
    /// Where the oldest is.
    head: usize,
    len: usize,
}

impl Spans {
    /// The place `n` after `at`, around the ring.
    fn after(&self, at: usize, n: usize) -> usize {
        let place = at + n;
        if place >= self.ring.len() { place - self.ring.len() } else { place }
    }

    /// Adds a round trip after the others, in a ring of `capacity` made if there is none: the
    /// oldest makes room if it is full. Inlined: every command of an episode comes here, and
    /// as a call it cost more than its work.
    #[inline(always)]
    fn push_back(&mut self, span: Span, capacity: usize) {
        if self.ring.is_empty() {
            self.make(span, capacity);
        }
        if self.len == self.ring.len() {
            self.ring[self.head] = span;
            self.head = self.after(self.head, 1);
        } else {
            let at = self.after(self.head, self.len);
            self.ring[at] = span;
            self.len += 1;
        }
    }

    /// The ring, as an episode starts.
    #[cold]
    fn make(&mut self, span: Span, capacity: usize) {
        self.ring = vec![span; capacity.max(1)];
    }

    fn pop_front(&mut self) {
        self.head = self.after(self.head, 1);
        self.len -= 1;
    }

    fn front(&self) -> Option<&Span> {
        (self.len > 0).then(|| &self.ring[self.head])
    }

    fn back(&self) -> Option<&Span> {
        (self.len > 0).then(|| &self.ring[self.after(self.head, self.len - 1)])
    }

    /// Lets the ring go (the episode is over).
    fn clear(&mut self) {
        *self = Spans::default();
    }

    /// [`push_dense`] for an episode's spans: the same answer, the same spans kept.
    fn push_dense(&mut self, newest: Span, min_round_trips: usize, window_us: u64) -> bool {
        let newest_us = newest.last_byte_us;
        // At most `min_round_trips`: a full ring's oldest goes.
        self.push_back(newest, min_round_trips);
        let outside = |span: &Span| newest_us.saturating_sub(span.request_us) > window_us;
        while self.len > 1 && self.front().is_some_and(outside) {
            self.pop_front();
        }
        self.len >= min_round_trips && self.front().is_some_and(|first| !outside(first))
    }
}

#[derive(Default)]
struct Window {
    /// The latest housekeeping round trips while no episode runs, at most
    /// `min_round_trips`, and only those that can still share a window with the newest:
    /// older ones can never make it dense again. (A pooled connection pinging every second
    /// kept its last 100 pings, 10 KiB, for nothing; now it keeps the last `window`'s.)
    recent: VecDeque<Seen>,
    /// The same while an episode runs, only their spans: empty otherwise.
    spans: Spans,
    /// Round trips since the window began (or restarted after an episode), up to
    /// `min_round_trips`: what the window's length was before old ones were let go.
    since_start: usize,
    episode: Option<Episode>,
}

impl Window {
    /// When its newest round trip ended (0 for none).
    fn last_us(&self) -> u64 {
        match (self.spans.back(), self.recent.back()) {
            (Some(span), _) => span.last_byte_us,
            (None, Some(seen)) => seen.step.last_byte_us,
            (None, None) => 0,
        }
    }
}

pub struct Chatty {
    min_round_trips: usize,
    window_us: u64,
    max_bytes: u64,
    min_projected_cost_us: u64,
    windows: Scopes,
    last: Option<PatternScope>,
}

/// The windows of every scope followed. The first scope seen (again, once it has closed)
/// keeps its window outside the map: a session's commands come one after another, and
/// those find their window with a compare rather than a hash and a probe.
#[derive(Default)]
struct Scopes {
    current: Option<(PatternScope, Box<Window>)>,
    /// Boxed: a window (its episode's run) is large.
    others: HashMap<PatternScope, Box<Window>>,
}

impl Scopes {
    /// The window of `scope`, made empty if there was none.
    fn get_or_default(&mut self, scope: PatternScope) -> &mut Window {
        let Scopes { current, others } = self;
        if current.is_none() && !others.contains_key(&scope) {
            *current = Some((scope, Box::default()));
        }
        match current {
            Some((at, w)) if *at == scope => w,
            _ => others.entry(scope).or_default(),
        }
    }

    fn get(&self, scope: &PatternScope) -> Option<&Window> {
        match &self.current {
            Some((at, w)) if at == scope => Some(w),
            _ => self.others.get(scope).map(|w| &**w),
        }
    }

    fn contains_key(&self, scope: &PatternScope) -> bool {
        self.get(scope).is_some()
    }

    fn remove(&mut self, scope: &PatternScope) -> Option<Box<Window>> {
        if self.current.as_ref().is_some_and(|(at, _)| at == scope) {
            return self.current.take().map(|(_, w)| w);
        }
        self.others.remove(scope)
    }

    fn iter(&self) -> impl Iterator<Item = (&PatternScope, &Window)> {
        let current = self.current.iter().map(|(at, w)| (at, &**w));
        current.chain(self.others.iter().map(|(at, w)| (at, &**w)))
    }

    fn values(&self) -> impl Iterator<Item = &Window> {
        self.iter().map(|(_, w)| w)
    }

    fn len(&self) -> usize {
        self.others.len() + usize::from(self.current.is_some())
    }

    fn clear(&mut self) {
        self.current = None;
        self.others.clear();
    }
}

impl Chatty {
    pub fn new(c: &ChattyConfig) -> Chatty {
        Chatty {
            min_round_trips: c.min_round_trips.max(1) as usize,
            window_us: c.window.0.as_micros() as u64,
            max_bytes: c.max_bytes.0,
            min_projected_cost_us: c.min_projected_cost.0.as_micros() as u64,
            windows: Scopes::default(),
            last: None,
        }
    }
}

/// Adds the newest round trip to a window's, lets go of those that can no longer share a
/// window with it, and says whether the rest are as dense as a chatty session's: at least
/// `min_round_trips`, within `window_us`.
fn push_dense<T: Timed>(recent: &mut VecDeque<T>, newest: T, min_round_trips: usize, window_us: u64) -> bool {
    let newest_us = newest.span().last_byte_us;
    recent.push_back(newest);
    while recent.len() > min_round_trips {
        recent.pop_front();
    }
    while recent.len() > 1 && recent.front().is_some_and(|f| newest_us.saturating_sub(f.span().request_us) > window_us)
    {
        recent.pop_front();
    }
    if recent.capacity() > 4 * recent.len().max(8) {
        recent.shrink_to(2 * recent.len());
    }
    match recent.front() {
        Some(first) if recent.len() >= min_round_trips => {
            newest_us.saturating_sub(first.span().request_us) <= window_us
        }
        _ => false,
    }
}

impl Detector for Chatty {
    fn kinds(&self) -> &'static [Kind] {
        &[Kind::ChattySession]
    }

    /// Inline, as most commands are not housekeeping: those leave here, without the call into [`Chatty::follow`].
    #[inline]
    fn command(&mut self, r: &CommandRecord, ctx: &Context, ended: &mut Vec<Run>) {
        self.last = None;
        if ctx.role != Role::Housekeeping {
            return;
        }
        self.follow(r, ctx, ended);
    }

    fn last_extended(&self) -> Option<&Run> {
        self.last.and_then(|s| self.windows.get(&s)).and_then(|w| w.episode.as_ref()).map(|e| &e.run)
    }

    fn connection_closed(&mut self, conn_id: u64, ended: &mut Vec<Run>) {
        if let Some(w) = self.windows.remove(&PatternScope::Connection(conn_id)) {
            ended.extend(w.episode.map(|e| e.run));
        }
        self.last = None;
    }

    fn in_progress(&self, out: &mut Vec<Run>) {
        out.extend(self.windows.values().filter_map(|w| w.episode.as_ref()).map(|e| e.run.clone()));
    }

    fn bar(&self, _run: &Run) -> Option<Bar> {
        Some(Bar { min_executions: self.min_round_trips as u64, min_projected_cost_us: self.min_projected_cost_us })
    }

    fn clear(&mut self) {
        self.windows.clear();
        self.last = None;
    }
}

impl Chatty {
    /// What [`Detector::command`] does with a housekeeping command (the only role it passes on).
    #[inline(never)]
    fn follow(&mut self, r: &CommandRecord, ctx: &Context, ended: &mut Vec<Run>) {
        if r.round_trips == 0 || r.bytes_up > self.max_bytes || r.bytes_down > self.max_bytes {
            return;
        }
        if self.windows.len() >= MAX_SCOPES
            && !self.windows.contains_key(&ctx.scope)
            && let Some(quietest) = self.windows.iter().min_by_key(|(_, w)| w.last_us()).map(|(k, _)| *k)
            && let Some(w) = self.windows.remove(&quietest)
        {
            ended.extend(w.episode.map(|e| e.run));
        }
        let (min_round_trips, window_us) = (self.min_round_trips, self.window_us);
        // In place: the window is large, and most commands extend one that exists.
        let w = self.windows.get_or_default(ctx.scope);
        w.since_start = (w.since_start + 1).min(min_round_trips);
        let step = Step::of(r);
        match &mut w.episode {
            Some(episode) => {
                let span = Span::of(&step);
                if w.spans.push_dense(span, min_round_trips, window_us) || w.since_start < min_round_trips {
                    episode.add(&step, r.fingerprint, &r.text, ctx);
                } else {
                    // The latest round trips no longer fit in a window: the episode is over,
                    // and this one starts the next window.
                    ended.extend(w.episode.take().map(|e| e.run));
                    w.spans.clear();
                    w.recent.push_back(Seen { step, fingerprint: r.fingerprint, text: r.text.clone() });
                    w.since_start = 1;
                }
            }
            None => {
                let seen = Seen { step, fingerprint: r.fingerprint, text: r.text.clone() };
                if push_dense(&mut w.recent, seen, min_round_trips, window_us) {
                    let run = Run::new(Kind::ChattySession, ctx, r, Detail::Chatty { top: Vec::new(), window_us });
                    let mut started = Episode::new(run);
                    // Taken, not drained: the window's round trips are only spans from here on.
                    for s in std::mem::take(&mut w.recent) {
                        w.spans.push_back(s.span(), min_round_trips);
                        started.add(&s.step, s.fingerprint, &s.text, ctx);
                    }
                    w.episode = Some(started);
                }
            }
        }
        // An episode already announced has nothing more to announce: the engine is not sent
        // to look for it again (a look-up in `windows` per command of a long episode).
        if w.episode.as_ref().is_some_and(|e| !e.run.announced.get()) {
            self.last = Some(ctx.scope);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::run::AppId;
    use crate::protocol::constants::command::COM_PING;

    fn ping(conn: u64, at_us: u64) -> CommandRecord {
        let mut r = CommandRecord::new(conn, COM_PING, FingerprintId(9), Arc::from("COM_PING"), at_us);
        r.last_byte_us = at_us + 150;
        (r.round_trips, r.bytes_up, r.bytes_down) = (1, 5, 11);
        r
    }

    /// The context the engine gives a ping on connection `conn`.
    fn context(conn: u64) -> Context<'static> {
        static APPLICATION: std::sync::LazyLock<Arc<str>> = std::sync::LazyLock::new(|| Arc::from("app@10.0.0.7"));
        Context {
            scope: PatternScope::Connection(conn),
            application: &APPLICATION,
            app: AppId::of("app@10.0.0.7", None),
            origin: &None,
            emulated: None,
            driver: None,
            role: Role::of(&ping(conn, 0)),
        }
    }

    /// The soak's shape: 1,000 pooled connections, each sending a housekeeping round trip
    /// every second for five minutes — never dense (100 within 10 s). Each connection used to
    /// keep its last 100 (some 10 KiB, 10 MiB for the pool) that could never make a window
    /// dense again; now only the last window's are kept.
    #[test]
    fn sparse_housekeeping_keeps_only_the_last_window() {
        let mut chatty = Chatty::new(&ChattyConfig::default());
        let mut ended = Vec::new();
        for second in 0..300 {
            for conn in 1..=1000 {
                chatty.command(&ping(conn, second * 1_000_000 + conn * 700), &context(conn), &mut ended);
            }
        }
        assert!(ended.is_empty());
        let kept: usize = chatty.windows.values().map(|w| w.recent.len()).sum();
        let capacity: usize = chatty.windows.values().map(|w| w.recent.capacity()).sum();
        assert_eq!(chatty.windows.len(), 1000);
        assert!(kept <= 1000 * 11, "{kept} round trips kept for 1,000 connections");
        assert!(capacity <= 1000 * 32, "room for {capacity} round trips kept for 1,000 connections");
    }

    /// An episode's ring keeps the spans, and answers, that `push_dense` over a deque does,
    /// whatever the gaps and however small the bound.
    #[test]
    fn the_ring_of_spans_is_a_bounded_deque() {
        let mut state = 5u64;
        for min_round_trips in [1, 2, 3, 7, 100] {
            let (mut ring, mut deque) = (Spans::default(), VecDeque::new());
            let mut at = 0;
            for _ in 0..5_000 {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                at += [10, 1_000, 90_000, 2_000_000][(state >> 60) as usize % 4];
                let span = Span { request_us: at, last_byte_us: at + (state >> 40) % 500 };
                let dense = push_dense(&mut deque, span, min_round_trips, 1_000_000);
                assert_eq!(ring.push_dense(span, min_round_trips, 1_000_000), dense);
                let kept: Vec<u64> = (0..ring.len).map(|i| ring.ring[ring.after(ring.head, i)].request_us).collect();
                assert_eq!(kept, deque.iter().map(|s| s.request_us).collect::<Vec<_>>());
                assert_eq!(ring.back().map(|s| s.last_byte_us), deque.back().map(|s| s.last_byte_us));
            }
            ring.clear();
            assert!(ring.front().is_none() && ring.ring.capacity() == 0);
        }
    }

    /// Letting old round trips go changes no episode: one starts when 100 fall within 10 s,
    /// goes on while the last 100 do, and the round trips after a quiet spell start afresh.
    #[test]
    fn episodes_start_and_end_as_before() {
        let mut chatty = Chatty::new(&ChattyConfig::default());
        let mut ended = Vec::new();
        let mut at = 0;
        let mut send = |chatty: &mut Chatty, n: u64, gap_us: u64, ended: &mut Vec<Run>| {
            for _ in 0..n {
                chatty.command(&ping(1, at), &context(1), ended);
                at += gap_us;
            }
        };
        // Sparse first (one every 2 s), then dense: the first 100 to fit in 10 s are the last
        // two sparse ones and 98 dense ones; the episode takes in those and the rest.
        send(&mut chatty, 20, 2_000_000, &mut ended);
        send(&mut chatty, 150, 50_000, &mut ended);
        assert!(ended.is_empty());
        let mut runs = Vec::new();
        chatty.in_progress(&mut runs);
        assert_eq!(runs.iter().map(|r| r.round_trips).collect::<Vec<_>>(), [152]);
        // Sparse again: the episode lasts until the last 100 no longer fit in 10 s.
        send(&mut chatty, 30, 1_000_000, &mut ended);
        assert_eq!(ended.iter().map(|r| r.round_trips).collect::<Vec<_>>(), [158]);
        runs.clear();
        chatty.in_progress(&mut runs);
        assert!(runs.is_empty());
        // A burst after it is a new episode: the burst and the sparse ones within 10 s of it.
        send(&mut chatty, 100, 50_000, &mut ended);
        chatty.in_progress(&mut runs);
        assert_eq!(runs.iter().map(|r| r.round_trips).collect::<Vec<_>>(), [105]);
        assert_eq!(ended.len(), 1);
    }
}
