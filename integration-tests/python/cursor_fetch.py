"""Server-side cursors: COM_STMT_EXECUTE with a cursor flag, then COM_STMT_FETCH.

Prints a digest of everything read (row counts, sha256 of the rows' repr, and
how many COM_STMT_FETCH the server saw on this connection), so that a run
straight to the server and one through rttscope can be compared line by line.

Modes:
  setup      create and fill the table (10,000 rows), once, before the reads
  capi       libmariadb (Connector/C) through ctypes: a READ_ONLY cursor with
             STMT_ATTR_PREFETCH_ROWS=--prefetch, so each COM_STMT_FETCH asks
             for that many rows; two cursors open at once with their fetches
             interleaved, a text query between fetches, and an empty cursor
  read       one such cursor over the first --rows rows, and nothing else (the
             what-if benchmark's cursor workload)
  connector  MariaDB Connector/Python's cursor(cursor_type=READ_ONLY,
             prefetch_size=N). Connector/Python 1.1 stores prefetch_size but
             never hands it to Connector/C, so unbuffered it fetches one row
             per COM_STMT_FETCH and buffered one COM_STMT_FETCH for all rows.
"""

import argparse
import datetime
import decimal
import hashlib
import sys

ROWS = 10_000


def rows():
    """The table's content: deterministic, with NULLs, multi-byte text and binary."""
    for i in range(1, ROWS + 1):
        yield (
            i,
            "name-%05d-%s" % (i, "äöü€😀"[: i % 6]),
            decimal.Decimal(i * 1234) / 100,
            datetime.datetime(2024, 1, 1) + datetime.timedelta(seconds=i * 37, microseconds=i),
            hashlib.sha256(str(i).encode()).digest()[: i % 33],
            None if i % 7 == 0 else "x" * (i % 300),
        )


def setup(args):
    import mariadb

    conn = mariadb.connect(**connect_args(args))
    cur = conn.cursor()
    cur.execute(
        f"CREATE OR REPLACE TABLE {args.table} (id INT PRIMARY KEY, name VARCHAR(40), "
        "amount DECIMAL(12,2), at DATETIME(6), bin VARBINARY(64), note TEXT NULL)"
    )
    cur.executemany(f"INSERT INTO {args.table} VALUES (?, ?, ?, ?, ?, ?)", list(rows()))
    conn.commit()
    cur.execute(f"SELECT COUNT(*) FROM {args.table}")
    print("setup rows=%d" % cur.fetchone()[0])
    conn.close()


def connect_args(args):
    return dict(host=args.host, port=args.port, user=args.user, password=args.password, database=args.db)


class Digest:
    def __init__(self):
        self.count = 0
        self.sha = hashlib.sha256()

    def add(self, row):
        self.count += 1
        self.sha.update(repr(row).encode() + b"\n")

    def __str__(self):
        return "rows=%d sha256=%s" % (self.count, self.sha.hexdigest())


def capi(args):
    import capi as c

    conn = c.Conn(args.host, args.port, args.user, args.password, args.db)
    fetches = lambda: int(conn.query("SHOW SESSION STATUS LIKE 'Com_stmt_fetch'")[0][0][1])
    before = fetches()

    # One cursor read to the end, with an unrelated text query every 1,000 rows:
    # the cursor stays open on the server between COM_STMT_FETCHes.
    digest, side = Digest(), Digest()
    cursor = c.CursorStmt(conn, f"SELECT * FROM {args.table} ORDER BY id", args.prefetch)
    while (row := cursor.fetch()) is not None:
        digest.add(row)
        if digest.count % 1000 == 0:
            side.add(conn.query("SELECT 'between fetches', 1"))
    cursor.close()
    print("single cursor: %s; queries between fetches: %s" % (digest, side))

    # Two cursors open at once, fetched in turn: the answers to the two
    # statements' COM_STMT_FETCHes interleave on one connection.
    a = c.CursorStmt(conn, f"SELECT id, name FROM {args.table} WHERE id % 2 = 0 ORDER BY id", args.prefetch)
    b = c.CursorStmt(conn, f"SELECT id, amount, at FROM {args.table} ORDER BY id DESC", args.prefetch)
    da, db_ = Digest(), Digest()
    live = {"a": a, "b": b}
    while live:
        for key in list(live):
            row = live[key].fetch()
            if row is None:
                live.pop(key).close()
            else:
                (da if key == "a" else db_).add(row)
    print("interleaved cursors: a %s; b %s" % (da, db_))

    empty = c.CursorStmt(conn, f"SELECT * FROM {args.table} WHERE id < 0", args.prefetch)
    print("empty cursor: first fetch %r" % (empty.fetch(),))
    empty.close()

    print("COM_STMT_FETCH on this connection: %d" % (fetches() - before))
    conn.close()


def read(args):
    """One cursor read to the end and nothing else: the what-if benchmark's workload."""
    import capi as c

    conn = c.Conn(args.host, args.port, args.user, args.password, args.db)
    digest = Digest()
    cursor = c.CursorStmt(conn, f"SELECT id, name FROM {args.table} WHERE id <= {args.rows} ORDER BY id", args.prefetch)
    while (row := cursor.fetch()) is not None:
        digest.add(row)
    cursor.close()
    print("cursor read: %s" % digest)
    conn.close()


def connector(args):
    import mariadb

    conn = mariadb.connect(**connect_args(args))
    status = conn.cursor()
    status.execute("SHOW SESSION STATUS LIKE 'Com_stmt_fetch'")
    before = int(status.fetchone()[1])
    cur = conn.cursor(
        cursor_type=mariadb.constants.CURSOR.READ_ONLY, prefetch_size=args.prefetch, buffered=args.buffered
    )
    cur.execute(f"SELECT * FROM {args.table} WHERE id > ? ORDER BY id", (0,))
    digest, last = Digest(), None
    while (row := cur.fetchone()) is not None:
        # Connector/Python 1.1 hides a failed COM_STMT_FETCH by returning the previous row
        # again; ids are unique, so a repeat can only be that.
        if row == last:
            sys.exit("a COM_STMT_FETCH failed after %d rows (Connector/Python repeated the last row)" % digest.count)
        digest.add(row)
        last = row
    cur.close()
    status.execute("SHOW SESSION STATUS LIKE 'Com_stmt_fetch'")
    print("connector cursor (buffered=%s): %s" % (args.buffered, digest))
    print("COM_STMT_FETCH on this connection: %d" % (int(status.fetchone()[1]) - before))
    conn.close()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("mode", choices=["setup", "capi", "read", "connector"])
    p.add_argument("--host", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--user", required=True)
    p.add_argument("--password", required=True)
    p.add_argument("--db", required=True)
    p.add_argument("--table", default="cursor_rows")
    p.add_argument("--prefetch", type=int, default=100)
    p.add_argument("--buffered", action="store_true")
    p.add_argument("--rows", type=int, default=ROWS)
    args = p.parse_args()
    {"setup": setup, "capi": capi, "read": read, "connector": connector}[args.mode](args)


if __name__ == "__main__":
    main()
