//! Which client library a connection uses, inferred from its handshake's connection attributes
//! (`_client_name`, `_client_version`, `program_name`), so a finding's fix can speak that
//! driver's own words (`fix`).
//!
//! What the drivers send, as shipped: PyMySQL `pymysql`; Connector/J `MariaDB Connector/J` or
//! `MySQL Connector/J` (`MySQL Connector Java` before 8.0); PHP `mysqlnd`; Go `Go-MySQL-Driver`;
//! MySqlConnector `MySqlConnector`, Oracle's `MySql.Data`; mysql2 `Node-MySQL-2`; Oracle's
//! Python connector `mysql-connector-python`. Everything over the C libraries (the `mariadb`
//! CLI, MariaDB Connector/Python, mysqlclient) sends `libmariadb` or `libmysql`, the CLI adding
//! `program_name` `mysql` or `mariadb`. mysql_async sends no attributes unless told
//! (`OptsBuilder::connect_attributes`, `_client_name` `mysql_async`).

use serde::{Deserialize, Serialize};

/// A client library whose fixes we can word.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Driver {
    /// MySQL Connector/J.
    MysqlConnectorJ,
    /// MariaDB Connector/J.
    MariadbConnectorJ,
    /// PHP's mysqlnd: mysqli and PDO_MySQL.
    Mysqlnd,
    /// PyMySQL, the pure-Python client.
    PyMysql,
    /// Oracle's MySQL Connector/Python.
    MysqlConnectorPython,
    /// libmariadb or libmysqlclient under a program that did not name itself: Connector/C,
    /// MariaDB Connector/Python, mysqlclient (MySQLdb), and others built on them.
    CLibrary,
    /// The `mysql`/`mariadb` command-line client.
    Cli,
    /// go-sql-driver/mysql.
    Go,
    /// mysql2 or the MariaDB Node.js connector.
    Node,
    /// MySqlConnector or MySql.Data (Connector/NET).
    DotNet,
    /// The Rust `mysql_async` crate (and `mysql`, its blocking sibling).
    MysqlAsync,
}

impl Driver {
    /// Every driver rttscope knows, in the order the enum lists them.
    pub const ALL: [Driver; 11] = [
        Driver::MysqlConnectorJ,
        Driver::MariadbConnectorJ,
        Driver::Mysqlnd,
        Driver::PyMysql,
        Driver::MysqlConnectorPython,
        Driver::CLibrary,
        Driver::Cli,
        Driver::Go,
        Driver::Node,
        Driver::DotNet,
        Driver::MysqlAsync,
    ];

    /// The driver that `_client_name` and `program_name` describe, if we know it.
    pub fn infer(client_name: &str, program_name: Option<&str>) -> Option<Driver> {
        let name = client_name.to_ascii_lowercase();
        let has = |needle: &str| name.contains(needle);
        Some(if has("connector/j") || has("connector java") {
            if has("mariadb") { Driver::MariadbConnectorJ } else { Driver::MysqlConnectorJ }
        } else if has("mysqlnd") {
            Driver::Mysqlnd
        } else if has("pymysql") {
            Driver::PyMysql
        } else if has("mysql-connector-python") || has("connector/python") {
            Driver::MysqlConnectorPython
        } else if has("libmariadb") || has("libmysql") {
            let program = program_name.map(|p| p.rsplit('/').next().unwrap_or(p).to_ascii_lowercase());
            match program.as_deref() {
                Some("mysql" | "mariadb") => Driver::Cli,
                _ => Driver::CLibrary,
            }
        } else if has("go-mysql") || has("go-sql-driver") {
            Driver::Go
        } else if has("node") {
            Driver::Node
        } else if has("mysqlconnector") || has("mysql.data") || has("connector/net") || has("connector.net") {
            Driver::DotNet
        } else if has("mysql_async") || has("rust-mysql") {
            Driver::MysqlAsync
        } else {
            return None;
        })
    }

    /// How a fix names it.
    pub fn name(self) -> &'static str {
        match self {
            Driver::MysqlConnectorJ => "MySQL Connector/J",
            Driver::MariadbConnectorJ => "MariaDB Connector/J",
            Driver::Mysqlnd => "PHP (mysqlnd)",
            Driver::PyMysql => "PyMySQL",
            Driver::MysqlConnectorPython => "MySQL Connector/Python",
            Driver::CLibrary => "the C client library",
            Driver::Cli => "the mariadb/mysql command-line client",
            Driver::Go => "Go (go-sql-driver/mysql)",
            Driver::Node => "Node.js (mysql2)",
            Driver::DotNet => ".NET (MySqlConnector)",
            Driver::MysqlAsync => "mysql_async",
        }
    }
}

impl std::fmt::Display for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::Driver::{self, *};

    #[test]
    fn each_driver_from_what_it_sends() {
        let cases: [(&str, Option<&str>, Option<Driver>); 14] = [
            ("pymysql", None, Some(PyMysql)),
            ("MariaDB Connector/J", None, Some(MariadbConnectorJ)),
            ("MySQL Connector/J", None, Some(MysqlConnectorJ)),
            ("MySQL Connector Java", None, Some(MysqlConnectorJ)),
            ("mysqlnd", None, Some(Mysqlnd)),
            ("mysql-connector-python", None, Some(MysqlConnectorPython)),
            ("libmariadb", Some("mysql"), Some(Cli)),
            ("libmariadb", Some("/usr/bin/mariadb"), Some(Cli)),
            ("libmariadb", None, Some(CLibrary)),
            ("libmysql", Some("myapp"), Some(CLibrary)),
            ("Go-MySQL-Driver", None, Some(Go)),
            ("Node-MySQL-2", None, Some(Node)),
            ("MySqlConnector", None, Some(DotNet)),
            ("something else", Some("mysql"), None),
        ];
        for (name, program, want) in cases {
            assert_eq!(Driver::infer(name, program), want, "{name} {program:?}");
        }
        assert_eq!(Driver::infer("mysql_async", None), Some(MysqlAsync));
    }
}
