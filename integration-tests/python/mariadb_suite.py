"""MariaDB Connector/Python (libmariadb underneath): the binary protocol and the commands it sends.

Prints a deterministic transcript; run straight to the server and through
rttscope, the two transcripts must be identical. Nothing printed depends on
the connection (no connection ids, ports or timings).

Covers: COM_STMT_PREPARE/EXECUTE/CLOSE with every column type as parameters
and as binary result rows (NULLs, extremes, a 17 MiB value that splits into
several packets both ways), executemany (COM_STMT_BULK_EXECUTE, carried
through rttscope as straight to the server), stored
procedures with OUT parameters (several binary result sets), COM_CHANGE_USER,
COM_RESET_CONNECTION, COM_PING, COM_DEBUG, KILL of another connection, and errors.
"""

import argparse
import datetime
import decimal
import hashlib
import sys

import mariadb

BIG = 17 * 1024 * 1024 + 3  # over 0xFFFFFF: one packet is not enough

COLUMNS = """
  id INT PRIMARY KEY,
  t TINYINT, tu TINYINT UNSIGNED, s SMALLINT, su SMALLINT UNSIGNED,
  m MEDIUMINT, mu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED, b BIGINT, bu BIGINT UNSIGNED,
  de DECIMAL(30,10), f FLOAT, d DOUBLE, bits BIT(12), bo BOOLEAN,
  dt DATE, tm TIME(6), dtm DATETIME(6), ts TIMESTAMP(6) NULL, y YEAR,
  c CHAR(10), vc VARCHAR(100), bn BINARY(8), vb VARBINARY(100),
  tt TINYTEXT, tx TEXT, mt MEDIUMTEXT, lt LONGTEXT, tb TINYBLOB, bl BLOB, mb MEDIUMBLOB, lb LONGBLOB,
  e ENUM('red','green','blue'), st SET('a','b','c'), j JSON, g GEOMETRY, ip INET6, u UUID
"""

D = decimal.Decimal
ROWS = [
    (1, -128, 0, -32768, 0, -8388608, 0, -2147483648, 0, -(2**63), 0,
     D("-99999999999999999999.9999999999"), -3.4e38, -1.7976931348623157e308, 0, False,
     datetime.date(1000, 1, 1), -datetime.timedelta(hours=838, minutes=59, seconds=59),
     datetime.datetime(1000, 1, 1, 0, 0, 0, 0), datetime.datetime(1970, 1, 2, 0, 0, 0, 1), 1901,
     "", "", b"\0" * 8, b"", "", "", "", "", b"", b"", b"", b"",
     "red", "", "{}", "POINT(0 0)", "::", "00000000-0000-0000-0000-000000000000"),
    (2, 127, 255, 32767, 65535, 8388607, 16777215, 2147483647, 4294967295, 2**63 - 1, 2**64 - 1,
     D("99999999999999999999.9999999999"), 3.4e38, 1.7976931348623157e308, 4095, True,
     datetime.date(9999, 12, 31), datetime.timedelta(hours=838, minutes=59, seconds=59),
     datetime.datetime(9999, 12, 31, 23, 59, 59, 999999), datetime.datetime(2038, 1, 19, 3, 14, 7, 999999), 2155,
     "ten chars!", "ünïcødé 😀 " * 8, b"\xff" * 8, bytes(range(100)), "t" * 255, "x" * 65535,
     "m" * 70000, "l" * 100000, b"\x00\xff" * 127, b"\x01" * 65535, b"\x02" * 70000, b"\x03" * 100000,
     "blue", "a,b,c", '{"k": [1, 2.5, "s", null, true], "emoji": "😀"}',
     "POLYGON((0 0,10 0,10 10,0 10,0 0))", "2001:db8::ff00:42:8329", "123e4567-e89b-12d3-a456-426614174000"),
    (3,) + (None,) * 38,
    (4, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, D("1.5"), 0.25, 1e-300, 5, True,
     datetime.date(2024, 2, 29), datetime.timedelta(seconds=1, microseconds=500),
     datetime.datetime(2024, 2, 29, 12, 30, 45, 123456), datetime.datetime(2024, 2, 29, 12, 30, 45, 123456), 2024,
     "abc", "line\nbreak\ttab'quote\"dq\\bs", b"12345678", b"\0\r\n\x1a", "tiny", "text", "medium", "long",
     b"t", b"b", b"m", b"l", "green", "b", "[1,2,3]", "LINESTRING(0 0,1 1,2 2)", "::ffff:10.0.0.1", None),
]


def show(value):
    """repr, with long values shortened to length + sha256 so the transcript stays readable."""
    if isinstance(value, (bytes, str)) and len(value) > 64:
        raw = value if isinstance(value, bytes) else value.encode()
        return "<%s len=%d sha256=%s>" % (type(value).__name__, len(value), hashlib.sha256(raw).hexdigest()[:16])
    return repr(value)


def row_text(row):
    return "(" + ", ".join(show(v) for v in row) + ")"


def error_text(e):
    return "%s errno=%s sqlstate=%s msg=%s" % (type(e).__name__, e.errno, e.sqlstate, e.msg)


def connect(args, user=None, password=None, **kw):
    return mariadb.connect(host=args.host, port=args.port, user=user or args.user,
                           password=password or args.password, database=args.db, **kw)


def types(conn):
    cur = conn.cursor()
    cur.execute(f"CREATE OR REPLACE TABLE ps_types ({COLUMNS})")
    marks = ", ".join("ST_GeomFromText(?)" if i == 36 else "?" for i in range(len(ROWS[0])))
    for row in ROWS:
        cur.execute(f"INSERT INTO ps_types VALUES ({marks})", row)
        print("insert id=%s rowcount=%d warnings=%d" % (row[0], cur.rowcount, cur.warnings))
    cur.execute("INSERT INTO ps_types (id, lb) VALUES (?, ?)", (5, bytes(range(256)) * (BIG // 256) + b"end"))
    print("insert big rowcount=%d" % cur.rowcount)
    conn.commit()
    select = "SELECT *, ST_AsText(g) AS g_text FROM ps_types WHERE id > ? ORDER BY id"
    cur.execute(select, (0,))  # parameters: the binary protocol
    print("binary description:", [(d[0], d[1]) for d in cur.description])
    for row in cur.fetchall():
        print("binary row", row_text(row))
    text = conn.cursor()
    text.execute(select.replace("?", "0"))  # no parameters: COM_QUERY, the text protocol
    for row in text.fetchall():
        print("text row", row_text(row))
    # Parameter types round-trip: the server echoes what it was sent.
    cur.execute("SELECT ?, ?, ?, ?, ?, ?, ?, ?", (None, -1, 2**64 - 1, 1.5, D("-0.001"), "ü", b"\0\1",
                                                   datetime.datetime(2001, 2, 3, 4, 5, 6, 7)))
    print("echo", row_text(cur.fetchone()))


def bulk(conn):
    cur = conn.cursor()
    cur.execute("CREATE OR REPLACE TABLE ps_bulk (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(20), n DOUBLE)")
    cur.executemany("INSERT INTO ps_bulk (v, n) VALUES (?, ?)", [("v%d" % i, i / 4) for i in range(500)])
    print("executemany rowcount=%d" % cur.rowcount)
    cur.executemany("UPDATE ps_bulk SET n = n * ? WHERE id = ?", [(2, i) for i in range(1, 500, 7)])
    print("executemany update rowcount=%d" % cur.rowcount)
    cur.execute("SELECT COUNT(*), SUM(n), GROUP_CONCAT(v ORDER BY id SEPARATOR '') FROM ps_bulk")
    print("bulk result", row_text(cur.fetchone()))
    conn.commit()


def procedures(conn):
    cur = conn.cursor()
    cur.execute(
        "CREATE OR REPLACE PROCEDURE ps_proc(IN a INT, OUT b INT, INOUT c VARCHAR(20)) BEGIN "
        "SELECT a AS x, 'first' AS y; SELECT a * 2 AS z UNION SELECT a * 3; "
        "SET b = a + 1; SET c = CONCAT(c, '!'); END"
    )
    cur.callproc("ps_proc", (5, 0, "hi"))
    n = 0
    while True:
        n += 1
        rows = cur.fetchall() if cur.description else []
        print("callproc result %d outparams=%s rows=%s" % (n, cur.sp_outparams, [row_text(r) for r in rows]))
        if not cur.nextset():
            break


def commands(args, conn):
    cur = conn.cursor()
    conn.ping()  # COM_PING
    print("ping ok")
    cur.execute("SET @session_var = 42")
    conn.reset()  # COM_RESET_CONNECTION: session variables are gone
    cur.execute("SELECT @session_var, DATABASE()")
    print("after reset", row_text(cur.fetchone()))
    conn.change_user(args.other_user, args.other_password, args.db)  # COM_CHANGE_USER
    cur.execute("SELECT SUBSTRING_INDEX(CURRENT_USER(), '@', 1)")
    print("changed user to", row_text(cur.fetchone()))
    try:
        conn.change_user(args.other_user, "wrong-password", args.db)
    except mariadb.Error as e:
        print("change_user with a wrong password:", error_text(e))
    admin = connect(args, args.admin_user, args.admin_password)
    admin.dump_debug_info()  # COM_DEBUG: the server writes its state to its error log
    print("dump_debug_info ok")
    victim = connect(args)
    admin.kill(victim.connection_id)  # a KILL query (not COM_PROCESS_KILL)
    print("killed a connection")
    try:
        victim.cursor().execute("SELECT 1")
        print("victim still alive?!")
    except mariadb.Error as e:
        print("victim:", type(e).__name__)
    admin.close()


def errors(conn):
    cur = conn.cursor()
    for sql, params in [
        ("SELECT * FROM no_such_table WHERE id = ?", (1,)),
        ("SELEKT ?", (1,)),
        ("INSERT INTO ps_types (id) VALUES (?)", (1,)),
        ("SELECT CAST(? AS UNSIGNED) + 18446744073709551615", (1,)),
    ]:
        try:
            cur.execute(sql, params)
            print("no error?!", row_text(cur.fetchone()))
        except mariadb.Error as e:
            print("error:", error_text(e))
    cur.execute("SELECT ?", (7,))  # the connection is still usable
    print("after errors", row_text(cur.fetchone()))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name in ["host", "user", "password", "db", "other-user", "other-password", "admin-user", "admin-password"]:
        p.add_argument("--" + name, required=True)
    p.add_argument("--port", type=int, required=True)
    args = p.parse_args()
    conn = connect(args)
    for part in [types, bulk, procedures, errors]:
        print("## " + part.__name__)
        part(conn)
    print("## commands")
    commands(args, conn)
    conn.close()
    print("done")


if __name__ == "__main__":
    sys.exit(main())
