//! The session's `sql_mode`, as far as it changes how SQL text is tokenized: the one mode
//! rttscope knows the session is in, or the few it may be in when it cannot know.

use super::Server;

/// The parts of the session's `sql_mode` that decide where a string literal ends.
///
/// Read under the wrong mode, part of a literal would come out as words, and words are kept:
/// `SELECT 'a\', 'secret'` is two strings under `NO_BACKSLASH_ESCAPES` and one unterminated
/// string otherwise. The server reports `NO_BACKSLASH_ESCAPES` in every OK/EOF status; whether
/// `"` quotes names (`ANSI_QUOTES`) it does not report, so a `"` token is `?` either way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SqlMode {
    /// A backslash in a string is an ordinary byte, not an escape.
    pub no_backslash_escapes: bool,
    /// `"` quotes identifiers (no backslash escapes in them), not strings.
    pub ansi_quotes: bool,
}

impl SqlMode {
    /// Every combination of the two flags, in [`SqlMode::bit`] order.
    pub const ALL: [SqlMode; 4] = [
        SqlMode { no_backslash_escapes: false, ansi_quotes: false },
        SqlMode { no_backslash_escapes: true, ansi_quotes: false },
        SqlMode { no_backslash_escapes: false, ansi_quotes: true },
        SqlMode { no_backslash_escapes: true, ansi_quotes: true },
    ];

    /// This mode's bit in [`SqlModes`].
    fn bit(self) -> u8 {
        1 << (u8::from(self.no_backslash_escapes) | u8::from(self.ansi_quotes) << 1)
    }
}

/// The modes a session may be in: one when rttscope knows it (the common case), more when a
/// statement changed it in a way it cannot follow (`SET sql_mode = @saved`, `EXECUTE`, a
/// global default it never saw). Statements are then read under every one of them, and a byte
/// any reading puts in a literal or a comment is never written out.
///
/// `likely` is the one reading whose text is kept: the mode assumed before this uncertainty
/// was known to exist, so that ordinary traffic keeps its statement ids.
///
/// They also say which server reads the text ([`Server`]), which decides its versioned
/// comments: a session's server never changes, so every set of modes it may be in carries it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SqlModes {
    likely: SqlMode,
    /// [`SqlMode::bit`]s; always holds `likely`'s.
    possible: u8,
    server: Server,
}

impl Default for SqlModes {
    fn default() -> Self {
        SqlModes::known(SqlMode::default())
    }
}

impl From<SqlMode> for SqlModes {
    fn from(mode: SqlMode) -> Self {
        SqlModes::known(mode)
    }
}

impl SqlModes {
    /// Exactly `mode`.
    #[must_use]
    pub fn known(mode: SqlMode) -> SqlModes {
        SqlModes { likely: mode, possible: mode.bit(), server: Server::Unknown }
    }

    /// Any mode at all, `likely` the one whose reading is kept.
    #[must_use]
    pub fn unknown(likely: SqlMode) -> SqlModes {
        SqlModes { likely, possible: 0b1111, server: Server::Unknown }
    }

    /// The same modes, read by `server`.
    #[must_use]
    pub fn on(self, server: Server) -> SqlModes {
        SqlModes { server, ..self }
    }

    /// The server that reads the text.
    #[must_use]
    pub fn server(self) -> Server {
        self.server
    }

    /// The mode whose reading gives the normalised text.
    #[must_use]
    pub fn likely(self) -> SqlMode {
        self.likely
    }

    /// Only one mode is possible.
    #[must_use]
    pub fn is_known(self) -> bool {
        self.possible == self.likely.bit()
    }

    /// Whether the session may be in `mode`.
    #[must_use]
    pub fn may_be(self, mode: SqlMode) -> bool {
        self.possible & mode.bit() != 0
    }

    /// Every mode possible, `likely` first.
    pub fn iter(self) -> impl Iterator<Item = SqlMode> {
        let rest = SqlMode::ALL.into_iter().filter(move |m| *m != self.likely && self.may_be(*m));
        std::iter::once(self.likely).chain(rest)
    }

    /// Either `self` or `other`, `other`'s likely mode kept (the newer guess).
    #[must_use]
    pub fn or(self, other: SqlModes) -> SqlModes {
        let server = if other.server == Server::Unknown { self.server } else { other.server };
        SqlModes { likely: other.likely, possible: self.possible | other.possible, server }
    }

    /// The server's status flags said whether backslashes escape: only the modes that agree
    /// remain (both `ANSI_QUOTES` readings, if both were possible).
    #[must_use]
    pub fn with_backslash_status(self, no_backslash_escapes: bool) -> SqlModes {
        let pin = |m: SqlMode| SqlMode { no_backslash_escapes, ..m };
        let possible = SqlMode::ALL.iter().filter(|m| self.may_be(**m)).fold(0, |bits, m| bits | pin(*m).bit());
        SqlModes { likely: pin(self.likely), possible, server: self.server }
    }
}

/// Combination modes that include `ANSI_QUOTES` (MySQL's and MariaDB's).
const WITH_ANSI_QUOTES: [&[u8]; 7] = [b"ANSI_QUOTES", b"ANSI", b"DB2", b"MAXDB", b"MSSQL", b"ORACLE", b"POSTGRESQL"];

/// The mode a `sql_mode` string sets: a comma-separated list of names.
pub(super) fn parse_modes(list: &[u8]) -> SqlMode {
    let has = |names: &[&[u8]]| {
        list.split(|&c| c == b',').any(|m| names.iter().any(|n| m.trim_ascii().eq_ignore_ascii_case(n)))
    };
    SqlMode { no_backslash_escapes: has(&[b"NO_BACKSLASH_ESCAPES"]), ansi_quotes: has(&WITH_ANSI_QUOTES) }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NBE: SqlMode = SqlMode { no_backslash_escapes: true, ansi_quotes: false };
    const ANSI: SqlMode = SqlMode { no_backslash_escapes: false, ansi_quotes: true };

    #[test]
    fn a_status_flag_narrows_what_is_possible() {
        let any = SqlModes::unknown(SqlMode::default());
        assert!(!any.is_known() && SqlMode::ALL.iter().all(|m| any.may_be(*m)));
        let plain = any.with_backslash_status(false);
        assert_eq!(plain.iter().collect::<Vec<_>>(), [SqlMode::default(), ANSI]);
        let nbe = SqlModes::known(ANSI).with_backslash_status(true);
        assert!(nbe.is_known() && nbe.likely() == SqlMode { no_backslash_escapes: true, ansi_quotes: true });
        let either = SqlModes::known(NBE).or(SqlModes::known(ANSI));
        assert_eq!((either.likely(), either.iter().count()), (ANSI, 2));
    }

    #[test]
    fn mode_lists_name_the_flags() {
        assert_eq!(parse_modes(b"STRICT_ALL_TABLES, ansi_quotes"), ANSI);
        assert_eq!(parse_modes(b"PIPES_AS_CONCAT,POSTGRESQL"), ANSI);
        assert_eq!(parse_modes(b"no_backslash_escapes"), NBE);
        assert_eq!(parse_modes(b""), SqlMode::default());
    }
}
