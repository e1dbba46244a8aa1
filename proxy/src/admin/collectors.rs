//! What each part contributes to `/metrics`, written at scrape time from what it already
//! keeps: the relay's counters, the recorded commands (with the per-statement OpenTelemetry
//! families), the findings, and the link. [`Metrics`] puts them together, each scrape under
//! the one `service` label of the process.

use std::borrow::Cow;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::Registry;

use super::metrics::Families;
use crate::findings::{FindingsEngine, StatementFindings};
use crate::inject::InjectControl;
use crate::link::Links;
use crate::record::{Recording, StatementSeries};
use crate::relay::{BufferBudget, RelayStats};
use crate::sync::locked;

/// What `/metrics` reads.
#[derive(Clone)]
pub struct Sources {
    /// Connection, login, protocol-error and desync counters, and the upstream's product for the
    /// OpenTelemetry families' `db.system.name`.
    pub relay: Arc<RelayStats>,
    /// The event queue's drop counter: `rttscope_records_dropped_total`.
    pub dropped: Arc<AtomicU64>,
    /// Relay buffer memory and its budget: the `rttscope_buffer_*` gauges.
    pub buffers: Arc<BufferBudget>,
    /// Recorded commands: the per-command and per-statement families, read under this lock at
    /// scrape time.
    pub recording: Arc<Mutex<Recording>>,
    /// The findings engine: `rttscope_findings_total`.
    pub findings: Arc<Mutex<FindingsEngine>>,
    /// Link verdicts and the upstream's RTT: `rttscope_upstream_rtt_seconds`, `rttscope_link_*`.
    pub links: Arc<Mutex<Links>>,
    /// The emulated link's settings: the `rttscope_inject_*` gauges.
    pub inject: Arc<InjectControl>,
    /// OpenTelemetry's `server.address`: the upstream's host as configured.
    pub server_address: String,
}

/// OpenTelemetry's default `service.name` when nothing names the service.
pub const UNKNOWN_SERVICE: &str = "unknown_service";

/// Every part's collector, exposed under one `service` label (OpenTelemetry's `service.name`).
pub struct Metrics {
    sources: Sources,
    /// `metrics.service`, else `OTEL_SERVICE_NAME`; `None`: the first client's `program_name`.
    named: Option<Arc<str>>,
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metrics").field("named", &self.named).finish_non_exhaustive()
    }
}

impl Metrics {
    /// Reads `sources`, naming the service `configured` (`metrics.service`), else `env`
    /// (`OTEL_SERVICE_NAME`, ignored when empty).
    pub fn new(sources: Sources, configured: Option<&str>, env: Option<&str>) -> Metrics {
        Metrics { sources, named: named_service(configured, env) }
    }

    /// The service every series is labelled with now: as configured, else the first
    /// `program_name` a client gave (fixed from then on), else [`UNKNOWN_SERVICE`].
    pub fn service(&self) -> Arc<str> {
        if let Some(named) = &self.named {
            return named.clone();
        }
        let program = locked(&self.sources.findings).program.clone();
        program.unwrap_or_else(|| Arc::from(UNKNOWN_SERVICE))
    }

    /// The exposition, in the text format: one registry per scrape, so that the service a
    /// client named since the last one labels every series alike.
    pub fn encode(&self) -> String {
        super::metrics::encode(&registry(self.sources.clone(), &self.service()))
    }
}

/// `metrics.service`, else `OTEL_SERVICE_NAME` when it is not blank; at most 255 characters,
/// control characters left out (the config's validation refuses them; the environment's
/// value is taken as it comes).
fn named_service(configured: Option<&str>, env: Option<&str>) -> Option<Arc<str>> {
    let name = configured.or(env.map(str::trim).filter(|e| !e.is_empty()))?;
    Some(Arc::from(name.chars().filter(|c| !c.is_control()).take(255).collect::<String>()))
}

/// A registry with every part's collector, each series labelled `service`.
pub fn registry(sources: Sources, service: &str) -> Registry {
    let mut registry = Registry::with_labels([(Cow::Borrowed("service"), Cow::Owned(service.to_owned()))].into_iter());
    registry.register_collector(Box::new(RelayCollector {
        relay: sources.relay.clone(),
        dropped: sources.dropped,
        buffers: sources.buffers,
    }));
    registry.register_collector(Box::new(RecordCollector {
        recording: sources.recording,
        relay: sources.relay,
        server_address: sources.server_address,
    }));
    registry.register_collector(Box::new(FindingsCollector(sources.findings)));
    registry.register_collector(Box::new(LinkCollector { links: sources.links, inject: sources.inject }));
    registry
}

#[derive(Debug)]
struct RelayCollector {
    relay: Arc<RelayStats>,
    dropped: Arc<AtomicU64>,
    buffers: Arc<BufferBudget>,
}

impl Collector for RelayCollector {
    fn encode(&self, encoder: DescriptorEncoder) -> fmt::Result {
        let mut f = Families::new(encoder);
        let relay = &self.relay;
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        f.gauge("rttscope_connections_active", "Client connections open now.", load(&relay.connections_active))?;
        f.counter("rttscope_connections_total", "Client connections accepted.", load(&relay.connections_accepted))?;
        f.counter(
            "rttscope_connections_rejected_total",
            "Clients refused at limits.max_connections.",
            load(&relay.connections_rejected),
        )?;
        f.counter(
            "rttscope_upstream_connect_errors_total",
            "Upstream dials that failed or timed out.",
            load(&relay.upstream_connect_errors),
        )?;
        f.counter(
            "rttscope_protocol_errors_total",
            "Connections closed for a protocol violation.",
            load(&relay.protocol_errors),
        )?;
        f.counter(
            "rttscope_upstream_closed_mid_response_total",
            "Connections the upstream closed in the middle of a response (it died, or was killed).",
            load(&relay.upstream_closed_mid_response),
        )?;
        f.labelled_counter(
            "rttscope_protocol_desyncs_total",
            "Times the state machine lost its place and forwarding went on unparsed, by reason.",
            relay.desync_counts().map(|(reason, n)| ([("reason", reason)], n)),
        )?;
        f.labelled_counter(
            "rttscope_logins_total",
            "Logins relayed, by leg, how the leg is carried (plain TCP, TLS, Unix socket) and its compression.",
            relay.login_counts().map(|(l, t, c, n)| ([("leg", l), ("transport", t), ("compression", c)], n)),
        )?;
        f.counter(
            "rttscope_idle_poll_seconds_total",
            "Time connection threads spent polling their sockets before sleeping (relay.idle_poll): the CPU it costs.",
            load(&relay.idle_poll.polled_ns) as f64 / 1e9,
        )?;
        f.labelled_counter(
            "rttscope_idle_polls_total",
            "Idle moments of the connection threads: caught (work came while polling), missed (slept after the window), crowded (not polled: work was waiting for a CPU), unpaid (not polled: polling did not shorten the application's cycle for about the CPU sleeping costs, or that was being measured).",
            relay.idle_poll.outcomes().into_iter().map(|(outcome, n)| ([("outcome", outcome)], n)),
        )?;
        f.counter(
            "rttscope_records_dropped_total",
            "Command records dropped because the collector fell behind.",
            load(&self.dropped),
        )?;
        f.gauge(
            "rttscope_buffer_bytes",
            "Bytes all connections' relay buffers hold now (fixed per-direction buffers and what emulated links hold).",
            self.buffers.total(),
        )?;
        f.gauge(
            "rttscope_buffer_budget_used_bytes",
            "Of rttscope_buffer_bytes, what is taken from limits.buffer_budget (beyond the fixed buffers).",
            self.buffers.extra(),
        )?;
        f.gauge(
            "rttscope_buffer_budget_bytes",
            "limits.buffer_budget: past it, connections get backpressure instead of memory.",
            self.buffers.limit(),
        )?;
        // Beside RSS, these tell a leak (in use grows) from the allocator keeping freed memory.
        if let Some(heap) = crate::sys::heap() {
            f.gauge("rttscope_heap_bytes", "Heap memory rttscope holds now (the C allocator's count).", heap.in_use)?;
            f.gauge(
                "rttscope_heap_free_bytes",
                "Heap memory rttscope freed that the C allocator keeps for reuse (resident until limits.heap_trim hands its pages back).",
                heap.free,
            )?;
        }
        Ok(())
    }
}

struct RecordCollector {
    recording: Arc<Mutex<Recording>>,
    relay: Arc<RelayStats>,
    server_address: String,
}

impl fmt::Debug for RecordCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordCollector").field("server_address", &self.server_address).finish_non_exhaustive()
    }
}

impl Collector for RecordCollector {
    fn encode(&self, encoder: DescriptorEncoder) -> fmt::Result {
        let mut f = Families::new(encoder);
        let mut recording = locked(&self.recording);
        let statement_classes = recording.statement_classes();
        let m = recording.metrics();
        // Each scrape promotes statements that earned a series since the last one.
        m.statements.rebalance();
        f.labelled_counter(
            "rttscope_commands_total",
            "Commands relayed, by command.",
            m.by_command().map(|(c, n, _)| ([("command", c)], n)),
        )?;
        f.labelled_counter(
            "rttscope_command_errors_total",
            "Commands answered with an error, by command.",
            m.by_command().map(|(c, _, e)| ([("command", c)], e)),
        )?;
        let all = m.statements.sum();
        f.counter(
            "rttscope_round_trips_total",
            "Request/response exchanges with the upstream server.",
            all.round_trips,
        )?;
        f.histogram(
            "rttscope_query_duration_seconds",
            "Time from a command's first byte to the last byte of its response.",
            &all.duration_seconds,
        )?;
        f.histogram(
            "rttscope_query_first_byte_seconds",
            "Time from a command's first byte to the first byte of its response (server time plus one round trip).",
            &all.first_byte_seconds,
        )?;
        f.histogram("rttscope_result_bytes", "Bytes in each response.", &m.result_bytes)?;
        f.histogram(
            "rttscope_inject_late_seconds",
            "Per command over the emulated link (inject): how much later than its settings the link let the request and the response's end go (timer and scheduling lateness); part of the link's time, never the server's.",
            &m.inject_late,
        )?;
        f.gauge(
            "rttscope_statement_classes",
            "Statement fingerprints tracked in the current window.",
            statement_classes as u64,
        )?;
        let other = m.statements.other();
        // The series' names, made once per statement when its series was (never per command).
        let ids: Vec<(String, &StatementSeries)> = m
            .statements
            .labelled()
            .map(|(id, s)| (id.to_string(), s))
            .chain(other.as_ref().map(|o| ("other".to_owned(), o)))
            .collect();
        let system = self.relay.db_system_name();
        let server = self.server_address.as_str();
        f.labelled_histogram(
            "db_client_operation_duration_seconds",
            "OpenTelemetry db.client.operation.duration: each command's time, per statement (the top \
             metrics.top_statements by time; the rest in db_query_summary=\"other\").",
            ids.iter().map(|(id, s)| (otel_labels(system, s, id, server), &s.duration_seconds)),
        )?;
        f.labelled_histogram(
            "db_client_response_returned_rows",
            "OpenTelemetry db.client.response.returned_rows: rows in each response, per statement.",
            ids.iter().map(|(id, s)| (otel_labels(system, s, id, server), &s.rows)),
        )?;
        f.labelled_gauge(
            "rttscope_statement_info",
            "1 for each statement with series of its own (and other): its OpenTelemetry db.query.summary and its \
             normalised text (literals replaced by ?; at most 200 bytes, longer ones end in …), to join on statement.",
            ids.iter()
                .map(|(id, s)| ([("statement", id.as_str()), ("summary", &*s.summary), ("text", &*s.text)], 1i64)),
        )?;
        f.labelled_counter(
            "rttscope_statement_round_trips_total",
            "Round trips to the upstream, per statement (the top metrics.top_statements; the rest in \"other\").",
            ids.iter().map(|(id, s)| ([("statement", id.as_str())], s.round_trips)),
        )?;
        f.labelled_counter(
            "rttscope_statement_wire_request_bytes_total",
            "Request bytes on the long hop's wire (compressed when it is), per statement.",
            ids.iter().map(|(id, s)| ([("statement", id.as_str())], s.wire_request_bytes)),
        )?;
        f.labelled_counter(
            "rttscope_statement_wire_response_bytes_total",
            "Response bytes on the long hop's wire (compressed when it is), per statement.",
            ids.iter().map(|(id, s)| ([("statement", id.as_str())], s.wire_response_bytes)),
        )?;
        f.labelled_histogram(
            "rttscope_statement_first_byte_seconds",
            "Time from a command's first byte to its response's first byte, per statement.",
            ids.iter().map(|(id, s)| ([("statement", id.as_str())], &s.first_byte_seconds)),
        )
    }
}

/// The OpenTelemetry attributes of a statement's series, as Prometheus label names, and the
/// statement's id.
fn otel_labels<'a>(
    system: &'a str,
    s: &'a StatementSeries,
    statement: &'a str,
    server: &'a str,
) -> [(&'a str, &'a str); 5] {
    [
        ("db_system_name", system),
        ("db_operation_name", &s.operation),
        ("db_query_summary", &s.summary),
        ("statement", statement),
        ("server_address", server),
    ]
}

struct FindingsCollector(Arc<Mutex<FindingsEngine>>);

impl fmt::Debug for FindingsCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FindingsCollector")
    }
}

impl Collector for FindingsCollector {
    fn encode(&self, encoder: DescriptorEncoder) -> fmt::Result {
        let findings = locked(&self.0);
        let counts = &findings.counts;
        let mut f = Families::new(encoder);
        f.labelled_counter(
            "rttscope_findings_total",
            "Query-pattern occurrences found, by kind.",
            counts.by_kind().map(|(k, n)| ([("kind", k)], n)),
        )?;
        let series: Vec<_> = counts.by_statement().collect();
        fn labels<'a>(kind: &'a str, id: &'a str, s: &'a StatementFindings) -> [(&'a str, &'a str); 3] {
            [("kind", kind), ("statement", id), ("summary", &s.summary)]
        }
        // Each family repeats the statement's summary so that a fleet query reads without a join.
        f.labelled_counter(
            "rttscope_finding_occurrences_total",
            "Query-pattern occurrences found, by kind and statement (the first metrics.top_statements statements \
             of each kind; the rest in statement=\"other\").",
            series.iter().map(|(k, id, s)| (labels(k, id, s), s.occurrences)),
        )?;
        f.labelled_counter(
            "rttscope_finding_round_trips_total",
            "Round trips of the query-pattern occurrences found (an N+1 parent's included), by kind and statement.",
            series.iter().map(|(k, id, s)| (labels(k, id, s), s.round_trips)),
        )?;
        f.labelled_counter(
            "rttscope_finding_wasted_seconds_total",
            "Time the query patterns wasted, by kind and statement: their round trips beyond one per occurrence, \
             each at findings.reference_rtt (what the fix, one round trip per occurrence, would save over a link \
             at that RTT).",
            series.iter().map(|(k, id, s)| (labels(k, id, s), s.wasted_us as f64 / 1e6)),
        )
    }
}

struct LinkCollector {
    links: Arc<Mutex<Links>>,
    inject: Arc<InjectControl>,
}

impl fmt::Debug for LinkCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LinkCollector")
    }
}

impl Collector for LinkCollector {
    fn encode(&self, encoder: DescriptorEncoder) -> fmt::Result {
        let mut f = Families::new(encoder);
        let l = locked(&self.links);
        f.histogram(
            "rttscope_upstream_rtt_seconds",
            "Upstream base RTT as the kernel measured it, per command.",
            &l.rtt,
        )?;
        f.labelled_counter(
            "rttscope_link_transfers_total",
            "Large transfers (and runs of small responses), by the limit that held them back.",
            l.totals.iter().map(|(k, (n, _))| ([("limit", *k)], *n)),
        )?;
        let inject = self.inject.current();
        f.gauge("rttscope_inject_active", "1 when an emulated link is on.", i64::from(inject.is_active()))?;
        f.gauge("rttscope_inject_rtt_seconds", "The emulated round-trip time.", inject.rtt.0.as_secs_f64())?;
        f.labelled_counter(
            "rttscope_link_limited_seconds_total",
            "Time transfers spent held back by each limit.",
            l.totals.iter().map(|(k, (_, us))| ([("limit", *k)], *us as f64 / 1e6)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_names_the_service_before_the_environment() {
        let name = |c, e| named_service(c, e).map(|s| s.to_string());
        assert_eq!(name(Some("checkout"), Some("from-env")).as_deref(), Some("checkout"));
        assert_eq!(name(None, Some(" from-env ")).as_deref(), Some("from-env"));
        assert_eq!(name(None, Some("  ")), None, "blank: the program_name decides");
        assert_eq!(name(None, None), None);
        let long = "x".repeat(300) + "\n";
        assert_eq!(name(None, Some(&long)).unwrap().len(), 255);
    }
}
