//! Protocol constants, named as in the MySQL and MariaDB manuals.

/// Capability flags. The low 32 bits are the classic MySQL flags; the high 32
/// bits are MariaDB's extended capabilities, which travel in the handshake's
/// reserved bytes when `CLIENT_MYSQL` is clear.
pub mod capability {
    /// Set by MySQL servers; MariaDB clears it to announce extended capabilities.
    pub const CLIENT_MYSQL: u64 = 1;
    pub const CLIENT_CONNECT_WITH_DB: u64 = 1 << 3;
    pub const CLIENT_COMPRESS: u64 = 1 << 5;
    pub const CLIENT_LOCAL_FILES: u64 = 1 << 7;
    pub const CLIENT_PROTOCOL_41: u64 = 1 << 9;
    pub const CLIENT_SSL: u64 = 1 << 11;
    pub const CLIENT_SECURE_CONNECTION: u64 = 1 << 15;
    pub const CLIENT_MULTI_STATEMENTS: u64 = 1 << 16;
    pub const CLIENT_MULTI_RESULTS: u64 = 1 << 17;
    pub const CLIENT_PS_MULTI_RESULTS: u64 = 1 << 18;
    pub const CLIENT_PLUGIN_AUTH: u64 = 1 << 19;
    pub const CLIENT_CONNECT_ATTRS: u64 = 1 << 20;
    pub const CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA: u64 = 1 << 21;
    pub const CLIENT_SESSION_TRACK: u64 = 1 << 23;
    pub const CLIENT_DEPRECATE_EOF: u64 = 1 << 24;
    pub const CLIENT_OPTIONAL_RESULTSET_METADATA: u64 = 1 << 25;
    pub const CLIENT_ZSTD_COMPRESSION_ALGORITHM: u64 = 1 << 26;
    pub const CLIENT_QUERY_ATTRIBUTES: u64 = 1 << 27;
    pub const MARIADB_CLIENT_PROGRESS: u64 = 1 << 32;
    pub const MARIADB_CLIENT_COM_MULTI: u64 = 1 << 33;
    pub const MARIADB_CLIENT_STMT_BULK_OPERATIONS: u64 = 1 << 34;
    pub const MARIADB_CLIENT_EXTENDED_TYPE_INFO: u64 = 1 << 35;
    pub const MARIADB_CLIENT_CACHE_METADATA: u64 = 1 << 36;
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
    pub const SERVER_MORE_RESULTS_EXISTS: u16 = 0x0008;
    pub const SERVER_STATUS_CURSOR_EXISTS: u16 = 0x0040;
    pub const SERVER_STATUS_LAST_ROW_SENT: u16 = 0x0080;
    /// The session's `sql_mode` has `NO_BACKSLASH_ESCAPES`: a backslash in a string is literal.
    pub const SERVER_STATUS_NO_BACKSLASH_ESCAPES: u16 = 0x0200;
}

/// Command bytes (the first payload byte of a client command packet).
pub mod command {
    pub const COM_SLEEP: u8 = 0x00;
    pub const COM_QUIT: u8 = 0x01;
    pub const COM_INIT_DB: u8 = 0x02;
    pub const COM_QUERY: u8 = 0x03;
    pub const COM_FIELD_LIST: u8 = 0x04;
    pub const COM_CREATE_DB: u8 = 0x05;
    pub const COM_DROP_DB: u8 = 0x06;
    pub const COM_REFRESH: u8 = 0x07;
    pub const COM_SHUTDOWN: u8 = 0x08;
    pub const COM_STATISTICS: u8 = 0x09;
    pub const COM_PROCESS_INFO: u8 = 0x0a;
    pub const COM_CONNECT: u8 = 0x0b;
    pub const COM_PROCESS_KILL: u8 = 0x0c;
    pub const COM_DEBUG: u8 = 0x0d;
    pub const COM_PING: u8 = 0x0e;
    pub const COM_TIME: u8 = 0x0f;
    pub const COM_DELAYED_INSERT: u8 = 0x10;
    pub const COM_CHANGE_USER: u8 = 0x11;
    pub const COM_BINLOG_DUMP: u8 = 0x12;
    pub const COM_TABLE_DUMP: u8 = 0x13;
    pub const COM_CONNECT_OUT: u8 = 0x14;
    pub const COM_REGISTER_SLAVE: u8 = 0x15;
    pub const COM_STMT_PREPARE: u8 = 0x16;
    pub const COM_STMT_EXECUTE: u8 = 0x17;
    pub const COM_STMT_SEND_LONG_DATA: u8 = 0x18;
    pub const COM_STMT_CLOSE: u8 = 0x19;
    pub const COM_STMT_RESET: u8 = 0x1a;
    pub const COM_SET_OPTION: u8 = 0x1b;
    pub const COM_STMT_FETCH: u8 = 0x1c;
    pub const COM_DAEMON: u8 = 0x1d;
    pub const COM_BINLOG_DUMP_GTID: u8 = 0x1e;
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
    pub const OK: u8 = 0x00;
    pub const AUTH_MORE_DATA: u8 = 0x01;
    pub const LOCAL_INFILE: u8 = 0xFB;
    pub const EOF: u8 = 0xFE;
    pub const ERR: u8 = 0xFF;
}

/// The error code MariaDB uses for an in-band progress report (an ERR-shaped
/// packet that does not end the response).
pub const PROGRESS_REPORT_CODE: u16 = 0xFFFF;
