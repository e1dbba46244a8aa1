//! The error codes rttscope itself answers with.
//!
//! Only server-range codes: libmariadb (the `mariadb` CLI and every client
//! built on MariaDB Connector/C) treats a client-range code (2000–2999)
//! arriving over the wire as a malformed packet and drops the message, so
//! the familiar 2003 would hide the reason from exactly the users who need it.

/// The upstream cannot be reached (MySQL's `ER_CONNECT_TO_FOREIGN_DATA_SOURCE`,
/// "Unable to connect to foreign data source"), SQL state HY000.
pub const UPSTREAM_UNREACHABLE: u16 = 1429;
/// Too many client connections (`ER_CON_COUNT_ERROR`), as the server says it.
pub const TOO_MANY_CONNECTIONS: u16 = 1040;
/// The client asked for something the handshake cannot give (`ER_HANDSHAKE_ERROR`).
pub const HANDSHAKE_ERROR: u16 = 1043;
/// A login refused (`ER_ACCESS_DENIED_ERROR`), SQL state 28000.
pub const ACCESS_DENIED: u16 = 1045;
/// A pre-4.1 client (`ER_NOT_SUPPORTED_AUTH_MODE`).
pub const NOT_SUPPORTED_AUTH_MODE: u16 = 1251;
/// A statement that ran out of time (`ER_STATEMENT_TIMEOUT`, MariaDB's max_statement_time).
pub const STATEMENT_TIMEOUT: u16 = 1969;
/// A login that needs TLS on a connection without it (`ER_SECURE_TRANSPORT_REQUIRED`).
pub const SECURE_TRANSPORT_REQUIRED: u16 = 3159;
/// The long hop died under a connection: nothing acknowledged within `relay.user_timeout`
/// (`ER_NET_READ_INTERRUPTED`, "Got timeout reading communication packets"), SQL state
/// 08S01, the server's own word for a connection that timed out on the network.
pub const NET_READ_INTERRUPTED: u16 = 1159;
