//! The command line's side of the admin API: `rttscope report --admin URL`
//! and `rttscope inject --admin URL` talk to a running rttscope, with the
//! bearer token when they have one.

use std::time::Duration;

/// Why a request to the admin API failed, in words for a terminal.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// No usable HTTP answer: refused, timed out (30 s), a body that would not read, or a
    /// reply that was not what the command expected.
    #[error("cannot reach the admin API at {url}: {reason}")]
    Unreachable {
        /// The URL asked, base and path.
        url: String,
        /// The transport's or the parser's error, in its words.
        reason: String,
    },
    /// An answer outside 2xx: 401 without the token, 400 for a refused `PUT /inject`, ...
    #[error("{url} answered {status}: {body}{hint}")]
    Status {
        /// The URL asked, base and path.
        url: String,
        /// The HTTP status code.
        status: u16,
        /// The admin API's error text, trimmed: it says what was wrong.
        body: String,
        /// What to do about it on this side, when the status says (a token missing or wrong);
        /// empty or starting with `; `.
        hint: &'static str,
    },
}

impl ClientError {
    /// With what the command line can do about a refused token: the server cannot know
    /// whether the caller had one.
    fn with_hint(self, token_sent: bool) -> ClientError {
        match self {
            ClientError::Status { url, status: 401, body, .. } => {
                let hint = if token_sent {
                    "; the token given (--token-file, $RTTSCOPE_ADMIN_TOKEN or the config's admin.token) is not this rttscope's"
                } else {
                    "; give the token with --token-file FILE or $RTTSCOPE_ADMIN_TOKEN"
                };
                ClientError::Status { url, status: 401, body, hint }
            }
            other => other,
        }
    }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(30)))
        // Non-2xx answers carry our own error text; read it rather than fail.
        .http_status_as_error(false)
        .build()
        .into()
}

fn finish(url: &str, response: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Result<String, ClientError> {
    let mut response = response.map_err(|e| ClientError::Unreachable { url: url.to_owned(), reason: e.to_string() })?;
    let status = response.status().as_u16();
    let body = response
        .body_mut()
        .read_to_string()
        .map_err(|e| ClientError::Unreachable { url: url.to_owned(), reason: e.to_string() })?;
    if (200..300).contains(&status) {
        Ok(body)
    } else {
        Err(ClientError::Status { url: url.to_owned(), status, body: body.trim().to_owned(), hint: "" })
    }
}

/// `base` without a trailing `/`, with `http://` when it names no scheme.
fn normalise(base: &str) -> String {
    let base = base.trim_end_matches('/');
    if base.contains("://") { base.to_owned() } else { format!("http://{base}") }
}

/// A running rttscope's admin API: its base URL and the token to show it.
pub struct AdminClient {
    base: String,
    /// The value of the `Authorization` header, when there is a token.
    authorization: Option<String>,
}

impl AdminClient {
    /// `base` is a URL, or a bare `HOST:PORT` (as `--admin` takes it when serving) for http.
    pub fn new(base: &str, token: Option<&str>) -> AdminClient {
        AdminClient { base: normalise(base), authorization: token.map(|t| format!("Bearer {t}")) }
    }

    /// The same credentials at another base URL.
    pub fn at(&self, base: &str) -> AdminClient {
        AdminClient { base: normalise(base), authorization: self.authorization.clone() }
    }

    /// The base URL, for messages.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// `GET base + path`.
    pub fn get(&self, path: &str) -> Result<String, ClientError> {
        let url = format!("{}{path}", self.base);
        let mut request = agent().get(&url);
        if let Some(auth) = &self.authorization {
            request = request.header("authorization", auth);
        }
        finish(&url, request.call()).map_err(|e| e.with_hint(self.authorization.is_some()))
    }

    /// `PUT base + path` with a JSON body.
    pub fn put_json(&self, path: &str, body: &str) -> Result<String, ClientError> {
        self.send_json(ureq::http::Method::PUT, path, body)
    }

    /// `POST base + path` with a JSON body.
    pub fn post_json(&self, path: &str, body: &str) -> Result<String, ClientError> {
        self.send_json(ureq::http::Method::POST, path, body)
    }

    fn send_json(&self, method: ureq::http::Method, path: &str, body: &str) -> Result<String, ClientError> {
        let url = format!("{}{path}", self.base);
        let mut request =
            ureq::http::Request::builder().method(method).uri(&url).header("content-type", "application/json");
        if let Some(auth) = &self.authorization {
            request = request.header("authorization", auth);
        }
        let request = request
            .body(body.to_owned())
            .map_err(|e| ClientError::Unreachable { url: url.clone(), reason: e.to_string() })?;
        finish(&url, agent().run(request)).map_err(|e| e.with_hint(self.authorization.is_some()))
    }
}

/// `GET base + path` without a token: enough for reads on loopback.
pub fn get(base: &str, path: &str) -> Result<String, ClientError> {
    AdminClient::new(base, None).get(path)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_bare_address_means_http() {
        assert_eq!(super::normalise("127.0.0.1:6070"), "http://127.0.0.1:6070");
        assert_eq!(super::normalise("http://127.0.0.1:6070/"), "http://127.0.0.1:6070");
        assert_eq!(super::normalise("https://admin.example/"), "https://admin.example");
    }
}
