//! Accuracy of the WAN emulator itself, measured with real kernel TCP across it.
//!
//! Run with `--nocapture` to read the measured figures. Tests that cannot run here (not root,
//! no TUN) print `skipped: <why>` and pass.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::process::Command;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rttscope_integration_tests::wan::{WanConfig, WanLink};

const RTT: Duration = Duration::from_millis(20);
const LINK_BPS: u64 = 100_000_000;
/// The 22 MB result set of the background story.
const BULK_BYTES: usize = 22_000_000;

/// The tests measure time on a 2-core machine: run them one at a time so they don't skew
/// each other (cargo runs tests of one binary on parallel threads).
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Starts a link, or returns None after printing why this machine can't.
fn start(config: WanConfig) -> Option<WanLink> {
    if let Err(why) = WanLink::available() {
        eprintln!("skipped: {why}");
        return None;
    }
    Some(WanLink::start(config).expect("start WAN link"))
}

/// A listener on the server side of `link`, on an ephemeral port.
fn listen(link: &WanLink) -> (TcpListener, SocketAddr) {
    let listener = link
        .in_namespace(link.server_ns(), || {
            TcpListener::bind((Ipv4Addr::UNSPECIFIED, 0))
        })
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
    eprintln!(
        "rtt 0 ms (emulator floor): {}",
        summary(&ping_pong(&link, 200))
    );
    drop(link);

    let link = WanLink::start(WanConfig::with_rtt(RTT)).expect("start WAN link");
    let rtts = ping_pong(&link, 200);
    eprintln!("rtt {:.0} ms: {}", ms(RTT), summary(&rtts));
    eprintln!("  {:?}", link.stats());
    let p50 = percentile(&rtts, 0.5);
    assert!(
        p50.abs_diff(RTT) <= Duration::from_micros(500),
        "median RTT {:.3} ms is not 20 ± 0.5 ms",
        ms(p50)
    );
}

/// Sends `bytes` from the server namespace to the client namespace over a fresh connection
/// and returns the throughput in bits per second, timed on the receiver from connect to the
/// last byte (slow start included, as a query's result set would see it).
fn bulk_download(link: &WanLink, bytes: usize) -> f64 {
    let (listener, addr) = listen(link);
    let sender = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().expect("accept");
        let chunk = vec![0x5a_u8; 64 * 1024];
        let mut left = bytes;
        while left > 0 {
            let n = left.min(chunk.len());
            s.write_all(&chunk[..n]).expect("send");
            left -= n;
        }
    });
    let start = Instant::now();
    let mut client = connect(link, addr);
    let mut buf = vec![0u8; 256 * 1024];
    let mut got = 0;
    loop {
        match client.read(&mut buf).expect("receive") {
            0 => break,
            n => got += n,
        }
    }
    let elapsed = start.elapsed();
    sender.join().expect("sender thread");
    assert_eq!(got, bytes, "bytes received");
    let bps = bytes as f64 * 8.0 / elapsed.as_secs_f64();
    eprintln!(
        "  {bytes} bytes in {:.3} s = {:.2} Mbit/s",
        elapsed.as_secs_f64(),
        bps / 1e6
    );
    bps
}

fn bottleneck_config() -> WanConfig {
    let mut config = WanConfig {
        rtt: RTT,
        bandwidth_bps: Some(LINK_BPS),
        queue_bytes: 0,
    };
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
        link.sysctl(link.server_ns(), "net.ipv4.tcp_wmem")
            .expect("sysctl")
    );
    let bps = bulk_download(&link, BULK_BYTES);
    eprintln!(
        "  {:.0} % of the link; {:?}",
        bps * 100.0 / LINK_BPS as f64,
        link.stats()
    );
    assert!(
        bps >= 0.8 * LINK_BPS as f64,
        "{:.2} Mbit/s is below 80 % of 100 Mbit/s",
        bps / 1e6
    );
}

#[test]
fn pinned_send_buffer_is_window_limited() {
    let _serial = serial();
    let Some(link) = start(bottleneck_config()) else {
        return;
    };
    // The story's misconfiguration: a 16 KiB send buffer that autotuning may not grow.
    // Set before the listener exists: sockets take their buffer sizes at creation.
    link.set_sysctl(link.server_ns(), "net.ipv4.tcp_wmem", "4096 16384 16384")
        .expect("set tcp_wmem");
    assert_eq!(
        link.sysctl(link.server_ns(), "net.ipv4.tcp_wmem")
            .expect("read back"),
        "4096\t16384\t16384"
    );
    // The client namespace keeps the defaults: the limit is the sender's alone.
    assert_ne!(
        link.sysctl(link.client_ns(), "net.ipv4.tcp_wmem")
            .expect("sysctl"),
        "4096\t16384\t16384"
    );
    eprintln!("tcp_wmem 4096 16384 16384 on the server, 20 ms, 100 Mbit/s:");
    let bps = bulk_download(&link, BULK_BYTES);
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
}

/// Tests hold a link across threads and `.await`s.
#[allow(dead_code)]
fn link_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<WanLink>();
}

fn netns_list() -> String {
    let out = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip netns list");
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
    assert!(
        listed.contains(&srv) && listed.contains(&cli),
        "namespaces exist while running:\n{listed}"
    );
    let out = link
        .command(&srv, "ip")
        .args(["-brief", "addr", "show", "wan0"])
        .output()
        .expect("ip in ns");
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        shown.contains(&link.server_ip().to_string()),
        "wan0 in {srv}: {shown}"
    );
    drop(link);
    let listed = netns_list();
    assert!(
        !listed.contains(&srv) && !listed.contains(&cli),
        "namespaces left after drop:\n{listed}"
    );
}

#[test]
fn panic_while_running_still_cleans_up() {
    let _serial = serial();
    if let Err(why) = WanLink::available() {
        eprintln!("skipped: {why}");
        return;
    }
    let names = std::sync::Mutex::new(None);
    let result = std::panic::catch_unwind(|| {
        let link = WanLink::start(WanConfig::with_rtt(RTT)).expect("start");
        *names.lock().expect("names") =
            Some((link.server_ns().to_owned(), link.client_ns().to_owned()));
        panic!("intentional panic: a test body failing while the link runs");
    });
    assert!(result.is_err());
    let (srv, cli) = names.into_inner().expect("names").expect("link started");
    let listed = netns_list();
    assert!(
        !listed.contains(&srv) && !listed.contains(&cli),
        "namespaces left after panic:\n{listed}"
    );
}

#[test]
fn start_removes_namespaces_of_dead_owners() {
    let _serial = serial();
    if let Err(why) = WanLink::available() {
        eprintln!("skipped: {why}");
        return;
    }
    // A pid that just exited stands in for a test run that was killed before its Drop.
    let mut child = Command::new("true").spawn().expect("spawn true");
    let dead = child.id();
    child.wait().expect("reap true");
    let stale = format!("rtts-{dead}-0-srv");
    let status = Command::new("ip")
        .args(["netns", "add", &stale])
        .status()
        .expect("ip netns add");
    assert!(status.success());
    let link = WanLink::start(WanConfig::with_rtt(RTT)).expect("start");
    let listed = netns_list();
    drop(link);
    assert!(
        !listed.contains(&stale),
        "stale namespace {stale} survived start:\n{listed}"
    );
}
