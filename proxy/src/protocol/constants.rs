//! Protocol constants, named as in the MySQL and MariaDB manuals.

/// Capability flags. The low 32 bits are the classic MySQL flags; the high 32
/// bits are MariaDB's extended capabilities, which travel in the handshake's
/// reserved bytes when `CLIENT_MYSQL` is clear.
pub mod capability {
    /// Set by MySQL servers; MariaDB clears it to announce extended capabilities.
    pub const CLIENT_MYSQL: u64 = 1;
    /// HandshakeResponse41 carries an initial schema name after the auth response.
    pub const CLIENT_CONNECT_WITH_DB: u64 = 1 << 3;
    /// zlib-compressed protocol after the handshake (each packet wrapped in a 7-byte compressed
    /// header).
    pub const CLIENT_COMPRESS: u64 = 1 << 5;
    /// The client can answer a LOCAL INFILE Request (0xFB) by uploading a file's contents.
    pub const CLIENT_LOCAL_FILES: u64 = 1 << 7;
    /// The 4.1 protocol: HandshakeResponse41, SQL state in ERR_Packet, status and warnings in
    /// OK/EOF.
    pub const CLIENT_PROTOCOL_41: u64 = 1 << 9;
    /// The client sends an SSLRequest and switches to TLS before its real HandshakeResponse41.
    pub const CLIENT_SSL: u64 = 1 << 11;
    /// HandshakeResponse41's auth response is prefixed by a 1-byte length (else NUL-terminated).
    pub const CLIENT_SECURE_CONNECTION: u64 = 1 << 15;
    /// One COM_QUERY may hold several `;`-separated statements, each with its own result.
    pub const CLIENT_MULTI_STATEMENTS: u64 = 1 << 16;
    /// A response may hold several results chained by `SERVER_MORE_RESULTS_EXISTS` (needed for
    /// `CALL`).
    pub const CLIENT_MULTI_RESULTS: u64 = 1 << 17;
    /// Like `CLIENT_MULTI_RESULTS`, for COM_STMT_EXECUTE responses.
    pub const CLIENT_PS_MULTI_RESULTS: u64 = 1 << 18;
    /// Auth plugin names travel in HandshakeV10 and HandshakeResponse41; the server may send
    /// AuthSwitchRequest.
    pub const CLIENT_PLUGIN_AUTH: u64 = 1 << 19;
    /// HandshakeResponse41 ends with length-encoded key/value connection attributes.
    pub const CLIENT_CONNECT_ATTRS: u64 = 1 << 20;
    /// HandshakeResponse41's auth response is prefixed by a length-encoded integer (may exceed 255
    /// bytes).
    pub const CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA: u64 = 1 << 21;
    /// OK_Packet may carry session state changes (system variables, schema, GTIDs) after its info
    /// text.
    pub const CLIENT_SESSION_TRACK: u64 = 1 << 23;
    /// No EOF_Packet after column definitions; an OK_Packet with header 0xFE ends the rows instead.
    pub const CLIENT_DEPRECATE_EOF: u64 = 1 << 24;
    /// MySQL 8.0: a byte after the column count says whether column definitions follow.
    pub const CLIENT_OPTIONAL_RESULTSET_METADATA: u64 = 1 << 25;
    /// zstd-compressed protocol; HandshakeResponse41 ends with the compression level.
    pub const CLIENT_ZSTD_COMPRESSION_ALGORITHM: u64 = 1 << 26;
    /// MySQL 8.0.23: COM_QUERY and COM_STMT_EXECUTE carry named attributes ahead of the SQL or
    /// parameters.
    pub const CLIENT_QUERY_ATTRIBUTES: u64 = 1 << 27;
    /// The server may send progress reports (ERR_Packet with code 0xFFFF) before the real answer.
    pub const MARIADB_CLIENT_PROGRESS: u64 = 1 << 32;
    /// COM_MULTI: several commands in one packet (see [`MASKED`]).
    pub const MARIADB_CLIENT_COM_MULTI: u64 = 1 << 33;
    /// COM_STMT_BULK_EXECUTE: one execute with many rows of parameters.
    pub const MARIADB_CLIENT_STMT_BULK_OPERATIONS: u64 = 1 << 34;
    /// Column definitions carry a length-encoded extended type info blob (e.g. `json`, `uuid`)
    /// before their fixed fields.
    pub const MARIADB_CLIENT_EXTENDED_TYPE_INFO: u64 = 1 << 35;
    /// A byte after the column count says whether column definitions follow or the client's cached
    /// ones apply.
    pub const MARIADB_CLIENT_CACHE_METADATA: u64 = 1 << 36;
    /// COM_STMT_BULK_EXECUTE answers with one result per parameter row instead of one total.
    pub const MARIADB_CLIENT_BULK_UNIT_RESULTS: u64 = 1 << 37;

    /// What rttscope does not carry: cleared from both handshakes, so clients do
    /// without it. COM_MULTI (MariaDB 10.2's batch of commands in one packet) changes
    /// the shape of commands and responses; no client library sends it and MariaDB
    /// 10.6+ servers no longer offer it.
    pub const MASKED: u64 = MARIADB_CLIENT_COM_MULTI;

    /// What each leg negotiates on its own: TLS and compression are between rttscope
    /// and each peer, and change nothing in the packets the state machine reads.
    pub const PER_LEG: u64 = CLIENT_SSL | CLIENT_COMPRESS | CLIENT_ZSTD_COMPRESSION_ALGORITHM;
}

/// Server status flags carried by OK and EOF packets.
pub mod status {
    /// Another result follows this one in the same response (multi-statements, `CALL`).
    pub const SERVER_MORE_RESULTS_EXISTS: u16 = 0x0008;
    /// The COM_STMT_EXECUTE opened a cursor: the response ends after the column definitions, rows
    /// come by COM_STMT_FETCH.
    pub const SERVER_STATUS_CURSOR_EXISTS: u16 = 0x0040;
    /// The cursor is exhausted: this COM_STMT_FETCH returned the last rows.
    pub const SERVER_STATUS_LAST_ROW_SENT: u16 = 0x0080;
    /// The session's `sql_mode` has `NO_BACKSLASH_ESCAPES`: a backslash in a string is literal.
    pub const SERVER_STATUS_NO_BACKSLASH_ESCAPES: u16 = 0x0200;
}

/// Command bytes (the first payload byte of a client command packet).
pub mod command {
    /// The server's internal idle state; a client never sends it (the server answers ERR).
    pub const COM_SLEEP: u8 = 0x00;
    /// Closes the connection; the server sends no answer.
    pub const COM_QUIT: u8 = 0x01;
    /// Changes the default schema (`USE`): payload is the schema name; answers OK or ERR.
    pub const COM_INIT_DB: u8 = 0x02;
    /// A text-protocol statement: answers a text result set, OK, ERR or a LOCAL INFILE Request.
    pub const COM_QUERY: u8 = 0x03;
    /// Deprecated: a table's column definitions, ended by EOF, without rows.
    pub const COM_FIELD_LIST: u8 = 0x04;
    /// Obsolete form of `CREATE DATABASE`, superseded by COM_QUERY.
    pub const COM_CREATE_DB: u8 = 0x05;
    /// Obsolete form of `DROP DATABASE`, superseded by COM_QUERY.
    pub const COM_DROP_DB: u8 = 0x06;
    /// Deprecated `FLUSH`: one byte of sub-command flags; answers OK.
    pub const COM_REFRESH: u8 = 0x07;
    /// Deprecated server shutdown; answers EOF or ERR.
    pub const COM_SHUTDOWN: u8 = 0x08;
    /// Server statistics: answered by a bare human-readable string, neither OK nor a result set.
    pub const COM_STATISTICS: u8 = 0x09;
    /// Deprecated `SHOW PROCESSLIST`: answers a text result set.
    pub const COM_PROCESS_INFO: u8 = 0x0a;
    /// Server-internal (a connection being set up); rttscope reuses it as
    /// [`CONNECT`](crate::protocol::session::CONNECT).
    pub const COM_CONNECT: u8 = 0x0b;
    /// Deprecated `KILL`: payload a 4-byte connection id; answers OK.
    pub const COM_PROCESS_KILL: u8 = 0x0c;
    /// Dumps debug information to the server's error log; answers EOF.
    pub const COM_DEBUG: u8 = 0x0d;
    /// A liveness check: answers OK.
    pub const COM_PING: u8 = 0x0e;
    /// Server-internal; a client never sends it.
    pub const COM_TIME: u8 = 0x0f;
    /// Server-internal; a client never sends it.
    pub const COM_DELAYED_INSERT: u8 = 0x10;
    /// Re-authenticates as another user and resets the session: an auth exchange like the
    /// handshake's.
    pub const COM_CHANGE_USER: u8 = 0x11;
    /// A replica asks for the binlog by file and position: answered by an open-ended stream of
    /// events.
    pub const COM_BINLOG_DUMP: u8 = 0x12;
    /// Obsolete replication command; a client never sends it.
    pub const COM_TABLE_DUMP: u8 = 0x13;
    /// Server-internal (replication); a client never sends it.
    pub const COM_CONNECT_OUT: u8 = 0x14;
    /// A replica registers itself with the source: answers OK.
    pub const COM_REGISTER_SLAVE: u8 = 0x15;
    /// Prepares a statement: answers COM_STMT_PREPARE_OK (statement id, counts, parameter and
    /// column definitions) or ERR.
    pub const COM_STMT_PREPARE: u8 = 0x16;
    /// Runs a prepared statement by 4-byte id with binary-protocol parameters: answers a binary
    /// result set, OK or ERR.
    pub const COM_STMT_EXECUTE: u8 = 0x17;
    /// Sends one parameter's data in pieces before the execute; never answered.
    pub const COM_STMT_SEND_LONG_DATA: u8 = 0x18;
    /// Deallocates a prepared statement; never answered.
    pub const COM_STMT_CLOSE: u8 = 0x19;
    /// Discards long data and closes the cursor of a prepared statement; answers OK.
    pub const COM_STMT_RESET: u8 = 0x1a;
    /// Turns multi-statements on or off (2-byte `MYSQL_OPTION_MULTI_STATEMENTS_*`); answers EOF.
    pub const COM_SET_OPTION: u8 = 0x1b;
    /// Reads more rows from a cursor (statement id, row count): answers binary rows, then an EOF
    /// whose status may say `SERVER_STATUS_LAST_ROW_SENT`.
    pub const COM_STMT_FETCH: u8 = 0x1c;
    /// Server-internal; a client never sends it.
    pub const COM_DAEMON: u8 = 0x1d;
    /// Like `COM_BINLOG_DUMP`, from a GTID set.
    pub const COM_BINLOG_DUMP_GTID: u8 = 0x1e;
    /// Resets session state (variables, temporary tables, prepared statements) without
    /// re-authenticating; answers OK.
    pub const COM_RESET_CONNECTION: u8 = 0x1f;
    /// MariaDB's bulk execute: one statement with many rows of parameters, one
    /// round trip (sent when `MARIADB_CLIENT_STMT_BULK_OPERATIONS` was negotiated).
    pub const COM_STMT_BULK_EXECUTE: u8 = 0xfa;

    /// The name the manual gives a command byte, for logs, records and metrics.
    pub fn name(cmd: u8) -> &'static str {
        match cmd {
            COM_SLEEP => "COM_SLEEP",
            COM_QUIT => "COM_QUIT",
            COM_INIT_DB => "COM_INIT_DB",
            COM_QUERY => "COM_QUERY",
            COM_FIELD_LIST => "COM_FIELD_LIST",
            COM_CREATE_DB => "COM_CREATE_DB",
            COM_DROP_DB => "COM_DROP_DB",
            COM_REFRESH => "COM_REFRESH",
            COM_SHUTDOWN => "COM_SHUTDOWN",
            COM_STATISTICS => "COM_STATISTICS",
            COM_PROCESS_INFO => "COM_PROCESS_INFO",
            COM_CONNECT => "COM_CONNECT",
            COM_PROCESS_KILL => "COM_PROCESS_KILL",
            COM_DEBUG => "COM_DEBUG",
            COM_PING => "COM_PING",
            COM_TIME => "COM_TIME",
            COM_DELAYED_INSERT => "COM_DELAYED_INSERT",
            COM_CHANGE_USER => "COM_CHANGE_USER",
            COM_BINLOG_DUMP => "COM_BINLOG_DUMP",
            COM_TABLE_DUMP => "COM_TABLE_DUMP",
            COM_CONNECT_OUT => "COM_CONNECT_OUT",
            COM_REGISTER_SLAVE => "COM_REGISTER_SLAVE",
            COM_STMT_PREPARE => "COM_STMT_PREPARE",
            COM_STMT_EXECUTE => "COM_STMT_EXECUTE",
            COM_STMT_SEND_LONG_DATA => "COM_STMT_SEND_LONG_DATA",
            COM_STMT_CLOSE => "COM_STMT_CLOSE",
            COM_STMT_RESET => "COM_STMT_RESET",
            COM_SET_OPTION => "COM_SET_OPTION",
            COM_STMT_FETCH => "COM_STMT_FETCH",
            COM_DAEMON => "COM_DAEMON",
            COM_BINLOG_DUMP_GTID => "COM_BINLOG_DUMP_GTID",
            COM_RESET_CONNECTION => "COM_RESET_CONNECTION",
            COM_STMT_BULK_EXECUTE => "COM_STMT_BULK_EXECUTE",
            _ => "COM_UNKNOWN",
        }
    }

    /// Whether rttscope knows the shape of this command's response.
    pub fn is_known(cmd: u8) -> bool {
        name(cmd) != "COM_UNKNOWN"
    }
}

/// Largest payload one packet carries; a payload of this size or more
/// continues in the next packet.
pub const MAX_PAYLOAD_LEN: usize = 0xFF_FFFF;

/// First payload byte of the generic response packets.
pub mod header {
    /// OK_Packet; also COM_STMT_PREPARE_OK.
    pub const OK: u8 = 0x00;
    /// AuthMoreData during authentication (e.g. caching_sha2_password's fast-auth result or RSA
    /// key).
    pub const AUTH_MORE_DATA: u8 = 0x01;
    /// LOCAL INFILE Request: the server asks for a file's contents (in a row, the same byte is
    /// NULL).
    pub const LOCAL_INFILE: u8 = 0xFB;
    /// EOF_Packet (under 9 bytes), or an OK_Packet ending rows with `CLIENT_DEPRECATE_EOF`;
    /// AuthSwitchRequest during authentication.
    pub const EOF: u8 = 0xFE;
    /// ERR_Packet (or a MariaDB progress report, see
    /// [`PROGRESS_REPORT_CODE`](super::PROGRESS_REPORT_CODE)).
    pub const ERR: u8 = 0xFF;
}

/// The error code MariaDB uses for an in-band progress report (an ERR-shaped
/// packet that does not end the response).
pub const PROGRESS_REPORT_CODE: u16 = 0xFFFF;
