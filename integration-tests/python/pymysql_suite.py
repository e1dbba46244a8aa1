"""PyMySQL (pure Python, text protocol): a workload whose transcript must not change through rttscope.

Nothing printed depends on the connection (no ids, ports or timings).

Covers: COM_QUERY with every kind of result (rows, OK, warnings, errors),
multi-statements (CLIENT_MULTI_STATEMENTS: several results in one
response, and an error part-way), a stored procedure with several result sets
(callproc + nextset), COM_INIT_DB (select_db), COM_PING, KILL of another
connection, LOAD DATA LOCAL INFILE (the client uploads a file mid-command),
an unbuffered (SSCursor) read of a large result, utf8mb4 and emoji, and a
query larger than one packet. Packets of exactly 0xFFFFFF bytes (followed by
an empty one) both ways. And command bytes PyMySQL has no API for, sent with
its own packet code: COM_PROCESS_KILL, COM_SET_OPTION, COM_STATISTICS, the
obsolete ones (COM_TIME, COM_SLEEP, ...) and an unknown one, each answered
with one packet, after which the connection must still work.
"""

import argparse
import hashlib
import os
import struct
import sys
import tempfile

import pymysql
from pymysql.constants import CLIENT


def connect(args, **kw):
    return pymysql.connect(host=args.host, port=args.port, user=args.user, password=args.password,
                           database=args.db, charset="utf8mb4", max_allowed_packet=64 << 20, **kw)


def show(value):
    if isinstance(value, (bytes, str)) and len(value) > 64:
        raw = value if isinstance(value, bytes) else value.encode()
        return "<%s len=%d sha256=%s>" % (type(value).__name__, len(value), hashlib.sha256(raw).hexdigest()[:16])
    return repr(value)


def rows_text(rows):
    return "[" + ", ".join("(" + ", ".join(show(v) for v in r) + ")" for r in rows) + "]"


def error_text(e):
    return "%s %r" % (type(e).__name__, e.args)


def results(cur):
    """Every result of the last statement, as text."""
    out = []
    while True:
        desc = [d[0] for d in cur.description] if cur.description else None
        out.append("cols=%s rows=%s rowcount=%d" % (desc, rows_text(cur.fetchall()), cur.rowcount))
        if not cur.nextset():
            return out


def queries(conn, args):
    cur = conn.cursor()
    cur.execute("CREATE OR REPLACE TABLE py_t (id INT AUTO_INCREMENT PRIMARY KEY, "
                "name VARCHAR(50) CHARACTER SET utf8mb4, price DECIMAL(10,2), at DATETIME(3), raw BLOB)")
    n = cur.executemany("INSERT INTO py_t (name, price, at, raw) VALUES (%s, %s, %s, %s)",
                        [("row %d ✓ 😀" % i, i * 1.5, "2024-05-06 07:08:09.%03d" % i, bytes([i % 256]) * i)
                         for i in range(200)])
    print("executemany affected", n, "lastrowid", cur.lastrowid)
    cur.execute("SELECT * FROM py_t ORDER BY id")
    print("select", [d[:2] for d in cur.description], rows_text(cur.fetchall()))
    cur.execute("SELECT 'ü😀€', CHAR_LENGTH('😀'), HEX('😀'), _binary'\\0\\xff', NULL, 1e300, -0.0, "
                "CAST('2024-02-29' AS DATE), TIMEDIFF('10:00:00', '12:30:00.5')")
    print("literals", rows_text(cur.fetchall()))
    cur.execute("INSERT IGNORE INTO py_t (name) VALUES ('this name is far too long for fifty characters, so it warns')")
    print("warnings", conn.show_warnings())
    cur.execute("UPDATE py_t SET price = price + 1 WHERE id <= 10")
    print("update rowcount", cur.rowcount)
    cur.execute("SELECT %s AS big", ("x" * (17 * 1024 * 1024),))  # one query packet is not enough
    print("big query echo", rows_text(cur.fetchall()))
    conn.commit()


def exact_packets(conn):
    cur = conn.cursor()
    # COM_QUERY payload = command byte + SQL = exactly 0xFFFFFF: an empty packet must follow.
    head, tail = "SELECT LENGTH('", "') AS exact_query"
    cur.execute(head + "q" * (0xFFFFFF - 1 - len(head) - len(tail)) + tail)
    print("exact query", rows_text(cur.fetchall()))
    # A text row of one 16777211-byte value: 4-byte length prefix + value = exactly 0xFFFFFF.
    for n in [16777211 - 1, 16777211, 16777211 + 1]:
        cur.execute("SELECT REPEAT('r', %d) AS exact_row" % n)
        print("row of", n, rows_text(cur.fetchall()))


def raw_commands(conn, args):
    cur = conn.cursor()
    victim = connect(args)
    for name, command, arg in [
        ("COM_PROCESS_KILL", 0x0C, struct.pack("<I", victim.thread_id())),
        ("COM_SET_OPTION off", 0x1B, struct.pack("<H", 1)),
        ("COM_SET_OPTION on", 0x1B, struct.pack("<H", 0)),
        ("COM_STATISTICS", 0x09, b""),
        ("COM_TIME", 0x0F, b""),
        ("COM_SLEEP", 0x00, b""),
        ("COM_CONNECT", 0x0B, b""),
        ("COM_DELAYED_INSERT", 0x10, b""),
        ("COM_TABLE_DUMP", 0x13, b"\x01d\x01t"),
        ("COM_CONNECT_OUT", 0x14, b""),
        ("COM_DAEMON", 0x1D, b""),
        ("unknown 0x40", 0x40, b"payload"),
    ]:
        conn._execute_command(command, arg)
        try:
            data = conn._read_packet().get_all_data()
            answer = "Uptime..." if data.startswith(b"Uptime:") else data.hex()
            print(name, "answer", answer)
        except pymysql.MySQLError as e:
            print(name, "error", error_text(e))
        cur.execute("SELECT 'alive after %s'" % name)
        print(rows_text(cur.fetchall()))
    try:
        victim.ping(reconnect=False)
        print("victim still alive?!")
    except pymysql.MySQLError as e:
        print("victim", type(e).__name__)


def multi_statements(conn):
    cur = conn.cursor()
    cur.execute("SELECT 1 AS a; SELECT 'two' AS b, 2 AS c; UPDATE py_t SET price = 0 WHERE id = 1; "
                "SELECT COUNT(*) FROM py_t; DO 1")
    for line in results(cur):
        print("multi", line)
    try:
        cur.execute("SELECT 'before'; SELECT * FROM no_such_table; SELECT 'never'")
        print("multi-error first", results(cur))
    except pymysql.MySQLError as e:
        print("multi-error", error_text(e))
    cur.execute("SELECT 'still usable'")
    print("after multi-error", rows_text(cur.fetchall()))


def procedure(conn):
    cur = conn.cursor()
    cur.execute("DROP PROCEDURE IF EXISTS py_proc")
    cur.execute("CREATE PROCEDURE py_proc(IN n INT) BEGIN "
                "SELECT n AS first_set; SELECT id, name FROM py_t WHERE id <= n ORDER BY id; "
                "UPDATE py_t SET price = price WHERE id = 1; SELECT 'last' AS third_set; END")
    cur.callproc("py_proc", (3,))
    for line in results(cur):
        print("callproc", line)


def commands(conn, args):
    cur = conn.cursor()
    conn.select_db("information_schema")  # COM_INIT_DB
    cur.execute("SELECT DATABASE()")
    print("after select_db", cur.fetchall())
    try:
        conn.select_db("no_such_database")
    except pymysql.MySQLError as e:
        print("select_db error", error_text(e))
    conn.select_db(args.db)
    conn.ping(reconnect=False)  # COM_PING
    print("ping ok")
    victim = connect(args)
    conn.kill(victim.thread_id())  # KILL <id> as a query
    try:
        victim.cursor().execute("SELECT 1")
        print("victim still alive?!")
    except pymysql.MySQLError as e:
        print("victim", type(e).__name__)


def local_infile(args):
    conn = connect(args, local_infile=True, client_flag=CLIENT.MULTI_STATEMENTS)
    cur = conn.cursor()
    cur.execute("CREATE OR REPLACE TABLE py_load (id INT, word VARCHAR(40), note TEXT)")
    with tempfile.NamedTemporaryFile("w", suffix=".tsv", delete=False, encoding="utf-8") as f:
        for i in range(30000):  # larger than one packet of upload
            f.write("%d\twörd-%d\t%s\n" % (i, i, "n" * (i % 100)))
        path = f.name
    try:
        cur.execute("LOAD DATA LOCAL INFILE %s INTO TABLE py_load", (path,))
        print("load data rowcount", cur.rowcount)
        cur.execute("SELECT COUNT(*), SUM(id), MD5(GROUP_CONCAT(word, note ORDER BY id)) FROM py_load")
        print("loaded", cur.fetchall())
        try:
            cur.execute("LOAD DATA LOCAL INFILE %s INTO TABLE py_load", (path + ".missing",))
        except (pymysql.MySQLError, OSError) as e:
            print("missing file", type(e).__name__)
        cur = conn.cursor()  # the connection survives the failed upload
        cur.execute("SELECT 'after missing file'")
        print(cur.fetchall())
    finally:
        os.unlink(path)
    conn.commit()
    conn.close()


def unbuffered(args):
    conn = connect(args, cursorclass=pymysql.cursors.SSCursor)
    cur = conn.cursor()
    cur.execute("SELECT seq, REPEAT(CHAR(65 + seq % 26), seq % 500) FROM seq_1_to_50000")
    digest, count = hashlib.sha256(), 0
    for row in cur:
        digest.update(repr(row).encode())
        count += 1
    print("unbuffered rows", count, digest.hexdigest())
    conn.close()


def errors(conn):
    cur = conn.cursor()
    for sql in ["SELEC 1", "SELECT * FROM no_such_table", "SELECT 1 FROM DUAL WHERE no_such_column = 1",
                "INSERT INTO py_t (id) VALUES (1)", "SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'custom ü 😀'"]:
        try:
            cur.execute(sql)
            print("no error?!", sql)
        except pymysql.MySQLError as e:
            print("error", error_text(e))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name in ["host", "user", "password", "db"]:
        p.add_argument("--" + name, required=True)
    p.add_argument("--port", type=int, required=True)
    args = p.parse_args()
    conn = connect(args, client_flag=CLIENT.MULTI_STATEMENTS)
    for part in [queries, exact_packets, multi_statements, procedure, errors, commands, raw_commands]:
        print("## " + part.__name__)
        part(conn, args) if part in (queries, commands, raw_commands) else part(conn)
    conn.close()
    for part in [local_infile, unbuffered]:
        print("## " + part.__name__)
        part(args)
    print("done")


if __name__ == "__main__":
    sys.exit(main())
