//! What each finding says: a one-line headline with its evidence, and the
//! concrete fix.

use super::{Detail, Finding, Kind};
use crate::fingerprint::StatementKind;
use crate::report::fmt::{count, us};

pub fn headline(f: &Finding) -> String {
    match (&f.kind, &f.detail) {
        (Kind::NPlusOne, _) => {
            let parent = f.parent.as_ref().map(|(_, t)| format!(" for the rows of `{t}`")).unwrap_or_default();
            format!(
                "N+1 loop: `{}` ran {} times back to back{parent}, {} round trips in {}",
                f.text,
                count(f.executions),
                count(f.round_trips),
                us(f.time_us)
            )
        }
        (Kind::RepeatedWrite, _) => format!(
            "one row at a time: `{}` ran {} times back to back, {} round trips in {}",
            f.text,
            count(f.executions),
            count(f.round_trips),
            us(f.time_us)
        ),
        (Kind::UndersizedFetch, Detail::Fetch { fetch_size }) => format!(
            "cursor fetched {} rows per round trip: {} fetches for {} rows of `{}`",
            count(u64::from(*fetch_size)),
            count(f.executions),
            count(f.rows),
            f.text
        ),
        (Kind::PaginationLoop, Detail::Pages { page_size, rescanned }) => format!(
            "LIMIT/OFFSET loop: {} pages of {} rows of `{}`; the server read and skipped {} rows for the OFFSETs",
            count(f.executions),
            count(*page_size),
            f.text,
            count(*rescanned)
        ),
        (Kind::ChattySession, Detail::Chatty { tiny, top }) => {
            let tops: Vec<String> = top.iter().map(|(t, n)| format!("`{t}` ×{}", count(*n))).collect();
            format!("chatty session: {} tiny round trips, most of them {}", count(*tiny), tops.join(", "))
        }
        _ => format!("{}: `{}`", f.kind.name(), f.text),
    }
}

/// `= ?` turned into `IN (?, ...)` in the child's text, when it has exactly one.
fn batched(text: &str) -> Option<String> {
    (text.matches("= ?").count() == 1).then(|| text.replacen("= ?", "in (?, ?, ...)", 1))
}

pub fn fix(f: &Finding) -> String {
    match (&f.kind, &f.detail) {
        (Kind::NPlusOne, _) => {
            let in_list = batched(&f.text).map(|b| format!(" (`{b}`)")).unwrap_or_default();
            match &f.parent {
                Some((_, parent)) => format!(
                    "Fetch the children together with their parents: JOIN them into `{parent}`, or run one query per batch of ~500 keys{in_list} instead of one per row."
                ),
                None => format!("Run one query per batch of ~500 keys{in_list} instead of one per row, or JOIN it into the query that produced the keys."),
            }
        }
        (Kind::RepeatedWrite, _) => match f.statement_kind {
            StatementKind::Insert | StatementKind::Replace => "Send the rows together: one multi-row INSERT ... VALUES (...), (...) per batch of ~500 (JDBC: rewriteBatchedStatements=true or useBulkStmts with executeBatch; Python: executemany).".to_owned(),
            _ => {
                let in_list = batched(&f.text).map(|b| format!(": `{b}`")).unwrap_or_default();
                format!("Change many rows per statement (WHERE key IN (...) per batch of ~500{in_list}), or batch the statements (JDBC executeBatch with rewriteBatchedStatements=true).")
            }
        },
        (Kind::UndersizedFetch, Detail::Fetch { .. }) => {
            let size = (f.rows / 10).clamp(1000, 10_000);
            format!(
                "Fetch more rows per round trip: about {size} (JDBC: statement.setFetchSize({size}) or defaultFetchSize={size} in the URL with useCursorFetch=true; MariaDB Connector/C: STMT_ATTR_PREFETCH_ROWS; Connector/Python: cursor(prefetch_size={size})). Or read without a cursor: the result streams in one round trip."
            )
        }
        (Kind::PaginationLoop, Detail::Pages { page_size, .. }) => format!(
            "Page by key instead of OFFSET (WHERE key > last_seen ORDER BY key LIMIT {page_size}) so no page rescans the ones before it, or read the whole result in one query and stream it."
        ),
        (Kind::ChattySession, _) => "Batch the small statements: several per round trip (multi-statements, one transaction per batch), drop per-use validation queries (pool testOnBorrow / ping), and cache lookups that repeat.".to_owned(),
        _ => String::new(),
    }
}
