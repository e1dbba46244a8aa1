//! The admin API's `PUT /inject` body, as an attacker may write it: any bytes through
//! `Inject::from_json` (what the handler runs). Besides not panicking: a body that is
//! accepted has every value within its documented range (loss included), prints back to
//! JSON that parses to the same settings, and makes models whose delay lines schedule
//! without panicking, releasing nothing early and nothing out of order. The same bytes as a `Host` header
//! go through the guard's check, which must not panic either.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use rttscope::admin::guard::Guard;
use rttscope::inject::{DelayLine, MAX_PIPE_BYTES, model, pipe_capacity};
use rttscope::protocol::Direction;
use rttscope_config::{AdminConfig, Direction as ConfigDirection, Inject};

/// The limits `Inject::validate` promises (see `config/src/inject.rs`).
const MAX_DELAY: Duration = Duration::from_secs(60);

pub fn run(data: &[u8]) {
    host(data);
    let Ok(body) = std::str::from_utf8(data) else { return };
    let Ok(inject) = Inject::from_json(body) else { return };

    for dir in [ConfigDirection::ToUpstream, ConfigDirection::ToClient] {
        let way = inject.direction(dir);
        assert!(way.delay <= MAX_DELAY && way.jitter <= MAX_DELAY, "{inject:?}");
        assert!(way.jitter <= way.delay || way.jitter.is_zero(), "jitter beyond the delay: {inject:?}");
        assert!(way.bandwidth_bps.is_none_or(|b| (1_000..=100_000_000_000).contains(&b)), "{inject:?}");
        assert!(way.loss_ppm <= 500_000, "loss beyond 50 %: {inject:?}");
    }
    assert!(inject.window.is_none_or(|w| (512..=1 << 30).contains(&w.0)), "{inject:?}");

    let json = serde_json::to_string(&inject).expect("accepted settings print");
    assert_eq!(Inject::from_json(&json).expect("printed settings parse"), inject, "{json}");

    let t0 = Instant::now();
    for (i, direction) in [Direction::ToUpstream, Direction::ToClient].into_iter().enumerate() {
        let m = model(&inject, direction);
        let capacity = pipe_capacity(&m, 64 * 1024);
        assert!((64 * 1024..=MAX_PIPE_BYTES).contains(&capacity));
        let mut line = DelayLine::new(m, 0, i as u64 + 1);
        let mut released = 0;
        for (k, len) in [1usize, 1500, 16 * 1024, 0, 64 * 1024].into_iter().enumerate() {
            let now = t0 + Duration::from_millis(k as u64 * 7);
            // A returned release may later come forward (a hole the next read repairs),
            // never before the bytes arrived; what is released only grows.
            let release = line.schedule(now, len);
            assert!(release >= now, "{inject:?}");
            let by_now = line.released_by(now);
            assert!(by_now >= released, "{inject:?}");
            released = by_now;
            assert!(line.next_release().is_none_or(|next| next > now), "{inject:?}");
        }
        // However many segments are lost, the held releases stay in stream order and
        // come after the bytes arrived.
        let mut held = (released, t0);
        while let Some(next) = line.next_release() {
            assert!(next >= held.1, "{inject:?}");
            let released = line.released_by(next);
            assert!(released >= held.0, "{inject:?}");
            held = (released, next);
        }
    }
}

/// The bytes as a `Host` header, against an API on loopback that knows one name.
fn host(data: &[u8]) {
    let Ok(host) = std::str::from_utf8(data) else { return };
    let admin = AdminConfig { hosts: vec!["rttscope.internal".to_owned()], ..AdminConfig::default() };
    let guard = Guard::new(&admin, None);
    let local = SocketAddr::from(([127, 0, 0, 1], 6070));
    let allowed = guard.host_allowed(host, local);
    // Whatever passes names this API: it carries no other name and no other port.
    if allowed {
        let lower = host.to_ascii_lowercase();
        // A port is digits after the last colon, unless the whole is an (IPv6) address;
        // "06070" is port 6070 as much as "6070" is (RFC 3986 allows leading zeros).
        let (name, port) = match lower.rsplit_once(':') {
            Some((n, p))
                if lower.parse::<IpAddr>().is_err() && !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) =>
            {
                (n, Some(p))
            }
            _ => (lower.as_str(), None),
        };
        assert!(port.is_none_or(|p| p.trim_start_matches('0') == "6070"), "{host:?}");
        let name = name.strip_prefix('[').and_then(|n| n.strip_suffix(']')).unwrap_or(name);
        let is_local_ip = name.parse::<IpAddr>().is_ok_and(|ip| ip.to_canonical() == local.ip());
        let name = name.strip_suffix('.').unwrap_or(name);
        assert!(is_local_ip || name == "localhost" || name == "rttscope.internal", "{host:?}");
    }
}
