//! Connection churn: many setups of one application against all of its time, the bar, the
//! projection of what a pool saves, and the fix in the driver's words.

use super::*;
use crate::fingerprint::FingerprintId;
use crate::protocol::session::CONNECT;

impl Script {
    /// A login on `conn` taking `setup_us` and `round_trips`, of which `injected_us` the
    /// emulated link's.
    pub(super) fn login(&mut self, conn: u64, setup_us: u64, round_trips: u32, injected_us: u64) {
        let name = "COM_CONNECT";
        let id = FingerprintId(hash_value(name.as_bytes()));
        let mut r = CommandRecord::new(conn, CONNECT, id, Arc::from(name), self.now_us);
        r.first_byte_us = Some(self.now_us + setup_us / 2);
        r.last_byte_us = self.now_us + setup_us;
        (r.round_trips, r.bytes_up, r.bytes_down, r.injected_us) = (round_trips, 120, 100, injected_us);
        self.command(r);
    }

    /// `connections` connections of one query each: login, a query of `query_us`, close.
    fn per_query(&mut self, connections: u64, setup_us: u64, query_us: u64) {
        for conn in 1..=connections {
            self.connect(conn, "app");
            self.login(conn, setup_us, 3, 0);
            self.query(conn, &format!("SELECT name FROM users WHERE id = {conn}"), 1, None, query_us, 100);
            self.close(conn);
        }
    }
}

fn churn(s: &Script) -> Vec<Assessed> {
    s.of(Kind::ConnectionChurn)
}

#[test]
fn a_connection_per_query_is_churn_with_its_counts_and_share() {
    let mut s = Script::new();
    s.per_query(40, 3_000, 500);
    let found = churn(&s);
    assert_eq!(found.len(), 1, "{found:#?}");
    let a = &found[0];
    let f = &a.finding;
    assert_eq!((f.executions, f.round_trips, f.cost_us()), (40, 120, 40 * 3_000));
    assert_eq!(f.detail, Detail::Churn { setup_us: 40 * 3_000, recorded_us: 40 * 3_500 });
    assert!((a.share_of_connection_time - 3.0 / 3.5).abs() < 1e-9, "{}", a.share_of_connection_time);
    // From the first login to the last: 40 × (3 ms + 0.5 ms + 100 µs + 50 µs) less the last
    // connection's query and gaps.
    assert_eq!(f.elapsed_us(), 40 * 3_650 - 650);
    assert_eq!(
        a.headline,
        "connection churn of app@10.0.0.7: 40 connections opened in 145.35 ms (275.2 per second), each taking 3.00 ms and 3 round trips to set up; setup was 86% of the application's 140.00 ms in commands"
    );
    assert!(a.fix.starts_with("Keep connections open and reuse them: a connection pool"), "{}", a.fix);
    // Counted once, though it never ends.
    assert_eq!(s.engine.counts.of_kind("connection_churn"), 1);
}

#[test]
fn what_a_pool_saves_is_the_setups_round_trips_at_each_rtt() {
    let mut s = Script::new();
    s.per_query(40, 3_000, 500);
    let a = &churn(&s)[0];
    let region = a.what_if.iter().find(|w| w.scenario == "another region").expect("the default scenario");
    assert_eq!(region.observed_us, 40 * 3_000);
    // ... and its bytes at the region's 20 Mbit/s.
    let transfer = a.finding.bytes * 8_000_000 / 20_000_000;
    assert_eq!(region.projected_us, 40 * 3_000 + 120 * 80_000 + transfer);
    assert_eq!(region.summary, "at 80.00 ms RTT and 20 Mbit/s (another region): ≈ 9.72 s");
    // 120 round trips at 15 ms: 1.8 s and more, a warning.
    assert_eq!(a.severity, Severity::Warning);
}

#[test]
fn over_an_emulated_link_the_projection_leaves_out_what_the_link_added() {
    let mut s = Script::new();
    s.engine.set_emulated(Some(Emulated { rtt_us: 5_000, bandwidth_bps: None, window_bytes: None }));
    for conn in 1..=30 {
        s.connect(conn, "app");
        // Three round trips of 5 ms each on the emulated link, and 1 ms of the server's.
        s.login(conn, 16_000, 3, 15_000);
        s.query(conn, "SELECT 1 FROM dual", 1, None, 5_200, 100);
        s.close(conn);
    }
    let a = &churn(&s)[0];
    assert_eq!((a.finding.injected_us, a.base_us), (30 * 15_000, 30 * 1_000));
    let rack = a.what_if.iter().find(|w| w.scenario == "same rack").expect("the default scenario");
    let transfer = a.finding.bytes * 8_000_000 / 10_000_000_000;
    assert_eq!(rack.projected_us, 30 * 1_000 + 90 * 200 + transfer);
}

/// Commands of two applications interleaved: each keeps its own time (the detector adds a
/// run of one application's commands at once, when another's comes).
#[test]
fn interleaved_applications_each_keep_their_own_time() {
    let mut s = Script::new();
    for n in 1..=20 {
        let (a, b) = (n, 100 + n);
        s.connect(a, "app");
        s.connect(b, "other");
        s.login(a, 3_000, 3, 0);
        s.login(b, 2_000, 3, 0);
        s.query(a, "SELECT name FROM users WHERE id = 1", 1, None, 500, 100);
        s.query(a, "SELECT name FROM users WHERE id = 2", 1, None, 500, 100);
        s.query(b, "SELECT name FROM teams WHERE id = 1", 1, None, 250, 100);
        s.close(a);
        s.close(b);
    }
    let found = churn(&s);
    let detail =
        |user: &str| found.iter().find(|a| a.finding.application.starts_with(user)).map(|a| a.finding.detail.clone());
    assert_eq!(detail("app@"), Some(Detail::Churn { setup_us: 20 * 3_000, recorded_us: 20 * 4_000 }));
    assert_eq!(detail("other@"), Some(Detail::Churn { setup_us: 20 * 2_000, recorded_us: 20 * 2_250 }));
}

#[test]
fn one_connection_for_many_queries_is_no_churn() {
    let mut s = Script::new();
    s.connect(1, "app");
    s.login(1, 3_000, 3, 0);
    for id in 0..40 {
        s.query(1, &format!("SELECT name FROM users WHERE id = {id}"), 1, None, 500, 100);
    }
    assert!(churn(&s).is_empty(), "{:#?}", churn(&s));
}

#[test]
fn the_bar_is_both_the_connections_and_the_share() {
    // Few connections, each a large share: not enough of them.
    let mut s = Script::new();
    s.per_query(19, 3_000, 500);
    assert!(churn(&s).is_empty());
    s.per_query(20, 3_000, 500);
    assert_eq!(churn(&s).len(), 1);

    // Many connections that each do a lot: setup is a small share.
    let mut s = Script::new();
    s.per_query(50, 1_000, 5_000);
    assert!(churn(&s).is_empty(), "a sixth of the time in setups");

    // Thresholds from the config.
    let mut config = FindingsConfig::default();
    config.connection_churn.min_connections = 10;
    config.connection_churn.min_share = "10%".parse().expect("a percentage");
    let mut s = Script::with(config);
    s.per_query(12, 1_000, 5_000);
    assert_eq!(churn(&s).len(), 1);
}

#[test]
fn the_fix_names_the_drivers_pool() {
    let mut s = Script::new();
    for conn in 1..=25 {
        s.connect_as(conn, "pymysql 1.2.4", None);
        s.login(conn, 3_000, 3, 0);
        s.close(conn);
    }
    let fix = &churn(&s)[0].fix;
    assert!(fix.contains("PyMySQL: with SQLAlchemy, one `create_engine(...)`"), "{fix}");
}

#[test]
fn applications_churn_apart() {
    let mut s = Script::new();
    s.per_query(25, 3_000, 500);
    for conn in 100..125 {
        s.connect(conn, "batch");
        s.login(conn, 3_000, 3, 0);
    }
    let apps: Vec<String> = churn(&s).iter().map(|a| a.finding.application.to_string()).collect();
    assert_eq!(apps.len(), 2, "{apps:?}");
}
