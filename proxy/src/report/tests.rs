//! The schema against its documentation, JSON read back as written, and the renderings.

use crate::live::{Legs, TlsInfo};
use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::*;
use crate::findings::{Kind, LoopShape, Severity};
use crate::link::{LinkLimit, LinkVerdict, Loss, Measurement};

const SCHEMA_DOC: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/report-schema.md"));

fn latency(base: u64) -> LatencySummary {
    LatencySummary { p50: base, p95: base * 2, p99: base * 3, max: base * 4, sum: base * 100 }
}

/// SQL a renderer must not take at its word: markup, an entity, quotes, and control characters
/// (a terminal escape, a carriage return, a NUL, a bidi override).
pub(super) const HOSTILE_SQL: &str =
    "select `<b>x</b>` from t where a = ? and b = '&amp;' and c = \"q\" -- \u{1b}[31mred\r\n\u{0}\u{202e}";

fn what_if(observed_us: u64) -> Vec<WhatIf> {
    vec![WhatIf {
        scenario: "another data centre".into(),
        rtt_us: 15_000,
        bandwidth_bps: Some(34_000_000),
        observed_us,
        base_us: observed_us / 2,
        projected_us: observed_us * 10,
        summary: "at 15.00 ms RTT and 34 Mbit/s (another data centre): ≈ 150.00 ms".into(),
    }]
}

fn finding(kind: Kind, statement: &str, detail: EvidenceDetail) -> FindingReport {
    FindingReport {
        kind,
        severity: Severity::Warning,
        fingerprint_id: "aba87d67dad511c7".into(),
        evidence: Evidence {
            summary: format!("{kind}: `{statement}` ran 10 times back to back"),
            statement: statement.into(),
            application: "app@10.0.0.7".into(),
            occurrences: 2,
            executions: 20,
            smallest_occurrence: 9,
            largest_occurrence: 11,
            elapsed_us: 9_000,
            commands_us: 8_000,
            injected_us: 1_000,
            base_us: 5_000,
            rows: 20,
            bytes: 4_000,
            share_of_connection_time: 0.5,
            connections: vec![1, 2],
            projected_at_reference_us: 1_500_000,
            reference_rtt_us: 15_000,
            observed_rtt_us: 60,
            trace_id: Some("4bf92f3577b34da6a3ce929d0e0e4736".into()),
            origin: Some([("controller".into(), "orders".into()), ("action".into(), "index".into())].into()),
            detail,
        },
        round_trips: 21,
        cost_us: 7_000,
        suggestion: format!("Batch `{statement}`."),
        driver: Some("PyMySQL".into()),
        what_if: what_if(7_000),
    }
}

/// A report with every key present: every `Option` set, every finding kind, every evidence
/// variant, every link limit's keys.
pub(super) fn full_report() -> Report {
    let loop_evidence = |parent: bool| {
        EvidenceDetail::Loop(LoopEvidence {
            distinct_values: 20,
            parent_fingerprint_id: parent.then(|| "0123456789abcdef".into()),
            parent_statement: parent.then(|| "select emp_no from employees".into()),
            shape: Some(if parent { LoopShape::Parent } else { LoopShape::Regular }),
        })
    };
    let findings = vec![
        finding(Kind::NPlusOne, HOSTILE_SQL, loop_evidence(true)),
        finding(Kind::RepeatedWrite, "insert into t (a) values(?+)", loop_evidence(false)),
        finding(Kind::UndersizedFetch, "select id from big", EvidenceDetail::Fetch(FetchEvidence { fetch_size: 10 })),
        finding(
            Kind::PaginationLoop,
            "select id from big order by id limit ? offset ?",
            EvidenceDetail::Pages(PagesEvidence { page_size: 50, pages: 20, offset_rows_rescanned: 9_500 }),
        ),
        finding(
            Kind::ChattySession,
            "select ?",
            EvidenceDetail::Chatty(ChattyEvidence {
                window_us: 10_000_000,
                top_statements: vec![StatementRoundTrips { statement: "select ?".into(), round_trips: 150 }],
            }),
        ),
        finding(
            Kind::ConnectionChurn,
            "COM_CONNECT",
            EvidenceDetail::Churn(ChurnEvidence {
                connections_opened: 40,
                connections_per_second: 20.0,
                setup_avg_us: 3_100,
                setup_round_trips_avg: 3.0,
                setup_us: 124_000,
                recorded_us: 160_000,
                setup_share: 0.775,
            }),
        ),
        finding(
            Kind::Compression,
            "select repeat(?, ?) from seq_1_to_5000",
            EvidenceDetail::Compression(CompressionEvidence {
                samples: 2,
                sampled_bytes: 131_072,
                compressed_bytes: 4_096,
                compression_ratio: 32.0,
                savings: vec![CompressionSaving {
                    scenario: "another data centre".into(),
                    bandwidth_bps: 34_000_000,
                    saved_us: 1_150_000,
                }],
            }),
        ),
    ];
    let link = |limit| LinkReport {
        limit,
        secondary: Some(LinkLimit::Loss),
        conn_id: 1,
        at_us: 5_000_000,
        bytes: 22_000_000,
        duration_us: 25_000_000,
        throughput: 880_000,
        rtt_us: 20_500,
        base_rtt_us: 20_000,
        bytes_per_rtt: 16_384,
        advertised_window: 3 << 20,
        receive_buffer: 6 << 20,
        idle_us: 0,
        after_first_loss_us: 25_000_000,
        idle_after_first_loss_us: 0,
        held_off_us: 0,
        backlog_held_us: 0,
        window_after_hold: Some(0),
        pace_while_held: Some(0),
        reader_pace: Some(0),
        reader_tail_us: 0,
        client_unread_at_end: Some(0),
        server_pauses: 0,
        server_pause_us: 0,
        samples: 2_500,
        round_trips: 1,
        emulated_us: 0,
        path_bytes_per_second: Some(12_500_000),
        bdp: Some(250_000),
        loss: Loss {
            recovery_stalls: 12,
            recovery_stall_us: 310_000,
            rto_stalls: 1,
            recovery_episodes: 10,
            segments_in: 15_200,
            out_of_order: 160,
            duplicates: 0,
            retransmitted: 0,
            rtos: 0,
            dsack_dups: 0,
            reord_seen: 0,
            recoveries_timed: 0,
            recoveries_cut: 0,
            mss: 1_448,
            loss_rate: 12.0 / 15_200.0,
            loss_limited_throughput: Some(3_140_000),
        },
        summary: "21.0 MiB in 25.00 s: the server sends at most 16.0 KiB per 20.00 ms RTT".into(),
        fix: "The server's send buffer is pinned".into(),
    };
    Report {
        schema_version: SCHEMA_VERSION,
        generator: "rttscope 0.1.0".into(),
        generated_at: "2026-11-21T22:13:53Z".into(),
        window_us: 30_000_000,
        window: Some(WindowReport {
            kind: WindowKind::Cumulative,
            start: "2026-11-21T22:13:23.000Z".into(),
            end: "2026-11-21T22:13:53.000Z".into(),
            start_us: 1_000_000,
            end_us: 31_000_000,
            requested_us: 30_000_000,
            resolution_us: 0,
            findings: true,
        }),
        totals: Totals {
            commands: 1_010,
            executions: 1_010,
            errors: 1,
            round_trips: 1_010,
            time_us: 204_050,
            busy_us: 150_000,
            bytes_up: 58_000,
            bytes_down: 108_000,
            rows: 2_000,
            connections: 2,
            events_dropped: 3,
            injected_us: 100_000,
            wire_up: 30_000,
            wire_down: 40_000,
            unparsed: 1,
            inject_late_us: 3_200,
            inject_lateness: LatencySummary { p50: 20, p95: 300, p99: 410, max: 900, sum: 3_200 },
            large_responses: crate::record::LargeResponses {
                rounds: 4,
                stream_us: 120_000,
                responses: 1,
                bytes: 200_000,
            },
        },
        queries: vec![QueryReport {
            fingerprint: HOSTILE_SQL.into(),
            fingerprint_id: "aba87d67dad511c7".into(),
            kind: "select".into(),
            count: 1_000,
            errors: 1,
            round_trips: 1_000,
            first_byte_us: latency(60),
            latency_us: latency(68),
            rows: RowsReport { sum: 1_000, max: 1 },
            bytes: BytesReport { up: 40_000, down: 91_000, max_down: 91, wire_up: 20_000, wire_down: 30_000 },
            commands: BTreeMap::from([("COM_QUERY".to_owned(), 1_000)]),
            time_share: 0.449,
            distribution: vec![[64, 400], [128, 600]],
            folded: 2,
            injected_us: 5_000,
            example: Some("select salary from salaries where emp_no = 10001 /* <\u{7}> */".into()),
            unparsed: 1,
            retransmission_waits: RetransmissionWaits {
                count: 3,
                at_or_above_p99: 2,
                latency_us: LatencySummary { p50: 230_000, p95: 410_000, p99: 410_000, max: 410_000, sum: 1_050_000 },
            },
            compressibility: Some(CompressibilityReport {
                samples: 2,
                sampled_bytes: 131_072,
                compressed_bytes: 4_096,
                ratio: 32.0,
            }),
        }],
        connections: vec![ConnectionReport {
            id: 1,
            client: "127.0.0.1:50000".into(),
            user: "app<script>\u{1b}".into(),
            schema: Some("demo".into()),
            open: false,
            opened_at_us: 0,
            closed_at_us: Some(1_300_000),
            commands: 1_010,
            errors: 1,
            round_trips: 1_010,
            latency_us: latency(70),
            bytes: BytesReport { up: 58_000, down: 108_000, max_down: 0, wire_up: 30_000, wire_down: 40_000 },
            rows: 2_000,
            legs: Legs {
                client_tls: Some(TlsInfo { version: "TLSv1.3".into(), cipher: "TLS13_AES_256_GCM_SHA384".into() }),
                upstream_tls: Some(TlsInfo {
                    version: "TLSv1.2".into(),
                    cipher: "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384".into(),
                }),
                client_compression: Some("zlib".into()),
                upstream_compression: Some("zlib".into()),
                client_library: Some("libmariadb 3.3.8".into()),
                client_program: Some("mysql".into()),
            },
        }],
        findings,
        links: LinkLimit::ALL.iter().map(|&l| link(l)).collect(),
        what_if: vec![WhatIfReport {
            scenario: "another data centre".into(),
            rtt_us: 15_000,
            bandwidth_bps: Some(34_000_000),
            recording: ProjectedTime { observed_us: 150_000, base_us: 100_000, projected_us: 15_350_000 },
            connections: vec![ConnectionProjection { id: 1, observed_us: 204_050, projected_us: 15_350_000 }],
            summary: "at 15.00 ms RTT and 34 Mbit/s (another data centre): ≈ 15.35 s".into(),
        }],
    }
}

/// The keys the doc lists, as paths (`findings[].evidence.summary`), and the paths of the
/// objects it calls `map`s (whose keys are data).
fn documented() -> (BTreeSet<String>, BTreeSet<String>) {
    documented_in(SCHEMA_DOC)
}

/// [`documented`] for any page written to the same conventions.
pub(super) fn documented_in(doc: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let (mut keys, mut maps) = (BTreeSet::new(), BTreeSet::new());
    let mut prefixes: Vec<String> = Vec::new();
    for line in doc.lines() {
        if line.starts_with('#') {
            prefixes = if line.contains("Top level") { vec![String::new()] } else { backticked(line) };
            continue;
        }
        let Some(row) = line.strip_prefix('|') else { continue };
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let (Some(first), Some(ty)) = (cells.first(), cells.get(1)) else { continue };
        for key in backticked(first) {
            for prefix in &prefixes {
                let path = if prefix.is_empty() { key.clone() } else { format!("{prefix}.{key}") };
                if ty.starts_with("map") {
                    maps.insert(path.clone());
                }
                keys.insert(path);
            }
        }
    }
    (keys, maps)
}

/// The `backticked` words of a line.
fn backticked(s: &str) -> Vec<String> {
    s.split('`').skip(1).step_by(2).map(str::to_owned).collect()
}

/// Every key path in `v`, descending into objects and arrays of objects, not into `maps`.
pub(super) fn key_paths(v: &Value, prefix: &str, maps: &BTreeSet<String>, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(o) => {
            for (k, v) in o {
                let path = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                out.insert(path.clone());
                if !maps.contains(&path) {
                    key_paths(v, &path, maps, out);
                }
            }
        }
        Value::Array(items) => {
            for item in items.iter().filter(|i| i.is_object()) {
                key_paths(item, &format!("{prefix}[]"), maps, out);
            }
        }
        _ => {}
    }
}

#[test]
fn the_schema_doc_lists_every_key_and_no_other() {
    let json = serde_json::to_value(full_report()).unwrap();
    let (documented, maps) = documented();
    let mut present = BTreeSet::new();
    key_paths(&json, "", &maps, &mut present);
    let undocumented: Vec<_> = present.difference(&documented).collect();
    let absent: Vec<_> = documented.difference(&present).collect();
    assert!(undocumented.is_empty(), "keys missing from docs/report-schema.md: {undocumented:#?}");
    assert!(absent.is_empty(), "documented keys the report does not have: {absent:#?}");
    assert!(SCHEMA_DOC.starts_with(&format!("# rttscope report schema (version {SCHEMA_VERSION})")));
    assert!(SCHEMA_DOC.contains(&format!("| `schema_version` | integer | `{SCHEMA_VERSION}` |")));
}

#[test]
fn the_full_report_leaves_nothing_out() {
    // A null would hide the keys of whatever it stands for from the test above.
    fn nulls(v: &Value, path: &str, out: &mut Vec<String>) {
        match v {
            Value::Null => out.push(path.to_owned()),
            Value::Object(o) => o.iter().for_each(|(k, v)| nulls(v, &format!("{path}.{k}"), out)),
            Value::Array(a) => a.iter().for_each(|v| nulls(v, &format!("{path}[]"), out)),
            _ => {}
        }
    }
    let mut found = Vec::new();
    nulls(&serde_json::to_value(full_report()).unwrap(), "", &mut found);
    assert!(found.is_empty(), "{found:?}");
}

#[test]
fn a_report_reads_back_as_written() {
    let report = full_report();
    let json = render(&report, ReportFormat::Json).unwrap();
    let back: Report = serde_json::from_str(&json).unwrap();
    assert_eq!(back, report);
    // Each kind's evidence comes back as its own variant.
    assert!(back.findings.iter().all(|f| f.evidence.detail.fits(f.kind)), "{back:#?}");
}

#[test]
fn names_are_the_shared_vocabulary() {
    for kind in Kind::ALL {
        assert_eq!(serde_json::to_value(kind).unwrap(), kind.name());
    }
    for severity in Severity::ALL {
        assert_eq!(serde_json::to_value(severity).unwrap(), severity.name());
    }
    for limit in LinkLimit::ALL {
        assert_eq!(serde_json::to_value(limit).unwrap(), limit.name());
    }
    let names: Vec<_> = Kind::ALL.iter().map(|k| k.name()).collect();
    assert_eq!(
        names,
        [
            "n_plus_one",
            "repeated_write",
            "undersized_fetch",
            "pagination_loop",
            "chatty_session",
            "connection_churn",
            "compression"
        ]
    );
    let names: Vec<_> = LinkLimit::ALL.iter().map(|l| l.name()).collect();
    assert_eq!(names, ["link", "receive_window", "sender", "client_reader", "latency", "server", "loss"]);
}

// ---- the renderings ----------------------------------------------------------------------

/// The escaped form of [`HOSTILE_SQL`]: what both renderings must show for it.
const HOSTILE_VISIBLE: &str = "-- \\u{1b}[31mred\\r\\n\\u{0}\\u{202e}";

/// Characters no rendering may emit: controls other than the line breaks it writes itself,
/// and bidi overrides.
fn raw_controls(s: &str) -> Vec<char> {
    s.chars().filter(|&c| (c.is_control() && c != '\n') || ('\u{202a}'..='\u{202e}').contains(&c)).collect()
}

#[test]
fn the_text_report_shows_every_part() {
    let r = full_report();
    let text = render_text(&r);
    for expected in [
        "# rttscope 0.1.0 report, generated 2026-11-21T22:13:53Z, over 30.00 s",
        "# Totals: 1,010 commands (1,010 executions), 1,010 round trips, 1 error, 2 connections",
        "#         150.00 ms in commands (wall clock; 204.05 ms summed over connections), 56.6 KiB up",
        "#         of the time summed, 100.00 ms the emulated link (as measured; 3.20 ms of it late, p50 20 µs, p99 410 µs a command), 104.05 ms the server's own and the real path's",
        "#         3 records dropped",
        "# Findings, by what they would cost at the reference RTT",
        "#  1. [warning] n_plus_one — 21 round trips, 7.00 ms",
        "#  5. [warning] chatty_session — 21 round trips, 7.00 ms",
        "#     what if its 7.00 ms of commands (3.50 ms without this link), over:",
        "#       another data centre  15.00 ms, 34 Mbit/s  ≈ 70.00 ms",
        "#     fix: Batch `insert into t (a) values(?+)`.",
        "# What if the database were elsewhere",
        "# what if the recording's 150.00 ms of commands (100.00 ms without this link), over:",
        "#   another data centre  15.00 ms, 34 Mbit/s  ≈ 15.35 s",
        "# Upstream link",
        "# Profile",
        "# Statement 1: aba87d67dad511c7 — 44.9% of time",
        "#   emulated link  5.00 ms of the 6.80 ms total",
        "#   retransmits    p99 204 µs: 3 of 1,000 executions waited for a retransmission, 2 of them at or above p99",
        "#   commands COM_QUERY 1,000",
        "#   (2 statement classes folded in)",
    ] {
        assert!(text.contains(expected), "no {expected:?} in:\n{text}");
    }
    for limit in LinkLimit::ALL {
        assert!(text.contains(&format!("# [{limit} + loss] 21.0 MiB in 25.00 s")), "no {limit} verdict in:\n{text}");
    }
    for kind in Kind::ALL {
        assert!(text.contains(&format!("[warning] {kind} — ")), "no {kind} in:\n{text}");
    }
}

/// One of a thing is said in the singular, in the text and the HTML report alike.
#[test]
fn one_row_and_one_dropped_record_are_singular() {
    let mut r = full_report();
    r.totals.rows = 1;
    r.totals.events_dropped = 1;
    let text = render_text(&r);
    assert!(text.contains(" down, 1 row\n"), "{text}");
    assert!(text.contains("#         1 record dropped:"), "{text}");
    let html = render_html(&r);
    assert!(html.contains(">1 record dropped:"), "{html}");
    let retransmits = RetransmissionWaits { count: 1, at_or_above_p99: 1, latency_us: latency(200) };
    let sentence = retransmits.sentence(1, &latency(100)).expect("one waited");
    assert!(sentence.contains(": 1 of 1 execution waited"), "{sentence}");
}

#[test]
fn the_text_report_escapes_control_characters() {
    let text = render_text(&full_report());
    assert_eq!(raw_controls(&text), Vec::<char>::new(), "{text}");
    // The SQL's newline and carriage return forge no line: every line is a comment, blank, or
    // a statement's own (escaped) text.
    for line in text.lines() {
        assert!(line.is_empty() || line.starts_with('#') || line.ends_with(HOSTILE_VISIBLE), "forged line {line:?}");
    }
    assert!(text.contains(&format!("n_plus_one: `{}", visible_prefix())), "the summary, escaped:\n{text}");
    assert!(text.contains("#   example: select salary from salaries where emp_no = 10001 /* <\\u{7}> */"), "{text}");
}

/// The start of [`HOSTILE_SQL`], which needs no escaping.
fn visible_prefix() -> &'static str {
    HOSTILE_SQL.split(" -- ").next().unwrap_or_default()
}

#[test]
fn the_html_report_shows_every_part() {
    let html = render_html(&full_report());
    assert!(html.starts_with("<!DOCTYPE html><html lang=\"en\">"), "{html}");
    assert!(html.trim_end().ends_with("</body></html>"));
    for id in ["findings", "what-if", "links", "round-trips", "time", "statements", "connections"] {
        assert!(html.contains(&format!("id=\"{id}\"")), "no section {id}");
    }
    assert_eq!(html.matches("<div class=\"finding warning\">").count(), Kind::ALL.len());
    assert_eq!(html.matches("<div class=\"link\">").count(), LinkLimit::ALL.len());
    for kind in Kind::ALL {
        assert!(html.contains(&format!("<b>{kind}</b>")), "no {kind}");
    }
    assert!(html.contains("<span>150.00 ms in commands (wall clock; 204.05 ms summed over connections)</span>"));
    assert!(html.contains("<p>Of the time summed, 100.00 ms the emulated link (as measured; 3.20 ms of it late,"));
    assert!(html.contains("<p>What if its 7.00 ms of commands (3.50 ms without this link), over:</p>"));
    assert!(html.contains(
        "<tr><td class=\"sql\">another data centre</td><td>15.00 ms, 34 Mbit/s</td><td>≈ 70.00 ms</td></tr>"
    ));
    assert!(html.contains("3 records dropped"));
    // Self-contained: no scripts, nothing fetched.
    for banned in ["<script", "src=", "href=", "@import", "url("] {
        assert!(!html.contains(banned), "{banned} in the page");
    }
}

#[test]
fn the_html_report_escapes_sql_markup_quotes_and_control_characters() {
    let html = render_html(&full_report());
    assert_eq!(raw_controls(&html), Vec::<char>::new());
    assert!(!html.contains("<b>x</b>") && !html.contains("app<script>"), "markup from the data got through");
    assert!(
        html.contains("`&lt;b&gt;x&lt;/b&gt;` from t where a = ? and b = &#39;&amp;amp;&#39; and c = &quot;q&quot;")
    );
    assert!(html.contains(&format!("{}</td>", HOSTILE_VISIBLE)), "the statement, escaped");
    assert!(html.contains("app&lt;script&gt;\\u{1b}"), "the user, escaped");
    // Every tag in the page is one the renderer writes.
    let allowed = [
        "!DOCTYPE", "html", "head", "meta", "title", "style", "body", "h1", "h2", "p", "span", "b", "br", "div", "ul",
        "li", "table", "tr", "th", "td", "svg", "text", "rect",
    ];
    for tag in html.split('<').skip(1) {
        let name: String =
            tag.trim_start_matches('/').chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '!').collect();
        let name = if name == "!DOCTYPE" { name } else { name.to_ascii_lowercase() };
        assert!(allowed.contains(&name.as_str()), "tag <{tag:.40}");
    }
}

/// A verdict with every number distinct, so a field copied from the wrong place shows.
fn distinct_verdict() -> LinkVerdict {
    LinkVerdict {
        conn_id: 7,
        at_us: 8_000_001,
        measurement: Measurement {
            limit: LinkLimit::ReceiveWindow,
            secondary: Some(LinkLimit::Loss),
            loss: Loss {
                recovery_stalls: 101,
                recovery_stall_us: 102,
                rto_stalls: 103,
                recovery_episodes: 113,
                segments_in: 104,
                out_of_order: 105,
                duplicates: 106,
                retransmitted: 107,
                rtos: 108,
                dsack_dups: 109,
                reord_seen: 110,
                recoveries_timed: 114,
                recoveries_cut: 115,
                mss: 111,
                loss_rate: 0.125,
                loss_limited_throughput: Some(112),
            },
            bytes: 201,
            duration_us: 202,
            throughput: 203,
            rtt_us: 204,
            base_rtt_us: 205,
            bytes_per_rtt: 206,
            advertised_window: 207,
            receive_buffer: 208,
            idle_us: 209,
            after_first_loss_us: 218,
            idle_after_first_loss_us: 219,
            held_off_us: 210,
            backlog_held_us: 217,
            held_received: 221,
            held_timed_us: 1_000_000,
            reader_taken: 222,
            reader_timed_us: 1_000_000,
            window_after_hold: Some(215),
            reader_tail_us: 216,
            server_pauses: 211,
            server_pause_us: 212,
            samples: 213,
            round_trips: 214,
            emulated_us: 215,
            client_unread_at_end: Some(220),
            client_readings: 0,
            client_behind_readings: 0,
        },
        path_bytes_per_second: Some(301),
        bdp: Some(302),
        summary: "the summary".into(),
        fix: "the fix".into(),
    }
}

/// One `links[]` entry as the report writes it: the keys in this order (`conn_id` and `at_us`
/// among the measurement's, `loss` after the path), each value from its own field.
#[test]
fn a_link_entry_is_exactly_this_json() {
    let json = serde_json::to_string_pretty(&LinkReport::from(&distinct_verdict())).unwrap();
    let expected = r#"{
  "limit": "receive_window",
  "secondary": "loss",
  "conn_id": 7,
  "at_us": 8000001,
  "bytes": 201,
  "duration_us": 202,
  "throughput": 203,
  "rtt_us": 204,
  "base_rtt_us": 205,
  "bytes_per_rtt": 206,
  "advertised_window": 207,
  "receive_buffer": 208,
  "idle_us": 209,
  "after_first_loss_us": 218,
  "idle_after_first_loss_us": 219,
  "held_off_us": 210,
  "backlog_held_us": 217,
  "window_after_hold": 215,
  "pace_while_held": 221,
  "reader_pace": 222,
  "reader_tail_us": 216,
  "client_unread_at_end": 220,
  "server_pauses": 211,
  "server_pause_us": 212,
  "samples": 213,
  "round_trips": 214,
  "emulated_us": 215,
  "path_bytes_per_second": 301,
  "bdp": 302,
  "loss": {
    "recovery_stalls": 101,
    "recovery_stall_us": 102,
    "rto_stalls": 103,
    "recovery_episodes": 113,
    "segments_in": 104,
    "out_of_order": 105,
    "duplicates": 106,
    "retransmitted": 107,
    "rtos": 108,
    "dsack_dups": 109,
    "reord_seen": 110,
    "recoveries_timed": 114,
    "recoveries_cut": 115,
    "mss": 111,
    "loss_rate": 0.125,
    "loss_limited_throughput": 112
  },
  "summary": "the summary",
  "fix": "the fix"
}"#;
    assert_eq!(json, expected);
}
