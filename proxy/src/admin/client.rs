//! The command line's side of the admin API: `rttscope report --admin URL`
//! and `rttscope inject --admin URL` talk to a running rttscope.

use std::time::Duration;

/// Why a request to the admin API failed, in words for a terminal.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot reach the admin API at {url}: {reason}")]
    Unreachable { url: String, reason: String },
    #[error("{url} answered {status}: {body}")]
    Status { url: String, status: u16, body: String },
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
        Err(ClientError::Status { url: url.to_owned(), status, body: body.trim().to_owned() })
    }
}

/// `GET base + path`.
pub fn get(base: &str, path: &str) -> Result<String, ClientError> {
    let url = format!("{}{path}", base.trim_end_matches('/'));
    finish(&url, agent().get(&url).call())
}

/// `PUT base + path` with a JSON body.
pub fn put_json(base: &str, path: &str, body: &str) -> Result<String, ClientError> {
    let url = format!("{}{path}", base.trim_end_matches('/'));
    finish(&url, agent().put(&url).header("content-type", "application/json").send(body))
}
