//! The delay line: per direction, a reader thread that stamps, shapes and impairs packets and a
//! writer thread that releases each one at its due time (plus a second writer for packets held
//! back for reordering, when that is on).

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::WanConfig;
use super::impair::{Fate, Impairer, WanImpairments};
use super::sys;

/// How long before a deadline the writer stops sleeping and spins. A SCHED_FIFO thread's
/// sleep overshoots by ~30 µs typically and ~75 µs at p99 on the 2-core CI VM, so 100 µs
/// covers nearly all wake-ups. Longer windows measured no better: at 100 Mbit/s packets are
/// 120 µs apart, so a 200 µs window spins a whole core; with it we saw a writer stall for
/// 52 ms, consistent with the kernel's RT throttling (50 ms a second for ordinary tasks).
const SPIN_WINDOW: Duration = Duration::from_micros(100);
/// A packet released later than this counts as `late` in the stats.
const LATE_THRESHOLD: Duration = Duration::from_micros(250);
/// SCHED_FIFO priority of the forwarder threads: above every normal thread, below kernel
/// threads that typically run at 50.
const RT_PRIORITY: i32 = 20;
/// Packets in the delay line per direction, a memory cap when no bandwidth limit bounds it
/// (10 ms at ~1.5 Mpps). Overflow is counted as a drop.
const LINE_CAPACITY: usize = 16_384;
/// Largest packet read from a TUN device: the MTU is 1500 but nothing stops a larger write.
const MAX_PACKET: usize = 65_536;

/// Counters for one direction of the link. Once nothing is in flight,
/// `seen + duplicated == packets + dropped + lost`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DirectionStats {
    /// Packets read from the near TUN device.
    pub seen: u64,
    /// Packets written to the far TUN device (a duplicated packet counts twice).
    pub packets: u64,
    /// IP bytes in those packets.
    pub bytes: u64,
    /// Packets dropped: bottleneck queue full (tail drop) or delay line at capacity.
    pub dropped: u64,
    /// Packets dropped at random by the loss impairment (not in `dropped`).
    pub lost: u64,
    /// Extra copies made by the duplication impairment.
    pub duplicated: u64,
    /// Packets corrupted by the corruption impairment and handed to the delay line (one
    /// later dropped for a full line counts in `dropped` instead).
    pub corrupted: u64,
    /// Packets held back by the reordering impairment, likewise.
    pub reordered: u64,
    /// Packets released more than 250 µs after their due time (emulator imprecision).
    pub late: u64,
    /// The worst release delay past a due time seen so far.
    pub max_lateness: Duration,
}

impl DirectionStats {
    /// Packets on the line now: read or copied, and not yet written, dropped or lost. The
    /// counters are read one by one, so while packets flow this is approximate.
    pub fn in_flight(&self) -> u64 {
        (self.seen + self.duplicated).saturating_sub(self.packets + self.dropped + self.lost)
    }
}

/// Counters for both directions; see [`DirectionStats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WanStats {
    /// Server namespace → client namespace (result sets, bulk downloads).
    pub server_to_client: DirectionStats,
    /// Client namespace → server namespace (queries, ACKs).
    pub client_to_server: DirectionStats,
    /// Forwarder threads running under SCHED_FIFO: all of them when real-time priority was
    /// granted, which is 4, plus one for each direction that reorders.
    pub realtime_threads: u64,
}

#[derive(Default)]
struct Counters {
    seen: AtomicU64,
    packets: AtomicU64,
    bytes: AtomicU64,
    dropped: AtomicU64,
    lost: AtomicU64,
    duplicated: AtomicU64,
    corrupted: AtomicU64,
    reordered: AtomicU64,
    late: AtomicU64,
    max_late_ns: AtomicU64,
}

impl Counters {
    fn snapshot(&self) -> DirectionStats {
        DirectionStats {
            seen: self.seen.load(Ordering::Relaxed),
            packets: self.packets.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
            lost: self.lost.load(Ordering::Relaxed),
            duplicated: self.duplicated.load(Ordering::Relaxed),
            corrupted: self.corrupted.load(Ordering::Relaxed),
            reordered: self.reordered.load(Ordering::Relaxed),
            late: self.late.load(Ordering::Relaxed),
            max_lateness: Duration::from_nanos(self.max_late_ns.load(Ordering::Relaxed)),
        }
    }
}

/// The bottleneck and propagation model of one direction, as pure arithmetic on timestamps:
/// a packet occupies the link for `len * 8 / rate`, waits behind what is still being
/// serialised, is tail-dropped when that backlog would exceed the queue, and arrives one
/// propagation delay after its last bit left. Due times never decrease, so FIFO release
/// never reorders.
#[derive(Debug)]
pub struct Shaper {
    delay: Duration,
    rate_bps: Option<u64>,
    queue_bytes: usize,
    /// When the bottleneck finishes serialising everything admitted so far.
    link_free_at: Option<Instant>,
}

impl Shaper {
    /// A shaper adding `delay` one way, serialising at `rate_bps` (if any) behind a queue of
    /// `queue_bytes`.
    pub fn new(delay: Duration, rate_bps: Option<u64>, queue_bytes: usize) -> Shaper {
        Shaper { delay, rate_bps, queue_bytes, link_free_at: None }
    }

    /// Admits a packet of `len` IP bytes read at `now`: `Some(due)` to release it at `due`,
    /// `None` to drop it.
    pub fn admit(&mut self, now: Instant, len: usize) -> Option<Instant> {
        let Some(rate) = self.rate_bps else {
            return Some(now + self.delay);
        };
        let start = match self.link_free_at {
            Some(free) if free > now => {
                // Bytes not yet on the wire; an empty link always takes one packet, so a
                // queue smaller than the MTU still passes traffic.
                let backlog = (free - now).as_nanos() * u128::from(rate) / 8 / 1_000_000_000;
                if backlog + len as u128 > self.queue_bytes as u128 {
                    return None;
                }
                free
            }
            _ => now,
        };
        let serialise_ns = len as u128 * 8 * 1_000_000_000 / u128::from(rate);
        let done = start + Duration::from_nanos(u64::try_from(serialise_ns).unwrap_or(u64::MAX));
        self.link_free_at = Some(done);
        Some(done + self.delay)
    }
}

struct Packet {
    due: Instant,
    data: Vec<u8>,
}

/// The forwarder threads: four, or six with reordering. Dropping it stops and joins them.
pub struct Forwarder {
    stop: Arc<AtomicBool>,
    /// While set, every packet read in either direction is lost: a blackholed link (a
    /// firewall that drops, a cable pulled), which neither end hears about.
    cut: Arc<AtomicBool>,
    wake: Arc<OwnedFd>,
    threads: Vec<JoinHandle<()>>,
    server_to_client: Arc<Counters>,
    client_to_server: Arc<Counters>,
    realtime: Arc<AtomicU64>,
}

impl Forwarder {
    /// Starts forwarding between the two TUN queues with `config`'s delay and bottleneck,
    /// the same in both directions, and each direction's impairments. `label` goes into
    /// thread names.
    pub fn start(
        server_tun: File,
        client_tun: File,
        config: &WanConfig,
        impairments: &WanImpairments,
        label: &str,
    ) -> io::Result<Forwarder> {
        let mut fwd = Forwarder {
            stop: Arc::new(AtomicBool::new(false)),
            cut: Arc::new(AtomicBool::new(false)),
            wake: Arc::new(sys::eventfd()?),
            threads: Vec::with_capacity(6),
            server_to_client: Arc::default(),
            client_to_server: Arc::default(),
            realtime: Arc::default(),
        };
        let server_tun = Arc::new(server_tun);
        let client_tun = Arc::new(client_tun);
        // If a spawn fails, `?` drops `fwd`, whose Drop stops the threads already running.
        let s2c = fwd.server_to_client.clone();
        let s2c_impairer = Impairer::new(impairments.server_to_client, impairments.seed, 0);
        fwd.direction(&format!("{label}s2c"), (&server_tun, &client_tun), config, s2c_impairer, s2c)?;
        let c2s = fwd.client_to_server.clone();
        let c2s_impairer = Impairer::new(impairments.client_to_server, impairments.seed, 1);
        fwd.direction(&format!("{label}c2s"), (&client_tun, &server_tun), config, c2s_impairer, c2s)?;
        Ok(fwd)
    }

    fn direction(
        &mut self,
        name: &str,
        (from, to): (&Arc<File>, &Arc<File>),
        config: &WanConfig,
        impairer: Impairer,
        counters: Arc<Counters>,
    ) -> io::Result<()> {
        // Each direction gets half the round trip; the bottleneck applies to both, like a
        // symmetric leased line.
        let shaper = Shaper::new(config.rtt / 2, config.bandwidth_bps, config.queue_bytes);
        let (tx, rx) = mpsc::sync_channel(LINE_CAPACITY);
        // Held-back packets have their own line and writer: each line's due times never
        // decrease, so each writer still releases in FIFO order, and the two interleave by
        // due time on the far device.
        let hold = if impairer.settings().reorders() {
            let (held_tx, held_rx) = mpsc::sync_channel(LINE_CAPACITY);
            self.writer(&format!("{name}-ho"), to, held_rx, &counters)?;
            Some(Hold { tx: held_tx, gap: impairer.settings().reorder_gap })
        } else {
            None
        };
        let reader = Reader {
            from: from.clone(),
            wake: self.wake.clone(),
            shaper,
            impairer,
            tx,
            hold,
            cut: self.cut.clone(),
            counters: counters.clone(),
            realtime: self.realtime.clone(),
        };
        self.threads.push(std::thread::Builder::new().name(format!("{name}-rd")).spawn(move || reader.run())?);
        self.writer(&format!("{name}-wr"), to, rx, &counters)
    }

    fn writer(&mut self, name: &str, to: &Arc<File>, rx: Receiver<Packet>, counters: &Arc<Counters>) -> io::Result<()> {
        let writer = Writer {
            to: to.clone(),
            rx,
            stop: self.stop.clone(),
            counters: counters.clone(),
            realtime: self.realtime.clone(),
        };
        self.threads.push(std::thread::Builder::new().name(name.to_owned()).spawn(move || writer.run())?);
        Ok(())
    }

    /// Drops every packet from now on (`true`) or forwards again (`false`).
    pub fn set_cut(&self, cut: bool) {
        self.cut.store(cut, Ordering::SeqCst);
    }

    /// A snapshot of both directions' counters.
    pub fn stats(&self) -> WanStats {
        WanStats {
            server_to_client: self.server_to_client.snapshot(),
            client_to_server: self.client_to_server.snapshot(),
            realtime_threads: self.realtime.load(Ordering::Relaxed),
        }
    }
}

impl std::fmt::Debug for Forwarder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Forwarder").field("stats", &self.stats()).finish_non_exhaustive()
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        // Writers watch `stop` while waiting for a due time; readers block in poll and need
        // the eventfd. A reader exiting drops its channel sender, which ends its writer's recv.
        self.stop.store(true, Ordering::SeqCst);
        sys::eventfd_signal(&self.wake);
        for t in self.threads.drain(..) {
            // A forwarder thread that panicked has nothing left to clean up; don't panic
            // again in Drop (it may already be unwinding).
            let _ = t.join();
        }
    }
}

/// The line for packets held back by the reordering impairment.
struct Hold {
    tx: SyncSender<Packet>,
    gap: Duration,
}

struct Reader {
    from: Arc<File>,
    wake: Arc<OwnedFd>,
    shaper: Shaper,
    impairer: Impairer,
    tx: SyncSender<Packet>,
    hold: Option<Hold>,
    cut: Arc<AtomicBool>,
    counters: Arc<Counters>,
    realtime: Arc<AtomicU64>,
}

impl Reader {
    fn run(mut self) {
        if sys::try_realtime(RT_PRIORITY) {
            self.realtime.fetch_add(1, Ordering::Relaxed);
        }
        let mut buf = vec![0u8; MAX_PACKET];
        while sys::poll_two(&self.from, &self.wake) {
            let len = match (&*self.from).read(&mut buf) {
                Ok(0) => break,
                Ok(len) => len,
                Err(e) if matches!(e.kind(), io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock) => {
                    continue;
                }
                Err(_) => break,
            };
            // The one-way delay runs from this instant (as toxiproxy's latency does): time in
            // the kernel's queues before we read is the sender's, not the link's.
            let now = Instant::now();
            self.counters.seen.fetch_add(1, Ordering::Relaxed);
            if self.cut.load(Ordering::Relaxed) {
                // Counted as lost, so `seen + duplicated == packets + dropped + lost` holds.
                self.counters.lost.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            // Every packet read draws its fate, so the n-th packet's fate is the same in every
            // run with the seed; it applies only if the bottleneck admits the packet.
            let fate = if self.impairer.is_active() { self.impairer.next(&buf[..len]) } else { Fate::default() };
            let Some(due) = self.shaper.admit(now, len) else {
                self.counters.dropped.fetch_add(1, Ordering::Relaxed);
                continue;
            };
            if self.forward(&buf[..len], due, fate).is_err() {
                break;
            }
        }
    }

    /// Impairs a packet that has left the bottleneck, due at `due`, and queues it (and its
    /// copy) for release. The impairments act on the line after the bottleneck: a lost packet
    /// has used its slot, a duplicate does not take one. `Err` when the writer is gone.
    fn forward(&self, packet: &[u8], due: Instant, fate: Fate) -> Result<(), ()> {
        let c = &*self.counters;
        if fate.lose {
            c.lost.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        let copy = fate.duplicate.then(|| packet.to_vec());
        let mut data = packet.to_vec();
        if let Some((at, mask)) = fate.corrupt {
            data[at] ^= mask;
        }
        let sent = match (&self.hold, fate.reorder) {
            (Some(hold), true) => offer(&hold.tx, Packet { due: due + hold.gap, data }, c)?,
            _ => offer(&self.tx, Packet { due, data }, c)?,
        };
        if sent {
            if fate.corrupt.is_some() {
                c.corrupted.fetch_add(1, Ordering::Relaxed);
            }
            if fate.reorder && self.hold.is_some() {
                c.reordered.fetch_add(1, Ordering::Relaxed);
            }
        }
        if let Some(data) = copy {
            c.duplicated.fetch_add(1, Ordering::Relaxed);
            offer(&self.tx, Packet { due, data }, c)?;
        }
        Ok(())
    }
}

/// Queues `pkt` on a line: `Ok(true)` if queued, `Ok(false)` if the line was full (counted as
/// a drop), `Err` when its writer is gone.
fn offer(line: &SyncSender<Packet>, pkt: Packet, counters: &Counters) -> Result<bool, ()> {
    match line.try_send(pkt) {
        Ok(()) => Ok(true),
        Err(TrySendError::Full(_)) => {
            counters.dropped.fetch_add(1, Ordering::Relaxed);
            Ok(false)
        }
        Err(TrySendError::Disconnected(_)) => Err(()),
    }
}

struct Writer {
    to: Arc<File>,
    rx: Receiver<Packet>,
    stop: Arc<AtomicBool>,
    counters: Arc<Counters>,
    realtime: Arc<AtomicU64>,
}

impl Writer {
    fn run(self) {
        if sys::try_realtime(RT_PRIORITY) {
            self.realtime.fetch_add(1, Ordering::Relaxed);
        }
        while let Ok(pkt) = self.rx.recv() {
            if !wait_until(pkt.due, &self.stop) {
                return;
            }
            let late = Instant::now().saturating_duration_since(pkt.due);
            // Writing to a TUN queue hands the packet to the far namespace's IP stack; the
            // receiving TCP runs right here, on this thread. A failed write (device going
            // away, malformed packet) is a lost packet, as on a real line.
            match (&*self.to).write(&pkt.data) {
                Ok(_) => {
                    self.counters.packets.fetch_add(1, Ordering::Relaxed);
                    self.counters.bytes.fetch_add(pkt.data.len() as u64, Ordering::Relaxed);
                }
                Err(_) => {
                    self.counters.dropped.fetch_add(1, Ordering::Relaxed);
                }
            }
            if late > LATE_THRESHOLD {
                self.counters.late.fetch_add(1, Ordering::Relaxed);
            }
            let late_ns = u64::try_from(late.as_nanos()).unwrap_or(u64::MAX);
            self.counters.max_late_ns.fetch_max(late_ns, Ordering::Relaxed);
        }
    }
}

/// Sleeps until shortly before `due`, then spins to it: sleeping alone wakes up to tens of µs
/// late, spinning alone burns a core for the whole delay. Returns false when asked to stop.
fn wait_until(due: Instant, stop: &AtomicBool) -> bool {
    loop {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        let now = Instant::now();
        if now >= due {
            return true;
        }
        let left = due - now;
        if left > SPIN_WINDOW {
            // Bounded so a stop request is noticed within 50 ms even during a long delay.
            std::thread::sleep((left - SPIN_WINDOW).min(Duration::from_millis(50)));
        } else {
            std::hint::spin_loop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unlimited_link_only_delays() {
        let t0 = Instant::now();
        let mut s = Shaper::new(Duration::from_millis(10), None, 0);
        assert_eq!(s.admit(t0, 1500), Some(t0 + Duration::from_millis(10)));
        assert_eq!(s.admit(t0, 1500), Some(t0 + Duration::from_millis(10)));
    }

    #[test]
    fn bottleneck_serialises_then_delays() {
        let t0 = Instant::now();
        // 12 Mbit/s: a 1500-byte packet takes exactly 1 ms on the wire.
        let mut s = Shaper::new(Duration::from_millis(10), Some(12_000_000), 4500);
        assert_eq!(s.admit(t0, 1500), Some(t0 + Duration::from_millis(11)));
        assert_eq!(s.admit(t0, 1500), Some(t0 + Duration::from_millis(12)));
        // An idle link starts serialising at arrival, not at the end of the old backlog.
        let later = t0 + Duration::from_millis(100);
        assert_eq!(s.admit(later, 1500), Some(later + Duration::from_millis(11)));
    }

    #[test]
    fn full_queue_tail_drops_and_recovers() {
        let t0 = Instant::now();
        let mut s = Shaper::new(Duration::ZERO, Some(12_000_000), 3000);
        assert!(s.admit(t0, 1500).is_some()); // backlog 1500
        assert!(s.admit(t0, 1500).is_some()); // backlog 3000
        assert_eq!(s.admit(t0, 1500), None); // 4500 > 3000: tail drop
        // 1 ms later one packet has left the queue: room again.
        assert_eq!(s.admit(t0 + Duration::from_millis(1), 1500), Some(t0 + Duration::from_millis(3)));
    }

    #[test]
    fn queue_smaller_than_a_packet_still_passes_one_at_a_time() {
        let t0 = Instant::now();
        let mut s = Shaper::new(Duration::ZERO, Some(12_000_000), 100);
        assert!(s.admit(t0, 1500).is_some());
        assert_eq!(s.admit(t0, 1500), None);
    }
}
