"""Undersized fetch batches through a real cursor driver: MariaDB Connector/C (libmariadb, via capi.py).

A READ_ONLY cursor with STMT_ATTR_PREFETCH_ROWS=N makes Connector/C send one
COM_STMT_FETCH asking for N rows each time its buffer runs dry: 20,000 rows at
N=10 are 2,000 round trips, the JDBC story of the background article.

Modes:
  setup  create and fill the table (20,000 rows of mixed types), once
  read   read the whole table through a cursor with --prefetch rows per fetch (or, with
         --no-cursor, without one) and print
         a digest of the rows and how many COM_STMT_FETCH the server counted
"""

import argparse
import hashlib

import capi as c

ROWS = 20_000
# No literals: the fingerprint is this text, lower-cased, which the test looks up.
SELECT = "SELECT id, name, amount, at, note FROM {table} ORDER BY id"


def setup(conn, args):
    for sql in [
        f"CREATE OR REPLACE TABLE {args.table} (id INT PRIMARY KEY, name VARCHAR(40), amount DECIMAL(12,2), "
        "at DATETIME(6), note TEXT NULL) CHARACTER SET utf8mb4",
        f"INSERT INTO {args.table} SELECT seq, CONCAT('name-', seq, SUBSTRING('äöü€😀', 1, seq % 6)), seq * 12.34, "
        "TIMESTAMP'2024-01-01 00:00:00' + INTERVAL seq * 37 SECOND + INTERVAL seq MICROSECOND, "
        f"IF(seq % 7 = 0, NULL, REPEAT('x', seq % 300)) FROM seq_1_to_{ROWS}",
    ]:
        result = conn.query(sql)
        if result and isinstance(result[0], str):
            raise SystemExit("%s: %s" % (sql, result[0]))
    print("setup rows=%s" % conn.value(f"SELECT COUNT(*) FROM {args.table}"))


def read(conn, args):
    fetches = lambda: int(conn.query("SHOW SESSION STATUS LIKE 'Com_stmt_fetch'")[0][0][1])
    before = fetches()
    cursor = c.CursorStmt(conn, SELECT.format(table=args.table), args.prefetch, cursor=not args.no_cursor)
    count, sha, ids = 0, hashlib.sha256(), set()
    while (row := cursor.fetch()) is not None:
        count += 1
        ids.add(int(row[0]))
        sha.update(repr(row).encode() + b"\n")
    # Closing sends COM_STMT_CLOSE: the cursor's end as rttscope sees it.
    cursor.close()
    # Complete means every id once, not merely the right count.
    complete = ids == set(range(1, ROWS + 1))
    print("rows=%d complete=%s sha256=%s" % (count, complete, sha.hexdigest()))
    print("COM_STMT_FETCH on this connection: %d" % (fetches() - before))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("mode", choices=["setup", "read"])
    p.add_argument("--host", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--user", required=True)
    p.add_argument("--password", required=True)
    p.add_argument("--db", required=True)
    p.add_argument("--table", default="drv_cursor_rows")
    p.add_argument("--prefetch", type=int, default=10)
    p.add_argument("--no-cursor", action="store_true", help="no cursor: mysql_stmt_store_result reads it all")
    args = p.parse_args()
    conn = c.Conn(args.host, args.port, args.user, args.password, args.db)
    # utf8mb4 both ways, so the emoji survive the INSERT ... SELECT literal and the read.
    conn.query("SET NAMES utf8mb4")
    {"setup": setup, "read": read}[args.mode](conn, args)
    conn.close()


if __name__ == "__main__":
    main()
