//! Who a session is: the user it logged in as and its default schema,
//! changed when the server accepts `COM_INIT_DB`, `USE db` or
//! `COM_CHANGE_USER`. Observers are told of every change; the emulated
//! link's scope and the live view follow it.

use std::sync::Arc;

use crate::protocol::constants::command::{COM_CHANGE_USER, COM_INIT_DB, COM_QUERY};

/// A session's user and default schema.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Identity {
    /// The account name the client logged in (or changed) to.
    pub user: Arc<str>,
    /// The default schema, if one is selected.
    pub schema: Option<Arc<str>>,
}

/// A change a command asks for, applied once the server answers OK.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Change {
    Schema(Arc<str>),
    User { user: Arc<str>, schema: Option<Arc<str>> },
}

impl Change {
    pub(super) fn apply(self, identity: &mut Identity) {
        match self {
            Change::Schema(schema) => identity.schema = Some(schema),
            Change::User { user, schema } => *identity = Identity { user, schema },
        }
    }
}

/// The change `command` asks for, judged from the first bytes of its
/// payload (after the command byte).
pub(super) fn requested(command: u8, payload: &[u8]) -> Option<Change> {
    match command {
        COM_INIT_DB => Some(Change::Schema(text(payload))).filter(|c| !matches!(c, Change::Schema(s) if s.is_empty())),
        COM_QUERY => use_target(payload).map(Change::Schema),
        COM_CHANGE_USER => {
            let (user, rest) = cstr(payload);
            // Auth data with a one-byte length (CLIENT_SECURE_CONNECTION, which
            // every 4.1+ client sets), then the schema.
            let schema = rest.split_first().and_then(|(&n, r)| r.get(usize::from(n)..)).map(|r| cstr(r).0);
            Some(Change::User { user: text(user), schema: schema.filter(|s| !s.is_empty()).map(text) })
        }
        _ => None,
    }
}

/// The schema named by `USE db` (backticks and a trailing `;` removed).
/// Every query passes here: the first bytes decide before any decoding.
fn use_target(sql: &[u8]) -> Option<Arc<str>> {
    let start = sql.iter().position(|b| !b.is_ascii_whitespace())?;
    let keyword = sql.get(start..start + 4)?;
    if !keyword[..3].eq_ignore_ascii_case(b"use") || !keyword[3].is_ascii_whitespace() {
        return None;
    }
    let rest = std::str::from_utf8(&sql[start + 4..]).ok()?;
    let name = rest.trim().trim_end_matches(';').trim().trim_matches('`');
    (!name.is_empty() && !name.contains(char::is_whitespace)).then(|| Arc::from(name))
}

fn cstr(buf: &[u8]) -> (&[u8], &[u8]) {
    match buf.iter().position(|&b| b == 0) {
        Some(nul) => (&buf[..nul], &buf[nul + 1..]),
        None => (buf, &[]),
    }
}

fn text(bytes: &[u8]) -> Arc<str> {
    Arc::from(String::from_utf8_lossy(bytes).as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_a_command_asks_for() {
        assert_eq!(requested(COM_INIT_DB, b"shop"), Some(Change::Schema("shop".into())));
        assert_eq!(requested(COM_QUERY, b"  USE `shop`;"), Some(Change::Schema("shop".into())));
        assert_eq!(requested(COM_QUERY, b"use shop"), Some(Change::Schema("shop".into())));
        assert_eq!(requested(COM_QUERY, b"SELECT 1"), None);
        assert_eq!(requested(COM_QUERY, b"user_defined()"), None);
        // user, 20 bytes of auth data, schema, charset...
        let mut change_user = b"app\0".to_vec();
        change_user.push(20);
        change_user.extend_from_slice(&[7; 20]);
        change_user.extend_from_slice(b"orders\0\x21\x00");
        assert_eq!(
            requested(COM_CHANGE_USER, &change_user),
            Some(Change::User { user: "app".into(), schema: Some("orders".into()) })
        );
    }
}
