//! The Prometheus exposition (text format 0.0.4) through `prometheus-client`: each part's
//! [`Collector`](prometheus_client::collector::Collector) (in `collectors`) writes its
//! families at scrape time from the counters it already keeps, through [`Families`]. Names
//! carry their unit; label sets are bounded (command names, directions, the top statements
//! and `other`) — never raw SQL.

use std::fmt;

use prometheus_client::encoding::{
    DescriptorEncoder, EncodeCounterValue, EncodeGaugeValue, EncodeLabelSet, EncodeMetric, NoLabelSet,
};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

use crate::record::BucketHistogram;

/// The `Content-Type` of what [`encode`] writes.
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// Everything registered, in the text format.
pub fn encode(registry: &Registry) -> String {
    let mut out = String::new();
    // Writing into a String cannot fail; a collector that fails ends the exposition early,
    // which a scraper sees as a short page rather than none.
    if let Err(e) = prometheus_client::encoding::prometheus_text::encode(&mut out, registry) {
        tracing::error!(error = %e, "cannot encode the metrics");
    }
    out
}

/// One label set per series, as the families below take them.
pub type Labels<'a, const N: usize> = [(&'a str, &'a str); N];

/// Writes metric families during a scrape. Names are given as exposed, counters with their
/// `_total` (the encoder adds it, so it is taken off here: grep finds the exposed name).
pub struct Families<'a> {
    encoder: DescriptorEncoder<'a>,
}

impl<'a> Families<'a> {
    /// Writes into one collector's `encoder`, during one scrape.
    pub fn new(encoder: DescriptorEncoder<'a>) -> Families<'a> {
        Families { encoder }
    }

    /// A counter without labels; `name` as exposed, with its `_total`.
    pub fn counter(&mut self, name: &str, help: &str, value: impl EncodeCounterValue) -> fmt::Result {
        let metric = self.encoder.encode_descriptor(counter_base(name), help, None, MetricType::Counter)?;
        ConstCounter::new(value).encode(metric)
    }

    /// A gauge without labels, its value as of this scrape.
    pub fn gauge(&mut self, name: &str, help: &str, value: impl EncodeGaugeValue) -> fmt::Result {
        let metric = self.encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
        ConstGauge::new(value).encode(metric)
    }

    /// A counter family, one series per label set.
    pub fn labelled_counter<L: EncodeLabelSet, V: EncodeCounterValue>(
        &mut self,
        name: &str,
        help: &str,
        series: impl IntoIterator<Item = (L, V)>,
    ) -> fmt::Result {
        let mut metric = self.encoder.encode_descriptor(counter_base(name), help, None, MetricType::Counter)?;
        for (labels, value) in series {
            ConstCounter::new(value).encode(metric.encode_family(&labels)?)?;
        }
        Ok(())
    }

    /// A gauge family, one series per label set.
    pub fn labelled_gauge<L: EncodeLabelSet, V: EncodeGaugeValue>(
        &mut self,
        name: &str,
        help: &str,
        series: impl IntoIterator<Item = (L, V)>,
    ) -> fmt::Result {
        let mut metric = self.encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
        for (labels, value) in series {
            ConstGauge::new(value).encode(metric.encode_family(&labels)?)?;
        }
        Ok(())
    }

    /// A histogram without labels: `h`'s per-bucket counts, which the encoder makes cumulative as
    /// Prometheus wants, with its sum and count.
    pub fn histogram(&mut self, name: &str, help: &str, h: &BucketHistogram) -> fmt::Result {
        let mut metric = self.encoder.encode_descriptor(name, help, None, MetricType::Histogram)?;
        let buckets: Vec<(f64, u64)> = h.buckets().collect();
        metric.encode_histogram::<NoLabelSet>(h.sum(), h.count(), &buckets, None)
    }

    /// A histogram family, one series per label set.
    pub fn labelled_histogram<'h, L: EncodeLabelSet>(
        &mut self,
        name: &str,
        help: &str,
        series: impl IntoIterator<Item = (L, &'h BucketHistogram)>,
    ) -> fmt::Result {
        let mut metric = self.encoder.encode_descriptor(name, help, None, MetricType::Histogram)?;
        let mut buckets = Vec::new();
        for (labels, h) in series {
            buckets.clear();
            buckets.extend(h.buckets());
            metric.encode_family(&labels)?.encode_histogram::<NoLabelSet>(h.sum(), h.count(), &buckets, None)?;
        }
        Ok(())
    }
}

fn counter_base(name: &str) -> &str {
    name.strip_suffix("_total").unwrap_or(name)
}

#[cfg(test)]
mod tests {
    use prometheus_client::collector::Collector;

    use super::*;

    #[derive(Debug)]
    struct Sample;

    impl Collector for Sample {
        fn encode(&self, encoder: DescriptorEncoder) -> fmt::Result {
            let mut h = BucketHistogram::new(&[0.001, 0.01]);
            h.observe(0.0005);
            h.observe(0.005);
            h.observe(5.0);
            let mut f = Families::new(encoder);
            f.counter("rttscope_round_trips_total", "Round trips.", 3u64)?;
            f.labelled_counter(
                "rttscope_commands_total",
                "Commands.",
                [([("command", "COM_QUERY")], 2u64), ([("command", "COM_PING")], 1)],
            )?;
            f.histogram("rttscope_query_duration_seconds", "Latency.", &h)
        }
    }

    #[test]
    fn encodes_counters_and_cumulative_histograms() {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Sample));
        assert_eq!(
            encode(&registry),
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
