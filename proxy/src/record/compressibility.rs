//! How well results would compress on the long hop, measured while it is not compressed.
//!
//! On the forwarding path the [`ResponseSampler`] only copies: from one large response in
//! [`SAMPLE_EVERY`] per connection, the [`SAMPLE_LEN`] bytes that follow its first
//! [`SAMPLE_AFTER`] (past the column definitions, into the rows). Responses smaller than that
//! cost a counter add per read; a sample costs one allocation and one copy. The collector
//! compresses the copy, off the forwarding path and within a CPU budget
//! ([`MeasureBudget`]), and the record carries the sizes from there on.

use std::io::Write;

use tokio::time::Instant;

/// Bytes of a response skipped before sampling: column definitions and small results say
/// nothing about a bandwidth-bound transfer.
pub const SAMPLE_AFTER: u64 = 16 << 10;
/// Bytes copied from a sampled response.
pub const SAMPLE_LEN: usize = 64 << 10;
/// One large response in this many is sampled, per connection (the first one always).
pub const SAMPLE_EVERY: u32 = 16;
/// A sample shorter than this (the response ended soon after `SAMPLE_AFTER`) is dropped.
const MIN_SAMPLE: usize = 8 << 10;
/// Sample bytes the collector compresses per second, at most: about 16 samples, a few
/// milliseconds of one core.
const BYTES_PER_SECOND: usize = 1 << 20;

/// Sampled payload bytes and what zlib made of them, summed over samples.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Compressibility {
    /// Responses sampled.
    pub samples: u64,
    /// Response bytes copied into samples, packet headers included (`queries[].compressibility.sampled_bytes`).
    pub sampled_bytes: u64,
    /// What zlib at its default level made of them ([`zlib_len`]); at least 1 per sample.
    pub compressed_bytes: u64,
}

impl Compressibility {
    /// Sampled bytes per compressed byte (2.0 is 2:1); 1.0 with nothing sampled.
    pub fn ratio(&self) -> f64 {
        if self.compressed_bytes == 0 { 1.0 } else { self.sampled_bytes as f64 / self.compressed_bytes as f64 }
    }

    /// Sums `other` in: a ratio over samples is bytes over bytes, not a mean of ratios.
    pub fn add(&mut self, other: &Compressibility) {
        self.samples += other.samples;
        self.sampled_bytes += other.sampled_bytes;
        self.compressed_bytes += other.compressed_bytes;
    }
}

/// A slice of one response's bytes, as copied on the forwarding path, or what compressing it
/// gave, once the collector has.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PayloadSample {
    /// Copied by the recorder (up to [`SAMPLE_LEN`] bytes), not measured yet.
    Bytes(Box<[u8]>),
    /// Compressed by the collector: one sample's [`Compressibility`].
    Measured(Compressibility),
}

/// One connection's sampler of response bytes (the stream towards the client, packet headers
/// included: what the compressed protocol would compress).
#[derive(Debug, Default)]
pub struct ResponseSampler {
    /// Bytes of the response in flight so far.
    seen: u64,
    /// Responses that grew past `SAMPLE_AFTER`.
    large: u32,
    buf: Option<Vec<u8>>,
}

impl ResponseSampler {
    /// `bytes` went towards the client. A read may end one response and start the next: the
    /// few bytes this gives the wrong one do not change a ratio.
    pub fn bytes(&mut self, bytes: &[u8]) {
        let before = self.seen;
        self.seen += bytes.len() as u64;
        if self.seen <= SAMPLE_AFTER {
            return;
        }
        if before <= SAMPLE_AFTER {
            self.large = self.large.wrapping_add(1);
            if (self.large - 1).is_multiple_of(SAMPLE_EVERY) {
                self.buf = Some(Vec::with_capacity(SAMPLE_LEN));
            }
        }
        let Some(buf) = self.buf.as_mut() else { return };
        let skip = usize::try_from(SAMPLE_AFTER.saturating_sub(before)).unwrap_or(usize::MAX).min(bytes.len());
        let rest = &bytes[skip..];
        let take = rest.len().min(SAMPLE_LEN - buf.len());
        buf.extend_from_slice(&rest[..take]);
    }

    /// The response in flight ended: its sample, if it was sampled and long enough.
    pub fn finished(&mut self) -> Option<PayloadSample> {
        self.seen = 0;
        let buf = self.buf.take()?;
        (buf.len() >= MIN_SAMPLE).then(|| PayloadSample::Bytes(buf.into_boxed_slice()))
    }
}

/// Bytes zlib at its default level (what MySQL and MariaDB compress with) makes of `sample`.
pub fn zlib_len(sample: &[u8]) -> u64 {
    let mut encoder = flate2::write::ZlibEncoder::new(CountingWriter(0), flate2::Compression::default());
    // Writing to a counter cannot fail.
    let _ = encoder.write_all(sample);
    encoder.finish().map_or(sample.len() as u64, |w| w.0)
}

/// Counts what is written to it, keeping nothing.
struct CountingWriter(u64);

impl Write for CountingWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The collector's budget for compressing samples: past it in a second, samples are dropped.
#[derive(Debug)]
pub struct MeasureBudget {
    window: Instant,
    used: usize,
}

impl Default for MeasureBudget {
    fn default() -> Self {
        MeasureBudget { window: Instant::now(), used: 0 }
    }
}

impl MeasureBudget {
    /// Replaces a copied sample by its measurement, or drops it when the budget is spent.
    pub fn measure(&mut self, sample: &mut Option<PayloadSample>, now: Instant) {
        let Some(PayloadSample::Bytes(bytes)) = sample else { return };
        if now.saturating_duration_since(self.window).as_secs() >= 1 {
            (self.window, self.used) = (now, 0);
        }
        if self.used + bytes.len() > BYTES_PER_SECOND {
            *sample = None;
            return;
        }
        self.used += bytes.len();
        let measured =
            Compressibility { samples: 1, sampled_bytes: bytes.len() as u64, compressed_bytes: zlib_len(bytes).max(1) };
        *sample = Some(PayloadSample::Measured(measured));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_the_bytes_past_the_skip_of_one_large_response_in_sample_every() {
        let mut s = ResponseSampler::default();
        // Small responses are never sampled.
        s.bytes(&[1; 1000]);
        assert_eq!(s.finished(), None);
        // The first large one is, from byte SAMPLE_AFTER on, up to SAMPLE_LEN bytes.
        s.bytes(&vec![0; SAMPLE_AFTER as usize - 10]);
        s.bytes(&[7; 20]);
        s.bytes(&vec![9; SAMPLE_LEN * 2]);
        let Some(PayloadSample::Bytes(b)) = s.finished() else { panic!("not sampled") };
        assert_eq!(b.len(), SAMPLE_LEN);
        assert_eq!(&b[..10], &[7; 10]);
        assert_eq!(b[10], 9);
        // The next SAMPLE_EVERY - 1 large ones are not; the one after is.
        for _ in 1..SAMPLE_EVERY {
            s.bytes(&vec![0; 2 * SAMPLE_LEN]);
            assert_eq!(s.finished(), None);
        }
        s.bytes(&vec![0; 2 * SAMPLE_LEN]);
        assert!(s.finished().is_some());
        // Too little past the skip: dropped.
        let mut s = ResponseSampler::default();
        s.bytes(&vec![0; SAMPLE_AFTER as usize + 100]);
        assert_eq!(s.finished(), None);
    }

    #[test]
    fn measures_within_the_budget() {
        let repetitive = vec![b'a'; SAMPLE_LEN];
        assert!(zlib_len(&repetitive) * 50 < SAMPLE_LEN as u64);
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let random: Vec<u8> = (0..SAMPLE_LEN)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        assert!(zlib_len(&random) >= SAMPLE_LEN as u64);

        let now = Instant::now();
        let mut budget = MeasureBudget { window: now, used: 0 };
        let per_second = BYTES_PER_SECOND / SAMPLE_LEN;
        for _ in 0..per_second {
            let mut sample = Some(PayloadSample::Bytes(repetitive.clone().into_boxed_slice()));
            budget.measure(&mut sample, now);
            let Some(PayloadSample::Measured(m)) = sample else { panic!("not measured") };
            assert!(m.ratio() > 50.0, "{m:?}");
        }
        let mut sample = Some(PayloadSample::Bytes(repetitive.clone().into_boxed_slice()));
        budget.measure(&mut sample, now);
        assert_eq!(sample, None, "over the budget");
        let mut sample = Some(PayloadSample::Bytes(random.into_boxed_slice()));
        budget.measure(&mut sample, now + std::time::Duration::from_secs(1));
        let Some(PayloadSample::Measured(m)) = sample else { panic!("a new second, a new budget") };
        assert!(m.ratio() <= 1.0, "{m:?}");
    }
}
