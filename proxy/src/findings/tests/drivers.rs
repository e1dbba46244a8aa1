//! Fixes in the words of the driver the connection attributes named, and sentences that say
//! "1 row", not "1 rows".

use super::*;
use crate::live::Legs;

impl Script {
    /// A connection whose attributes named `library` (`_client_name _client_version`) and
    /// `program` (`program_name`).
    pub(super) fn connect_as(&mut self, conn: u64, library: &str, program: Option<&str>) {
        let legs = Legs {
            client_library: Some(library.to_owned()),
            client_program: program.map(str::to_owned),
            ..Legs::default()
        };
        self.connect_with(conn, "app", legs);
    }

    /// A server-side cursor read `fetches` times, `size` rows a fetch.
    fn cursor(&mut self, conn: u64, fetches: u64, size: u32) {
        let sql = "SELECT id FROM big WHERE id > ?";
        let mut execute = record(conn, COM_STMT_EXECUTE, sql, 0, self.now_us, 500);
        (execute.statement, execute.cursor) = (Some(7), true);
        self.command(execute);
        for _ in 0..fetches {
            let mut fetch = record(conn, COM_STMT_FETCH, sql, u64::from(size), self.now_us, 200);
            (fetch.statement, fetch.fetch_rows) = (Some(7), size);
            self.command(fetch);
        }
    }
}

fn only(s: &Script, kind: Kind) -> Assessed {
    let found = s.of(kind);
    assert_eq!(found.len(), 1, "{found:#?}");
    found.into_iter().next().unwrap_or_else(|| unreachable!())
}

#[test]
fn an_n_plus_one_fix_in_pymysql_words() {
    let mut s = Script::new();
    s.connect_as(1, "pymysql 1.2.4", None);
    salary_loop(&mut s, 1, 50);
    let a = only(&s, Kind::NPlusOne);
    assert_eq!(a.finding.driver, Some(Driver::PyMysql));
    assert!(a.fix.starts_with("Fetch the children together with their parents: JOIN"), "{}", a.fix);
    assert!(a.fix.contains("PyMySQL: `cursor.execute(\"... IN %s\", (tuple(keys),))`"), "{}", a.fix);
    // The name the report's `driver` key carries.
    assert_eq!(a.finding.driver.map(|d| d.name()), Some("PyMySQL"));
}

#[test]
fn an_undersized_fetch_fix_in_connector_j_and_connector_python_words() {
    let mut s = Script::new();
    s.connect_as(1, "MySQL Connector/J 8.4.0", None);
    s.cursor(1, 200, 10);
    let fix = only(&s, Kind::UndersizedFetch).fix;
    assert!(fix.contains("MySQL Connector/J: `useCursorFetch=true&defaultFetchSize=1000`"), "{fix}");
    assert!(!fix.contains("prefetch_size"), "only the driver's words: {fix}");

    let mut s = Script::new();
    s.connect_as(2, "libmariadb 3.3.8", None);
    s.cursor(2, 200, 10);
    let fix = only(&s, Kind::UndersizedFetch).fix;
    assert!(fix.contains("`conn.cursor(prefetch_size=1000)`") && fix.contains("STMT_ATTR_PREFETCH_ROWS"), "{fix}");
}

#[test]
fn the_cli_and_an_unknown_driver_get_the_general_fix() {
    let mut general = Script::new();
    general.connect(1, "app");
    salary_loop(&mut general, 1, 50);
    let general = only(&general, Kind::NPlusOne);
    assert_eq!(general.finding.driver, None);
    for (library, program) in [("libmariadb 3.3.8", Some("mysql")), ("somedriver 1.0", None)] {
        let mut s = Script::new();
        s.connect_as(1, library, program);
        salary_loop(&mut s, 1, 50);
        assert_eq!(only(&s, Kind::NPlusOne).fix, general.fix, "{library}");
    }
}

#[test]
fn one_application_through_two_drivers_is_two_findings_each_in_its_words() {
    let mut s = Script::new();
    s.connect_as(1, "pymysql 1.2.4", None);
    salary_loop(&mut s, 1, 50);
    s.close(1);
    s.connect_as(2, "MySQL Connector/J 8.4.0", None);
    salary_loop(&mut s, 2, 50);
    s.close(2);
    let mut found: Vec<(Option<Driver>, bool)> = s
        .of(Kind::NPlusOne)
        .iter()
        .map(|a| (a.finding.driver, a.fix.contains(&format!("{}: ", a.finding.driver.map_or("-", Driver::name)))))
        .collect();
    found.sort_by_key(|(d, _)| d.map(Driver::name));
    assert_eq!(found, [(Some(Driver::MysqlConnectorJ), true), (Some(Driver::PyMysql), true)]);
}

#[test]
fn a_closed_connection_forgets_its_driver() {
    let mut s = Script::new();
    s.connect_as(1, "pymysql 1.2.4", None);
    s.close(1);
    s.connect(1, "app");
    salary_loop(&mut s, 1, 50);
    assert_eq!(only(&s, Kind::NPlusOne).finding.driver, None);
}

#[test]
fn every_driver_has_words_for_every_fix_that_depends_on_it() {
    use Driver::*;
    let drivers = [
        MysqlConnectorJ,
        MariadbConnectorJ,
        Mysqlnd,
        PyMysql,
        MysqlConnectorPython,
        CLibrary,
        Go,
        Node,
        DotNet,
        MysqlAsync,
    ];
    let mut s = Script::new();
    salary_loop(&mut s, 1, 50);
    for i in 0..30 {
        s.sql(2, &format!("INSERT INTO t (a) VALUES ({i})"), 0);
    }
    s.close(1);
    s.close(2);
    for a in s.findings() {
        for driver in drivers {
            let mut f = a.finding.clone();
            f.driver = Some(driver);
            let fix = super::super::suggest::fix(&f);
            assert!(fix.contains(&format!("{}: ", driver.name())), "{} for {driver}: {fix}", f.kind);
        }
    }
}

/// Fetching one row per round trip is the worst case of an undersized fetch, and the one a
/// sentence is likeliest to get wrong.
#[test]
fn one_row_per_fetch_is_said_in_the_singular() {
    let mut s = Script::new();
    s.cursor(1, 300, 1);
    let a = only(&s, Kind::UndersizedFetch);
    assert!(
        a.headline.starts_with("cursor fetched 1 row per round trip: 300 fetches for 300 rows of"),
        "{}",
        a.headline
    );
    for sentence in [a.headline.as_str(), a.fix.as_str()] {
        for wrong in ["1 rows", "1 round trips", "1 times", "1 fetches", "1 pages"] {
            assert!(!sentence.contains(&format!(" {wrong}")), "{wrong:?} in {sentence}");
        }
    }
}
