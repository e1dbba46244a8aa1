//! Link verdicts over the WAN emulator: each limit of the background stories made for real.
//!
//! A private MariaDB runs in the emulator's server namespace, rttscope in the client one, with
//! 20 ms and 100 Mbit/s between them; clients connect to rttscope inside the client namespace.
//! Each test provokes one limit (a pinned server send buffer, a capped receive buffer, a slow
//! reader, round trips) and checks the `limit` rttscope names for it in `/report`'s `links`.
//! Run with `--nocapture` to read the verdicts and the figures behind them. Tests that cannot
//! run here (not root, no TUN) print `skipped: <why>` and pass.

mod link_rig;

use std::io::Read;
use std::time::{Duration, Instant};

use link_rig::*;
use mysql_async::prelude::*;
use rttscope_integration_tests::wan::{WanConfig, WanLink};
#[test]
fn default_buffers_are_link_limited() {
    let _serial = serial();
    let Some(rig) = Rig::start(&[], &[]) else {
        return;
    };
    let started = Instant::now();
    let elapsed = finish(rig.stream(BULK_SQL), started);
    let v = rig.large_verdict();
    show("defaults", &v);
    eprintln!("defaults: client saw the query take {:.2} s; {:?}", elapsed.as_secs_f64(), rig.link.stats());
    assert_eq!(v["limit"], "link", "{}", v["summary"]);
    let bps = num(&v, "throughput") * 8.0;
    assert!(bps >= 0.8 * LINK_BPS as f64, "{:.1} Mbit/s is below 80 % of the link", bps / 1e6);
}

#[test]
fn a_path_below_expectations_is_explained_and_the_host_checked_against_it() {
    let _serial = serial();
    // Expected: a 1 Gbit/s, 5 ms link; the line is 100 Mbit/s at 20 ms. rttscope's host may
    // send at most 256 KiB per round trip: too little for the path as measured.
    let expected = "link:\n  expected_rtt: 5ms\n  expected_bandwidth: 1gbit\n";
    let Some(rig) =
        Rig::start_configured(&[], &[("net.ipv4.tcp_wmem", "4096 16384 262144")], Default::default(), expected)
    else {
        return;
    };
    // The check against the measured path needs a transfer the link limited. Its reader is
    // the CLI on a shared 2-core machine: in CI it fell behind for a second at times (held
    // off 37-49 % of the transfer) and rttscope rightly named it instead, which says nothing
    // of the path; such a transfer is run again, at most twice.
    let mut last_at = 0;
    for attempt in 1..=3 {
        let started = Instant::now();
        finish(rig.stream(BULK_SQL), started);
        let v = rig.verdict(|v| v["bytes"].as_u64().unwrap_or(0) >= LARGE && v["at_us"].as_u64() > Some(last_at));
        show("expected", &v);
        last_at = v["at_us"].as_u64().unwrap_or(0);
        // Every verdict explains the expectations, whatever its limit.
        let summary = v["summary"].as_str().unwrap_or_default();
        let share = 100.0 * num(&v, "throughput") / 125e6;
        assert!(
            summary.contains(&format!("that is {share:.0}% of the 125.0 MB/s expected (link.expected_bandwidth)")),
            "{summary}"
        );
        assert!(summary.contains("× the 5.00 ms expected (link.expected_rtt)"), "{summary}");
        let limit = v["limit"].as_str().unwrap_or_default();
        if limit == "client_reader" && attempt < 3 {
            eprintln!("expected: attempt {attempt}: the reader fell behind; once more");
            continue;
        }
        assert_eq!(limit, "link", "{}", v["summary"]);
        break;
    }
    // At start-up the host was checked against the configured link; after the transfer, against
    // the measured one (a warning of its own, with the measured rate).
    let measured = rig.proxy.log_line(
        |l| l.contains("net.ipv4.tcp_wmem max is 262144") && l.contains("measured_bps"),
        Duration::from_secs(5),
    );
    assert!(measured.is_some(), "no check against the measured path:\n{}", rig.proxy.log());
}

/// rttscope's live reading of its upstream socket's SO_RCVBUF.
fn upstream_rcvbuf(rig: &Rig) -> Option<(u64, u64)> {
    let conns = rig.admin("/connections");
    let c = conns.as_array()?.first()?;
    Some((c["link"]["upstream"]["rcvbuf"].as_u64()?, c["bytes_down"].as_u64().unwrap_or(0)))
}

#[test]
fn upstream_receive_buffer_grows_under_load() {
    let _serial = serial();
    let Some(rig) = Rig::start(&[], &[]) else {
        return;
    };
    // Sleeps around the transfer keep the connection open (and listed) on both sides of it.
    let started = Instant::now();
    let mut child = rig.stream(&format!("SELECT SLEEP(0.5); {BULK_SQL}; SELECT SLEEP(0.5)"));
    let (mut before, mut peak) = (None, 0);
    while child.try_wait().expect("mariadb").is_none() {
        if let Some((rcvbuf, bytes_down)) = upstream_rcvbuf(&rig) {
            // Readings taken before the big result started flowing.
            if bytes_down < 100_000 && before.is_none() {
                before = Some(rcvbuf);
                eprintln!("buffers: rcvbuf {rcvbuf} right after connecting");
            }
            peak = peak.max(rcvbuf);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    finish(child, started);
    show("buffers", &rig.large_verdict());
    let before = before.expect("a reading of the connection before the transfer");
    let bdp = WanConfig { rtt: RTT, bandwidth_bps: Some(LINK_BPS), queue_bytes: 0 }.bdp_bytes() as u64;
    eprintln!("buffers: upstream rcvbuf {before} before, {peak} at most during the 22 MB transfer (BDP {bdp})");
    assert!(
        peak >= 2 * before && peak >= bdp,
        "autotuning should grow the upstream receive buffer past the BDP: {before} → {peak}"
    );
}

/// One `ss -tin` reading of the server's side of rttscope's connection.
#[derive(Debug)]
struct SenderReading {
    in_flight: u64,
    srtt_ms: f64,
    notsent: u64,
    sndbuf: u64,
}

/// `key:value` fields of `ss -tinm` output, e.g. `bytes_acked:123`, `rtt:20.5/0.3`.
fn ss_field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.split_whitespace().find_map(|t| t.strip_prefix(key)?.strip_prefix(':'))
}

fn read_sender(link: &WanLink) -> Option<SenderReading> {
    let out = link
        .command(link.server_ns(), "ss")
        .args(["-H", "-tinm", "state", "established", "( sport = :3306 )"])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let field = |key| ss_field(&text, key).and_then(|v: &str| v.parse::<u64>().ok());
    let srtt_ms = ss_field(&text, "rtt")?.split('/').next()?.parse().ok()?;
    let sndbuf =
        text.split_once("skmem:(").and_then(|(_, m)| m.split(',').find_map(|f| f.strip_prefix("tb")?.parse().ok()));
    // Bytes sent and not yet acknowledged: exactly what a window-limited sender keeps in the
    // pipe. (`unacked` counts segments, and segments need not be full MSS.) `bytes_sent`
    // counts retransmissions too.
    let sent = field("bytes_sent")?.saturating_sub(field("bytes_retrans").unwrap_or(0));
    let in_flight = sent.saturating_sub(field("bytes_acked")?);
    Some(SenderReading { in_flight, srtt_ms, notsent: field("notsent").unwrap_or(0), sndbuf: sndbuf.unwrap_or(0) })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[test]
fn pinned_server_send_buffer_is_the_sender() {
    let _serial = serial();
    // The story's misconfiguration, on the server's host: 16 KiB that autotuning may not grow.
    let Some(rig) = Rig::start(&[("net.ipv4.tcp_wmem", "4096 16384 16384")], &[]) else {
        return;
    };
    let started = Instant::now();
    let mut child = rig.stream(BULK_SQL);
    // The effective send buffer, measured on the server itself while the result flows: the
    // bytes its socket has sent and not yet had acknowledged. (The configured 16 KiB is not
    // the figure: the kernel checks the limit before it fills a new buffer of up to 64 KB, and
    // 17-75 KB were seen in flight under it.) By Little's law a pipe that holds W bytes on
    // average for a round trip R carries W / R: so the mean of the readings, taken at random
    // moments, over the server socket's own smoothed RTT (which counts the window's time on
    // the wire). The median is printed too; the readings are skewed, so it runs ~10 % high.
    let mut readings = Vec::new();
    let mut jitter = 0x9e37_79b9_u32;
    while child.try_wait().expect("mariadb").is_none() {
        readings.extend(read_sender(&rig.link).filter(|r| r.in_flight > 0));
        // A sampling period that wanders, so that it cannot lock onto the RTT's rhythm; and
        // not too often: each reading is two execs on a 2-core host that also runs the link.
        jitter ^= jitter << 13;
        jitter ^= jitter >> 17;
        jitter ^= jitter << 5;
        std::thread::sleep(Duration::from_micros(30_000 + u64::from(jitter % 40_000)));
    }
    let elapsed = finish(child, started);
    let v = rig.large_verdict();
    show("sender", &v);
    assert!(readings.len() >= 20, "too few ss readings of the server socket: {readings:?}");
    let stat = |f: fn(&SenderReading) -> f64| {
        let values: Vec<f64> = readings.iter().map(f).collect();
        (values.iter().sum::<f64>() / values.len() as f64, median(values))
    };
    let (in_flight, in_flight_median) = stat(|r| r.in_flight as f64);
    let (srtt_ms, _) = stat(|r| r.srtt_ms);
    let (_, notsent) = stat(|r| r.notsent as f64);
    let (_, sndbuf) = stat(|r| r.sndbuf as f64);
    let expected = in_flight / (srtt_ms / 1e3);
    let measured = num(&v, "throughput");
    eprintln!(
        "sender: server socket over {} readings: in flight mean {in_flight:.0} B (median {in_flight_median:.0}), \
         notsent {notsent:.0} B, sndbuf {sndbuf:.0} B, srtt {srtt_ms:.2} ms → {:.2} Mbit/s expected \
         ({:.2} with the median); rttscope measured {:.2} Mbit/s = {:.0} % of expected; the client took {:.2} s",
        readings.len(),
        mbit(expected),
        mbit(in_flight_median / (srtt_ms / 1e3)),
        mbit(measured),
        100.0 * measured / expected,
        elapsed.as_secs_f64()
    );
    assert_eq!(v["limit"], "sender", "{}", v["summary"]);
    assert!(
        (0.7..=1.3).contains(&(measured / expected)),
        "throughput {:.2} Mbit/s is not within ±30 % of send buffer / RTT ({:.2} Mbit/s)",
        mbit(measured),
        mbit(expected)
    );
}

#[test]
fn capped_receive_buffer_is_the_receive_window() {
    let _serial = serial();
    // rttscope's host may not grow a receive buffer past 32 KiB.
    let Some(rig) = Rig::start(&[], &[("net.ipv4.tcp_rmem", "4096 16384 32768")]) else {
        return;
    };
    let started = Instant::now();
    let elapsed = finish(rig.stream(SMALLER_SQL), started);
    let v = rig.large_verdict();
    show("receive window", &v);
    eprintln!("receive window: the client saw {:.2} s", elapsed.as_secs_f64());
    assert_eq!(v["limit"], "receive_window", "{}", v["summary"]);
}

/// `sql` through rttscope, its output read at `bytes_per_second`; the verdict on it, shown
/// under `label`, and the pace the output was read at, bytes a second.
fn read_slowly_through(rig: &Rig, sql: &str, bytes_per_second: f64, label: &str) -> (serde_json::Value, f64) {
    let read_pace = read_output_slowly(rig, sql, bytes_per_second, label);
    let v = rig.large_verdict();
    show(label, &v);
    (v, read_pace)
}

/// `sql` through rttscope, its output read at `bytes_per_second`: the pace it was read at.
fn read_output_slowly(rig: &Rig, sql: &str, bytes_per_second: f64, label: &str) -> f64 {
    let started = Instant::now();
    let mut child = rig.stream_to_pipe(sql);
    let read = read_slowly(child.stdout.take().expect("stdout piped"), bytes_per_second);
    let elapsed = finish(child, started);
    eprintln!("{label}: took {read} bytes of output in {:.2} s", elapsed.as_secs_f64());
    read as f64 / elapsed.as_secs_f64()
}

/// Reads `from` at no more than `bytes_per_second`, pausing between reads (an application
/// that does work between rows), timed from its first byte: such an application has no time
/// saved up from waiting for the first (timed from the start, it took the first half-megabyte
/// at full speed while the connection and the query crossed the line). Returns the bytes read.
fn read_slowly(mut from: impl Read, bytes_per_second: f64) -> u64 {
    let mut started = None;
    let mut buf = vec![0u8; 16 * 1024];
    let mut total = 0u64;
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => return total,
            Ok(n) => total += n as u64,
        }
        let started = *started.get_or_insert_with(Instant::now);
        let due = Duration::from_secs_f64(total as f64 / bytes_per_second);
        if let Some(ahead) = due.checked_sub(started.elapsed()) {
            std::thread::sleep(ahead);
        }
    }
}

#[test]
fn slow_reader_is_the_client_reader() {
    let _serial = serial();
    let Some(rig) = Rig::start(&[], &[]) else {
        return;
    };
    // `mariadb --quick` only reads the socket as fast as its output is taken; taking it at
    // 5 MB/s (40 % of the link) makes it the slow reader. The whole 22 MB is needed: the
    // loopback sockets between rttscope and its client absorb several MB before rttscope's
    // own buffer fills and it stops reading the server.
    let (v, read_pace) = read_slowly_through(&rig, BULK_SQL, 5e6, "slow reader");
    assert_eq!(v["limit"], "client_reader", "{}", v["summary"]);
    // What the client's socket acknowledged while rttscope held off for it is the reader's
    // own pace (5 MB/s asked; on a busy machine less), a few percent more on the wire.
    let pace = num(&v, "reader_pace");
    assert!(
        (0.85 * read_pace..=1.2 * read_pace).contains(&pace),
        "reader pace {pace}, read at {read_pace:.0}: {}",
        v["summary"]
    );
}

/// At 5 ms a reader at 40 % of the line holds rttscope off half the time, yet each hold is
/// short: the server's bytes never pile up past a relay buffer and the window stays open, so
/// none of the costs the verdict looked for showed, and it read `link`. What the client's
/// socket acknowledged while rttscope held off for it is the application's pace, and the
/// transfer moved at it. As in the confusion matrix's cell: a Reno server (BBR keeps sending
/// into the hold-offs until the window shuts, which the verdict read before), and the
/// client's socket to rttscope buffering 64 KiB (without a clamp the loopback sockets absorb
/// megabytes first).
#[test]
fn a_reader_at_a_short_rtt_is_timed_while_behind_and_named() {
    let _serial = serial();
    let line = Line { rtt: Duration::from_millis(5), bandwidth_bps: LINK_BPS, impairments: Default::default() };
    let server = [("net.ipv4.tcp_congestion_control", "reno")];
    let Some(rig) = Rig::start_on(line, &server, &[("net.ipv4.tcp_wmem", "4096 16384 65536")], "") else {
        return;
    };
    let (v, _) = read_slowly_through(&rig, "SELECT REPEAT('x', 1000) FROM seq_1_to_20000", 5e6, "short-RTT reader");
    assert_eq!(v["limit"], "client_reader", "{}", v["summary"]);
    // Named for what was measured: the transfer at the client's pace, or the server slowing
    // while rttscope waited for the client (at this RTT the client's acknowledgements time
    // its pace only roughly: 3.3-6.1 MB/s for 5 measured here).
    let summary = v["summary"].as_str().unwrap_or_default();
    assert!(
        summary.contains("the application's pace")
            || summary.contains("the server slowed each time the application fell behind"),
        "{summary}"
    );
}

/// A slow reader of a result the loopback sockets between rttscope and its client can hold
/// (4 MB: rttscope's send buffer and the client's receive buffer grow to several MB each)
/// never holds rttscope off: the server's bytes go through at the line's pace and wait for
/// the application on this side. What the application had still to take when the server was
/// done names it. Before, the verdict was the line's (`link`), the application's seconds of
/// reading unexplained.
#[test]
fn a_slow_reader_the_sockets_absorb_is_the_client_reader() {
    let _serial = serial();
    let Some(rig) = Rig::start(&[], &[]) else {
        return;
    };
    let (v, _) = read_slowly_through(&rig, "SELECT REPEAT('x', 1000) FROM seq_1_to_4000", 1e6, "absorbed slow reader");
    assert_eq!(v["limit"], "client_reader", "{}", v["summary"]);
    let unread = num(&v, "client_unread_at_end");
    assert!(unread >= 0.2 * num(&v, "bytes"), "{unread} unread: {}", v["summary"]);
    let summary = v["summary"].as_str().unwrap_or_default();
    assert!(
        summary.contains("when the server's last byte reached rttscope the application had still to take"),
        "{summary}"
    );
}

/// The same, where the application's own socket holds the result: a client with a large
/// receive buffer (16 MiB here, as an application that sets `SO_RCVBUF`), rttscope's socket to
/// it holding only 64 KiB. What the application left unread waits in its socket's receive
/// queue, acknowledged by its kernel — from rttscope's socket it looks taken (without the
/// reading of the client's own socket: nothing unread, and at 2 MB the verdict `link`). The
/// client is on this host, and its kernel says what it holds.
#[test]
fn a_slow_reader_its_own_socket_absorbs_is_the_client_reader() {
    let _serial = serial();
    let line = Line { rtt: Duration::from_millis(20), bandwidth_bps: LINK_BPS, impairments: Default::default() };
    let client = [("net.ipv4.tcp_wmem", "4096 16384 65536"), ("net.ipv4.tcp_rmem", "4096 16777216 16777216")];
    let Some(rig) = Rig::start_on(line, &[], &client, "") else {
        return;
    };
    // 1.5 MB: well under what the client's window opens to (about 2.1 MiB measured here), so
    // most of the result goes through rttscope and waits for the application there. How long
    // rttscope is held off while that window opens is the client kernel's pace, not
    // rttscope's: 7-49 % of the transfer measured here (over a quarter in about one run in
    // five), so it is not bounded; what names the reader must be what the application left
    // unread, not the hold-off.
    let label = "reader behind its own socket";
    read_output_slowly(&rig, "SELECT REPEAT('x', 1000) FROM seq_1_to_1500", 1e6, label);
    let v = rig.verdict(|v| v["bytes"].as_u64().unwrap_or(0) >= 1_500_000);
    show(label, &v);
    assert_eq!(v["limit"], "client_reader", "{}", v["summary"]);
    let unread = num(&v, "client_unread_at_end");
    assert!(unread >= 0.2 * num(&v, "bytes"), "{unread} unread: {}", v["summary"]);
    assert!(unread > f64::from(64u32 << 10) * 2.0, "more than rttscope's socket can hold: {unread}");
    let summary = v["summary"].as_str().unwrap_or_default();
    assert!(
        summary.contains("when the server's last byte reached rttscope the application had still to take"),
        "named by what the application left unread: {summary}"
    );
}

#[test]
fn a_thousand_point_selects_are_latency() {
    let _serial = serial();
    let Some(rig) = Rig::start(&[], &[]) else {
        return;
    };
    let elapsed = rig.with_conn(|mut conn| async move {
        let started = Instant::now();
        for i in 0..1000u64 {
            let got: Option<u64> = conn.exec_first("SELECT ?", (i,)).await.expect("point select");
            assert_eq!(got, Some(i));
        }
        let elapsed = started.elapsed();
        conn.disconnect().await.expect("disconnect");
        elapsed
    });
    let v = rig.verdict(|v| v["limit"] == "latency");
    eprintln!("latency: verdict {}", serde_json::to_string_pretty(&v).unwrap_or_default());
    eprintln!(
        "latency: 1000 point selects took {:.2} s ({:.2} ms each); verdict: {} round trips in {:.2} s at base RTT {} µs",
        elapsed.as_secs_f64(),
        elapsed.as_secs_f64(), // 1000 queries: seconds in total are milliseconds each
        v["round_trips"],
        num(&v, "duration_us") / 1e6,
        v["base_rtt_us"]
    );
    assert!(v["round_trips"].as_u64().unwrap_or(0) >= 1000, "{v}");
}
