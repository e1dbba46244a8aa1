//! Accuracy of the WAN emulator itself, measured with real kernel TCP across it: its RTT, its
//! bottleneck, and its impairments (loss, duplication, corruption, reordering), each checked
//! against the emulator's own counters and against what the kernels at both ends counted.
//!
//! Run with `--nocapture` to read the measured figures. Tests that cannot run here (not root,
//! no TUN) print `skipped: <why>` and pass. The impairments' seed is fixed; set
//! `RTTSCOPE_WAN_SEED` to run them with another.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::process::Command;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rttscope_integration_tests::skip;
use rttscope_integration_tests::wan::{Chance, Impairments, Transfer, WanConfig, WanImpairments, WanLink};

const RTT: Duration = Duration::from_millis(20);
const LINK_BPS: u64 = 100_000_000;
/// The 22 MB result set of the background story.
const BULK_BYTES: usize = 22_000_000;
/// Goodput can be at most this fraction of the IP rate: a full segment is 1448 payload bytes
/// in a 1500-byte packet (20 IP + 20 TCP + 12 timestamp option bytes).
const GOODPUT_CEILING: f64 = 1448.0 / 1500.0;

/// The tests measure time on a 2-core machine: run them one at a time so they don't skew
/// each other (cargo runs tests of one binary on parallel threads).
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Starts a link, or returns None after printing why this machine can't.
fn start(config: WanConfig) -> Option<WanLink> {
    if let Err(why) = WanLink::available() {
        skip(why);
        return None;
    }
    Some(WanLink::start(config).expect("start WAN link"))
}

/// A listener on the server side of `link`, on an ephemeral port.
fn listen(link: &WanLink) -> (TcpListener, SocketAddr) {
    let listener = link
        .in_namespace(link.server_ns(), || TcpListener::bind((Ipv4Addr::UNSPECIFIED, 0)))
        .expect("enter server ns")
        .expect("bind");
    let port = listener.local_addr().expect("local addr").port();
    (listener, SocketAddr::from((link.server_ip(), port)))
}

/// A connection from the client side of `link` to `addr`.
fn connect(link: &WanLink, addr: SocketAddr) -> TcpStream {
    link.in_namespace(link.client_ns(), || TcpStream::connect(addr))
        .expect("enter client ns")
        .expect("connect across the link")
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Times `count` 1-byte TCP round trips (TCP_NODELAY both ends) from the client namespace to
/// an echo server in the server namespace, after a short warm-up; returns them sorted.
fn ping_pong(link: &WanLink, count: usize) -> Vec<Duration> {
    let (listener, addr) = listen(link);
    let echo = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().expect("accept");
        s.set_nodelay(true).expect("nodelay");
        let mut b = [0u8; 1];
        while s.read_exact(&mut b).is_ok() {
            s.write_all(&b).expect("echo");
        }
    });
    let mut client = connect(link, addr);
    client.set_nodelay(true).expect("nodelay");
    let mut rtts = Vec::with_capacity(count);
    let mut b = [7u8; 1];
    // The first round trips warm up caches, the scheduler and the echo thread.
    for i in 0..count + 10 {
        let t = Instant::now();
        client.write_all(&b).expect("ping");
        client.read_exact(&mut b).expect("pong");
        if i >= 10 {
            rtts.push(t.elapsed());
        }
    }
    drop(client);
    echo.join().expect("echo thread");
    rtts.sort();
    rtts
}

fn summary(rtts: &[Duration]) -> String {
    format!(
        "p50 {:.3} ms, p99 {:.3} ms, min {:.3} ms, max {:.3} ms over {} round trips",
        ms(percentile(rtts, 0.5)),
        ms(percentile(rtts, 0.99)),
        ms(rtts[0]),
        ms(rtts[rtts.len() - 1]),
        rtts.len()
    )
}

#[test]
fn rtt_of_tcp_ping_pong_matches_configuration() {
    let _serial = serial();
    // The floor: what the delay line, two TUN hops and two socket wake-ups cost with no delay.
    let Some(link) = start(WanConfig::with_rtt(Duration::ZERO)) else {
        return;
    };
    let floor = ping_pong(&link, 200);
    eprintln!("rtt 0 ms (emulator floor): {}", summary(&floor));
    drop(link);

    let link = WanLink::start(WanConfig::with_rtt(RTT)).expect("start WAN link");
    let rtts = ping_pong(&link, 200);
    eprintln!("rtt {:.0} ms: {}", ms(RTT), summary(&rtts));
    eprintln!("  {:?}", link.stats());
    // What the delay adds on top of the floor just measured: the emulator's own hops and the
    // sockets' wake-ups (0.15-0.3 ms at p50 here) are there with any delay.
    let added = percentile(&rtts, 0.5).saturating_sub(percentile(&floor, 0.5));
    assert!(
        added.abs_diff(RTT) <= Duration::from_micros(500),
        "the median RTT adds {:.3} ms to the floor, not 20 ± 0.5 ms",
        ms(added)
    );
}

/// Sends `bytes` from the server namespace to the client namespace over a fresh connection
/// (every byte checked) and prints the goodput, timed on the receiver from connect to the last
/// byte (slow start included, as a query's result set would see it).
fn bulk_download(link: &WanLink, bytes: usize) -> Transfer {
    let transfer = link.bulk_download(bytes).expect("bulk transfer across the link");
    eprintln!(
        "  {bytes} bytes in {:.3} s = {:.2} Mbit/s ({:.0} % of the link)",
        transfer.elapsed.as_secs_f64(),
        transfer.bps() / 1e6,
        transfer.bps() * 100.0 / LINK_BPS as f64
    );
    transfer
}

fn bottleneck_config() -> WanConfig {
    let mut config = WanConfig { rtt: RTT, bandwidth_bps: Some(LINK_BPS), queue_bytes: 0 };
    config.queue_bytes = config.bdp_bytes(); // 250 KB: one bandwidth-delay product
    config
}

#[test]
fn default_buffers_fill_the_bottleneck() {
    let _serial = serial();
    let Some(link) = start(bottleneck_config()) else {
        return;
    };
    eprintln!(
        "default tcp_wmem {:?}, 20 ms, 100 Mbit/s, queue 250 KB:",
        link.sysctl(link.server_ns(), "net.ipv4.tcp_wmem").expect("sysctl")
    );
    let transfer = bulk_download(&link, BULK_BYTES);
    let bps = transfer.bps();
    let stats = transfer.stats_at_eof.server_to_client;
    eprintln!("  {stats:?}\n  sender {:?}", transfer.sender);
    assert!(bps >= 0.8 * LINK_BPS as f64, "{:.2} Mbit/s is below 80 % of 100 Mbit/s", bps / 1e6);
    assert!(bps <= GOODPUT_CEILING * LINK_BPS as f64, "{:.2} Mbit/s is more than the link can carry", bps / 1e6);
    // The control for the impairment tests: nothing impaired, nothing corrupted, and every
    // retransmission answers a tail drop.
    assert_eq!((stats.lost, stats.duplicated, stats.corrupted, stats.reordered), (0, 0, 0, 0));
    assert_eq!(stats.seen, stats.packets + stats.dropped, "{stats:?}");
    assert_retransmissions(&transfer, 0, SPURIOUS);
    assert_eq!(counter(&link, link.client_ns(), "Tcp.InCsumErrors"), 0);
    assert!(matches!(transfer.sender.reord_seen, None | Some(0)), "{:?}", transfer.sender);
}

#[test]
fn pinned_send_buffer_is_window_limited() {
    let _serial = serial();
    let Some(link) = start(bottleneck_config()) else {
        return;
    };
    // The story's misconfiguration: a 16 KiB send buffer that autotuning may not grow.
    // Set before the listener exists: sockets take their buffer sizes at creation.
    link.set_sysctl(link.server_ns(), "net.ipv4.tcp_wmem", "4096 16384 16384").expect("set tcp_wmem");
    assert_eq!(link.sysctl(link.server_ns(), "net.ipv4.tcp_wmem").expect("read back"), "4096\t16384\t16384");
    // The client namespace keeps the defaults: the limit is the sender's alone.
    assert_ne!(link.sysctl(link.client_ns(), "net.ipv4.tcp_wmem").expect("sysctl"), "4096\t16384\t16384");
    eprintln!("tcp_wmem 4096 16384 16384 on the server, 20 ms, 100 Mbit/s:");
    let bps = bulk_download(&link, BULK_BYTES).bps();
    let window_bps = 16384.0 * 8.0 / RTT.as_secs_f64();
    eprintln!(
        "  {:.1} % of the link; {:.2}x one 16 KiB window per RTT ({:.2} Mbit/s); {:?}",
        bps * 100.0 / LINK_BPS as f64,
        bps / window_bps,
        window_bps / 1e6,
        link.stats()
    );
    assert!(
        bps < 0.3 * LINK_BPS as f64,
        "{:.2} Mbit/s: a 16 KiB send buffer should cap this far below the link",
        bps / 1e6
    );
    // And it is the buffer, not a stall: at least one buffer's worth crosses per round trip.
    assert!(bps >= window_bps, "{:.2} Mbit/s is below one 16 KiB window per RTT", bps / 1e6);
}

/// Tests hold a link across threads and `.await`s.
#[allow(dead_code)]
fn link_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<WanLink>();
}

fn netns_list() -> String {
    let out = Command::new("ip").args(["netns", "list"]).output().expect("ip netns list");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn drop_removes_namespaces_and_threads() {
    let _serial = serial();
    let Some(link) = start(WanConfig::with_rtt(RTT)) else {
        return;
    };
    let (srv, cli) = (link.server_ns().to_owned(), link.client_ns().to_owned());
    let listed = netns_list();
    assert!(listed.contains(&srv) && listed.contains(&cli), "namespaces exist while running:\n{listed}");
    let out = link.command(&srv, "ip").args(["-brief", "addr", "show", "wan0"]).output().expect("ip in ns");
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains(&link.server_ip().to_string()), "wan0 in {srv}: {shown}");
    drop(link);
    let listed = netns_list();
    assert!(!listed.contains(&srv) && !listed.contains(&cli), "namespaces left after drop:\n{listed}");
}

#[test]
fn panic_while_running_still_cleans_up() {
    let _serial = serial();
    if let Err(why) = WanLink::available() {
        skip(why);
        return;
    }
    let names = std::sync::Mutex::new(None);
    let result = std::panic::catch_unwind(|| {
        let link = WanLink::start(WanConfig::with_rtt(RTT)).expect("start");
        *names.lock().expect("names") = Some((link.server_ns().to_owned(), link.client_ns().to_owned()));
        panic!("intentional panic: a test body failing while the link runs");
    });
    assert!(result.is_err());
    let (srv, cli) = names.into_inner().expect("names").expect("link started");
    let listed = netns_list();
    assert!(!listed.contains(&srv) && !listed.contains(&cli), "namespaces left after panic:\n{listed}");
}

#[test]
fn start_removes_namespaces_of_dead_owners() {
    let _serial = serial();
    if let Err(why) = WanLink::available() {
        skip(why);
        return;
    }
    // A pid that just exited stands in for a test run that was killed before its Drop.
    let mut child = Command::new("true").spawn().expect("spawn true");
    let dead = child.id();
    child.wait().expect("reap true");
    let stale = format!("rtts-{dead}-0-srv");
    let status = Command::new("ip").args(["netns", "add", &stale]).status().expect("ip netns add");
    assert!(status.success());
    let link = WanLink::start(WanConfig::with_rtt(RTT)).expect("start");
    let listed = netns_list();
    drop(link);
    assert!(!listed.contains(&stale), "stale namespace {stale} survived start:\n{listed}");
}

// Impairments. Each test impairs the server-to-client direction of the bottleneck link at the
// background story's 1 % and moves the 22 MB result set across it (about 15,000 packets), then
// checks the emulator's counters against the binomial distribution and against what the two
// kernels saw. The seed is fixed, so the n-th packet's fate is the same in every run.

/// The story's impairment rate.
const RATE: f64 = 0.01;
/// Standard deviations allowed around an expected count: a correct emulator strays this far
/// once in ~150,000 seeds; a rate off by half fails at these packet counts.
const Z: f64 = 4.5;
/// The impairments' seed; `RTTSCOPE_WAN_SEED=<u64>` runs the tests with another.
fn seed() -> u64 {
    std::env::var("RTTSCOPE_WAN_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x5eed_2026)
}

/// Starts the bottleneck link with `impairments` from server to client, or returns None after
/// printing why this machine can't.
fn start_impaired(impairments: Impairments) -> Option<WanLink> {
    if let Err(why) = WanLink::available() {
        skip(why);
        return None;
    }
    let seed = seed();
    eprintln!("seed {seed}");
    let impairments = WanImpairments { seed, server_to_client: impairments, ..WanImpairments::default() };
    Some(WanLink::start_impaired(bottleneck_config(), impairments).expect("start WAN link"))
}

/// Counter `key` of namespace `ns` (e.g. `Tcp.InCsumErrors`); this kernel must have it.
fn counter(link: &WanLink, ns: &str, key: &str) -> u64 {
    let counters = link.net_counters(ns).expect("read /proc/net/{snmp,netstat}");
    counters.get(key).unwrap_or_else(|| panic!("no counter {key} in this kernel"))
}

/// Asserts that `count` events in `trials` are what `chance` gives: within `Z` standard
/// deviations of `trials * rate`, the variance widened by (1+ρ)/(1-ρ) for correlation ρ.
fn assert_binomial(what: &str, count: u64, trials: u64, chance: Chance) {
    let (n, p, rho) = (trials as f64, chance.rate, chance.correlation);
    let mean = n * p;
    let sd = (n * p * (1.0 - p) * (1.0 + rho) / (1.0 - rho)).sqrt();
    let (lo, hi) = (mean - Z * sd, mean + Z * sd);
    eprintln!("  {what}: {count} of {trials} packets, expected {mean:.0} (band {lo:.0}..={hi:.0})");
    assert!((lo..=hi).contains(&(count as f64)), "{what}: {count} of {trials} is outside {lo:.1}..={hi:.1}");
}

/// Spurious retransmissions (a tail loss probe, an early RTO) allowed on a link that only
/// drops, loses, corrupts or duplicates: they are rare.
const SPURIOUS: u64 = 3;

/// Asserts the sender retransmitted every packet the link failed to deliver (tail drops,
/// losses) and everything TCP was made to give up for lost (`given_up`: corrupted packets,
/// packets held back past the RTT), and at most `spurious` more.
fn assert_retransmissions(transfer: &Transfer, given_up: u64, spurious: u64) {
    let s = &transfer.stats_at_eof.server_to_client;
    let needed = s.dropped + s.lost + given_up;
    let retrans = u64::from(transfer.sender.total_retrans);
    eprintln!(
        "  sender retransmitted {retrans}: {} tail drops + {} lost + {given_up} given up for lost",
        s.dropped, s.lost
    );
    assert!(
        (needed..=needed + spurious).contains(&retrans),
        "{retrans} retransmissions for {needed} undelivered packets (at most {spurious} more allowed)"
    );
}

/// Packets that reached the far end of the bottleneck, the ones the impairments drew for.
fn admitted(transfer: &Transfer) -> u64 {
    let s = &transfer.stats_at_eof.server_to_client;
    assert_eq!(s.in_flight(), 0, "the line to the client drained: {s:?}");
    s.seen - s.dropped
}

#[test]
fn loss_is_binomial_and_every_lost_segment_is_retransmitted() {
    let _serial = serial();
    let loss = Chance::rate(RATE);
    let Some(link) = start_impaired(Impairments { loss, ..Impairments::default() }) else {
        return;
    };
    eprintln!("1 % loss from server to client, 20 ms, 100 Mbit/s:");
    let transfer = bulk_download(&link, BULK_BYTES);
    let s = transfer.stats_at_eof.server_to_client;
    assert_binomial("lost", s.lost, admitted(&transfer), loss);
    // Loss happens on the line, after the queue: all of it reached the kernels as missing
    // segments, and the sender sent each again.
    assert_retransmissions(&transfer, 0, SPURIOUS);
    assert_eq!(s.packets + s.lost + s.dropped, s.seen, "every packet seen was written, lost or dropped");
    assert_eq!(link.stats().client_to_server.lost, 0, "the ACK direction was not impaired");
}

#[test]
fn corrupted_segments_fail_the_tcp_checksum_and_are_retransmitted() {
    let _serial = serial();
    let corrupt = Chance::rate(RATE);
    let Some(link) = start_impaired(Impairments { corrupt, ..Impairments::default() }) else {
        return;
    };
    eprintln!("1 % corruption from server to client, 20 ms, 100 Mbit/s:");
    // bulk_download checks every byte: a corrupted segment that got through would fail it.
    let transfer = bulk_download(&link, BULK_BYTES);
    let s = transfer.stats_at_eof.server_to_client;
    assert_binomial("corrupted", s.corrupted, admitted(&transfer), corrupt);
    // The byte changed is after the IP header, so IP delivers the packet and TCP drops it: one
    // TCP input error in the receiving namespace for each corrupted packet, no more, no fewer.
    // Counted now, not at end of stream: the server's last ACK may have been corrupted too.
    let corrupted = link.settled_stats(Duration::from_secs(1)).server_to_client.corrupted;
    let client = link.net_counters(link.client_ns()).expect("client counters");
    let [tcp_errors, csum_errors, ip_errors] =
        ["Tcp.InErrs", "Tcp.InCsumErrors", "Ip.InHdrErrors"].map(|key| client.get(key).expect(key));
    eprintln!(
        "  client kernel: {tcp_errors} TCP input errors, {csum_errors} of them checksum errors; {ip_errors} IP header errors"
    );
    assert_eq!(tcp_errors, corrupted, "TCP input errors in the client namespace");
    assert_eq!(ip_errors, 0, "the IP header was never touched");
    // Nearly all are caught by the checksum. The rest hit the header's data offset and made it
    // too small, which TCP rejects as malformed before it checks the sum: one byte in ~1480,
    // and the default seed does it once (packet 7109, data offset 8 → 4).
    assert!((tcp_errors * 9 / 10..=tcp_errors).contains(&csum_errors), "{csum_errors} checksum errors");
    assert_retransmissions(&transfer, s.corrupted, SPURIOUS);
}

#[test]
fn duplicates_are_dsacked_and_cost_no_throughput() {
    let _serial = serial();
    let duplicate = Chance::rate(RATE);
    let Some(link) = start_impaired(Impairments { duplicate, ..Impairments::default() }) else {
        return;
    };
    eprintln!("1 % duplication from server to client, 20 ms, 100 Mbit/s:");
    let transfer = bulk_download(&link, BULK_BYTES);
    let s = transfer.stats_at_eof.server_to_client;
    assert_binomial("duplicated", s.duplicated, admitted(&transfer), duplicate);
    assert_eq!(s.packets, s.seen - s.dropped + s.duplicated, "each duplicate was written once more");
    // The receiver answers each second copy with a D-SACK, whether the first copy was already
    // delivered (old) or waiting behind a tail drop (out of order). A duplicated SYN-ACK gets
    // a plain ACK instead, hence one fewer at most; a spurious retransmission adds one.
    let spurious = u64::from(transfer.sender.total_retrans).saturating_sub(s.dropped);
    let client = link.net_counters(link.client_ns()).expect("client counters");
    let dsacks = client.get("TcpExt.TCPDSACKOldSent").unwrap_or(0) + client.get("TcpExt.TCPDSACKOfoSent").unwrap_or(0);
    // The sender hears most of them: a receiver that takes several segments in one go (its
    // socket was busy) folds their D-SACKs into one ACK.
    let heard = u64::from(transfer.sender.dsack_dups.expect("tcpi_dsack_dups (Linux 4.19+)"));
    eprintln!("  client kernel sent {dsacks} D-SACKs; the sender heard of {heard} duplicate segments");
    assert!((s.duplicated.saturating_sub(1)..=s.duplicated + spurious).contains(&dsacks), "{dsacks} D-SACKs");
    assert!((s.duplicated / 2..=s.duplicated + spurious).contains(&heard), "{heard} duplicates heard");
    // Duplicates take no retransmission and no slot at the bottleneck.
    assert_retransmissions(&transfer, 0, SPURIOUS);
    let bps = transfer.bps();
    assert!(bps >= 0.8 * LINK_BPS as f64, "{:.2} Mbit/s is below 80 % of 100 Mbit/s", bps / 1e6);
    assert!(bps <= GOODPUT_CEILING * LINK_BPS as f64, "{:.2} Mbit/s is more than the link can carry", bps / 1e6);
}

/// The background story's "reordering 1 % (gap 100 ms, correlation 10 %)".
const STORY_REORDER: Chance = Chance::correlated(RATE, 0.1);

#[test]
fn reordering_shorter_than_the_rtt_is_recognised_as_reordering() {
    let _serial = serial();
    // 2 ms is under RACK's reordering window (a quarter of the 20 ms min RTT).
    let gap = Duration::from_millis(2);
    let Some(link) = start_impaired(Impairments { reorder: STORY_REORDER, reorder_gap: gap, ..Default::default() })
    else {
        return;
    };
    eprintln!("1 % reordering (gap 2 ms, correlation 10 %) from server to client, 20 ms, 100 Mbit/s:");
    let transfer = bulk_download(&link, BULK_BYTES);
    let s = transfer.stats_at_eof.server_to_client;
    assert_binomial("held back", s.reordered, admitted(&transfer), STORY_REORDER);
    let info = transfer.sender;
    let seen = u64::from(info.reord_seen.expect("tcpi_reord_seen (Linux 4.19+)"));
    eprintln!("  sender: reordering seen {seen} times, reordering degree now {}", info.reordering);
    // Each held packet fills its hole after later ones were SACKed: one reordering event, or
    // one for a run of consecutive held packets (correlation makes runs), so 0.85 to 1.0 of
    // the held packets in ~30 runs. Some runs count more events than held packets, which we
    // have not traced (a recovery that ended in a timeout would do it; so would the emulator
    // itself reordering under load): one in ~40 here up to 10 % more, one CI run on a loaded
    // host 185 for 144 held (+28 %). Without reordering the sender sees none
    // (default_buffers_fill_the_bottleneck), so half as many again still says it was these.
    let reordered = s.reordered;
    assert!((reordered * 3 / 4..=reordered * 3 / 2).contains(&seen), "sender saw reordering {seen} times");
    assert!(info.reordering > 3, "the sender raised its reordering degree above the default 3");
    // Once the sender knows, it waits the packets out instead of retransmitting them. Before
    // it knows, and while it recovers from tail drops (when RACK allows no reordering), a
    // held packet is retransmitted in vain: a few in ~150 (9 at worst in our runs), where a
    // gap longer than the RTT costs every one (the next test).
    assert_retransmissions(&transfer, 0, SPURIOUS + s.reordered / 10);
}

#[test]
fn reordering_longer_than_the_rtt_is_retransmitted_then_dsacked() {
    let _serial = serial();
    let gap = Duration::from_millis(100);
    let Some(link) = start_impaired(Impairments { reorder: STORY_REORDER, reorder_gap: gap, ..Default::default() })
    else {
        return;
    };
    eprintln!("1 % reordering (gap 100 ms, correlation 10 %) from server to client, 20 ms, 100 Mbit/s:");
    let transfer = bulk_download(&link, BULK_BYTES);
    let s = transfer.stats_at_eof.server_to_client;
    assert_binomial("held back", s.reordered, admitted(&transfer), STORY_REORDER);
    assert_eq!(link.impairments().server_to_client.reorder_gap, gap);
    let late = s.reordered;
    // A packet 100 ms late is given up for lost after about an RTT and sent again. A held
    // SYN-ACK is the exception (its timer is 1 s, so it just arrives late), and most likely
    // so is a held pure ACK (of the request, of the client's FIN), since an ACK is never sent
    // again — not confirmed by a capture. So one to three fewer (a CI run saw 143 sent again
    // for 145 held back); the top of the range stays where it was (late - 1 + SPURIOUS).
    assert_retransmissions(&transfer, late.saturating_sub(3), SPURIOUS + 2);
    // When the original turns up, its timestamp is 100 ms older than what the receiver has
    // seen since, and the receiver discards it as a stale duplicate (PAWS, RFC 7323)...
    let client = link.net_counters(link.client_ns()).expect("client counters");
    let [paws, dsacks] = ["TcpExt.PAWSEstab", "TcpExt.TCPDSACKOldSent"].map(|key| client.get(key).expect(key));
    let heard = u64::from(transfer.sender.dsack_dups.expect("tcpi_dsack_dups (Linux 4.19+)"));
    let ofo = transfer.receiver.rcv_ooopack.expect("tcpi_rcv_ooopack (Linux 5.4+)");
    eprintln!(
        "  client kernel queued {ofo} segments out of order, discarded {paws} as stale (PAWS) and \
         sent {dsacks} D-SACKs; the sender heard of {heard} duplicates"
    );
    assert!((late.saturating_sub(1)..=late).contains(&paws), "{paws} stale segments for {late} late packets");
    // ...and D-SACKs it, so the sender learns it retransmitted in vain; unless the
    // retransmission has not arrived yet (it queued behind tail drops, or was dropped itself),
    // when the original is discarded with a plain duplicate ACK. That was at most 7 in ~165.
    assert!((late * 3 / 4..=late).contains(&dsacks), "{dsacks} D-SACKs for {late} late packets");
    assert!((dsacks * 3 / 4..=dsacks).contains(&heard), "{heard} duplicates heard of {dsacks}");
    // Every hole holds up at least the packet behind it.
    assert!(u64::from(ofo) >= late.saturating_sub(1), "{ofo} segments queued out of order");
}
