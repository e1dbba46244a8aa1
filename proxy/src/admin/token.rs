//! The admin API's bearer token: where it comes from (`RTTSCOPE_ADMIN_TOKEN`, then
//! `admin.token_file`, then `admin.token`), whether rttscope may start without one, and
//! the comparison, which takes the same time whatever the guess.

use std::net::SocketAddr;
use std::path::PathBuf;

use ring::digest::{SHA256, digest};
use rttscope_config::{ADMIN_TOKEN_ENV, AdminConfig, AdminToken};

/// Why the admin API cannot start with the token settings it has.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The API would listen beyond loopback with no token: whoever reaches it could read the
    /// statements and change the emulated link.
    #[error(
        "admin.address is {addr}, beyond loopback, and no admin token is set: set admin.token, \
         admin.token_file or {ADMIN_TOKEN_ENV} (or bind admin.address to 127.0.0.1, or set admin: off)"
    )]
    Unprotected {
        /// The non-loopback `admin.address` it would bind.
        addr: SocketAddr,
    },
    /// `admin.token_file` is set but unreadable: start refuses rather than run unprotected.
    #[error("cannot read admin.token_file {}: {source}", path.display())]
    File {
        /// The path as configured.
        path: PathBuf,
        /// The read error (missing file, permissions).
        source: std::io::Error,
    },
    /// A token was found but is too short, or holds spaces or control characters.
    #[error("{key}: {problem}")]
    Weak {
        /// Where it came from: `RTTSCOPE_ADMIN_TOKEN`, `admin.token_file` or `admin.token`.
        key: &'static str,
        /// What is wrong with it, in words ([`AdminToken::problem`]).
        problem: String,
    },
}

/// The token the admin API checks, if any. `env` is the value of `RTTSCOPE_ADMIN_TOKEN`.
pub fn resolve(admin: &AdminConfig, env: Option<String>) -> Result<Option<AdminToken>, TokenError> {
    let (token, key) = if let Some(value) = env.filter(|v| !v.is_empty()) {
        (Some(AdminToken::new(value.trim())), ADMIN_TOKEN_ENV)
    } else if let Some(path) = &admin.token_file {
        let text = std::fs::read_to_string(path).map_err(|source| TokenError::File { path: path.clone(), source })?;
        (Some(AdminToken::new(text.trim())), "admin.token_file")
    } else {
        (admin.token.clone(), "admin.token")
    };
    if let Some(problem) = token.as_ref().and_then(AdminToken::problem) {
        return Err(TokenError::Weak { key, problem });
    }
    if token.is_none() && admin.beyond_loopback() {
        return Err(TokenError::Unprotected { addr: admin.address });
    }
    Ok(token)
}

/// Whether the `Authorization` header value `header` carries `token`. Both sides are
/// hashed first, so the comparison takes the same time whatever their lengths, and the
/// byte loop does not stop at the first difference.
pub fn authorizes(token: &AdminToken, header: &str) -> bool {
    let Some(offered) = header.strip_prefix("Bearer ").or_else(|| header.strip_prefix("bearer ")) else {
        return false;
    };
    let (a, b) = (digest(&SHA256, offered.trim().as_bytes()), digest(&SHA256, token.expose().as_bytes()));
    let difference = a.as_ref().iter().zip(b.as_ref()).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(difference) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "0123456789abcdef-token";

    #[test]
    fn only_the_exact_bearer_token_authorizes() {
        let token = AdminToken::new(TOKEN);
        assert!(authorizes(&token, &format!("Bearer {TOKEN}")));
        for wrong in ["", "Bearer", "Bearer ", TOKEN, "Basic abc", "Bearer 0123456789abcdef-toke", "Bearer x"] {
            assert!(!authorizes(&token, wrong), "{wrong:?}");
        }
    }

    #[test]
    fn the_environment_wins_and_beyond_loopback_needs_a_token() {
        let loopback = AdminConfig::default();
        assert!(resolve(&loopback, None).unwrap().is_none());
        let wide = AdminConfig::from(SocketAddr::from(([0, 0, 0, 0], 6070)));
        let err = resolve(&wide, None).unwrap_err().to_string();
        assert!(err.contains("admin.token") && err.contains(ADMIN_TOKEN_ENV), "{err}");
        let from_env = resolve(&wide, Some(TOKEN.to_owned())).unwrap().unwrap();
        assert_eq!(from_env.expose(), TOKEN);
        let err = resolve(&loopback, Some("short".to_owned())).unwrap_err().to_string();
        assert!(err.starts_with(ADMIN_TOKEN_ENV), "{err}");
    }

    #[test]
    fn a_token_file_is_read_and_trimmed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, format!("{TOKEN}\n")).unwrap();
        let admin = AdminConfig { token_file: Some(path), ..AdminConfig::default() };
        assert_eq!(resolve(&admin, None).unwrap().unwrap().expose(), TOKEN);
        let missing = AdminConfig { token_file: Some(dir.path().join("nope")), ..AdminConfig::default() };
        assert!(resolve(&missing, None).unwrap_err().to_string().starts_with("cannot read admin.token_file"));
    }
}
