"""MySQL's protocol features beyond MariaDB's, as MySQL's own clients use them, against
mysql8_server.py directly or through rttscope. Prints what the client saw, one line a fact,
so that a run through rttscope can be compared with a direct one.

Usage: mysql8_features.py HOST PORT USER:PASSWORD SCENARIO
Scenarios:
  libmysql-zstd LEVEL, libmysql-zlib   libmysqlclient (MySQL 9's C client, the one inside
                                       mysql-connector-python's wheel) with that compression
  libmysql-metadata                    optional result-set metadata, resultset_metadata=NONE
  libmysql-session-track               session state in OK packets (variables, schema, GTIDs)
  libmysql-reset                       COM_RESET_CONNECTION
  libmysql-change-user USER:PASSWORD [zlib|zstd]
                                       COM_CHANGE_USER (get-server-public-key on), the
                                       connection compressed if an algorithm is named
  mysqlclient-change-user tls|plain USER:PASSWORD...
                                       mysqlclient (MySQLdb on libmariadb) changes user to
                                       each account in turn, with TLS or without
  pymysql-rows                         PyMySQL: no CLIENT_DEPRECATE_EOF (EOF packets)
  pymysql-server-key                   PyMySQL without TLS: the public key it was given for
                                       full authentication (PEM, as received), and who it is
  connector-attributes TRACEPARENT     Connector/Python's cursor.add_attribute() (pure and C)
  connector-traced-loop TRACEPARENT    an N+1 loop over a pool of 4, each statement carrying
                                       the traceparent as a query attribute
"""

import ctypes
import sys

# mysql_option values from MySQL's include/mysql.h (8.0 to 9.x).
MYSQL_OPT_SSL_MODE = 35
MYSQL_OPT_GET_SERVER_PUBLIC_KEY = 36
MYSQL_OPT_OPTIONAL_RESULTSET_METADATA = 38
MYSQL_OPT_COMPRESSION_ALGORITHMS = 41
MYSQL_OPT_ZSTD_COMPRESSION_LEVEL = 42
SSL_MODE_DISABLED = 1
# enum_session_state_type
SESSION_TRACK_SYSTEM_VARIABLES, SESSION_TRACK_SCHEMA, SESSION_TRACK_STATE_CHANGE, SESSION_TRACK_GTIDS = 0, 1, 2, 3
ITEMS = "SELECT id, name FROM items"


class LibMysql:
    """MySQL's C client library through ctypes: the copy linked into mysql-connector-python's
    C extension exports the C API."""

    def __init__(self):
        import _mysql_connector  # pylint: disable=import-outside-toplevel

        lib = ctypes.CDLL(_mysql_connector.__file__)
        p, c, u = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint
        for name, restype, argtypes in [
            ("mysql_init", p, [p]),
            ("mysql_options", ctypes.c_int, [p, ctypes.c_int, p]),
            ("mysql_real_connect", p, [p, c, c, c, c, u, c, ctypes.c_ulong]),
            ("mysql_real_query", ctypes.c_int, [p, c, ctypes.c_ulong]),
            ("mysql_store_result", p, [p]),
            ("mysql_num_fields", u, [p]),
            ("mysql_fetch_fields", p, [p]),
            ("mysql_fetch_row", ctypes.POINTER(c), [p]),
            ("mysql_free_result", None, [p]),
            ("mysql_error", c, [p]),
            ("mysql_errno", u, [p]),
            ("mysql_close", None, [p]),
            ("mysql_reset_connection", ctypes.c_int, [p]),
            ("mysql_change_user", ctypes.c_bool, [p, c, c, c]),
            ("mysql_session_track_get_first", ctypes.c_int, [p, ctypes.c_int, ctypes.POINTER(c), ctypes.POINTER(ctypes.c_size_t)]),
            ("mysql_session_track_get_next", ctypes.c_int, [p, ctypes.c_int, ctypes.POINTER(c), ctypes.POINTER(ctypes.c_size_t)]),
            ("mysql_get_client_info", c, []),
        ]:
            f = getattr(lib, name)
            f.restype, f.argtypes = restype, argtypes
        self.lib = lib

    def connect(self, host, port, account, options=()):
        user, password = account.split(":", 1)
        mysql = self.lib.mysql_init(None)
        self.option(mysql, MYSQL_OPT_SSL_MODE, ctypes.c_uint(SSL_MODE_DISABLED))
        self.option(mysql, MYSQL_OPT_GET_SERVER_PUBLIC_KEY, ctypes.c_bool(True))
        for option, value in options:
            self.option(mysql, option, value)
        if not self.lib.mysql_real_connect(mysql, host.encode(), user.encode(), password.encode(), None, port, None, 0):
            raise SystemExit(f"connect failed: {self.error(mysql)}")
        return mysql

    def option(self, mysql, option, value):
        arg = value if isinstance(value, bytes) else ctypes.byref(value)
        if self.lib.mysql_options(mysql, option, arg) != 0:
            raise SystemExit(f"mysql_options {option} refused")

    def error(self, mysql):
        return f"{self.lib.mysql_errno(mysql)} {self.lib.mysql_error(mysql).decode()}"

    def query(self, mysql, sql):
        """Runs `sql`; returns (column names or None when no metadata came, rows) or None for
        a statement without a result set."""
        if self.lib.mysql_real_query(mysql, sql.encode(), len(sql.encode())) != 0:
            return f"error {self.error(mysql)}"
        res = self.lib.mysql_store_result(mysql)
        if not res:
            return None
        n = self.lib.mysql_num_fields(res)
        rows = []
        while True:
            row = self.lib.mysql_fetch_row(res)
            if not row:
                break
            rows.append(tuple(None if row[i] is None else row[i].decode() for i in range(n)))
        names = None if not self.lib.mysql_fetch_fields(res) else n
        self.lib.mysql_free_result(res)
        return names, rows

    def session_changes(self, mysql):
        """What the last OK's session state said, by type."""
        out = []
        for kind, label in [(SESSION_TRACK_SYSTEM_VARIABLES, "variables"), (SESSION_TRACK_SCHEMA, "schema"),
                            (SESSION_TRACK_STATE_CHANGE, "state"), (SESSION_TRACK_GTIDS, "gtids")]:
            data, length = ctypes.c_char_p(), ctypes.c_size_t()
            values = []
            found = self.lib.mysql_session_track_get_first(mysql, kind, ctypes.byref(data), ctypes.byref(length))
            while found == 0:
                values.append(ctypes.string_at(data, length.value).decode())
                found = self.lib.mysql_session_track_get_next(mysql, kind, ctypes.byref(data), ctypes.byref(length))
            if values:
                out.append(f"{label}={','.join(values)}")
        return " ".join(out) or "none"


def items_queries(run):
    """The result shapes every scenario reads: all rows, one row, an empty result."""
    yield f"items: {run(ITEMS)}"
    yield f"one: {run('SELECT id, name FROM items WHERE id = 7')}"
    yield f"none: {run('SELECT id, name FROM items WHERE id = 99')}"


def libmysql(host, port, account, scenario, args):
    lib = LibMysql()
    options = []
    if scenario == "libmysql-zstd":
        options = [(MYSQL_OPT_COMPRESSION_ALGORITHMS, b"zstd"), (MYSQL_OPT_ZSTD_COMPRESSION_LEVEL, ctypes.c_uint(int(args[0])))]
    elif scenario == "libmysql-zlib":
        options = [(MYSQL_OPT_COMPRESSION_ALGORITHMS, b"zlib")]
    elif scenario == "libmysql-metadata":
        options = [(MYSQL_OPT_OPTIONAL_RESULTSET_METADATA, ctypes.c_bool(True))]
    elif scenario == "libmysql-change-user" and len(args) > 1:
        options = [(MYSQL_OPT_COMPRESSION_ALGORITHMS, args[1].encode())]
    mysql = lib.connect(host, port, account, options)
    run = lambda sql: lib.query(mysql, sql)  # noqa: E731
    if scenario in ("libmysql-zstd", "libmysql-zlib"):
        yield from items_queries(run)
        yield f"who: {run('SELECT CURRENT_USER()')}"
    elif scenario == "libmysql-metadata":
        yield from items_queries(run)
        yield f"set: {run('SET SESSION resultset_metadata = NONE')}"
        yield from items_queries(run)
        yield f"set: {run('SET SESSION resultset_metadata = FULL')}"
        yield f"items again: {run(ITEMS)}"
    elif scenario == "libmysql-session-track":
        for sql in ["SET SESSION time_zone = '+01:00'", "USE shop", "INSERT INTO items VALUES (21, 'x')",
                    "SELECT id, name FROM items WHERE id = 3", "INSERT INTO items VALUES (22, 'y')"]:
            yield f"{sql}: {run(sql)} {lib.session_changes(mysql)}"
    elif scenario == "libmysql-reset":
        yield f"before: {run('SELECT CURRENT_USER()')}"
        yield f"reset: {lib.lib.mysql_reset_connection(mysql)}"
        yield f"after: {run('SELECT CURRENT_USER()')}"
    elif scenario == "libmysql-change-user":
        user, password = args[0].split(":", 1)
        changed = lib.lib.mysql_change_user(mysql, user.encode(), password.encode(), None)
        yield f"change: {'error ' + lib.error(mysql) if changed else 'ok'}"
        yield f"who: {run('SELECT CURRENT_USER()')}"
    lib.lib.mysql_close(mysql)


def pymysql_rows(host, port, account):
    import pymysql  # pylint: disable=import-outside-toplevel

    user, password = account.split(":", 1)
    conn = pymysql.connect(host=host, port=port, user=user, password=password, ssl_disabled=True)
    cur = conn.cursor()

    def run(sql):
        cur.execute(sql)
        return (len(cur.description) if cur.description else None), list(cur.fetchall())

    yield from items_queries(run)
    conn.close()


def mysqlclient_change_user(host, port, account, leg, accounts):
    """COM_CHANGE_USER by libmariadb (mysql_change_user), which MySQLdb exposes."""
    import MySQLdb  # pylint: disable=import-outside-toplevel

    user, password = account.split(":", 1)
    tls = {"ssl": {"cipher": "DEFAULT"}} if leg == "tls" else {}
    conn = MySQLdb.connect(host=host, port=port, user=user, password=password, connect_timeout=10, **tls)
    for to in accounts:
        user, password = to.split(":", 1)
        try:
            conn.change_user(user, password)
        except MySQLdb.Error as e:
            yield f"{user}: error {e.args[0]} {e.args[1]}"
            continue
        cur = conn.cursor()
        cur.execute("SELECT CURRENT_USER()")
        yield f"{user}: {cur.fetchall()[0][0]}"
    conn.close()


def pymysql_server_key(host, port, account):
    """The key a plain PyMySQL client was sent when it asked for the server's (PyMySQL keeps
    it on the connection), then who it logged in as."""
    import pymysql  # pylint: disable=import-outside-toplevel

    user, password = account.split(":", 1)
    conn = pymysql.connect(host=host, port=port, user=user, password=password, ssl_disabled=True)
    yield from (conn.server_public_key or b"no key").decode().splitlines()
    cur = conn.cursor()
    cur.execute("SELECT CURRENT_USER()")
    yield f"who: {cur.fetchall()[0][0]}"
    conn.close()


def connector(host, port, account, pure):
    import mysql.connector  # pylint: disable=import-outside-toplevel

    user, password = account.split(":", 1)
    return mysql.connector.connect(host=host, port=port, user=user, password=password, ssl_disabled=True,
                                   use_pure=pure)


def connector_attributes(host, port, account, traceparent):
    for pure in (True, False):
        conn = connector(host, port, account, pure)
        cur = conn.cursor()
        cur.add_attribute("traceparent", traceparent)
        cur.add_attribute("n", 7)
        cur.execute("SELECT mysql_query_attribute_string('traceparent')")
        yield f"{'pure' if pure else 'c'} traceparent: {cur.fetchall()}"
        cur.execute("SELECT mysql_query_attribute_string('n')")
        yield f"{'pure' if pure else 'c'} n: {cur.fetchall()}"
        conn.close()


def connector_traced_loop(host, port, account, traceparent):
    pool = [connector(host, port, account, True) for _ in range(4)]
    cursors = [conn.cursor() for conn in pool]
    for cur in cursors:
        cur.add_attribute("traceparent", traceparent)
    cursors[0].execute(ITEMS)
    ids = [row[0] for row in cursors[0].fetchall()]
    for i, item in enumerate(ids):
        cur = cursors[i % 4]
        cur.execute(f"SELECT name FROM items WHERE id = {item}")
        cur.fetchall()
    yield f"loop: {len(ids)} statements over {len(pool)} connections"
    for conn in pool:
        conn.close()


def main():
    host, port, account, scenario, *args = sys.argv[1:]
    port = int(port)
    if scenario.startswith("libmysql"):
        lines = libmysql(host, port, account, scenario, args)
    elif scenario == "pymysql-rows":
        lines = pymysql_rows(host, port, account)
    elif scenario == "mysqlclient-change-user":
        lines = mysqlclient_change_user(host, port, account, args[0], args[1:])
    elif scenario == "pymysql-server-key":
        lines = pymysql_server_key(host, port, account)
    elif scenario == "connector-attributes":
        lines = connector_attributes(host, port, account, args[0])
    elif scenario == "connector-traced-loop":
        lines = connector_traced_loop(host, port, account, args[0])
    else:
        raise SystemExit(f"unknown scenario {scenario}")
    for line in lines:
        print(line, flush=True)


if __name__ == "__main__":
    main()
