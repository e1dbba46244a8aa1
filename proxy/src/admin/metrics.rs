//! Prometheus text exposition (format 0.0.4), written by each component
//! into a [`MetricsWriter`] at scrape time. Names carry their unit; label
//! sets are bounded (command names, directions) — never raw SQL.

use std::fmt::Write;

use crate::record::BucketHistogram;

/// Writes metric families; one `# HELP` and `# TYPE` per family.
#[derive(Default)]
pub struct MetricsWriter {
    out: String,
}

impl MetricsWriter {
    pub fn new() -> MetricsWriter {
        MetricsWriter::default()
    }

    pub fn finish(self) -> String {
        self.out
    }

    fn header(&mut self, name: &str, help: &str, kind: &str) {
        let _ = writeln!(self.out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{k}=\"{}\"", escape_label(v));
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {}", number(value));
    }

    pub fn counter(&mut self, name: &str, help: &str, value: u64) {
        self.header(name, help, "counter");
        self.sample(name, &[], value as f64);
    }

    pub fn gauge(&mut self, name: &str, help: &str, value: f64) {
        self.header(name, help, "gauge");
        self.sample(name, &[], value);
    }

    /// A counter family with one label.
    pub fn labelled_counter<'a>(&mut self, name: &str, help: &str, label: &str, values: impl IntoIterator<Item = (&'a str, u64)>) {
        self.header(name, help, "counter");
        for (l, v) in values {
            self.sample(name, &[(label, l)], v as f64);
        }
    }

    /// A counter family with one label and fractional values (seconds).
    pub fn labelled_counter_f64<'a>(&mut self, name: &str, help: &str, label: &str, values: impl IntoIterator<Item = (&'a str, f64)>) {
        self.header(name, help, "counter");
        for (l, v) in values {
            self.sample(name, &[(label, l)], v);
        }
    }

    /// A gauge family with one label.
    pub fn labelled_gauge<'a>(&mut self, name: &str, help: &str, label: &str, values: impl IntoIterator<Item = (&'a str, f64)>) {
        self.header(name, help, "gauge");
        for (l, v) in values {
            self.sample(name, &[(label, l)], v);
        }
    }

    pub fn histogram(&mut self, name: &str, help: &str, h: &BucketHistogram) {
        self.header(name, help, "histogram");
        let bucket = format!("{name}_bucket");
        let mut cumulative = 0;
        for (bound, count) in h.buckets() {
            cumulative += count;
            self.sample(&bucket, &[("le", &number(bound))], cumulative as f64);
        }
        self.sample(&bucket, &[("le", "+Inf")], h.count() as f64);
        self.sample(&format!("{name}_sum"), &[], h.sum());
        self.sample(&format!("{name}_count"), &[], h.count() as f64);
    }
}

fn number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 { format!("{}", v as i64) } else { format!("{v}") }
}

fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_counters_and_cumulative_histograms() {
        let mut h = BucketHistogram::new(&[0.001, 0.01]);
        h.observe(0.0005);
        h.observe(0.005);
        h.observe(5.0);
        let mut w = MetricsWriter::new();
        w.counter("rttscope_round_trips_total", "Round trips.", 3);
        w.labelled_counter("rttscope_commands_total", "Commands.", "command", [("COM_QUERY", 2), ("COM_PING", 1)]);
        w.histogram("rttscope_query_duration_seconds", "Latency.", &h);
        let text = w.finish();
        assert_eq!(
            text,
            "# HELP rttscope_round_trips_total Round trips.\n# TYPE rttscope_round_trips_total counter\nrttscope_round_trips_total 3\n\
             # HELP rttscope_commands_total Commands.\n# TYPE rttscope_commands_total counter\n\
             rttscope_commands_total{command=\"COM_QUERY\"} 2\nrttscope_commands_total{command=\"COM_PING\"} 1\n\
             # HELP rttscope_query_duration_seconds Latency.\n# TYPE rttscope_query_duration_seconds histogram\n\
             rttscope_query_duration_seconds_bucket{le=\"0.001\"} 1\nrttscope_query_duration_seconds_bucket{le=\"0.01\"} 2\n\
             rttscope_query_duration_seconds_bucket{le=\"+Inf\"} 3\nrttscope_query_duration_seconds_sum 5.0055\n\
             rttscope_query_duration_seconds_count 3\n"
        );
    }
}
