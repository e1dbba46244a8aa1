//! What each finding says: a one-line headline with its evidence, and the concrete fix. The
//! headline says only what happened: "back to back" with the size of each burst.

use super::{Detail, Driver, Finding, Kind};
use super::{churn, compression, driver_fix};
use crate::fingerprint::StatementKind;
use crate::human::{count, counted, us};

/// "ran 1,000 times back to back", or for several loops "ran back to back in 40 loops of 10
/// to 12 (440 times in all)".
fn repetitions(f: &Finding) -> String {
    if f.occurrences <= 1 {
        return format!("ran {} back to back", counted(f.executions, "time", "times"));
    }
    let size = if f.smallest == f.largest {
        count(f.largest)
    } else {
        format!("{} to {}", count(f.smallest), count(f.largest))
    };
    format!(
        "ran back to back in {} loops of {size} ({} in all)",
        count(f.occurrences),
        counted(f.executions, "time", "times")
    )
}

/// "in 52.00 ms", and when the application took a good part of the loop's time between its
/// statements, "in 506.84 ms, within the loop's 557.98 ms".
fn loop_time(f: &Finding) -> String {
    if f.elapsed_us() > f.cost_us() + f.cost_us() / 10 {
        let whose = if f.occurrences > 1 { "loops'" } else { "loop's" };
        format!("in {}, within the {whose} {}", us(f.cost_us()), us(f.elapsed_us()))
    } else {
        format!("in {}", us(f.cost_us()))
    }
}

/// " in controller `orders#index`", when the statements said where they came from.
fn place(f: &Finding) -> String {
    f.origin.as_ref().map(|o| format!(" in {o}")).unwrap_or_default()
}

pub fn headline(f: &Finding) -> String {
    match (&f.kind, &f.detail) {
        (Kind::NPlusOne, _) => {
            let parent = f.parent.as_ref().map(|(_, t)| format!(" for the rows of `{t}`")).unwrap_or_default();
            format!(
                "N+1 loop{}: `{}` {}{parent}, {} {}",
                place(f),
                f.text,
                repetitions(f),
                counted(f.round_trips, "round trip", "round trips"),
                loop_time(f)
            )
        }
        (Kind::RepeatedWrite, _) => format!(
            "one row at a time{}: `{}` {}, {} {}",
            place(f),
            f.text,
            repetitions(f),
            counted(f.round_trips, "round trip", "round trips"),
            loop_time(f)
        ),
        (Kind::UndersizedFetch, Detail::Fetch { fetch_size }) => format!(
            "cursor fetched {} per round trip: {} for {} of `{}`",
            counted(u64::from(*fetch_size), "row", "rows"),
            counted(f.executions, "fetch", "fetches"),
            counted(f.rows, "row", "rows"),
            f.text
        ),
        (Kind::PaginationLoop, Detail::Pages { page_size, rescanned }) => format!(
            "LIMIT/OFFSET loop: {} of {} of `{}`; the server read and skipped {} for the OFFSETs",
            counted(f.executions, "page", "pages"),
            counted(*page_size, "row", "rows"),
            f.text,
            counted(*rescanned, "row", "rows")
        ),
        (Kind::ChattySession, Detail::Chatty { top, .. }) => {
            let tops: Vec<String> = top.iter().map(|(t, n)| format!("`{t}` ×{}", count(*n))).collect();
            let who = if f.application.is_empty() { String::new() } else { format!(" of {}", f.application) };
            let bursts = if f.occurrences > 1 { format!(" in {} bursts", count(f.occurrences)) } else { String::new() };
            format!(
                "chatty session{who}: {} that did no work on data within {}{bursts}, {} of waiting on them; most of them {}",
                counted(f.round_trips, "round trip", "round trips"),
                us(f.elapsed_us()),
                us(f.cost_us()),
                tops.join(", ")
            )
        }
        (Kind::ConnectionChurn, Detail::Churn { setup_us, recorded_us }) => {
            let who = if f.application.is_empty() { String::new() } else { format!(" of {}", f.application) };
            let n = f.executions.max(1);
            format!(
                "connection churn{who}: {} opened in {} ({:.1} per second), each taking {} and {} to set up; setup was {:.0}% of the application's {} in commands",
                counted(f.executions, "connection", "connections"),
                us(f.elapsed_us()),
                churn::per_second(f.executions, f.elapsed_us()),
                us(setup_us / n),
                round_trips_each(f.round_trips, n),
                churn::share(*setup_us, *recorded_us) * 100.0,
                us(*recorded_us)
            )
        }
        (Kind::Compression, _) => compression::headline(f),
        _ => format!("{}: `{}`", f.kind.name(), f.text),
    }
}

/// "3 round trips", or "2.5 round trips" on average when setups differed.
fn round_trips_each(round_trips: u64, connections: u64) -> String {
    if round_trips.is_multiple_of(connections) {
        counted(round_trips / connections, "round trip", "round trips")
    } else {
        format!("{:.1} round trips", round_trips as f64 / connections as f64)
    }
}

/// `= ?` turned into `IN (?, ...)` in the child's text, when it has exactly one.
fn batched(text: &str) -> Option<String> {
    (text.matches("= ?").count() == 1).then(|| text.replacen("= ?", "in (?, ?, ...)", 1))
}

/// The fix. When the driver that ran the pattern is known, its own words come first and the
/// general fix follows without other drivers' settings; when it is not (or it is the CLI, whose
/// scripts have no driver settings), the general fix names the usual drivers' settings.
pub fn fix(f: &Finding) -> String {
    let size = (f.rows / 10).clamp(1000, 10_000);
    match (f.driver, f.driver.and_then(|d| driver_fix::words(f, d, size))) {
        // A cursor's fix is a driver setting: the driver's words are the whole fix (mysqlnd's
        // say it has no fetch size, which the general sentence would contradict).
        (_, Some(words)) if f.kind == Kind::UndersizedFetch => words,
        (_, Some(words)) => format!("{words} {}", generic_fix(f, false)),
        (Some(d), None) if d != Driver::Cli => generic_fix(f, false),
        (_, None) => generic_fix(f, true),
    }
}

/// The fix in SQL terms; `drivers` adds, in parentheses, how the usual drivers do it.
fn generic_fix(f: &Finding, drivers: bool) -> String {
    let with = |list: &str| if drivers { list.to_owned() } else { String::new() };
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
            StatementKind::Insert | StatementKind::Replace => format!(
                "Send the rows together: one multi-row INSERT ... VALUES (...), (...) per batch of ~500{}.",
                with(" (JDBC: rewriteBatchedStatements=true or useBulkStmts with executeBatch; Python: executemany)")
            ),
            _ => {
                let in_list = batched(&f.text).map(|b| format!(": `{b}`")).unwrap_or_default();
                format!(
                    "Change many rows per statement (WHERE key IN (...) per batch of ~500{in_list}), or batch the statements{}.",
                    with(" (JDBC executeBatch with rewriteBatchedStatements=true)")
                )
            }
        },
        (Kind::UndersizedFetch, Detail::Fetch { .. }) => {
            let size = (f.rows / 10).clamp(1000, 10_000);
            let list = format!(
                " (JDBC: statement.setFetchSize({size}) or defaultFetchSize={size} in the URL with useCursorFetch=true; MariaDB Connector/C: STMT_ATTR_PREFETCH_ROWS; Connector/Python: cursor(prefetch_size={size}))"
            );
            format!(
                "Fetch more rows per round trip: about {size}{}. Or read without a cursor: the result streams in one round trip.",
                with(&list)
            )
        }
        (Kind::PaginationLoop, Detail::Pages { page_size, .. }) => format!(
            "Page by key instead of OFFSET (WHERE key > last_seen ORDER BY key LIMIT {page_size}) so no page rescans the ones before it, or read the whole result in one query and stream it."
        ),
        (Kind::ConnectionChurn, _) => format!(
            "Keep connections open and reuse them: a connection pool in the application{}, or, where the application cannot keep connections between requests (PHP, CGI, serverless functions), a pooler beside it such as ProxySQL.",
            with(" (HikariCP, SQLAlchemy's engine, Go's database/sql, mysql2's createPool)")
        ),
        (Kind::ChattySession, _) => "Drop the round trips that do no work: validate pooled connections only when idle (not on every borrow), set session variables once per connection (or in the pool's init SQL), cache lookups of server settings, and send what remains several per round trip (multi-statements).".to_owned(),
        _ => String::new(),
    }
}
