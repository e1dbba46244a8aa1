//! What every admin request passes before a handler sees it, in this order:
//!
//! 1. `Host` names this API (the IP the client connected to, `localhost` on loopback, or
//!    one of `admin.hosts`), else 421: a DNS-rebinding page's requests carry its own name;
//! 2. the bearer token, for requests that change state (any method but GET and HEAD) and,
//!    beyond loopback, for all of them, else 401 (403 when no token is configured);
//! 3. a request that changes state carries `Content-Type: application/json`, else 415: a
//!    browser cannot send that cross-site without a preflight, so no form can post here;
//! 4. its body arrives within `admin.body_timeout` (else 408) and `admin.max_body_bytes`
//!    (else 413), read here whole so a handler never waits on a slow client.
//!
//! Header size and header timeout are hyper's (`server`), the connection cap the
//! listener's.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, to_bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rttscope_config::{ADMIN_TOKEN_ENV, AdminConfig, AdminToken};

use super::token::authorizes;

/// The address a connection was accepted on, put on each of its requests by the listener.
#[derive(Clone, Copy, Debug)]
pub struct LocalAddr(pub SocketAddr);

/// The address a connection came from, put on each of its requests by the listener: for the
/// log line of a refused token.
#[derive(Clone, Copy, Debug)]
pub struct PeerAddr(pub SocketAddr);

/// A token that was offered and refused, logged as a warning at most once a second (a
/// guessing client must not flood the log); the lines left out are counted in the next.
fn log_wrong_token(peer: Option<SocketAddr>, method: &Method, path: &str) {
    use std::sync::atomic::{AtomicU64, Ordering};
    static LAST_SECOND: AtomicU64 = AtomicU64::new(0);
    static LEFT_OUT: AtomicU64 = AtomicU64::new(0);
    let second = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    if LAST_SECOND.swap(second, Ordering::Relaxed) == second {
        LEFT_OUT.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let peer = peer.map_or_else(|| "?".to_owned(), |p| p.to_string());
    let left_out = LEFT_OUT.swap(0, Ordering::Relaxed);
    tracing::warn!(%peer, %method, path, earlier_unlogged = left_out, "admin API: a wrong bearer token was refused");
}

/// The rules, resolved once at start.
#[derive(Debug)]
pub struct Guard {
    token: Option<AdminToken>,
    /// Reads need the token too: the API is reachable beyond this host.
    reads_need_token: bool,
    /// Extra names `Host` may carry, lowercased.
    hosts: Vec<String>,
    max_body_bytes: usize,
    body_timeout: Duration,
}

impl Guard {
    /// The rules for `admin`; reads need `token` too when `admin.address` is beyond loopback.
    pub fn new(admin: &AdminConfig, token: Option<AdminToken>) -> Guard {
        Guard {
            token,
            reads_need_token: admin.beyond_loopback(),
            hosts: admin.hosts.iter().map(|h| h.to_ascii_lowercase()).collect(),
            max_body_bytes: usize::try_from(admin.max_body_bytes.0).unwrap_or(usize::MAX),
            body_timeout: admin.body_timeout.get(),
        }
    }

    /// Whether `host` (a `Host` header) names this API, reached at `local`.
    pub fn host_allowed(&self, host: &str, local: SocketAddr) -> bool {
        let Some((name, port)) = split_host_port(host) else {
            return false;
        };
        if port.is_some_and(|p| p != local.port()) {
            return false;
        }
        let local_ip = local.ip().to_canonical();
        if let Ok(ip) = name.parse::<IpAddr>() {
            return ip.to_canonical() == local_ip;
        }
        let name = name.to_ascii_lowercase();
        let name = name.strip_suffix('.').unwrap_or(&name);
        (name == "localhost" && local_ip.is_loopback()) || self.hosts.iter().any(|h| h == name)
    }

    /// The 401/403 for a request without the token; `None` when it carries it.
    fn token_refusal(&self, headers: &HeaderMap) -> Option<Response> {
        let Some(token) = &self.token else {
            let message = format!(
                "this request changes state and needs a bearer token, but this rttscope runs without \
                 one: restart it with admin.token, admin.token_file or {ADMIN_TOKEN_ENV} set"
            );
            return Some(refuse(StatusCode::FORBIDDEN, &message));
        };
        let offered = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
        if offered.is_some_and(|h| authorizes(token, h)) {
            return None;
        }
        let mut response = refuse(StatusCode::UNAUTHORIZED, "needs Authorization: Bearer <admin token>");
        response.headers_mut().insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer"));
        Some(response)
    }
}

/// `host[:port]` or `[v6][:port]` → (host, port). `None` for anything else.
fn split_host_port(host: &str) -> Option<(&str, Option<u16>)> {
    let (name, port) = if let Some(rest) = host.strip_prefix('[') {
        let (v6, after) = rest.split_once(']')?;
        match after {
            "" => (v6, None),
            _ => (v6, Some(after.strip_prefix(':')?)),
        }
    } else {
        match host.split_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (host, None),
        }
    };
    let port = match port {
        Some(p) => Some(p.parse::<u16>().ok()?),
        None => None,
    };
    (!name.is_empty()).then_some((name, port))
}

fn refuse(status: StatusCode, message: &str) -> Response {
    (status, axum::Json(serde_json::json!({ "error": message }))).into_response()
}

fn is_json(headers: &HeaderMap) -> bool {
    let Some(value) = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let media_type = value.split(';').next().unwrap_or_default().trim();
    media_type.eq_ignore_ascii_case("application/json")
}

/// The middleware: the checks of the module docs, then the handler.
pub async fn guard(State(guard): State<Arc<Guard>>, request: Request, next: Next) -> Response {
    let Some(LocalAddr(local)) = request.extensions().get::<LocalAddr>().copied() else {
        // Every connection gets one from the listener; a request without it did not come
        // through the listener, so nothing vouches for it.
        return refuse(StatusCode::INTERNAL_SERVER_ERROR, "request without a connection");
    };
    let host = request.headers().get(header::HOST).and_then(|v| v.to_str().ok());
    if !host.is_some_and(|h| guard.host_allowed(h, local)) {
        let message = "Host does not name this admin API (add the name to admin.hosts)";
        return refuse(StatusCode::MISDIRECTED_REQUEST, message);
    }
    let changes_state = !matches!(*request.method(), Method::GET | Method::HEAD);
    if (changes_state || guard.reads_need_token)
        && let Some(refusal) = guard.token_refusal(request.headers())
    {
        // A wrong token is worth a line (someone guessing, or a client with a stale one); a
        // missing one is a plain client that did not know.
        if refusal.status() == StatusCode::UNAUTHORIZED && request.headers().contains_key(header::AUTHORIZATION) {
            let peer = request.extensions().get::<PeerAddr>().map(|p| p.0);
            log_wrong_token(peer, request.method(), request.uri().path());
        }
        return refusal;
    }
    if !changes_state {
        return next.run(request).await;
    }
    if !is_json(request.headers()) {
        return refuse(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "a request that changes state takes Content-Type: application/json",
        );
    }
    let declared = request.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > guard.max_body_bytes as u64) {
        return refuse(StatusCode::PAYLOAD_TOO_LARGE, "body larger than admin.max_body_bytes");
    }
    let (parts, body) = request.into_parts();
    let bytes = match tokio::time::timeout(guard.body_timeout, to_bytes(body, guard.max_body_bytes)).await {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(_)) => return refuse(StatusCode::PAYLOAD_TOO_LARGE, "body larger than admin.max_body_bytes"),
        Err(_) => return refuse(StatusCode::REQUEST_TIMEOUT, "body not received within admin.body_timeout"),
    };
    next.run(Request::from_parts(parts, Body::from(bytes))).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(hosts: &[&str]) -> Guard {
        let admin = AdminConfig { hosts: hosts.iter().map(|h| h.to_string()).collect(), ..AdminConfig::default() };
        Guard::new(&admin, None)
    }

    #[test]
    fn host_must_name_the_address_or_a_configured_name() {
        let g = guard(&["rttscope.internal"]);
        let local: SocketAddr = "127.0.0.1:6070".parse().unwrap();
        for ok in ["127.0.0.1:6070", "127.0.0.1", "localhost:6070", "LOCALHOST", "rttscope.internal:6070"] {
            assert!(g.host_allowed(ok, local), "{ok}");
        }
        for bad in ["evil.example:6070", "127.0.0.1:80", "127.0.0.2:6070", "", ":6070", "localhost:x", "[::1]:6070"] {
            assert!(!g.host_allowed(bad, local), "{bad}");
        }
        let public: SocketAddr = "10.1.2.3:6070".parse().unwrap();
        assert!(g.host_allowed("10.1.2.3:6070", public));
        assert!(!g.host_allowed("localhost:6070", public), "localhost names loopback only");
        let v6: SocketAddr = "[::1]:6070".parse().unwrap();
        assert!(g.host_allowed("[::1]:6070", v6) && g.host_allowed("[::1]", v6) && g.host_allowed("localhost", v6));
    }
}
