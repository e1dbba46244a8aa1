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
    // The driver's own words first, then the general fix.
    assert!(a.fix.starts_with("PyMySQL: `cursor.execute(\"... IN %s\", (tuple(keys),))`"), "{}", a.fix);
    assert!(a.fix.contains(" Fetch the children together with their parents: JOIN"), "{}", a.fix);
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
    // libmariadb without a program name is as likely a C program (sysbench) as a Python
    // binding: the C API's words, no Python.
    assert!(
        fix.starts_with("The C client library: `mysql_stmt_attr_set(stmt, STMT_ATTR_PREFETCH_ROWS, &rows)`"),
        "{fix}"
    );
    assert!(!fix.contains("prefetch_size") && !fix.contains("Python"), "{fix}");
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
    // The CLI has no words of its own: it gets the general fix.
    let drivers: Vec<Driver> = Driver::ALL.into_iter().filter(|d| *d != Driver::Cli).collect();
    let mut s = Script::new();
    salary_loop(&mut s, 1, 50);
    for i in 0..30 {
        s.sql(2, &format!("INSERT INTO t (a) VALUES ({i})"), 0);
    }
    s.close(1);
    s.close(2);
    for a in s.findings() {
        for &driver in &drivers {
            let mut f = a.finding.clone();
            f.driver = Some(driver);
            let fix = super::super::suggest::fix(&f);
            let fix = fix.replace('`', "").to_lowercase();
            assert!(fix.contains(&format!("{}: ", driver.name().to_lowercase())), "{} for {driver}: {fix}", f.kind);
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

/// Each kind's finding, made from `n_plus_one` (the fix reads only the kind, its detail and
/// its statement's kind, text and rows).
fn one_of_each_kind(n_plus_one: &Finding) -> Vec<Finding> {
    use crate::fingerprint::StatementKind;
    let mut all = Vec::new();
    for kind in Kind::ALL {
        let mut f = n_plus_one.clone();
        f.kind = kind;
        f.detail = match kind {
            Kind::UndersizedFetch => Detail::Fetch { fetch_size: 10 },
            Kind::PaginationLoop => Detail::Pages { page_size: 50, rescanned: 2_250 },
            Kind::ChattySession => Detail::Chatty { top: vec![("select ?".into(), 100)], window_us: 10_000_000 },
            Kind::ConnectionChurn => Detail::Churn { setup_us: 900_000, recorded_us: 1_000_000 },
            _ => f.detail.clone(),
        };
        if kind == Kind::RepeatedWrite {
            let mut update = f.clone();
            (update.statement_kind, update.text) = (StatementKind::Update, "update t set a = ? where id = ?".into());
            all.push(update);
            (f.statement_kind, f.text) = (StatementKind::Insert, "insert into t (a) values (?)".into());
        }
        all.push(f);
    }
    all
}

/// Words only one family of drivers uses: a fix for another driver must not contain them.
const FAMILY_WORDS: [(&[Driver], &[&str]); 8] = {
    use Driver::*;
    [
        (
            &[MysqlConnectorJ, MariadbConnectorJ],
            &["JDBC", "Connector/J", "rewriteBatchedStatements", "setFetchSize", "HikariCP"],
        ),
        (&[PyMysql, MysqlConnectorPython], &["Python", "executemany", "prefetch_size", "SQLAlchemy", "pymysql"]),
        (&[CLibrary], &["mysql_stmt_", "Connector/C", "(stmt, STMT_ATTR", "MYSQL_INIT_COMMAND"]),
        (&[Mysqlnd], &["mysqlnd", "mysqli", "PDO", "$stmt"]),
        (&[Go], &["go-sql-driver", "database/sql", "sqlx", "DSN"]),
        (&[Node], &["mysql2", "Node", "createPool"]),
        (&[DotNet], &["Dapper", "MySqlConnector", "ADO.NET"]),
        (&[MysqlAsync], &["mysql_async", "OptsBuilder"]),
    ]
};

/// Plural subjects followed by a verb in the singular: "these round trips takes".
fn disagreements(text: &str) -> Vec<String> {
    let plurals =
        ["round trips", "rows", "keys", "connections", "statements", "fetches", "pages", "loops", "variables"];
    let verbs =
        ["takes", "sends", "saves", "does", "has", "is", "was", "rewrites", "expands", "streams", "reads", "keeps"];
    let mut found = Vec::new();
    for p in plurals {
        for v in verbs {
            if text.contains(&format!("{p} {v} ")) || text.ends_with(&format!("{p} {v}")) {
                found.push(format!("{p} {v}"));
            }
        }
    }
    found
}

/// Sentences (code spans aside) that do not start with a capital letter.
fn lower_case_starts(text: &str) -> Vec<String> {
    // Code spans are names, whatever their case: read them as one capitalised word.
    let prose: String = text.split('`').enumerate().map(|(i, part)| if i % 2 == 1 { "Code" } else { part }).collect();
    prose.split(". ").filter(|s| s.chars().next().is_none_or(char::is_lowercase)).map(str::to_owned).collect()
}

/// Every kind × every driver (and none): sentences start with a capital, no other driver's
/// words, no plural subject with a singular verb, and the driver's words before the general fix.
#[test]
fn every_fix_for_every_driver_reads_right() {
    let drivers = Driver::ALL;
    let mut s = Script::new();
    salary_loop(&mut s, 1, 50);
    let n_plus_one = only(&s, Kind::NPlusOne).finding;
    let mut checked = 0;
    for base in one_of_each_kind(&n_plus_one) {
        for driver in drivers.iter().copied().map(Some).chain([None]) {
            let f = Finding { driver, ..base.clone() };
            let fix = super::super::suggest::fix(&f);
            if fix.is_empty() {
                continue; // compression's fix is said with its savings elsewhere
            }
            let what = format!("{} for {driver:?}: {fix}", f.kind);
            assert_eq!(lower_case_starts(&fix), Vec::<String>::new(), "{what}");
            assert_eq!(disagreements(&fix), Vec::<String>::new(), "{what}");
            if let Some(d) = driver.filter(|d| *d != Driver::Cli) {
                for (family, words) in FAMILY_WORDS.iter().filter(|(family, _)| !family.contains(&d)) {
                    let theirs: Vec<&&str> = words.iter().filter(|w| fix.contains(**w)).collect();
                    assert!(theirs.is_empty(), "{theirs:?}, words of {family:?}, in {what}");
                }
                if super::super::driver_fix::words(&f, d, 1000).is_some() {
                    let label = d.name();
                    let start = fix.replace('`', "").to_lowercase();
                    assert!(start.starts_with(&format!("{}: ", label.to_lowercase())), "{what}");
                }
            }
            checked += 1;
        }
    }
    assert!(checked >= 7 * 12, "{checked} fixes checked");
}
