//! Polling before sleeping: a connection thread with nothing left to do keeps watching its
//! sockets for a few tens of microseconds before it lets its CPU go idle.
//!
//! Why: on a virtual machine an idle CPU halts, and waking it again — the other side's
//! packet, an interrupt, the hypervisor scheduling the vCPU back in — is most of what a
//! relay's hop costs. A relay adds two such hand-offs to every round trip (the query into
//! it, the answer into it). Measured here (`scripts/bench.sh --only a`): rttscope and
//! HAProxy, both at the floor of system calls per round trip, each added about +20 to +40 µs
//! to a loopback `SELECT 1`; polling through the idle gap took rttscope's share to a few
//! microseconds, because the answer, or the application's next query, lands while the
//! thread is still awake. It is the idea of the kernel's own `haltpoll` idle driver, done
//! where the kernel's is off (this machine boots with `haltpoll.guest_halt_poll_ns=0`).
//!
//! What keeps it cheap — a sidecar must not burn the CPU the application needs:
//! - The window adapts as `haltpoll`'s does ([`Window`]): it grows when a sleep ended
//!   soon after the window would have, shrinks when sleeps outlast the longest window. There
//!   is one window for each thing a thread waits for ([`Awaited`]): the application's next
//!   command, the first byte of the server's answer, and the rest of an answer under way —
//!   which come at unrelated paces (an application sending 100 queries a second to a server
//!   50 µs away; a result set streaming over a line 20 ms long). In front of a database
//!   milliseconds away, the long waits for answers close the answer's window, so it costs
//!   little where it cannot help.
//! - It polls for an answer's first byte only while the application's commands come back
//!   to back (the client's window open). A poll costs as much CPU as it lasts, and caught, it saves a
//!   sleep and a wake-up — less than the answer's tens of microseconds. Where the
//!   application waits on each answer to send the next command, the latency saved is its
//!   throughput; where it paces its commands milliseconds apart, polling would buy latency
//!   with CPU on every query, and a sidecar's CPU is paid on every application host
//!   (`scripts/bench.sh --cpu` races it against HAProxy's at paced rates). Once an answer
//!   is under way, its rest is polled for whatever the client's pace: a large result is
//!   read as it streams in, or the relay's late reads leave the line idle and the link
//!   verdict reads the line as the sender's fault.
//! - It stands aside when the machine is crowded ([`Crowding`]): when work waits for a CPU
//!   half the time or more, a polling thread would take a CPU from it. Read from the
//!   kernel's pressure stall information (`/proc/pressure/cpu`: how long some task waited
//!   for a CPU) every 100 ms at most ([`PRESSURE_EVERY`]); where the kernel has no PSI, from
//!   `/proc/loadavg`'s runnable threads at most once a millisecond per thread, every 8 ms
//!   while crowded ([`SAMPLE_EVERY_CROWDED`]) ([`Gauge`]). This is what keeps
//!   many-connection throughput where it was without polling.
//! - It pays for itself or stays off ([`payoff`]): the thread measures, on its own traffic,
//!   whether polling for the next command and an answer's first byte shortens the
//!   application's cycle — it does for a client waiting on each answer to send the next, not
//!   for one keeping its own pace or talking to a server milliseconds away — and for how much
//!   of the thread's CPU, and polls for them only where the cycle is shorter for about the CPU
//!   sleeping costs.
//! - It gives way: between looks it yields the CPU (`sched_yield`), so a thread waiting for
//!   this CPU runs at once instead of after the window. And a thread that parks because a
//!   write found its socket full does not poll at all: its peer, perhaps the application on
//!   this machine reading a result, needs the CPU to make room ([`write_waiting`]).
//! - It stops at the first sign of work: a watched socket readable (or writable again while
//!   a write waits for room: [`write_waiting`]), or a task woken from another thread (a
//!   timer on the main runtime, the drain). Those wake-ups reach the runtime's queue, not
//!   these sockets, so its queue is looked at too.
//!
//! `relay.idle_poll` is the longest window; `0` turns polling off. The metric
//! `rttscope_idle_poll_seconds_total` is what it costs, `rttscope_idle_polls_total` how it
//! went.
//!
//! The sockets are watched through an epoll set of the thread's own (mio's, edge-
//! triggered): the runtime's is not reachable, and polling it would take its events.

use std::cell::{Cell, RefCell};
use std::fs::File;
use std::io::{self, ErrorKind};
use std::os::fd::RawFd;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

mod payoff;

use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Registry, Token};
use tokio::runtime::RuntimeMetrics;

use payoff::Payoff;

/// Events taken per look: any one ends the poll, but each socket that had room again must
/// go back to being watched for data only.
const EVENTS: usize = 8;

/// How often a thread reads `/proc/loadavg`, at most.
const SAMPLE_EVERY: Duration = Duration::from_millis(1);

/// How often while the machine is crowded. Why less often: then nothing is polled, and a
/// reading only decides when polling may start again — a little later costs a little latency
/// for a moment — while reading it once a millisecond per thread cost about 1.5 % of the
/// relay's CPU on a crowded machine (`perf`, workload b). The moving average needs 15 to 26
/// uncrowded samples to let polling back: at this pace 0.1 to 0.2 s after the load ends.
const SAMPLE_EVERY_CROWDED: Duration = Duration::from_millis(8);

/// How often a thread reads `/proc/pressure/cpu`, at most. Why so seldom: the kernel weighs
/// each CPU's stall time in a reading by the whole jiffies (1–10 ms) that CPU was busy since
/// the reading before, so readings a millisecond apart lose most of the stall — measured
/// here, 3 busy loops on 2 CPUs read every millisecond showed 1 % where read every second
/// they show 50 % — and lose it for every reader of the file (monitoring, `systemd-oomd`),
/// not only this one. At 100 ms a reading loses a few percent.
const PRESSURE_EVERY: Duration = Duration::from_millis(100);

/// What the connection threads' polling did, for `/metrics`.
#[derive(Debug, Default)]
pub struct IdlePollStats {
    /// Nanoseconds spent polling.
    pub polled_ns: AtomicU64,
    /// Polls a watched socket (or woken task) ended: a sleep and a wake-up saved.
    pub caught: AtomicU64,
    /// Polls the window ended: the thread slept after all.
    pub missed: AtomicU64,
    /// Idle moments not polled because work was waiting for a CPU (the machine crowded).
    pub crowded: AtomicU64,
    /// Idle moments not polled because polling did not speed the application up ([`payoff`]),
    /// or while that was being measured.
    pub unpaid: AtomicU64,
}

impl IdlePollStats {
    /// `(outcome, count)` as `rttscope_idle_polls_total` labels them.
    pub fn outcomes(&self) -> [(&'static str, u64); 4] {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        [
            ("caught", load(&self.caught)),
            ("missed", load(&self.missed)),
            ("crowded", load(&self.crowded)),
            ("unpaid", load(&self.unpaid)),
        ]
    }
}

/// The polling window: `haltpoll`'s rule. A sleep that ended within the longest window but
/// after this one says a longer window would have caught it (grow); a sleep longer than the
/// longest window says polling would have been wasted (shrink).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Window {
    now: Duration,
    longest: Duration,
}

impl Window {
    pub(crate) fn new(longest: Duration) -> Window {
        Window { now: Duration::ZERO, longest }
    }

    /// How long to poll at the next idle moment.
    pub(crate) fn get(self) -> Duration {
        self.now
    }

    /// The first window after none: a quarter of the longest.
    fn start(self) -> Duration {
        self.longest / 4
    }

    /// Learns from one idle moment that lasted `idle` (polling included).
    pub(crate) fn idled(&mut self, idle: Duration) {
        if idle <= self.now {
            return;
        }
        if idle <= self.longest {
            self.now = (self.now * 2).max(self.start()).min(self.longest);
        } else {
            self.now /= 2;
            if self.now < self.start() {
                self.now = Duration::ZERO;
            }
        }
    }
}

/// Whether work is waiting for a CPU, averaged over the last few samples so one busy
/// instant does not decide.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Crowding {
    /// How much work waited, in 256ths, as a moving average: of the time (pressure, a half
    /// per sample), or in threads beyond the CPUs (load, an eighth per sample).
    waiting: u32,
    cpus: u32,
}

/// A sample that could not be read: as crowded as can be, so polling happens only where
/// the machine is known to be free.
const UNREAD: u32 = 16 * 256;

impl Crowding {
    pub(crate) fn new(cpus: u32) -> Crowding {
        Crowding { waiting: 0, cpus: cpus.max(1) }
    }

    /// Takes one pressure sample: the share of the time since the last in which some task
    /// waited for a CPU, in 256ths (`None`: unreadable). Half its weight: each covers 100 ms
    /// or more already.
    pub(crate) fn sample_pressure(&mut self, waited: Option<u32>) {
        let sample = waited.map_or(UNREAD, |w| w.min(256));
        self.waiting = self.waiting / 2 + sample / 2;
    }

    /// Takes one load sample: `runnable` threads, this one among them (`None`: unreadable).
    /// An eighth of the weight: each is an instant.
    pub(crate) fn sample_load(&mut self, runnable: Option<u32>) {
        let sample = runnable.map_or(UNREAD, |n| n.saturating_sub(self.cpus).min(16) * 256);
        self.waiting = self.waiting - self.waiting / 8 + sample / 8;
    }

    /// Work waiting for a CPU half the time, or half a thread waiting, on average.
    pub(crate) fn crowded(self) -> bool {
        self.waiting >= 128
    }
}

/// Where a thread reads how crowded the machine is.
///
/// Why pressure first: `/proc/loadavg`'s runnable count is an instant, and the instant a
/// connection thread reads it — about to sleep, having just passed a query to the server
/// and an answer to the client — is the one at which the threads it woke are runnable
/// before they run. On 2 CPUs with one sequential client (workload a) that read as crowded
/// often enough to stop polling for whole stretches: 36,000 of 48,000 idle moments of one
/// side of a run not polled, its added latency back at HAProxy's (1.27× where it had been
/// 0.35×). The pressure is time actually spent waiting for a CPU: about 18 % under a, 88 %
/// under b's 8 connections.
enum Gauge {
    /// `/proc/pressure/cpu`'s `some ... total=` (µs some task waited for a CPU) and when it
    /// was last read.
    Pressure { file: File, last: Option<(u64, Instant)> },
    /// `/proc/loadavg`, where the kernel has no PSI (built without it, or booted `psi=0`).
    Load(File),
    /// Neither readable: always crowded, so never polling.
    Unreadable,
}

impl Gauge {
    fn open() -> Gauge {
        // Opening succeeds on a kernel that has PSI built in but off; reading then fails.
        if let Ok(file) = File::open("/proc/pressure/cpu")
            && cpu_waited_us(&file).is_some()
        {
            return Gauge::Pressure { file, last: None };
        }
        match File::open("/proc/loadavg") {
            Ok(file) => Gauge::Load(file),
            Err(_) => Gauge::Unreadable,
        }
    }

    /// How long after a reading the next may be taken.
    fn every(&self, crowded: bool) -> Duration {
        match self {
            Gauge::Pressure { .. } => PRESSURE_EVERY,
            _ if crowded => SAMPLE_EVERY_CROWDED,
            _ => SAMPLE_EVERY,
        }
    }

    /// Reads the gauge at `now` into `crowding`.
    fn sample(&mut self, now: Instant, crowding: &mut Crowding) {
        match self {
            Gauge::Pressure { file, last } => {
                let total = cpu_waited_us(file);
                match (total, *last) {
                    (Some(total), Some((before, at))) => {
                        crowding.sample_pressure(waited_share(total.saturating_sub(before), now.duration_since(at)));
                    }
                    // The first reading is the baseline for the next.
                    (Some(_), None) => {}
                    (None, _) => crowding.sample_pressure(None),
                }
                *last = total.map(|t| (t, now));
            }
            Gauge::Load(file) => crowding.sample_load(runnable(file)),
            Gauge::Unreadable => crowding.sample_load(None),
        }
    }
}

/// `waited` µs of waiting over `elapsed`, in 256ths (`None` for no time elapsed).
fn waited_share(waited: u64, elapsed: Duration) -> Option<u32> {
    let elapsed = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
    (elapsed > 0).then(|| u32::try_from(waited.saturating_mul(256) / elapsed).unwrap_or(u32::MAX))
}

/// Reads the µs some task has waited for a CPU since boot from `/proc/pressure/cpu`
/// ("some avg10=0.00 avg60=0.00 avg300=0.00 total=1149127711").
fn cpu_waited_us(pressure: &File) -> Option<u64> {
    parse_cpu_waited_us(read_text(pressure, &mut [0u8; 256])?)
}

fn parse_cpu_waited_us(text: &str) -> Option<u64> {
    let some = text.lines().find(|l| l.starts_with("some "))?;
    some.split_ascii_whitespace().find_map(|field| field.strip_prefix("total="))?.parse().ok()
}

/// Reads the runnable threads from `/proc/loadavg` ("0.52 0.58 0.59 3/131 11486": 3).
fn runnable(loadavg: &File) -> Option<u32> {
    read_text(loadavg, &mut [0u8; 128])?.split_ascii_whitespace().nth(3)?.split('/').next()?.parse().ok()
}

/// A small /proc file read whole, afresh (from offset 0, so the same descriptor serves every
/// reading), into `buf`, as text.
fn read_text<'a>(file: &File, buf: &'a mut [u8]) -> Option<&'a str> {
    let n = file.read_at(buf, 0).ok()?;
    std::str::from_utf8(buf.get(..n)?).ok()
}

/// A connection thread's poller.
struct Poller {
    poll: Poll,
    events: Events,
    runtime: RuntimeMetrics,
    /// How long to poll for the client's next command.
    client: Window,
    /// How long to poll for the first byte of the server's answer.
    answer: Window,
    /// How long to poll for more of an answer under way.
    rest: Window,
    /// What the current idle moment waits for (set before parking, read after).
    awaited: Awaited,
    crowding: Crowding,
    /// Whether polling for the next command and an answer's first byte pays.
    payoff: Payoff,
    /// When the thread last went idle waiting for a command: where the application's current
    /// cycle began.
    cycle_since: Option<Instant>,
    gauge: Gauge,
    sampled: Option<Instant>,
    /// When the current idle moment began (set before parking, read after).
    idle_since: Option<Instant>,
    stats: Arc<super::RelayStats>,
    /// A write found its socket full since the last park ([`write_waiting`]).
    write_waited: Cell<bool>,
    /// Counts not yet added to `stats`: added at each sample ([`Gauge::every`]) and before a
    /// sleep that follows a poll, so a park that catches work, or does not poll, writes
    /// nothing shared.
    polled: Duration,
    caught: u64,
    crowded: u64,
    unpaid: u64,
}

thread_local! {
    static POLLER: RefCell<Option<Poller>> = const { RefCell::new(None) };
    /// What the connection task that last went idle on this thread waits for ([`awaiting`]).
    static AWAITED: Cell<Awaited> = const { Cell::new(Awaited::Command) };
}

/// What a connection going idle waits for; each has its own window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Awaited {
    /// The client's next command: nothing is unanswered.
    Command,
    /// The first byte of the server's answer to a command.
    Answer,
    /// More of an answer under way: some of it came, not its end.
    Rest,
}

/// Tells this thread's poller what the connection going idle now waits for. Called as a
/// connection's task returns pending, on every wake-up: a thread-local store. With several
/// connections on a thread, the last to go idle speaks for the thread; those threads are
/// busy, and polling then is mostly decided by [`Crowding`].
pub(crate) fn awaiting(awaited: Awaited) {
    AWAITED.with(|a| a.set(awaited));
}

/// What the connection that last went idle on this thread waits for.
#[cfg(test)]
pub(crate) fn awaited() -> Awaited {
    AWAITED.with(Cell::get)
}

/// Makes the calling thread poll for up to `longest` before its runtime parks it; `0`
/// leaves it as it was. Called on a connection thread before its runtime runs.
pub(super) fn install(longest: Duration, runtime: RuntimeMetrics, stats: Arc<super::RelayStats>) {
    if longest.is_zero() {
        return;
    }
    let poll = match Poll::new() {
        Ok(poll) => poll,
        Err(e) => {
            tracing::warn!(error = %e, "relay.idle_poll: cannot make an epoll set; this connection thread sleeps when idle");
            return;
        }
    };
    let cpus = std::thread::available_parallelism().map_or(1, |n| u32::try_from(n.get()).unwrap_or(u32::MAX));
    let poller = Poller {
        poll,
        events: Events::with_capacity(EVENTS),
        runtime,
        client: Window::new(longest),
        answer: Window::new(longest),
        rest: Window::new(longest),
        awaited: Awaited::Command,
        crowding: Crowding::new(cpus),
        payoff: Payoff::default(),
        cycle_since: None,
        gauge: Gauge::open(),
        sampled: None,
        idle_since: None,
        stats,
        write_waited: Cell::new(false),
        polled: Duration::ZERO,
        caught: 0,
        crowded: 0,
        unpaid: 0,
    };
    POLLER.with(|p| *p.borrow_mut() = Some(poller));
}

/// Watches `fd` (a connection's socket) for data from this thread's poller, if it has one.
/// The epoll set forgets it by itself when the socket's last descriptor is closed.
///
/// Readable only: a socket's writable edges also come when its peer merely reads (a Unix
/// socket's on every read), and watched all the time they ended nearly every poll at once
/// (measured at d03bd2d: the latency gain gone). Writability is watched only while a write
/// waits for room ([`write_waiting`]).
pub(crate) fn watch(fd: RawFd) {
    register(fd, Interest::READABLE, |r, s, t, i| r.register(s, t, i));
}

/// Says that a write on `fd` found the socket full (or a TLS stream's flush had to wait):
/// until the socket has room again, a poll ends when it does, so the write goes on as soon
/// as the peer takes bytes rather than when the window runs out (a bulk result to a slow
/// reader would otherwise wait a window each time the reader made room, and the link probe
/// would blame the reader).
///
/// And the thread's next park does not poll at all: it parks because its peer is slower
/// than it, and the peer — on the same machine, the application reading a result — needs
/// the CPU to make room, and polling there would take it.
pub(crate) fn write_waiting(fd: RawFd) {
    POLLER.with(|p| {
        if let Ok(poller) = p.try_borrow()
            && let Some(poller) = poller.as_ref()
        {
            poller.write_waited.set(true);
        }
    });
    register(fd, Interest::READABLE | Interest::WRITABLE, |r, s, t, i| r.reregister(s, t, i));
}

/// Registers (or changes) `fd` in this thread's epoll set, if it has one.
fn register(
    fd: RawFd,
    interest: Interest,
    how: impl FnOnce(&Registry, &mut SourceFd<'_>, Token, Interest) -> io::Result<()>,
) {
    POLLER.with(|p| {
        if let Ok(poller) = p.try_borrow()
            && let Some(poller) = poller.as_ref()
            && let Err(e) = how(poller.poll.registry(), &mut SourceFd(&fd), token(fd), interest)
        {
            // Only this socket goes unwatched: it still wakes the thread, later.
            tracing::debug!(error = %e, fd, "relay.idle_poll: cannot watch a socket");
        }
    });
}

/// A socket's token in the epoll set: its descriptor, so an event names the socket.
fn token(fd: RawFd) -> Token {
    Token(usize::try_from(fd).unwrap_or(usize::MAX))
}

/// The runtime's hook before it parks the thread.
pub(super) fn before_park() {
    POLLER.with(|p| {
        if let Ok(mut poller) = p.try_borrow_mut()
            && let Some(poller) = poller.as_mut()
        {
            poller.before_park();
        }
    });
}

/// The runtime's hook after the thread is back.
pub(super) fn after_unpark() {
    POLLER.with(|p| {
        if let Ok(mut poller) = p.try_borrow_mut()
            && let Some(poller) = poller.as_mut()
            && let Some(since) = poller.idle_since.take()
        {
            let idle = since.elapsed();
            poller.window_for(poller.awaited).idled(idle);
        }
    });
}

impl Poller {
    fn before_park(&mut self) {
        let start = Instant::now();
        self.idle_since = Some(start);
        let every = self.gauge.every(self.crowding.crowded());
        if self.sampled.is_none_or(|at| start.duration_since(at) >= every) {
            self.sampled = Some(start);
            self.gauge.sample(start, &mut self.crowding);
            self.publish();
        }
        let was = std::mem::replace(&mut self.awaited, AWAITED.with(Cell::get));
        if self.awaited == Awaited::Command && was != Awaited::Command {
            self.cycle_began(start);
        }
        let window = self.window();
        if self.write_waited.replace(false) || window.is_zero() {
            // About to sleep: the shared counters cost nothing now.
            self.publish();
            return;
        }
        if self.awaited != Awaited::Rest && !self.payoff.polls() {
            // Counted at the next sample or sleep after a poll, as a crowded moment is: under
            // many connections most moments are one or the other, and a shared write at each
            // would be the cost of not polling.
            self.unpaid += 1;
            return;
        }
        if self.crowding.crowded() {
            self.crowded += 1;
            return;
        }
        let caught = self.poll_for(start, window);
        self.polled += start.elapsed();
        if caught {
            self.caught += 1;
        } else {
            // About to sleep anyway: the shared counters cost nothing now.
            self.stats.idle_poll.missed.fetch_add(1, Ordering::Relaxed);
            self.publish();
        }
    }

    /// A new application cycle begins at `at`: the one before ends.
    fn cycle_began(&mut self, at: Instant) {
        if let Some(since) = self.cycle_since.replace(at) {
            self.payoff.cycled(at.duration_since(since), crate::sys::thread_cpu_time);
        }
    }

    /// How long to poll now, for what the thread waits for: an answer's first byte only
    /// while the client's window is open, the rest of one whatever the client's pace (the
    /// module doc says why).
    fn window(&self) -> Duration {
        match self.awaited {
            Awaited::Answer if self.client.get().is_zero() => Duration::ZERO,
            awaited => self.window_for_ref(awaited).get(),
        }
    }

    fn window_for(&mut self, awaited: Awaited) -> &mut Window {
        match awaited {
            Awaited::Command => &mut self.client,
            Awaited::Answer => &mut self.answer,
            Awaited::Rest => &mut self.rest,
        }
    }

    fn window_for_ref(&self, awaited: Awaited) -> &Window {
        match awaited {
            Awaited::Command => &self.client,
            Awaited::Answer => &self.answer,
            Awaited::Rest => &self.rest,
        }
    }

    /// Polls until a watched socket is readable (or has room for a waiting write), a task
    /// was woken from another thread, or `window` has passed since `start`. True if
    /// something came.
    fn poll_for(&mut self, start: Instant, window: Duration) -> bool {
        loop {
            match self.poll.poll(&mut self.events, Some(Duration::ZERO)) {
                Ok(()) if !self.events.is_empty() => {
                    for event in self.events.iter().filter(|e| e.is_writable()) {
                        // Room again: the waiting write goes on; watch for data only. Room
                        // that came while the thread slept is seen here one poll later, and
                        // ends that poll for nothing, once; a failure to switch back leaves
                        // room watched, so that socket's peer reading ends polls early.
                        let fd = RawFd::try_from(event.token().0).unwrap_or(-1);
                        let _ = self.poll.registry().reregister(&mut SourceFd(&fd), event.token(), Interest::READABLE);
                    }
                    return true;
                }
                Ok(()) => {}
                // A signal in the middle of a look: look again.
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                // Nothing to poll with: sleep, as without polling.
                Err(_) => return false,
            }
            if self.runtime.global_queue_depth() > 0 {
                return true;
            }
            if start.elapsed() >= window {
                return false;
            }
            // Not a bare spin: a thread the kernel queued on this CPU — it puts a woken
            // thread beside the one that woke it, so the server's thread after a query went
            // out — runs now, not when the window ends (measured: the spin kept p50 but
            // doubled a's p99 and cost b 4 % of its q/s; yielding kept both).
            std::thread::yield_now();
        }
    }

    /// Adds what this thread counted to the shared counters.
    fn publish(&mut self) {
        let nanos = u64::try_from(self.polled.as_nanos()).unwrap_or(u64::MAX);
        for (counter, n) in [
            (&self.stats.idle_poll.polled_ns, nanos),
            (&self.stats.idle_poll.caught, self.caught),
            (&self.stats.idle_poll.crowded, self.crowded),
            (&self.stats.idle_poll.unpaid, self.unpaid),
        ] {
            if n > 0 {
                counter.fetch_add(n, Ordering::Relaxed);
            }
        }
        (self.polled, self.caught, self.crowded, self.unpaid) = (Duration::ZERO, 0, 0, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: Duration = Duration::from_micros(1);

    #[test]
    fn the_window_opens_on_short_idle_moments_and_closes_on_long_ones() {
        let mut w = Window::new(100 * US);
        assert_eq!(w.get(), Duration::ZERO, "no polling before a short idle moment is seen");
        w.idled(30 * US);
        assert_eq!(w.get(), 25 * US, "the first window is a quarter of the longest");
        w.idled(20 * US);
        assert_eq!(w.get(), 25 * US, "caught within the window: unchanged");
        w.idled(40 * US);
        assert_eq!(w.get(), 50 * US);
        w.idled(90 * US);
        assert_eq!(w.get(), 100 * US);
        w.idled(99 * US);
        assert_eq!(w.get(), 100 * US, "never past the longest");
        w.idled(2_000 * US);
        assert_eq!(w.get(), 50 * US, "a wait longer than any window halves it");
        w.idled(2_000 * US);
        assert_eq!(w.get(), 25 * US);
        w.idled(2_000 * US);
        assert_eq!(w.get(), Duration::ZERO, "below the first window: off");
        w.idled(2_000 * US);
        assert_eq!(w.get(), Duration::ZERO);
    }

    #[test]
    fn the_answer_is_polled_for_only_while_the_client_comes_back_to_back() {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        install(100 * US, runtime.metrics(), Arc::default());
        // Answers 60 µs away, the next query 10 ms after each (100 queries a second).
        for _ in 0..4 {
            idled(Awaited::Answer, 60 * US);
            idled(Awaited::Command, 10_000 * US);
        }
        assert_eq!(window(Awaited::Answer), Duration::ZERO, "a paced client: no polling for the answer");
        assert_eq!(window(Awaited::Command), Duration::ZERO, "nor for the next query");
        // Back to back: the next query 20 µs after each answer.
        idled(Awaited::Command, 20 * US);
        assert_eq!(window(Awaited::Command), 25 * US);
        assert!(window(Awaited::Answer) >= 60 * US, "the answer's window learnt meanwhile");
        // A server 2 ms away: its answer is not polled for, the next query still is.
        for _ in 0..4 {
            idled(Awaited::Answer, 2_000 * US);
            idled(Awaited::Command, 20 * US);
        }
        assert_eq!(window(Awaited::Answer), Duration::ZERO);
        assert_eq!(window(Awaited::Command), 25 * US);
    }

    #[test]
    fn an_answer_under_way_is_polled_for_whatever_the_clients_pace() {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        install(100 * US, runtime.metrics(), Arc::default());
        // One large query now and then (a paced client), its first byte 20 ms away, then
        // its rest streaming in with gaps of tens of microseconds.
        for _ in 0..4 {
            idled(Awaited::Command, 500_000 * US);
            idled(Awaited::Answer, 20_000 * US);
            for _ in 0..8 {
                idled(Awaited::Rest, 40 * US);
            }
        }
        assert_eq!(window(Awaited::Command), Duration::ZERO);
        assert_eq!(window(Awaited::Answer), Duration::ZERO, "20 ms away: not polled for");
        assert!(window(Awaited::Rest) >= 40 * US, "the rest of the result is: {:?}", window(Awaited::Rest));
    }

    /// The window this thread's poller would poll for `awaited` now.
    fn window(awaited: Awaited) -> Duration {
        awaiting(awaited);
        POLLER.with(|p| {
            let mut p = p.borrow_mut();
            let p = p.as_mut().unwrap();
            p.awaited = AWAITED.with(Cell::get);
            p.window()
        })
    }

    /// This thread's poller back from an idle moment of `idle`, waiting for `awaited`.
    fn idled(awaited: Awaited, idle: Duration) {
        POLLER.with(|p| {
            let mut p = p.borrow_mut();
            let p = p.as_mut().unwrap();
            p.awaited = awaited;
            p.idle_since = Some(Instant::now() - idle);
        });
        after_unpark();
    }

    #[test]
    fn crowding_by_load_is_more_threads_runnable_than_cpus_on_average() {
        let mut c = Crowding::new(2);
        for _ in 0..50 {
            c.sample_load(Some(2));
        }
        assert!(!c.crowded(), "as many runnable as CPUs: free");
        c.sample_load(Some(3));
        assert!(!c.crowded(), "one thread waiting for an instant does not decide");
        c.sample_load(Some(6));
        assert!(c.crowded(), "four threads waiting at once: crowded at the first sample");
        for _ in 0..50 {
            c.sample_load(Some(3));
        }
        assert!(c.crowded(), "one thread always waiting");
        for _ in 0..30 {
            c.sample_load(Some(1));
        }
        assert!(!c.crowded(), "free again within a few tens of samples");
        c.sample_load(None);
        assert!(c.crowded(), "unreadable: taken as crowded");
    }

    #[test]
    fn crowding_by_pressure_is_work_waiting_for_a_cpu_half_the_time() {
        let share = |percent: u32| Some(percent * 256 / 100);
        let mut c = Crowding::new(2);
        for _ in 0..10 {
            c.sample_pressure(share(20));
        }
        assert!(!c.crowded(), "waiting a fifth of the time (one sequential client): free");
        c.sample_pressure(share(60));
        assert!(!c.crowded(), "one reading a little over half does not decide");
        c.sample_pressure(share(90));
        assert!(c.crowded(), "then 90 % (8 connections on 2 CPUs): crowded");
        c.sample_pressure(share(10));
        c.sample_pressure(share(10));
        assert!(!c.crowded(), "free again two readings after the load ends");
        c.sample_pressure(Some(100_000));
        assert!(c.crowded(), "a share above the whole counts as the whole");
        c.sample_pressure(share(0));
        c.sample_pressure(share(0));
        assert!(!c.crowded());
        c.sample_pressure(None);
        assert!(c.crowded(), "unreadable: taken as crowded");
    }

    #[test]
    fn pressure_is_read_seldom_and_the_load_often() {
        let load = Gauge::Load(File::open("/proc/loadavg").unwrap());
        assert_eq!(load.every(false), SAMPLE_EVERY);
        assert_eq!(load.every(true), SAMPLE_EVERY_CROWDED);
        let pressure = Gauge::Pressure { file: File::open("/proc/loadavg").unwrap(), last: None };
        assert_eq!(pressure.every(false), PRESSURE_EVERY);
        assert_eq!(pressure.every(true), PRESSURE_EVERY);
    }

    #[test]
    fn the_share_waited_is_the_waiting_over_the_time_between_readings() {
        assert_eq!(waited_share(500, Duration::from_millis(1)), Some(128));
        assert_eq!(waited_share(0, Duration::from_millis(8)), Some(0));
        assert_eq!(waited_share(2_000, Duration::from_millis(1)), Some(512), "two tasks waiting: Crowding caps it");
        assert_eq!(waited_share(10, Duration::ZERO), None, "no time between: no sample");
        assert_eq!(waited_share(u64::MAX, Duration::from_micros(1)), Some(u32::MAX), "saturates, never panics");
    }

    #[test]
    fn the_time_waited_for_a_cpu_is_read_from_pressure() {
        let text = "some avg10=3.33 avg60=4.52 avg300=21.14 total=1149127711\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
        assert_eq!(parse_cpu_waited_us(text), Some(1_149_127_711));
        assert_eq!(parse_cpu_waited_us("full avg10=0.00 total=5\n"), None, "no `some` line");
        assert_eq!(parse_cpu_waited_us("some avg10=0.00\n"), None, "no total");
        assert_eq!(parse_cpu_waited_us("some total=12x\n"), None);
        // Where the kernel has PSI (this project's machines do), its own file reads too and
        // the gauge picks it; elsewhere the gauge falls back to the load.
        match File::open("/proc/pressure/cpu") {
            Ok(file) if cpu_waited_us(&file).is_some() => assert!(matches!(Gauge::open(), Gauge::Pressure { .. })),
            _ => {
                eprintln!("no PSI on this kernel: the gauge reads /proc/loadavg");
                assert!(matches!(Gauge::open(), Gauge::Load(_)));
            }
        }
    }

    /// One poll of this thread's poller, for up to `window`: whether something ended it.
    fn poll_once(window: Duration) -> bool {
        POLLER.with(|p| p.borrow_mut().as_mut().unwrap().poll_for(Instant::now(), window))
    }

    /// Writes to `socket` until it is full.
    fn fill(mut socket: &std::os::unix::net::UnixStream) {
        use std::io::Write;
        let chunk = [0u8; 4096];
        loop {
            match socket.write(&chunk) {
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) => panic!("filling the socket: {e}"),
            }
        }
    }

    /// Reads everything waiting on `socket`.
    fn drain(mut socket: &std::os::unix::net::UnixStream) {
        use std::io::Read;
        let mut buf = [0u8; 65536];
        loop {
            match socket.read(&mut buf) {
                Ok(0) => return,
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) => panic!("draining the socket: {e}"),
            }
        }
    }

    #[test]
    fn a_poll_ends_on_room_only_while_a_write_waits_for_it() {
        use std::os::fd::AsRawFd;
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        install(Duration::from_millis(1), runtime.metrics(), Arc::default());
        let (ours, peer) = std::os::unix::net::UnixStream::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        peer.set_nonblocking(true).unwrap();
        watch(ours.as_raw_fd());
        assert!(!poll_once(Duration::ZERO), "a socket with nothing to read reports nothing");

        // No write waiting: the peer reading makes room, and that must not end a poll (a
        // Unix socket's writable edge comes on every read of its peer).
        fill(&ours);
        drain(&peer);
        assert!(!poll_once(Duration::from_millis(20)), "room with no write waiting ended the poll");

        // A write found the socket full: room ends the poll, and once only.
        fill(&ours);
        write_waiting(ours.as_raw_fd());
        assert!(!poll_once(Duration::from_millis(5)), "still full: nothing to report");
        drain(&peer);
        assert!(poll_once(Duration::from_millis(20)), "room for the waiting write did not end the poll");
        fill(&ours);
        drain(&peer);
        assert!(!poll_once(Duration::from_millis(20)), "after the room was reported, writability is no longer watched");

        // Data still ends a poll.
        std::io::Write::write_all(&mut &peer, b"x").unwrap();
        assert!(poll_once(Duration::from_millis(20)), "data to read did not end the poll");
    }

    /// Installs this thread's poller with every window open, the machine free, no sample due
    /// whatever else runs meanwhile, and a standing verdict that polling `pays` or not; returns
    /// the runtime it watches (keep it) and its counters.
    fn ready_to_poll(pays: bool) -> (tokio::runtime::Runtime, Arc<super::super::RelayStats>) {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let stats = Arc::new(super::super::RelayStats::default());
        install(Duration::from_millis(1), runtime.metrics(), stats.clone());
        POLLER.with(|p| {
            let mut p = p.borrow_mut();
            let p = p.as_mut().unwrap();
            for window in [&mut p.client, &mut p.answer, &mut p.rest] {
                window.idled(10 * US);
            }
            p.crowding = Crowding::new(u32::MAX);
            p.sampled = Some(Instant::now() + Duration::from_secs(3600));
            p.payoff = Payoff::settled(pays);
        });
        (runtime, stats)
    }

    /// Adds what this thread's poller counted to the shared counters now.
    fn publish() {
        POLLER.with(|p| p.borrow_mut().as_mut().unwrap().publish());
    }

    #[test]
    fn a_park_with_a_write_waiting_does_not_poll() {
        use std::os::fd::AsRawFd;
        let (_runtime, stats) = ready_to_poll(true);
        awaiting(Awaited::Command);
        // Nothing ever comes, so every poll runs out: `missed` counts the polls.
        let polls = || stats.idle_poll.missed.load(Ordering::Relaxed);
        let (ours, _peer) = std::os::unix::net::UnixStream::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        watch(ours.as_raw_fd());

        before_park();
        assert_eq!(polls(), 1, "an idle moment with the window open polls");
        fill(&ours);
        write_waiting(ours.as_raw_fd());
        before_park();
        assert_eq!(polls(), 1, "the park right after a write found its socket full polled");
        before_park();
        assert_eq!(polls(), 2, "the next park, with no write waiting, polls again");
    }

    #[test]
    fn where_polling_does_not_pay_only_the_rest_of_an_answer_is_polled_for() {
        let (_runtime, stats) = ready_to_poll(false);
        let counts =
            || (stats.idle_poll.missed.load(Ordering::Relaxed), stats.idle_poll.unpaid.load(Ordering::Relaxed));
        for (awaited, expected) in [(Awaited::Command, (0, 1)), (Awaited::Answer, (0, 2)), (Awaited::Rest, (1, 2))] {
            awaiting(awaited);
            before_park();
            publish();
            assert_eq!(counts(), expected, "{awaited:?}: (polled, unpaid)");
        }
    }

    #[test]
    fn runnable_threads_are_read_from_loadavg() {
        let file = File::open("/proc/loadavg").unwrap();
        let n = runnable(&file).unwrap();
        assert!(n >= 1, "this test's own thread is running: {n}");
    }
}
