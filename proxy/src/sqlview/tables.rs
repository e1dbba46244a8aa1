//! What each `SHOW RTTSCOPE` table holds: the report's figures as rows, in
//! milliseconds and bytes so a SQL prompt can sort and compare them.

use rttscope_config::Inject;
use serde_json::Value;

use super::resultset::{Kind, ResultSet};
use crate::report::Report;

/// Milliseconds with three decimals, from µs.
fn ms(us: u64) -> Option<String> {
    Some(format!("{:.3}", us as f64 / 1000.0))
}

fn count(n: impl Into<u64>) -> Option<String> {
    Some(n.into().to_string())
}

fn text(s: impl Into<String>) -> Option<String> {
    Some(s.into())
}

/// Statements by total time, slowest first: what `/report`'s `queries` says.
pub fn statements(report: &Report) -> ResultSet {
    let mut rs = ResultSet::new(
        "statements",
        &[
            ("statement", Kind::Text),
            ("calls", Kind::Count),
            ("errors", Kind::Count),
            ("round_trips", Kind::Count),
            ("total_ms", Kind::Number),
            ("avg_ms", Kind::Number),
            ("p99_ms", Kind::Number),
            ("emulated_ms", Kind::Number),
            ("rows", Kind::Count),
            ("bytes_down", Kind::Count),
            ("time_share", Kind::Number),
            ("fingerprint_id", Kind::Text),
        ],
    );
    for q in &report.queries {
        rs.row(vec![
            text(q.fingerprint.as_str()),
            count(q.count),
            count(q.errors),
            count(q.round_trips),
            ms(q.latency_us.sum),
            ms(q.latency_us.sum.checked_div(q.count).unwrap_or(0)),
            ms(q.latency_us.p99),
            ms(q.injected_us),
            count(q.rows.sum),
            count(q.bytes.down),
            Some(format!("{:.4}", q.time_share)),
            text(q.fingerprint_id.as_str()),
        ]);
    }
    rs
}

/// Findings, worst first, each with its sentence and its fix.
pub fn findings(report: &Report) -> ResultSet {
    let mut rs = ResultSet::new(
        "findings",
        &[
            ("severity", Kind::Text),
            ("kind", Kind::Text),
            ("statement", Kind::Text),
            ("application", Kind::Text),
            ("occurrences", Kind::Count),
            ("round_trips", Kind::Count),
            ("cost_ms", Kind::Number),
            ("summary", Kind::Text),
            ("fix", Kind::Text),
        ],
    );
    for f in &report.findings {
        rs.row(vec![
            text(f.severity.to_string()),
            text(f.kind.to_string()),
            text(f.evidence.statement.as_str()),
            Some(f.evidence.application.clone()).filter(|a| !a.is_empty()),
            count(f.evidence.occurrences),
            count(f.round_trips),
            ms(f.cost_us),
            text(f.evidence.summary.as_str()),
            text(f.suggestion.as_str()),
        ]);
    }
    rs
}

/// The link verdicts of recent large transfers, newest last.
pub fn link(report: &Report) -> ResultSet {
    let mut rs = ResultSet::new(
        "link",
        &[
            ("conn_id", Kind::Count),
            ("limit", Kind::Text),
            ("bytes", Kind::Count),
            ("duration_ms", Kind::Number),
            ("mbit_per_s", Kind::Number),
            ("rtt_ms", Kind::Number),
            ("base_rtt_ms", Kind::Number),
            ("bytes_per_rtt", Kind::Count),
            ("summary", Kind::Text),
            ("fix", Kind::Text),
        ],
    );
    for v in &report.links {
        rs.row(vec![
            count(v.conn_id),
            text(v.limit.to_string()),
            count(v.bytes),
            ms(v.duration_us),
            Some(format!("{:.3}", v.throughput as f64 * 8.0 / 1e6)),
            ms(u64::from(v.rtt_us)),
            ms(u64::from(v.base_rtt_us)),
            count(v.bytes_per_rtt),
            text(v.summary.as_str()),
            text(v.fix.as_str()),
        ]);
    }
    rs
}

/// The emulated link's settings, one per row as `SHOW VARIABLES` has them, in the keys
/// `PUT /inject` and `SET RTTSCOPE` take.
pub fn inject(inject: &Inject) -> ResultSet {
    let mut rs = ResultSet::new("inject", &[("Variable_name", Kind::Text), ("Value", Kind::Text)]);
    rs.row(vec![text("active"), text(if inject.is_active() { "ON" } else { "OFF" })]);
    let mut rows = Vec::new();
    if let Ok(value) = serde_json::to_value(inject) {
        flatten("", &value, &mut rows);
    }
    for (key, value) in rows {
        rs.row(vec![Some(key), value]);
    }
    rs
}

/// `{"a": {"b": 1}}` as `("a.b", "1")`; lists joined by commas; null as NULL.
fn flatten(prefix: &str, value: &Value, out: &mut Vec<(String, Option<String>)>) {
    match value {
        Value::Object(map) => {
            for (key, value) in map {
                let path = if prefix.is_empty() { key.clone() } else { format!("{prefix}.{key}") };
                flatten(&path, value, out);
            }
        }
        Value::Null => out.push((prefix.to_owned(), None)),
        Value::String(s) => out.push((prefix.to_owned(), Some(s.clone()))),
        Value::Array(items) => {
            let items: Vec<String> =
                items.iter().map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned)).collect();
            out.push((prefix.to_owned(), Some(items.join(","))));
        }
        other => out.push((prefix.to_owned(), Some(other.to_string()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inject_settings_flatten_to_their_keys() {
        let inject = Inject::from_json(
            r#"{"rtt": "15ms", "to_upstream": {"delay": "10ms"}, "scope": {"users": ["app", "etl"]}}"#,
        )
        .unwrap();
        let mut rows = Vec::new();
        flatten("", &serde_json::to_value(&inject).unwrap(), &mut rows);
        let get = |key: &str| rows.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
        assert_eq!(get("rtt"), Some(Some("15ms".into())));
        assert_eq!(get("to_upstream.delay"), Some(Some("10ms".into())));
        assert_eq!(get("to_client.delay"), Some(None));
        assert_eq!(get("scope.users"), Some(Some("app,etl".into())));
    }
}
