//! Connection churn: an application that opens a connection for each bit of work, so that
//! connection setup — TCP connect, greeting, auth exchange (and TLS), recorded as the
//! `CONNECT` pseudo-command — is a large share of its time. Each setup pays its round trips
//! again, where a pool pays them once per pooled connection.
//!
//! Churn is many short connections, not one, so it is judged per application (`user@host`
//! and client library) over the whole recording: one run per application counts every
//! setup (its round trips and time) beside the time of all the application's commands,
//! setups included. It qualifies with at least `min_connections` setups that took at least
//! `min_share` of that time. A run ends only when it is forgotten (too many applications) or
//! the recording is reset: the report shows it in progress, like the recording itself.

use rustc_hash::FxHashMap as HashMap;

use rttscope_config::ConnectionChurnConfig;

use super::run::{AppId, Bar, Context, Detector, Run};
use super::{Detail, Kind};
use crate::protocol::session::CONNECT;
use crate::record::CommandRecord;

/// Applications followed at once; past this, the one that connected least recently is
/// forgotten (its run ends).
const MAX_APPLICATIONS: usize = 1024;

/// One application's time: its setups (a run, from the first one on) and all its commands.
#[derive(Default)]
struct App {
    run: Option<Run>,
    /// Time in commands of its connections, setups included, each command's own latency
    /// summed (as the report's totals sum them).
    recorded_us: u64,
    /// Time in setups, summed the same way.
    setup_us: u64,
    /// When it last connected: the least recent is forgotten first.
    last_connect_us: u64,
}

impl App {
    /// Its detail, with `unsettled_us` more command time than `recorded_us` holds yet.
    fn detail(&self, unsettled_us: u64) -> Detail {
        Detail::Churn { setup_us: self.setup_us, recorded_us: self.recorded_us + unsettled_us }
    }

    /// The run as it stands, with `unsettled_us` more command time: a command that is not
    /// a setup adds only to `recorded_us`, and the run's detail catches up here, when the
    /// run is read, not on every command.
    fn run_now(&self, unsettled_us: u64) -> Option<Run> {
        let mut run = self.run.clone()?;
        run.detail = self.detail(unsettled_us);
        Some(run)
    }
}

/// The `connection_churn` detector: per application, its connection setups' time against all its recorded time.
pub struct ConnectionChurn {
    min_connections: u64,
    min_share: f64,
    apps: HashMap<AppId, App>,
    last: Option<AppId>,
    /// Command time of one application not yet added to its entry: consecutive commands
    /// of one application (most of a collector's batch, often all) add here, without a
    /// look-up of `apps` each. Settled before anything changes `apps`.
    unsettled: Option<(AppId, u64)>,
}

impl ConnectionChurn {
    /// Thresholds from `findings.connection_churn` (at least one connection).
    pub fn new(c: &ConnectionChurnConfig) -> ConnectionChurn {
        ConnectionChurn {
            min_connections: u64::from(c.min_connections.max(1)),
            min_share: c.min_share.fraction(),
            apps: HashMap::default(),
            last: None,
            unsettled: None,
        }
    }

    /// Adds the unsettled command time to its application, if it is followed (time of
    /// one whose connections opened before the recording began says nothing about churn).
    fn settle(&mut self) {
        if let Some((key, us)) = self.unsettled.take()
            && let Some(app) = self.apps.get_mut(&key)
        {
            app.recorded_us += us;
        }
    }

    fn forget_least_recent(&mut self, ended: &mut Vec<Run>) {
        let oldest = self.apps.iter().min_by_key(|(_, a)| a.last_connect_us).map(|(k, _)| *k);
        if let Some(app) = oldest.and_then(|k| self.apps.remove(&k)) {
            ended.extend(app.run_now(0));
        }
    }
}

impl Detector for ConnectionChurn {
    fn kinds(&self) -> &'static [Kind] {
        &[Kind::ConnectionChurn]
    }

    /// Inline for the common case, a command of the application being followed (its time
    /// added); the rest is [`ConnectionChurn::follow`]'s.
    #[inline(always)]
    fn command(&mut self, r: &CommandRecord, ctx: &Context, ended: &mut Vec<Run>) {
        self.last = None;
        if r.command != CONNECT
            && let Some((app, us)) = &mut self.unsettled
            && *app == ctx.app
        {
            *us += r.latency_us();
            return;
        }
        self.follow(r, ctx, ended);
    }

    fn last_extended(&self) -> Option<&Run> {
        self.last.as_ref().and_then(|k| self.apps.get(k)).and_then(|a| a.run.as_ref())
    }

    fn connection_closed(&mut self, _conn_id: u64, _ended: &mut Vec<Run>) {
        // An application's churn outlives each of its connections: that is what churn is.
        self.last = None;
    }

    fn in_progress(&self, out: &mut Vec<Run>) {
        let unsettled = |key: &AppId| self.unsettled.filter(|(app, _)| app == key).map_or(0, |(_, us)| us);
        out.extend(self.apps.iter().filter_map(|(key, app)| app.run_now(unsettled(key))));
    }

    fn bar(&self, run: &Run) -> Option<Bar> {
        let Detail::Churn { setup_us, recorded_us } = run.detail else { return None };
        (share(setup_us, recorded_us) >= self.min_share)
            .then_some(Bar { min_executions: self.min_connections, min_projected_cost_us: 0 })
    }

    fn clear(&mut self) {
        self.apps.clear();
        self.last = None;
        self.unsettled = None;
    }
}

impl ConnectionChurn {
    /// What [`Detector::command`] does beside adding a command's time to the application
    /// followed: a login, or another application's command.
    #[inline(never)]
    fn follow(&mut self, r: &CommandRecord, ctx: &Context, ended: &mut Vec<Run>) {
        let key = ctx.app;
        let setup = r.command == CONNECT;
        if !setup {
            // Another application's command (the followed one's was added inline): settle
            // the one followed, and follow this one (see `settle`).
            self.settle();
            self.unsettled = Some((key, r.latency_us()));
            return;
        }
        self.settle();
        if !self.apps.contains_key(&key) {
            // Commands of an application whose connections opened before the recording
            // began say nothing about churn until it connects again.
            if !setup {
                return;
            }
            if self.apps.len() >= MAX_APPLICATIONS {
                self.forget_least_recent(ended);
            }
        }
        let app = self.apps.entry(key).or_default();
        let latency = r.latency_us();
        app.recorded_us += latency;
        if setup {
            app.setup_us += latency;
            app.last_connect_us = r.request_us;
            let run = app.run.get_or_insert_with(|| {
                Run::new(Kind::ConnectionChurn, ctx, r, Detail::Churn { setup_us: 0, recorded_us: 0 })
            });
            run.add(r, ctx);
        }
        let detail = app.detail(0);
        if let Some(run) = app.run.as_mut() {
            run.detail = detail;
        }
        // Only a login can make a run qualify: any other command lowers the share.
        if setup {
            self.last = Some(key);
        }
    }
}

/// Connections opened per second over the span from the first setup's start to the last
/// one's end (a span under a millisecond counts as one).
pub fn per_second(connections: u64, span_us: u64) -> f64 {
    connections as f64 * 1e6 / span_us.max(1000) as f64
}

/// The share of `recorded_us` that went to `setup_us` (0–1).
pub fn share(setup_us: u64, recorded_us: u64) -> f64 {
    if recorded_us == 0 { 0.0 } else { (setup_us as f64 / recorded_us as f64).min(1.0) }
}
