"""Loops over MariaDB Connector/Python's binary protocol, for tests/prepared.rs.

Connector/Python 1.1 runs a binary cursor's execute() as Connector/C's execute-direct: the
COM_STMT_PREPARE and a COM_STMT_EXECUTE naming "the statement just prepared" (id 0xFFFFFFFF)
go out together, then a COM_STMT_CLOSE of the statement before the next one.

Modes:
  setup    create pl_authors (300), pl_books (300, author_id = id) and pl_writes
  loop     an N+1 loop: 200 books, then one query per book for its author (binary cursors)
  inserts  200 single-row INSERTs of integers into pl_writes (a binary cursor)
  longdata 200 single-row INSERTs through Connector/C (ctypes), the document of each sent by
           mysql_stmt_send_long_data (COM_STMT_SEND_LONG_DATA) ahead of the execute that carries
           only its id
  reuse    a cursor(prepared=True): Connector/Python ignores the statement of every execute()
           after the first and runs the first one again (its documented behaviour); prints
           what the server ran, from its own counters
Each prints a line the test checks.
"""

import argparse

import mariadb

BOOKS = "SELECT id, author_id FROM pl_books WHERE id > ? ORDER BY id LIMIT 200"
AUTHOR = "SELECT name FROM pl_authors WHERE id = ?"


def status(conn, name):
    cur = conn.cursor()
    cur.execute("SHOW SESSION STATUS LIKE ?", (name,))
    return int(cur.fetchone()[1])


def long_data_inserts(a):
    """200 INSERTs whose document goes by COM_STMT_SEND_LONG_DATA; returns the rows written."""
    import ctypes

    import capi

    lib = capi.LIB
    conn = capi.Conn(a.host, a.port, a.user, a.password, a.db)
    conn.query("DELETE FROM pl_docs")
    stmt = lib.mysql_stmt_init(conn.mysql)
    sql = b"INSERT INTO pl_docs (doc, id) VALUES (?, ?)"
    if lib.mysql_stmt_prepare(stmt, sql, len(sql)):
        raise SystemExit("prepare: " + lib.mysql_stmt_error(stmt).decode())
    ident = ctypes.c_int(0)
    binds = (capi.MYSQL_BIND * 2)()
    binds[0].buffer_type = capi.MYSQL_TYPE_BLOB
    binds[1].buffer_type, binds[1].buffer = capi.MYSQL_TYPE_LONG, ctypes.cast(ctypes.byref(ident), ctypes.c_void_p)
    lib.mysql_stmt_bind_param(stmt, binds)
    for ident.value in range(200):
        doc = b"document %d " % ident.value * 20
        if lib.mysql_stmt_send_long_data(stmt, 0, doc, len(doc)) != b"\0":
            raise SystemExit("send_long_data: " + lib.mysql_stmt_error(stmt).decode())
        if lib.mysql_stmt_execute(stmt):
            raise SystemExit("execute: " + lib.mysql_stmt_error(stmt).decode())
    lib.mysql_stmt_close(stmt)
    rows = int(conn.value("SELECT COUNT(*) FROM pl_docs WHERE doc LIKE CONCAT('document ', id, ' %')"))
    conn.close()
    return rows


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["setup", "loop", "inserts", "longdata", "reuse"])
    for flag in ["--host", "--user", "--password", "--db"]:
        p.add_argument(flag)
    p.add_argument("--port", type=int)
    a = p.parse_args()
    if a.mode == "longdata":
        print("inserted=%d" % long_data_inserts(a))
        return
    conn = mariadb.connect(host=a.host, port=a.port, user=a.user, password=a.password, database=a.db)
    if a.mode == "setup":
        cur = conn.cursor()
        for sql in [
            "CREATE OR REPLACE TABLE pl_authors (id INT PRIMARY KEY, name VARCHAR(20))",
            "CREATE OR REPLACE TABLE pl_books (id INT PRIMARY KEY, author_id INT)",
            "CREATE OR REPLACE TABLE pl_writes (id INT PRIMARY KEY, qty INT)",
            "CREATE OR REPLACE TABLE pl_docs (doc BLOB, id INT PRIMARY KEY)",
            "INSERT INTO pl_authors SELECT seq, CONCAT('author', seq) FROM seq_1_to_300",
            "INSERT INTO pl_books SELECT seq, seq FROM seq_1_to_300",
        ]:
            cur.execute(sql)
        conn.commit()
        print("setup done")
    elif a.mode == "loop":
        books = conn.cursor(binary=True)
        books.execute(BOOKS, (0,))
        authors = conn.cursor(binary=True)
        names = []
        for _book, author in books.fetchall():
            authors.execute(AUTHOR, (author,))
            names.append(authors.fetchone()[0])
        print("names=%d distinct=%d" % (len(names), len(set(names))))
    elif a.mode == "inserts":
        cur = conn.cursor()
        cur.execute("DELETE FROM pl_writes")
        conn.commit()
        writes = conn.cursor(binary=True)
        for i in range(200):
            writes.execute("INSERT INTO pl_writes (id, qty) VALUES (?, ?)", (i, 1))
        conn.commit()
        print("inserted=200")
    elif a.mode == "reuse":
        selects = status(conn, "Com_select")
        cur = conn.cursor(prepared=True)
        cur.execute(BOOKS, (0,))
        rows = cur.fetchall()
        columns = set()
        for _book, author in rows:
            cur.execute(AUTHOR, (author,))
            columns.add(len(cur.fetchone()))
        print("rows=%d selects=%d columns=%s" % (len(rows), status(conn, "Com_select") - selects, sorted(columns)))
    conn.close()


main()
