//! The SQL view: rttscope answers statements addressed to it from the SQL prompt a
//! team already has open, as ordinary result sets, and never forwards them.
//!
//! - `statement`: the grammar (`SHOW RTTSCOPE ...`, `SET RTTSCOPE ...`).
//! - `tables`: each table's rows, from the report and the emulated link's settings.
//! - `resultset`: result sets, OK and ERR packets shaped for the client's capabilities.
//!
//! The relay finds these statements and delivers the answer (`relay::LocalAnswers`);
//! this module says what they mean. `SET RTTSCOPE` changes the emulated link only when
//! `sql_view.allow_set` is on.

mod resultset;
mod statement;
mod tables;

use std::sync::Arc;

use rttscope_config::{Inject, SqlViewConfig};
use serde_json::Value as Json;

use crate::admin::AdminState;
use crate::relay::{LocalAnswers, LocalContext};
use resultset::{err, ok};
pub use statement::{Statement, SyntaxError, Table, Value, claims, parse};

/// MySQL error codes the view answers with.
mod codes {
    /// ER_PARSE_ERROR.
    pub const PARSE_ERROR: u16 = 1064;
    /// ER_UNKNOWN_SYSTEM_VARIABLE.
    pub const UNKNOWN_VARIABLE: u16 = 1193;
    /// ER_SPECIFIC_ACCESS_DENIED_ERROR.
    pub const ACCESS_DENIED: u16 = 1227;
    /// ER_WRONG_VALUE_FOR_VAR.
    pub const WRONG_VALUE: u16 = 1231;
}

/// Answers `SHOW RTTSCOPE` from the live report and `SET RTTSCOPE` on the emulated link.
pub struct SqlView {
    state: Arc<AdminState>,
    config: SqlViewConfig,
}

impl SqlView {
    /// Answers for `state`; `config.allow_set` decides whether `SET RTTSCOPE` may change the emulated
    /// link.
    pub fn new(state: Arc<AdminState>, config: SqlViewConfig) -> SqlView {
        SqlView { state, config }
    }

    fn show(&self, table: Table, context: &LocalContext<'_>) -> Vec<u8> {
        let rows = match table {
            Table::Inject => tables::inject(&self.state.inject.current()),
            Table::Statements => tables::statements(&self.state.report()),
            Table::Findings => tables::findings(&self.state.report()),
            Table::Link => tables::link(&self.state.report()),
        };
        rows.encode(context.capabilities, context.server_status)
    }

    fn set(&self, assignments: &[(String, Value)], context: &LocalContext<'_>) -> Vec<u8> {
        if !self.config.allow_set {
            return err(
                codes::ACCESS_DENIED,
                "42000",
                "SET RTTSCOPE is off (sql_view.allow_set: false); change the emulated link with PUT /inject",
            );
        }
        let current = self.state.inject.current();
        let changed = match assign(&current, assignments) {
            Ok(changed) => changed,
            Err((code, message)) => {
                return err(code, if code == codes::WRONG_VALUE { "42000" } else { "HY000" }, &message);
            }
        };
        // The change itself is logged where it is made, with the new settings.
        tracing::info!(conn_id = context.conn_id, user = %context.identity.user, "SET RTTSCOPE changes the emulated link");
        self.state.inject.replace(changed);
        ok(context.server_status)
    }
}

/// The settings `current` with `assignments` applied, validated as `PUT /inject` does;
/// or the error code and message for the client.
fn assign(current: &Inject, assignments: &[(String, Value)]) -> Result<Inject, (u16, String)> {
    let to_json = |inject: &Inject| serde_json::to_value(inject).map_err(|e| (codes::WRONG_VALUE, e.to_string()));
    let mut settings = to_json(current)?;
    let defaults = to_json(&Inject::default())?;
    for (key, value) in assignments {
        let pointer = format!("/{}", key.replace('.', "/"));
        let unknown = || (codes::UNKNOWN_VARIABLE, format!("unknown setting {key}; SHOW RTTSCOPE INJECT lists them"));
        let slot = settings.pointer_mut(&pointer).filter(|slot| !slot.is_object()).ok_or_else(unknown)?;
        *slot = match value {
            Value::Default => defaults.pointer(&pointer).cloned().ok_or_else(unknown)?,
            Value::Quoted(s) | Value::Bare(s) if slot.is_array() => {
                Json::Array(s.split(',').map(str::trim).filter(|s| !s.is_empty()).map(Json::from).collect())
            }
            Value::Bare(s) if s.eq_ignore_ascii_case("true") || s.eq_ignore_ascii_case("false") => {
                Json::Bool(s.eq_ignore_ascii_case("true"))
            }
            Value::Quoted(s) | Value::Bare(s) => Json::from(s.as_str()),
        };
    }
    Inject::from_json(&settings.to_string()).map_err(|e| (codes::WRONG_VALUE, e.to_string()))
}

impl LocalAnswers for SqlView {
    fn claims(&self, sql: &[u8]) -> bool {
        statement::claims(sql)
    }

    fn answer(&self, sql: &[u8], context: &LocalContext<'_>) -> Vec<u8> {
        match statement::parse(sql) {
            Ok(Statement::Show(table)) => self.show(table, context),
            Ok(Statement::Set(assignments)) => self.set(&assignments, context),
            Err(SyntaxError(message)) => err(codes::PARSE_ERROR, "42000", &message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(current: &Inject, sql: &str) -> Result<Inject, (u16, String)> {
        let Ok(Statement::Set(assignments)) = parse(sql.as_bytes()) else { panic!("{sql}") };
        assign(current, &assignments)
    }

    #[test]
    fn set_changes_only_the_keys_named() {
        let current = Inject::from_json(r#"{"rtt": "20ms", "bandwidth": "10mbit"}"#).unwrap();
        let changed = set(&current, "SET RTTSCOPE rtt = '15ms', to_upstream.delay = 5ms").unwrap();
        assert_eq!(changed.rtt.0, std::time::Duration::from_millis(15));
        assert_eq!(changed.bandwidth, current.bandwidth);
        assert_eq!(changed.to_upstream.delay.map(|d| d.0), Some(std::time::Duration::from_millis(5)));
        let back = set(&changed, "SET RTTSCOPE bandwidth = DEFAULT, scope.users = 'app, etl'").unwrap();
        assert_eq!(back.bandwidth, None);
        assert_eq!(back.scope.users, vec!["app".to_owned(), "etl".to_owned()]);
    }

    #[test]
    fn set_refuses_unknown_keys_and_bad_values_by_name() {
        let current = Inject::default();
        let (code, message) = set(&current, "SET RTTSCOPE rtts = '15ms'").unwrap_err();
        assert_eq!(code, codes::UNKNOWN_VARIABLE);
        assert!(message.contains("rtts"), "{message}");
        let (code, message) = set(&current, "SET RTTSCOPE to_upstream = '15ms'").unwrap_err();
        assert_eq!(code, codes::UNKNOWN_VARIABLE, "{message}");
        let (code, message) = set(&current, "SET RTTSCOPE rtt = 'fast'").unwrap_err();
        assert_eq!(code, codes::WRONG_VALUE);
        assert!(message.contains("rtt"), "{message}");
        let (code, message) = set(&current, "SET RTTSCOPE rtt = 10ms, jitter = 50ms").unwrap_err();
        assert_eq!(code, codes::WRONG_VALUE);
        assert!(message.contains("jitter"), "{message}");
    }
}
