"""ctypes bindings for the parts of libmariadb (MariaDB Connector/C) that the test scripts call.

Connector/C's own API, not a re-implementation: what an application linked
against libmariadb sends is what these scripts send. Structures are laid out
as in <mariadb/mysql.h> and <mariadb/mariadb_stmt.h> of Connector/C 3.x.
"""

import ctypes
import ctypes.util
import sys

vp, cp, uint, ulong = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint, ctypes.c_ulong


class MYSQL_BIND(ctypes.Structure):
    _fields_ = [
        ("length", ctypes.POINTER(ulong)),
        ("is_null", ctypes.POINTER(ctypes.c_char)),
        ("buffer", vp),
        ("error", ctypes.POINTER(ctypes.c_char)),
        ("u", vp),
        ("store_param_func", vp),
        ("fetch_result", vp),
        ("skip_result", vp),
        ("buffer_length", ulong),
        ("offset", ulong),
        ("length_value", ulong),
        ("flags", uint),
        ("pack_length", uint),
        ("buffer_type", ctypes.c_int),
        ("error_value", ctypes.c_char),
        ("is_unsigned", ctypes.c_char),
        ("long_data_used", ctypes.c_char),
        ("is_null_value", ctypes.c_char),
        ("extension", vp),
    ]


class MYSQL_FIELD(ctypes.Structure):
    _fields_ = [(name, cp) for name in ["name", "org_name", "table", "org_table", "db", "catalog", "def_"]] + [
        ("length", ulong),
        ("max_length", ulong),
    ] + [(name, uint) for name in ["name_length", "org_name_length", "table_length", "org_table_length",
                                   "db_length", "catalog_length", "def_length", "flags", "decimals", "charsetnr"]] + [
        ("type", ctypes.c_int),
        ("extension", vp),
    ]


STMT_ATTR_CURSOR_TYPE, STMT_ATTR_PREFETCH_ROWS = 1, 2
CURSOR_TYPE_READ_ONLY = 1
MYSQL_TYPE_LONG, MYSQL_TYPE_BLOB, MYSQL_TYPE_STRING = 3, 252, 254
MYSQL_NO_DATA, MYSQL_DATA_TRUNCATED = 100, 101
MYSQL_OPTION_MULTI_STATEMENTS_ON, MYSQL_OPTION_MULTI_STATEMENTS_OFF = 0, 1
CLIENT_MULTI_STATEMENTS = 1 << 16
REFRESH_TABLES, REFRESH_STATUS = 4, 16

_SIGNATURES = [
    ("mysql_init", vp, [vp]),
    ("mysql_real_connect", vp, [vp, cp, cp, cp, cp, uint, cp, ulong]),
    ("mysql_error", cp, [vp]),
    ("mysql_errno", uint, [vp]),
    ("mysql_sqlstate", cp, [vp]),
    ("mysql_query", ctypes.c_int, [vp, cp]),
    ("mysql_store_result", vp, [vp]),
    ("mysql_next_result", ctypes.c_int, [vp]),
    ("mysql_field_count", uint, [vp]),
    ("mysql_affected_rows", ctypes.c_ulonglong, [vp]),
    ("mysql_num_fields", uint, [vp]),
    ("mysql_fetch_field_direct", ctypes.POINTER(MYSQL_FIELD), [vp, uint]),
    ("mysql_fetch_row", ctypes.POINTER(cp), [vp]),
    ("mysql_fetch_lengths", ctypes.POINTER(ulong), [vp]),
    ("mysql_free_result", None, [vp]),
    ("mysql_close", None, [vp]),
    ("mysql_thread_id", ulong, [vp]),
    ("mysql_ping", ctypes.c_int, [vp]),
    ("mysql_select_db", ctypes.c_int, [vp, cp]),
    ("mysql_change_user", ctypes.c_char, [vp, cp, cp, cp]),
    ("mysql_reset_connection", ctypes.c_int, [vp]),
    ("mysql_set_server_option", ctypes.c_int, [vp, ctypes.c_int]),
    ("mysql_kill", ctypes.c_int, [vp, ulong]),
    ("mysql_refresh", ctypes.c_int, [vp, uint]),
    ("mysql_stat", cp, [vp]),
    ("mysql_dump_debug_info", ctypes.c_int, [vp]),
    ("mysql_list_fields", vp, [vp, cp, cp]),
    ("mysql_list_processes", vp, [vp]),
    ("mysql_stmt_init", vp, [vp]),
    ("mysql_stmt_attr_set", ctypes.c_char, [vp, ctypes.c_int, vp]),
    ("mysql_stmt_prepare", ctypes.c_int, [vp, cp, ulong]),
    ("mysql_stmt_bind_param", ctypes.c_char, [vp, ctypes.POINTER(MYSQL_BIND)]),
    ("mysql_stmt_send_long_data", ctypes.c_char, [vp, uint, cp, ulong]),
    ("mysql_stmt_execute", ctypes.c_int, [vp]),
    ("mysql_stmt_reset", ctypes.c_char, [vp]),
    ("mysql_stmt_affected_rows", ctypes.c_ulonglong, [vp]),
    ("mysql_stmt_field_count", uint, [vp]),
    ("mysql_stmt_bind_result", ctypes.c_char, [vp, ctypes.POINTER(MYSQL_BIND)]),
    ("mysql_stmt_fetch", ctypes.c_int, [vp]),
    ("mysql_stmt_store_result", ctypes.c_int, [vp]),
    ("mysql_stmt_error", cp, [vp]),
    ("mysql_stmt_errno", uint, [vp]),
    ("mysql_stmt_close", ctypes.c_char, [vp]),
]


def load():
    lib = ctypes.CDLL(ctypes.util.find_library("mariadb") or "libmariadb.so.3")
    for name, res, argtypes in _SIGNATURES:
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, argtypes
    return lib


LIB = load()


class Conn:
    """One MYSQL handle."""

    def __init__(self, host, port, user, password, db, flags=0):
        self.mysql = LIB.mysql_init(None)
        if not LIB.mysql_real_connect(self.mysql, host.encode(), user.encode(), password.encode(),
                                      db.encode() if db else None, port, None, flags):
            sys.exit("connect as %s: %s" % (user, self.error()))

    def error(self):
        return "%d (%s) %s" % (LIB.mysql_errno(self.mysql), LIB.mysql_sqlstate(self.mysql).decode(),
                               LIB.mysql_error(self.mysql).decode("utf-8", "replace"))

    def rows(self, res):
        """Every row of a MYSQL_RES as a tuple of bytes/None, then frees it."""
        out, n = [], LIB.mysql_num_fields(res)
        while row := LIB.mysql_fetch_row(res):
            lengths = LIB.mysql_fetch_lengths(res)
            out.append(tuple(None if row[i] is None else ctypes.string_at(row[i], lengths[i]) for i in range(n)))
        LIB.mysql_free_result(res)
        return out

    def query(self, sql):
        """Every result of `sql`: a list of row lists (None for a result without rows), or an
        error string in place of the result that failed."""
        if LIB.mysql_query(self.mysql, sql.encode()):
            return ["error " + self.error()]
        results = []
        while True:
            res = LIB.mysql_store_result(self.mysql)
            results.append(self.rows(res) if res else None)
            rc = LIB.mysql_next_result(self.mysql)
            if rc > 0:
                results.append("error " + self.error())
            if rc != 0:
                return results

    def value(self, sql):
        return self.query(sql)[0][0][0].decode()

    def close(self):
        LIB.mysql_close(self.mysql)


class CursorStmt:
    """A prepared SELECT executed with a READ_ONLY cursor; every column read as a string.
    With cursor=False, no cursor: the whole result read by mysql_stmt_store_result."""

    def __init__(self, conn, sql, prefetch, cursor=True):
        self.stmt = LIB.mysql_stmt_init(conn.mysql)
        attrs = [(STMT_ATTR_CURSOR_TYPE, CURSOR_TYPE_READ_ONLY), (STMT_ATTR_PREFETCH_ROWS, prefetch)]
        for attr, value in attrs if cursor else []:
            v = ulong(value)
            if LIB.mysql_stmt_attr_set(self.stmt, attr, ctypes.byref(v)) != b"\0":
                self.fail("attr_set")
        if LIB.mysql_stmt_prepare(self.stmt, sql.encode(), len(sql.encode())):
            self.fail("prepare")
        if LIB.mysql_stmt_execute(self.stmt):
            self.fail("execute")
        if not cursor and LIB.mysql_stmt_store_result(self.stmt):
            self.fail("store_result")
        n = LIB.mysql_stmt_field_count(self.stmt)
        self.binds = (MYSQL_BIND * n)()
        self.buffers = [ctypes.create_string_buffer(4096) for _ in range(n)]
        self.lengths = [ulong() for _ in range(n)]
        self.nulls = [ctypes.c_char() for _ in range(n)]
        for i, b in enumerate(self.binds):
            b.buffer_type = MYSQL_TYPE_STRING
            b.buffer = ctypes.cast(self.buffers[i], vp)
            b.buffer_length = 4096
            b.length = ctypes.pointer(self.lengths[i])
            b.is_null = ctypes.pointer(self.nulls[i])
        if LIB.mysql_stmt_bind_result(self.stmt, self.binds) != b"\0":
            self.fail("bind_result")

    def fail(self, what):
        sys.exit("%s: %s" % (what, LIB.mysql_stmt_error(self.stmt).decode()))

    def fetch(self):
        """The next row, or None at the end."""
        rc = LIB.mysql_stmt_fetch(self.stmt)
        if rc == MYSQL_NO_DATA:
            return None
        if rc in (1, MYSQL_DATA_TRUNCATED):
            self.fail("fetch (rc %d)" % rc)
        return tuple(
            None if self.nulls[i].value == b"\x01" else self.buffers[i].raw[: self.lengths[i].value]
            for i in range(len(self.binds))
        )

    def close(self):
        LIB.mysql_stmt_close(self.stmt)
