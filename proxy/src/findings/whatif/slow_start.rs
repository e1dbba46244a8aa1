//! A large response over a far link, round trip by round trip, when both TCP's slow start and
//! the server's own pace hold it.
//!
//! Neither alone says how long it takes. The window doubles each round trip from ten segments,
//! so a 40 MB result needs eleven round trips more than its first however fast the server;
//! and the server takes as long as it took here to produce the rows however wide the window.
//! The two overlap only as far as the server can run ahead of the window: into its socket's
//! send buffer, which grows to 4 MiB at most (Linux's default `tcp_wmem`). Once that is full
//! the server waits for the window, and the time it waits comes on top of its streaming.
//! Measured over the emulated link (`scripts/bench.sh --whatif`), a 40 MB read that streams
//! in about 80 ms took some 20 ms more at 5 ms than either alone says: about what the server
//! waits for a full 4 MiB buffer here.

use crate::inject::slow_start::INITIAL_WINDOW;

/// The most a server's socket buffers ahead of the window: Linux's default `tcp_wmem`
/// maximum, the size its send buffer autotunes to at most.
const SERVER_SEND_BUFFER: f64 = 4_194_304.0;

/// Round trips replayed at most; the window has opened past any response by then, so this
/// only bounds the loop.
const MAX_ROUNDS: u32 = 64;

/// How long a response of `bytes` that streamed for `stream_us` here takes over a link of
/// `rtt_us` and `bytes_per_us` (`None`: no bandwidth limit), µs, from its first round trip's
/// end (that round trip is the command's own, charged with the others) to its last byte.
pub(super) fn response_us(bytes: u64, stream_us: u64, rtt_us: u64, bytes_per_us: Option<f64>) -> u64 {
    let total = bytes as f64;
    let stream = stream_us as f64;
    // The server's pace, bytes per µs; infinite when nothing streamed (it had them all ready).
    let pace = if stream_us == 0 { f64::INFINITY } else { total / stream };
    let at_pace = |left: f64| if left <= 0.0 || pace.is_infinite() { 0.0 } else { left / pace };
    let on_wire = |left: f64| bytes_per_us.filter(|&bw| bw > 0.0).map_or(0.0, |bw| left / bw);
    if rtt_us == 0 || bytes == 0 {
        return at_pace(total).max(on_wire(total)) as u64;
    }
    let rtt = rtt_us as f64;
    let pipe = bytes_per_us.map_or(f64::INFINITY, |bw| bw * rtt);
    let (mut window, mut made, mut sent, mut elapsed) = (INITIAL_WINDOW as f64, 0.0_f64, 0.0_f64, 0.0_f64);
    for _ in 0..MAX_ROUNDS {
        let left = total - made;
        let made_per_round = (pace * rtt).min(left);
        let ready = made - sent + made_per_round;
        if ready <= window.min(pipe) {
            // The window carries what the server makes from now on: its pace ends it.
            return (elapsed + at_pace(left)) as u64;
        }
        if pipe <= window {
            // The bandwidth binds from now on, and the server's pace at most matches it.
            return (elapsed + at_pace(left).max(on_wire(total - sent))) as u64;
        }
        // The window binds: it carries a window's worth; the server makes what fits beside
        // what is still queued, then waits.
        let room = SERVER_SEND_BUFFER - (made - sent) + window;
        made += made_per_round.min(room.max(0.0));
        sent += window;
        elapsed += rtt;
        window *= 2.0;
    }
    (elapsed + at_pace(total - made).max(on_wire(total - sent))) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: u64 = 1_000_000;

    #[test]
    fn a_response_the_server_had_ready_takes_slow_starts_round_trips() {
        // 40 MB: eleven round trips beyond the first, whatever the RTT.
        for rtt in [1_000, 20_000, 80_000] {
            assert_eq!(response_us(40 * MB, 0, rtt, None), 11 * rtt);
        }
        // One that fits in the first window takes no more.
        assert_eq!(response_us(10_000, 0, 80_000, None), 0);
    }

    #[test]
    fn a_window_that_opens_before_the_server_fills_its_buffer_costs_nothing() {
        // 40 MB streamed over 250 ms (160 KB a millisecond): at 1 ms the window outruns the
        // server after a few round trips, long before 4 MiB waits; the server's pace decides.
        assert_eq!(response_us(40 * MB, 250_000, 1_000, None), 250_000);
    }

    #[test]
    fn a_server_that_fills_its_buffer_waits_for_the_window() {
        // 40 MB streamed in 80 ms, at 5 ms: the server makes 2.5 MB a round trip while the
        // window is still 14-900 KB, fills 4 MiB in a few, then waits for the window to
        // double past its pace. Longer than the streaming (80 ms) and than slow start's
        // round trips (55 ms), as measured over the emulated link (about 20 ms more).
        let t = response_us(40 * MB, 80_000, 5_000, None);
        assert!((95_000..=110_000).contains(&t), "{t}");
        // Far away, slow start's round trips hold it however fast the server.
        let far = response_us(40 * MB, 80_000, 80_000, None);
        assert!((11 * 80_000..=12 * 80_000).contains(&far), "{far}");
    }

    #[test]
    fn a_bandwidth_limit_holds_the_rest() {
        // 40 MB at 34 Mbit/s (4.25 bytes a µs) and 20 ms: the bandwidth's 9.4 s, plus what
        // the three round trips before the window reached the pipe (85 KB) carried less.
        let t = response_us(40 * MB, 80_000, 20_000, Some(4.25));
        let wire = (40 * MB) as f64 / 4.25;
        assert!((t as f64) >= wire && (t as f64) <= wire + 3.0 * 20_000.0, "{t}");
    }

    #[test]
    fn no_input_panics_or_runs_away() {
        for bytes in [0, 1, 14_480, u64::MAX] {
            for stream in [0, 1, u64::MAX] {
                for rtt in [0, 1, 80_000, u64::MAX] {
                    for bw in [None, Some(0.0), Some(1e-9), Some(4.25), Some(f64::MAX)] {
                        let _ = response_us(bytes, stream, rtt, bw);
                    }
                }
            }
        }
    }
}
