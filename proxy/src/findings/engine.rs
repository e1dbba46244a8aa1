//! The findings engine: feeds every detector, and — once for every kind — decides which runs
//! qualify, merges them into findings, and assesses them for reports.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use rttscope_config::FindingsConfig;

use super::chatty::Chatty;
use super::churn::{self, ConnectionChurn};
use super::compression::{self, Compression};
use super::cursors::Cursors;
use super::loops::Loops;
use super::pages::Pages;
use super::run::{AppId, Context, Detector, Roles, Run};
use super::whatif::{self, projections};
use super::{
    Assessed, Detail, Driver, Emulated, Finding, FindingCounts, FindingKey, Kind, PatternScope, Severity, suggest,
};
use crate::record::{CommandRecord, Connected, Consumer, Event, IdentityChange, IndexedMap};
use crate::sync::locked;

/// Most distinct findings kept; the cheapest go first.
const MAX_FINDINGS: usize = 1000;
/// New-finding log lines allowed per minute.
const LOG_LINES_PER_MINUTE: u32 = 10;
/// Connections whose application name is remembered.
const MAX_APPLICATIONS: usize = 65_536;
/// Occurrences kept for rolling windows (each a few hundred bytes).
const MAX_RECENT: usize = 10_000;
/// How far back rolling windows reach unless `report.window_max` says otherwise.
const DEFAULT_KEEP_RECENT_US: u64 = 3_600_000_000;

/// Runs every detector over the collector's events, keeps the findings merged by kind, statement, application, origin and driver and assesses them for reports.
pub struct FindingsEngine {
    config: FindingsConfig,
    reference_rtt_us: u64,
    detectors: Detectors,
    /// By connection: `user@client-host`, the client library when its attributes named
    /// one we know, and both as a number (one look-up per command for all three, mostly of
    /// the connection the command before was on: indexed).
    applications: IndexedMap<u64, (Arc<str>, Option<Driver>, AppId)>,
    /// The emulated link configured now (set by the consumer before each batch).
    emulated: Option<Emulated>,
    found: HashMap<FindingKey, Finding>,
    /// Each occurrence that qualified, with when it ended, for rolling-window reports: kept
    /// for `keep_recent_us` and at most `MAX_RECENT` of them.
    recent: VecDeque<(u64, Finding)>,
    keep_recent_us: u64,
    announced: HashSet<FindingKey>,
    /// Occurrences that qualified, by kind and by kind and statement, since start (metrics).
    pub counts: FindingCounts,
    /// The first `program_name` a client's connection attributes gave: the metrics' service
    /// when neither `metrics.service` nor `OTEL_SERVICE_NAME` names one.
    pub program: Option<Arc<str>>,
    log_window: (u64, u32),
    unnamed: Arc<str>,
    unnamed_id: AppId,
    roles: Roles,
}

impl FindingsEngine {
    /// Every detector, with `config`'s thresholds and reference RTT.
    pub fn new(config: FindingsConfig) -> FindingsEngine {
        let reference_rtt_us = config.reference_rtt.0.as_micros() as u64;
        let detectors = Detectors {
            loops: Loops::new(&config),
            cursors: Cursors::new(&config.fetch),
            pages: Pages::new(&config.pagination),
            chatty: Chatty::new(&config.chatty),
            churn: ConnectionChurn::new(&config.connection_churn),
            compression: Compression::new(&config),
        };
        FindingsEngine {
            config,
            reference_rtt_us,
            detectors,
            applications: IndexedMap::default(),
            emulated: None,
            found: HashMap::default(),
            recent: VecDeque::new(),
            keep_recent_us: DEFAULT_KEEP_RECENT_US,
            announced: HashSet::default(),
            counts: FindingCounts::new(reference_rtt_us),
            program: None,
            log_window: (0, 0),
            unnamed: Arc::from(""),
            unnamed_id: AppId::of("", None),
            roles: Roles::default(),
        }
    }

    /// The emulated link configured now; commands collected from here on ran over it when
    /// their records say a link added time.
    pub fn set_emulated(&mut self, emulated: Option<Emulated>) {
        self.emulated = emulated;
    }

    /// Follows one event: commands feed the detectors, logins name the application and driver, closes end the connection's runs.
    #[inline(always)]
    pub fn observe(&mut self, event: &Event) {
        let mut ended = Vec::new();
        let now_us = match event {
            Event::Command(r) => {
                self.command(r, &mut ended);
                r.last_byte_us
            }
            Event::Connected(c) => {
                let Connected { conn_id, client, user, at_us, legs, .. } = &**c;
                if self.program.is_none()
                    && let Some(program) = legs.client_program.as_deref().filter(|p| !p.is_empty())
                {
                    self.program = Some(Arc::from(program.chars().take(255).collect::<String>()));
                }
                if self.applications.len() < MAX_APPLICATIONS {
                    let driver = legs
                        .client_library
                        .as_deref()
                        .and_then(|library| Driver::infer(library, legs.client_program.as_deref()));
                    let application = Arc::from(format!("{user}@{}", host_of(client)));
                    let id = AppId::of(&application, driver);
                    self.applications.insert(*conn_id, (application, driver, id));
                }
                *at_us
            }
            Event::Identity(change) => {
                let IdentityChange { conn_id, user, .. } = &**change;
                if let Some((app, driver, id)) = self.applications.get_mut(conn_id) {
                    let host = app.rsplit_once('@').map_or("", |(_, h)| h).to_owned();
                    *app = Arc::from(format!("{user}@{host}"));
                    *id = AppId::of(app, *driver);
                }
                return;
            }
            Event::Closed { conn_id, at_us } => {
                for d in self.detectors.all_mut() {
                    d.connection_closed(*conn_id, &mut ended);
                }
                self.applications.remove(conn_id);
                *at_us
            }
        };
        // Most commands end no run: nothing to look at.
        if !ended.is_empty() {
            self.record(ended, now_us);
        }
    }

    fn command(&mut self, r: &CommandRecord, ended: &mut Vec<Run>) {
        // Found mutably, so that the connection is tried first next time.
        let application = self.applications.get_mut(&r.conn_id).map(|a| &*a);
        let ctx = Context {
            scope: r.trace.map_or(PatternScope::Connection(r.conn_id), PatternScope::Trace),
            application: application.map_or(&self.unnamed, |(app, _, _)| app),
            app: application.map_or(self.unnamed_id, |(_, _, id)| *id),
            origin: &r.origin,
            emulated: self.emulated,
            driver: application.and_then(|(_, driver, _)| *driver),
            role: self.roles.of(r),
        };
        let mut newly = Vec::new();
        let mut feed = Feed {
            r,
            ctx: &ctx,
            ended,
            reference: self.reference_rtt_us,
            announced: &self.announced,
            newly: &mut newly,
        };
        let Detectors { loops, cursors, pages, chatty, churn, compression } = &mut self.detectors;
        feed.to(loops);
        feed.to(cursors);
        feed.to(pages);
        feed.to(chatty);
        feed.to(churn);
        feed.to(compression);
        for f in newly {
            // A churn or compression run lasts as long as the recording, so it is counted
            // when it first qualifies rather than when it ends.
            if matches!(f.kind, Kind::ConnectionChurn | Kind::Compression) {
                self.counts.count(&f);
            }
            self.announce(&f, r.last_byte_us);
        }
    }

    /// Keeps the ended runs that qualify.
    fn record(&mut self, ended: Vec<Run>, now_us: u64) {
        for run in ended {
            let Some(d) = self.detector_of(run.kind) else { continue };
            if !qualifies(d, &run, self.reference_rtt_us) {
                continue;
            }
            let f = run.to_finding();
            if !matches!(f.kind, Kind::ConnectionChurn | Kind::Compression) {
                self.counts.count(&f);
            }
            self.announce(&f, now_us);
            self.remember_recent(now_us, &f);
            match self.found.get_mut(&f.key()) {
                Some(existing) => existing.merge(&f),
                None => {
                    if self.found.len() >= MAX_FINDINGS
                        && let Some(cheapest) =
                            self.found.iter().min_by_key(|(_, g)| g.round_trips).map(|(k, _)| k.clone())
                    {
                        self.found.remove(&cheapest);
                    }
                    self.found.insert(f.key(), f);
                }
            }
        }
    }

    /// The detectors, in the order they see commands.
    #[cfg(test)]
    pub(crate) fn detectors(&self) -> impl Iterator<Item = &dyn Detector> {
        self.detectors.all().into_iter()
    }

    fn detector_of(&self, kind: Kind) -> Option<&dyn Detector> {
        self.detectors.all().into_iter().find(|d| d.kinds().contains(&kind))
    }

    /// One warning per new finding, at most a few a minute.
    fn announce(&mut self, f: &Finding, now_us: u64) {
        if self.announced.len() >= 2 * MAX_FINDINGS {
            self.announced.clear();
        }
        if !self.announced.insert(f.key()) {
            return;
        }
        let minute = now_us / 60_000_000;
        if self.log_window.0 != minute {
            self.log_window = (minute, 0);
        }
        self.log_window.1 += 1;
        if self.log_window.1 <= LOG_LINES_PER_MINUTE {
            tracing::warn!(
                kind = f.kind.name(),
                statement = %f.fingerprint,
                round_trips = f.round_trips,
                "finding: {}",
                suggest::headline(f)
            );
        }
    }

    /// Rolling windows reach back `window_max` (`report.window_max`; 0 keeps nothing).
    pub fn keep_recent(&mut self, window_max: std::time::Duration) {
        self.keep_recent_us = u64::try_from(window_max.as_micros()).unwrap_or(u64::MAX);
    }

    fn remember_recent(&mut self, ended_us: u64, f: &Finding) {
        if self.keep_recent_us == 0 {
            return;
        }
        let oldest = ended_us.saturating_sub(self.keep_recent_us);
        while self.recent.front().is_some_and(|(at, _)| *at < oldest) || self.recent.len() >= MAX_RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back((ended_us, f.clone()));
    }

    /// Every finding so far, runs in progress included, for a report: ranked by what it
    /// would cost at the reference RTT. `conn_time` gives each connection's time in commands
    /// (for "share of the connection").
    pub fn report(&self, conn_time: &dyn Fn(u64) -> u64) -> Vec<Assessed> {
        self.ranked(self.found.clone(), conn_time)
    }

    /// The findings of a rolling window: the occurrences that ended since `since_us`, merged
    /// per statement as the cumulative report merges them, and the runs in progress now (a
    /// run that spans the recording, such as connection churn, counts as it stands).
    pub fn report_since(&self, since_us: u64, conn_time: &dyn Fn(u64) -> u64) -> Vec<Assessed> {
        let mut all: HashMap<FindingKey, Finding> = HashMap::default();
        for (_, f) in self.recent.iter().filter(|(at, _)| *at >= since_us) {
            match all.get_mut(&f.key()) {
                Some(existing) => existing.merge(f),
                None => {
                    all.insert(f.key(), f.clone());
                }
            }
        }
        self.ranked(all, conn_time)
    }

    /// `all` and the runs in progress, assessed and ranked.
    fn ranked(&self, mut all: HashMap<FindingKey, Finding>, conn_time: &dyn Fn(u64) -> u64) -> Vec<Assessed> {
        let mut open = Vec::new();
        for d in self.detectors.all() {
            open.clear();
            d.in_progress(&mut open);
            for run in open.iter().filter(|run| qualifies(d, run, self.reference_rtt_us)) {
                let f = run.to_finding();
                match all.get_mut(&f.key()) {
                    Some(existing) => existing.merge(&f),
                    None => {
                        all.insert(f.key(), f);
                    }
                }
            }
        }
        let mut assessed: Vec<Assessed> = all.into_values().map(|f| self.assess(f, conn_time)).collect();
        assessed.sort_by(|a, b| {
            b.at_reference_us.cmp(&a.at_reference_us).then_with(|| a.finding.fingerprint.cmp(&b.finding.fingerprint))
        });
        assessed
    }

    fn assess(&self, f: Finding, conn_time: &dyn Fn(u64) -> u64) -> Assessed {
        let measured = f.measured();
        let at_reference_us = whatif::project(measured, self.reference_rtt_us, None);
        // Churn spans more connections than a finding lists: its detector kept the sums.
        // Both sides are connection-time: the connections' commands, each counted.
        let (part, whole) = match f.detail {
            Detail::Churn { setup_us, recorded_us } => (setup_us, recorded_us),
            _ => (f.commands_us, f.per_conn.iter().map(|(c, _)| conn_time(*c)).sum()),
        };
        let share_of_connection_time = churn::share(part, whole);
        // Connections long closed are forgotten: then the cost alone judges.
        let share = (whole > 0).then_some(share_of_connection_time);
        let what_if = projections(measured, &self.config.scenarios);
        // Compression's fix is worth what it saves at each link's bandwidth.
        let fix = match f.kind {
            Kind::Compression => compression::fix(&f, &what_if),
            _ => suggest::fix(&f),
        };
        Assessed {
            severity: Severity::of(at_reference_us, share),
            headline: suggest::headline(&f),
            fix,
            reference_rtt_us: self.reference_rtt_us,
            at_reference_us,
            base_us: measured.base_us(),
            what_if,
            share_of_connection_time,
            finding: f,
        }
    }

    /// Forgets findings, occurrences and runs in progress (`POST /reset`); the metrics counts keep counting.
    pub fn reset(&mut self) {
        for d in self.detectors.all_mut() {
            d.clear();
        }
        self.found.clear();
        self.recent.clear();
        self.announced.clear();
    }
}

/// The detectors, each by its own type: a command reaches each through a direct call the
/// compiler can inline (most return at once, the command being none of their business),
/// where a list of `dyn Detector` cost two indirect calls per detector and command. Rarer
/// paths see them as a list.
struct Detectors {
    loops: Loops,
    cursors: Cursors,
    pages: Pages,
    chatty: Chatty,
    churn: ConnectionChurn,
    compression: Compression,
}

impl Detectors {
    /// In the order they see commands.
    fn all(&self) -> [&dyn Detector; 6] {
        [&self.loops, &self.cursors, &self.pages, &self.chatty, &self.churn, &self.compression]
    }

    fn all_mut(&mut self) -> [&mut dyn Detector; 6] {
        [&mut self.loops, &mut self.cursors, &mut self.pages, &mut self.chatty, &mut self.churn, &mut self.compression]
    }
}

/// One command on its way through the detectors, collecting the runs it made qualify for the
/// first time.
struct Feed<'a, 'c> {
    r: &'a CommandRecord,
    ctx: &'a Context<'c>,
    ended: &'a mut Vec<Run>,
    reference: u64,
    announced: &'a HashSet<FindingKey>,
    newly: &'a mut Vec<Finding>,
}

impl Feed<'_, '_> {
    fn to<D: Detector>(&mut self, d: &mut D) {
        d.command(self.r, self.ctx, self.ended);
        if let Some(run) = d.last_extended()
            && !run.announced.get()
            && qualifies(d, run, self.reference)
        {
            run.announced.set(true);
            if !self.announced.contains(&run.key()) {
                self.newly.push(run.to_finding());
            }
        }
    }
}

/// Whether a run clears its detector's bar: the one qualification rule for every kind.
fn qualifies<D: Detector + ?Sized>(d: &D, run: &Run, reference_rtt_us: u64) -> bool {
    d.bar(run).is_some_and(|bar| {
        run.executions >= bar.min_executions
            && run.round_trips.saturating_mul(reference_rtt_us) >= bar.min_projected_cost_us
    })
}

/// Feeds the engine from the collector, one lock per batch, telling it first which link is
/// emulated now.
pub struct FindingsConsumer {
    engine: Arc<Mutex<FindingsEngine>>,
    emulated: Box<dyn Fn() -> Option<Emulated> + Send>,
}

impl FindingsConsumer {
    /// `emulated` says which link is emulated at the moment it is called.
    pub fn new(
        engine: Arc<Mutex<FindingsEngine>>,
        emulated: impl Fn() -> Option<Emulated> + Send + 'static,
    ) -> FindingsConsumer {
        FindingsConsumer { engine, emulated: Box::new(emulated) }
    }
}

impl Consumer for FindingsConsumer {
    fn events(&mut self, batch: &[Event]) {
        let emulated = (self.emulated)();
        let mut engine = locked(&self.engine);
        engine.set_emulated(emulated);
        for event in batch {
            engine.observe(event);
        }
    }
}

/// The host of a client address as logs name it: `10.0.0.7` of `10.0.0.7:51234`,
/// `::1` of `[::1]:51234`, `unix` of a Unix socket's `unix:/path`.
fn host_of(client: &str) -> &str {
    if client.starts_with("unix:") {
        return "unix";
    }
    let host = client.rsplit_once(':').map_or(client, |(host, _)| host);
    host.trim_start_matches('[').trim_end_matches(']')
}
