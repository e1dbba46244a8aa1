"""The C library's advice run through the C API itself (libmariadb by ctypes, capi.py), for
tests/driver_advice.rs: the pattern, then the code the advice's C calls describe.

Modes (the tables come from driver_fixes.py setup):
  loop            an N+1 loop: the orders, then one execution of a prepared lookup per order
  loop-advised    one prepared statement with `IN (?, ?, ...)`, `mysql_stmt_bind_param` with one
                  bind per key
  inserts         one execution of a prepared INSERT per row, 40 rows, in one transaction
  inserts-advised the same rows bound as arrays (`STMT_ATTR_ARRAY_SIZE`): one execution
Each prints the line driver_fixes.py prints for the same mode, read back from the server.
"""

import argparse
import ctypes

import capi as c

STMT_ATTR_ARRAY_SIZE = 201  # enum enum_stmt_attr_type in <mariadb/mariadb_stmt.h>
INT = ctypes.c_int


class Stmt:
    """A prepared statement whose parameters are INT columns, each a list of one value per row."""

    def __init__(self, conn, sql):
        self.stmt = c.LIB.mysql_stmt_init(conn.mysql)
        if c.LIB.mysql_stmt_prepare(self.stmt, sql.encode(), len(sql.encode())):
            self.fail("prepare")

    def fail(self, what):
        raise SystemExit("%s: %s" % (what, c.LIB.mysql_stmt_error(self.stmt).decode()))

    def execute(self, columns, rows=1):
        """Binds each column (a list of `rows` ints) and executes once; rows > 1 binds arrays."""
        if rows > 1:
            size = ctypes.c_uint(rows)
            if c.LIB.mysql_stmt_attr_set(self.stmt, STMT_ATTR_ARRAY_SIZE, ctypes.byref(size)) != b"\0":
                self.fail("attr_set(STMT_ATTR_ARRAY_SIZE)")
        # Kept on self: the C library reads them at execute.
        self.arrays = [(INT * rows)(*values) for values in columns]
        self.binds = (c.MYSQL_BIND * len(columns))()
        for bind, array in zip(self.binds, self.arrays):
            bind.buffer_type, bind.buffer = c.MYSQL_TYPE_LONG, ctypes.cast(array, c.vp)
        if c.LIB.mysql_stmt_bind_param(self.stmt, self.binds) != b"\0":
            self.fail("bind_param")
        if c.LIB.mysql_stmt_execute(self.stmt):
            self.fail("execute")

    def strings(self):
        """The result's first column, every row, as text."""
        if c.LIB.mysql_stmt_store_result(self.stmt):
            self.fail("store_result")
        buf, length, null = ctypes.create_string_buffer(256), c.ulong(), ctypes.c_char()
        bind = (c.MYSQL_BIND * c.LIB.mysql_stmt_field_count(self.stmt))()
        bind[0].buffer_type, bind[0].buffer, bind[0].buffer_length = c.MYSQL_TYPE_STRING, ctypes.cast(buf, c.vp), 256
        bind[0].length, bind[0].is_null = ctypes.pointer(length), ctypes.pointer(null)
        if c.LIB.mysql_stmt_bind_result(self.stmt, bind) != b"\0":
            self.fail("bind_result")
        out = []
        while c.LIB.mysql_stmt_fetch(self.stmt) == 0:
            out.append(buf.raw[: length.value].decode())
        return out

    def close(self):
        c.LIB.mysql_stmt_close(self.stmt)


def loop(conn, advised):
    keys = [int(row[0]) for row in conn.query("SELECT customer FROM df_orders ORDER BY id")[0]]
    if advised:
        stmt = Stmt(conn, "SELECT name FROM df_customers WHERE id IN (%s)" % ", ".join(["?"] * len(keys)))
        stmt.execute([[key] for key in keys])
        names = stmt.strings()
    else:
        stmt = Stmt(conn, "SELECT name FROM df_customers WHERE id = ?")
        names = []
        for key in keys:
            stmt.execute([[key]])
            names.extend(stmt.strings())
    stmt.close()
    print("names=%d distinct=%d" % (len(names), len(set(names))))


def inserts(conn, advised):
    conn.query("DELETE FROM df_writes")
    conn.query("BEGIN")
    # The name is made from the id so that both columns are INTs to bind.
    stmt = Stmt(conn, "INSERT INTO df_writes (id, name) VALUES (?, CONCAT('w', ?))")
    ids = list(range(40))
    if advised:
        stmt.execute([ids, ids], rows=len(ids))
    else:
        for i in ids:
            stmt.execute([[i], [i]])
    stmt.close()
    conn.query("COMMIT")
    count, total, last = conn.query("SELECT COUNT(*), SUM(id), MAX(name) FROM df_writes")[0][0]
    print("inserted=%s sum=%s max=%s" % (count.decode(), total.decode(), last.decode()))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("mode", choices=["loop", "loop-advised", "inserts", "inserts-advised"])
    for flag in ["--host", "--user", "--password", "--db"]:
        p.add_argument(flag, required=True)
    p.add_argument("--port", type=int, required=True)
    a = p.parse_args()
    conn = c.Conn(a.host, a.port, a.user, a.password, a.db)
    if a.mode.startswith("loop"):
        loop(conn, a.mode == "loop-advised")
    else:
        inserts(conn, a.mode == "inserts-advised")
    conn.close()


main()
