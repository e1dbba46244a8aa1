//! Proves the test harness: the server starts, fixture users log in, and the CLI works.

#[allow(dead_code)]
use rttscope_integration_tests::mariadb;

use mariadb::{ADMIN, Account, DB, ED25519, NATIVE, OTHER, TestDb, ed25519_login};
use mysql_async::prelude::Queryable;

/// Every fixture account this server has (an existing server may lack the ed25519 plugin).
fn accounts(db: &TestDb) -> Vec<Account> {
    let mut accounts = vec![NATIVE, OTHER, ADMIN];
    if db.has_ed25519() {
        accounts.push(ED25519);
    } else {
        eprintln!("no ed25519 fixture: server {} refused the plugin", db.version());
    }
    accounts
}

#[tokio::test]
async fn every_fixture_user_logs_in() {
    let db = TestDb::shared();
    for account in accounts(db) {
        let mut conn = ed25519_login(|| mysql_async::Conn::new(db.opts(account.user, account.password)))
            .await
            .unwrap_or_else(|e| panic!("{} cannot log in: {e}", account.user));
        let (current_user, max_allowed_packet, local_infile): (String, u64, i64) =
            conn.query_first("SELECT CURRENT_USER(), @@max_allowed_packet, @@local_infile").await.unwrap().unwrap();
        assert!(current_user.starts_with(&format!("{}@", account.user)), "{current_user}");
        assert_eq!(max_allowed_packet, db.max_allowed_packet());
        if db.is_private() {
            assert_eq!(max_allowed_packet, 64 << 20);
            assert_eq!(local_infile, 1);
        }
        conn.disconnect().await.unwrap();
    }
}

#[tokio::test]
async fn fixture_users_have_the_intended_auth_plugins() {
    let db = TestDb::shared();
    let mut conn = mysql_async::Conn::from_url(db.admin_url()).await.unwrap();
    let plugin_of = async |conn: &mut mysql_async::Conn, user: &str| -> String {
        conn.exec_first("SELECT plugin FROM mysql.user WHERE user = ? AND host = '%'", (user,))
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("no {user}@'%'"))
    };
    assert_eq!(plugin_of(&mut conn, NATIVE.user).await, "mysql_native_password");
    if db.has_ed25519() {
        assert_eq!(plugin_of(&mut conn, ED25519.user).await, "ed25519");
    }
    conn.disconnect().await.unwrap();
}

#[tokio::test]
async fn wrong_password_is_refused_with_1045() {
    let db = TestDb::shared();
    for account in accounts(db) {
        match mysql_async::Conn::new(db.opts(account.user, "wrong-pw")).await {
            Err(mysql_async::Error::Server(e)) => assert_eq!(e.code, 1045, "{}: {e}", account.user),
            Err(e) => panic!("{}: expected ER_ACCESS_DENIED_ERROR, got {e}", account.user),
            Ok(_) => panic!("{} logged in with a wrong password", account.user),
        }
    }
}

/// mysql_async would otherwise hop from TCP onto the server's unix socket and so bypass a proxy.
#[tokio::test]
async fn urls_and_opts_stay_on_tcp() {
    let db = TestDb::shared();
    let urls = [
        db.url(NATIVE.user, NATIVE.password, Some(DB)),
        db.url_via(db.upstream_addr(), NATIVE.user, NATIVE.password, Some(DB)),
        db.admin_url(),
    ];
    let mut conns = Vec::new();
    for url in &urls {
        conns.push(mysql_async::Conn::from_url(url).await.unwrap_or_else(|e| panic!("{url}: {e}")));
    }
    conns.push(mysql_async::Conn::new(db.opts_via(db.upstream_addr(), OTHER.user, OTHER.password)).await.unwrap());
    for mut conn in conns {
        // PROCESSLIST shows `ip:port` for TCP clients and `localhost` for socket ones.
        let host: String = conn
            .query_first("SELECT HOST FROM information_schema.PROCESSLIST WHERE ID = CONNECTION_ID()")
            .await
            .unwrap()
            .unwrap();
        assert!(host.contains(':') && !host.starts_with("localhost"), "connected via {host}");
        conn.disconnect().await.unwrap();
    }
}

#[test]
fn mariadb_cli_logs_in_and_queries() {
    let db = TestDb::shared();
    for account in accounts(db) {
        let out = db
            .mariadb_cli(db.upstream_addr(), account.user, account.password, Some(DB))
            .args(["-N", "-e", "SELECT CURRENT_USER(), DATABASE()"])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{}: {}", account.user, String::from_utf8_lossy(&out.stderr));
        let (user, database) = stdout.trim_end().split_once('\t').unwrap_or_else(|| panic!("{stdout:?}"));
        assert!(user.starts_with(&format!("{}@", account.user)), "{stdout:?}");
        assert_eq!(database, DB);
    }

    let out =
        db.mariadb_cli(db.upstream_addr(), NATIVE.user, "wrong-pw", None).args(["-e", "SELECT 1"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("ERROR 1045"), "{out:?}");
}

#[test]
fn mariadb_cli_loads_local_infile() {
    let db = TestDb::shared();
    let mut file = tempfile::NamedTempFile::new().unwrap();
    std::io::Write::write_all(&mut file, b"1\tone\n2\ttwo\n3\tthree\n").unwrap();
    // A temporary table keeps concurrent runs against a shared server apart and leaves nothing.
    let sql = format!(
        "CREATE TEMPORARY TABLE t (n INT, s VARCHAR(10)); \
         LOAD DATA LOCAL INFILE '{}' INTO TABLE t; \
         SELECT COUNT(*), SUM(n), GROUP_CONCAT(s ORDER BY n) FROM t;",
        file.path().display()
    );
    let out = db
        .mariadb_cli(db.upstream_addr(), NATIVE.user, NATIVE.password, Some(DB))
        .args(["-N", "-e", &sql])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "3\t6\tone,two,three\n");
}
