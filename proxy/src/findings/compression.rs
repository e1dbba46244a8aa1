//! `compression`: a statement whose transfer is bandwidth-bound on the long hop and whose
//! results compress well, while the long hop is not compressed — compressing it
//! (`upstream.compression`) would save most of that transfer.
//!
//! Judged per statement (and application and driver) over the recording, like churn: one run
//! per statement from the first record that carries a measured sample of its results (the
//! recorder samples only while the long hop is plain). The run sums the statement's
//! commands; the detail sums the samples. It qualifies when the samples compress at least
//! `min_ratio`:1 and, at some scenario's bandwidth (or the emulated link's), the statement's
//! wire bytes take at least `min_transfer_share` of its projected time there. A statement
//! seen over a compressed long hop never qualifies: it has nothing left to gain.

use rustc_hash::FxHashMap as HashMap;

use rttscope_config::FindingsConfig;

use super::run::{AppId, Bar, Context, Detector, Run};
use super::whatif::{Projection, project, transfer_us};
use super::{Detail, Emulated, Finding, Kind};
use crate::fingerprint::FingerprintId;
use crate::human::{bandwidth, bytes, us};
use crate::record::{CommandRecord, Compressibility, PayloadSample};

/// Statements followed at once; past this, new ones are not.
const MAX_STATEMENTS: usize = 1024;

type Key = (FingerprintId, AppId);

/// One statement's run, and whether any of its commands crossed a compressed long hop.
struct Statement {
    run: Run,
    compressed_hop: bool,
}

/// The `compression` detector: per statement, how much of its time was transfer that the compressed protocol would shrink.
pub struct Compression {
    min_ratio: f64,
    min_share: f64,
    /// Bandwidths of the scenarios that have one, with their names.
    scenarios: Vec<(String, u64, u64)>,
    statements: HashMap<Key, Statement>,
    last: Option<Key>,
}

impl Compression {
    /// Thresholds from `findings.compression`; the scenarios' bandwidths size what compression would save.
    pub fn new(c: &FindingsConfig) -> Compression {
        Compression {
            min_ratio: c.compression.min_ratio,
            min_share: c.compression.min_transfer_share.fraction(),
            scenarios: c
                .scenarios
                .iter()
                .filter_map(|s| {
                    let bw = s.bandwidth?.bits_per_second();
                    Some((s.name.clone(), s.rtt.0.as_micros() as u64, bw))
                })
                .collect(),
            statements: HashMap::default(),
            last: None,
        }
    }

    /// Whether, at one of the links it could be projected onto, its bytes take at least
    /// `min_share` of its time.
    fn bandwidth_bound(&self, run: &Run) -> bool {
        let m = run.measured();
        links(&self.scenarios, run.emulated).any(|(_, rtt_us, bw)| {
            let total = project(m, rtt_us, Some(bw));
            transfer_us(m.bytes, Some(bw)) as f64 >= self.min_share * total.max(1) as f64
        })
    }
}

/// The links with a bandwidth: the scenarios', then the emulated one's.
fn links<'a>(
    scenarios: &'a [(String, u64, u64)],
    emulated: Option<Emulated>,
) -> impl Iterator<Item = (String, u64, u64)> + 'a {
    let emulated = emulated.and_then(|e| Some(("the emulated link".to_owned(), e.rtt_us, e.bandwidth_bps?)));
    scenarios.iter().cloned().chain(emulated)
}

impl Detector for Compression {
    fn kinds(&self) -> &'static [Kind] {
        &[Kind::Compression]
    }

    /// Inline, as most commands carry no measured sample and, until one has, no statement
    /// is followed: those leave here, without the call into [`Compression::follow`].
    #[inline]
    fn command(&mut self, r: &CommandRecord, ctx: &Context, _ended: &mut Vec<Run>) {
        self.last = None;
        if r.payload_sample.is_none() && self.statements.is_empty() {
            return;
        }
        self.follow(r, ctx);
    }

    fn last_extended(&self) -> Option<&Run> {
        self.last.as_ref().and_then(|k| self.statements.get(k)).map(|s| &s.run)
    }

    fn connection_closed(&mut self, _conn_id: u64, _ended: &mut Vec<Run>) {
        // A statement's transfers outlive the connections that ran it.
        self.last = None;
    }

    fn in_progress(&self, out: &mut Vec<Run>) {
        out.extend(self.statements.values().filter(|s| !s.compressed_hop).map(|s| s.run.clone()));
    }

    fn bar(&self, run: &Run) -> Option<Bar> {
        let Detail::Compression(c) = &run.detail else { return None };
        let compressed = self
            .statements
            .get(&(run.fingerprint, AppId::of(&run.application, run.driver)))
            .is_none_or(|s| s.compressed_hop);
        (!compressed && c.samples > 0 && c.ratio() >= self.min_ratio && self.bandwidth_bound(run))
            .then_some(Bar { min_executions: 1, min_projected_cost_us: 0 })
    }

    fn clear(&mut self) {
        self.statements.clear();
        self.last = None;
    }
}

impl Compression {
    /// What [`Detector::command`] does with a command that may be this detector's.
    #[inline(never)]
    fn follow(&mut self, r: &CommandRecord, ctx: &Context) {
        let key: Key = (r.fingerprint, ctx.app);
        let sample = match &r.payload_sample {
            Some(PayloadSample::Measured(m)) => Some(*m),
            _ => None,
        };
        if sample.is_none() && !self.statements.contains_key(&key) {
            return;
        }
        if !self.statements.contains_key(&key) && self.statements.len() >= MAX_STATEMENTS {
            return;
        }
        let st = self.statements.entry(key).or_insert_with(|| Statement {
            run: Run::new(Kind::Compression, ctx, r, Detail::Compression(Compressibility::default())),
            compressed_hop: false,
        });
        st.run.add(r, ctx);
        // Wire bytes apart from packet bytes: the long hop was compressed for this command.
        st.compressed_hop |= r.wire_down.is_some();
        if let (Some(m), Detail::Compression(c)) = (sample, &mut st.run.detail) {
            c.add(&m);
        }
        self.last = Some(key);
    }
}

/// What compressing the long hop would save at each projection with a bandwidth (and over the
/// emulated link): the transfer of the bytes compression takes away.
pub fn savings(f: &Finding, what_if: &[Projection]) -> Vec<(String, u64, u64)> {
    let Detail::Compression(c) = &f.detail else { return Vec::new() };
    let saved_bytes = f.bytes - (f.bytes as f64 / c.ratio().max(1.0)) as u64;
    let scenarios = what_if.iter().filter_map(|p| Some((p.scenario.clone(), p.bandwidth_bps?)));
    let emulated = f.emulated.and_then(|e| Some(("the emulated link".to_owned(), e.bandwidth_bps?)));
    scenarios.chain(emulated).map(|(name, bw)| (name, bw, transfer_us(saved_bytes, Some(bw)))).collect()
}

/// "results compress 180.2:1 (zlib, 320.0 KiB sampled); 24.4 MiB on the wire in 5
/// executions".
pub fn headline(f: &Finding) -> String {
    let Detail::Compression(c) = &f.detail else { return String::new() };
    format!(
        "compressible transfer: the results of `{}` compress {:.1}:1 (zlib, {} sampled) and are sent uncompressed over the long hop: {} in {}",
        f.text,
        c.ratio(),
        bytes(c.sampled_bytes),
        bytes(f.bytes),
        crate::human::counted(f.executions, "execution", "executions"),
    )
}

/// The fix, with the saving at each bandwidth it was projected onto.
pub fn fix(f: &Finding, what_if: &[Projection]) -> String {
    let Detail::Compression(c) = &f.detail else { return String::new() };
    let saved: Vec<String> = savings(f, what_if)
        .into_iter()
        .map(|(name, bw, saved_us)| format!("≈ {} at {} ({name})", us(saved_us), bandwidth(bw)))
        .collect();
    let saving = if saved.is_empty() { String::new() } else { format!(" Projected saving: {}.", saved.join(", ")) };
    format!(
        "Compress the long hop: `upstream.compression: zlib` in rttscope's config compresses only between rttscope and the server, with the application unchanged (`zstd` where the server offers it, MySQL 8.0.18+; MariaDB offers zlib); or turn on the driver's compression (`--compress`, `useCompression=true`, `compress=True`). At {:.1}:1 its transfer shrinks to about {}; compressing costs CPU on both ends.{saving}",
        c.ratio(),
        bytes((f.bytes as f64 / c.ratio().max(1.0)) as u64),
    )
}
