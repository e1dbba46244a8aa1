//! Which versioned comments (`/*!NNNNN ... */`, MariaDB's `/*M!NNNNN ... */`) the server runs
//! as SQL and which it skips as comments: decided by its version, from the greeting.

/// The server that reads the text, as far as its versioned comments go.
///
/// A server runs `/*!NNNNN ... */` as SQL when its version is NNNNN or later, and otherwise
/// skips it as a comment that ends at the first `*/` (one nested `/* */` allowed), strings or
/// not. Read the wrong way, a secret in a string of one reading is a word in the other:
/// `SELECT 1 /*!99999 'x */, 'secret' -- '*/`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Server {
    /// Not known: a versioned comment that some server skips may be read either way.
    #[default]
    Unknown,
    /// MariaDB, its version as a number (`101119` for 10.11.19).
    MariaDb(u32),
    /// MySQL or a server that reads SQL as it does (`80036` for 8.0.36).
    MySql(u32),
}

/// How the server reads a comment that opens with `/*!` or `/*M!`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Reading {
    /// Its body is SQL.
    Sql,
    /// A comment, ending at the first `*/` after one nested `/* */` if `nested`.
    Comment { nested: bool },
    /// Either, as far as rttscope can tell.
    Either,
}

/// MariaDB reads versions from 50700 to 99999 as MySQL 5.7's and 8's: it skips them.
const MYSQL_ONLY: std::ops::RangeInclusive<u32> = 50700..=99999;

impl Server {
    /// From the greeting's version string: `8.0.36`, `10.11.19-MariaDB-0+deb12u1`, or with
    /// the `5.5.5-` prefix MariaDB before 11 sends. Unknown when it does not start
    /// `major.minor.patch`.
    #[must_use]
    pub fn from_version(version: &str) -> Server {
        let mariadb = version.contains("MariaDB");
        let version = if mariadb { version.strip_prefix("5.5.5-").unwrap_or(version) } else { version };
        let mut id = 0;
        let mut rest = version;
        for _ in 0..3 {
            let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            let Some(part) = rest.get(..digits).and_then(|d| d.parse::<u32>().ok()) else {
                return Server::Unknown;
            };
            id = id * 100 + part.min(99);
            rest = rest.get(digits..).unwrap_or_default().strip_prefix('.').unwrap_or_default();
        }
        if mariadb { Server::MariaDb(id) } else { Server::MySql(id) }
    }

    /// How this server reads a comment opened by `/*!`, or by `/*M!` if `mariadb_only`, with
    /// `digits` digits after the marker holding `version` (its first five or six).
    pub(super) fn reads(self, mariadb_only: bool, digits: usize, version: u32) -> Reading {
        let versioned = digits >= 5;
        match self {
            // Fewer than five digits are no version: the body is SQL, digits and all.
            Server::MariaDb(_) if !versioned => Reading::Sql,
            Server::MariaDb(server) if version <= server && (mariadb_only || !MYSQL_ONLY.contains(&version)) => {
                Reading::Sql
            }
            Server::MariaDb(_) => Reading::Comment { nested: true },
            // `/*M` opens an ordinary comment to MySQL.
            Server::MySql(_) if mariadb_only => Reading::Comment { nested: false },
            Server::MySql(_) if !versioned => Reading::Sql,
            // Some MySQL releases read five digits of a longer version, some six.
            Server::MySql(_) if digits > 5 => Reading::Either,
            Server::MySql(server) if version <= server => Reading::Sql,
            Server::MySql(_) => Reading::Comment { nested: true },
            // Every MariaDB, and MySQL from 5.7, runs a version below 50700 (mysqldump's
            // `/*!40101 SET ... */`).
            Server::Unknown if !mariadb_only && (!versioned || version < *MYSQL_ONLY.start()) => Reading::Sql,
            Server::Unknown => Reading::Either,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_greeting_names_the_server() {
        assert_eq!(Server::from_version("5.5.5-10.11.19-MariaDB-0+deb12u1"), Server::MariaDb(101119));
        assert_eq!(Server::from_version("11.4.2-MariaDB"), Server::MariaDb(110402));
        assert_eq!(Server::from_version("8.0.36"), Server::MySql(80036));
        assert_eq!(Server::from_version("8.4.0-commercial"), Server::MySql(80400));
        assert_eq!(Server::from_version("5.7.44-log"), Server::MySql(50744));
        assert_eq!(Server::from_version("8.0"), Server::Unknown);
        assert_eq!(Server::from_version("mimic"), Server::Unknown);
    }

    #[test]
    fn a_version_decides_whether_the_body_is_sql() {
        let mariadb = Server::MariaDb(101119);
        assert_eq!(mariadb.reads(false, 5, 40101), Reading::Sql);
        assert_eq!(mariadb.reads(false, 6, 100000), Reading::Sql);
        assert_eq!(mariadb.reads(false, 5, 99999), Reading::Comment { nested: true });
        assert_eq!(mariadb.reads(false, 6, 999999), Reading::Comment { nested: true });
        // MySQL 5.7's and 8's versions are skipped, unless MariaDB's own marker says them.
        assert_eq!(mariadb.reads(false, 5, 50701), Reading::Comment { nested: true });
        assert_eq!(mariadb.reads(true, 5, 50701), Reading::Sql);
        assert_eq!(mariadb.reads(true, 0, 0), Reading::Sql);

        let mysql = Server::MySql(80036);
        assert_eq!(mysql.reads(false, 5, 80036), Reading::Sql);
        assert_eq!(mysql.reads(false, 5, 80037), Reading::Comment { nested: true });
        assert_eq!(mysql.reads(false, 6, 100000), Reading::Either);
        assert_eq!(mysql.reads(true, 5, 40101), Reading::Comment { nested: false });
        assert_eq!(mysql.reads(false, 4, 4010), Reading::Sql);

        assert_eq!(Server::Unknown.reads(false, 5, 40101), Reading::Sql);
        assert_eq!(Server::Unknown.reads(false, 0, 0), Reading::Sql);
        assert_eq!(Server::Unknown.reads(false, 5, 50700), Reading::Either);
        assert_eq!(Server::Unknown.reads(true, 0, 0), Reading::Either);
    }
}
