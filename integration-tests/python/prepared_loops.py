"""Loops over MariaDB Connector/Python's binary protocol, for tests/prepared.rs.

Connector/Python 1.1 runs a binary cursor's execute() as Connector/C's execute-direct: the
COM_STMT_PREPARE and a COM_STMT_EXECUTE naming "the statement just prepared" (id 0xFFFFFFFF)
go out together, then a COM_STMT_CLOSE of the statement before the next one.

Modes:
  setup    create pl_authors (300), pl_books (300, author_id = id) and pl_writes
  loop     an N+1 loop: 200 books, then one query per book for its author (binary cursors)
  inserts  200 single-row INSERTs of integers into pl_writes (a binary cursor)
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


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["setup", "loop", "inserts", "reuse"])
    for flag in ["--host", "--user", "--password", "--db"]:
        p.add_argument(flag)
    p.add_argument("--port", type=int)
    a = p.parse_args()
    conn = mariadb.connect(host=a.host, port=a.port, user=a.user, password=a.password, database=a.db)
    if a.mode == "setup":
        cur = conn.cursor()
        for sql in [
            "CREATE OR REPLACE TABLE pl_authors (id INT PRIMARY KEY, name VARCHAR(20))",
            "CREATE OR REPLACE TABLE pl_books (id INT PRIMARY KEY, author_id INT)",
            "CREATE OR REPLACE TABLE pl_writes (id INT PRIMARY KEY, qty INT)",
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
