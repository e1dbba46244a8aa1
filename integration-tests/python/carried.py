"""What rttscope no longer masks or loses, driven by MariaDB's own client libraries.

Prints a deterministic transcript (no connection ids, ports or timings), so a run
straight to the server and one through rttscope compare line by line.

Modes:
  bulk          Connector/Python cursor.executemany(): one COM_STMT_BULK_EXECUTE for all
                rows when the server offers MariaDB bulk operations. Prints the rows with
                their auto-increment ids, and how many COM_STMT_EXECUTE the server counted
                for the whole batch (1 for bulk; one a row if the connector fell back).
  procedure     Connector/Python: CALL of a procedure that loops over a cursor and SELECTs
                inside the loop (each result set the server sends while its cursor is open
                carries SERVER_STATUS_CURSOR_EXISTS); every result set printed.
  call-simple   Connector/Python: CALL (twice) of a procedure with two one-row SELECTs;
                Connector/Python sends a CALL with execute-direct (PREPARE and EXECUTE
                together).
  cursor-error  A prepared SELECT that fails only when its result is materialised, executed
                with a server-side READ_ONLY cursor, by Connector/C (ctypes, capi.py) and by
                Connector/Python: the error each gets, then the connection still answers.
"""

import argparse
import ctypes
import datetime
import decimal


def connector(args):
    import mariadb

    return mariadb.connect(host=args.host, port=args.port, user=args.user, password=args.password,
                           database=args.db, connect_timeout=30, read_timeout=120, write_timeout=120)


def status(cur, name):
    cur.execute("SHOW SESSION STATUS LIKE %r" % name)
    return int(cur.fetchone()[1])


def bulk(args):
    conn = connector(args)
    cur = conn.cursor()
    cur.execute("CREATE OR REPLACE TABLE %s (id INT AUTO_INCREMENT PRIMARY KEY, name VARCHAR(40), "
                "amount DECIMAL(10,2), at DATETIME(6) NULL, note TEXT NULL)" % args.table)
    rows = [("name-%d-%s" % (i, "äö😀"[: i % 4]), decimal.Decimal(i) / 4,
             None if i % 5 == 0 else datetime.datetime(2024, 1, 1) + datetime.timedelta(seconds=i, microseconds=i),
             None if i % 3 == 0 else "x" * (i % 50)) for i in range(1, 1001)]
    before = status(cur, "Com_stmt_execute")
    cur.executemany("INSERT INTO %s (name, amount, at, note) VALUES (?, ?, ?, ?)" % args.table, rows)
    executes = status(cur, "Com_stmt_execute") - before
    print("executemany rowcount=%d" % cur.rowcount)
    print("COM_STMT_EXECUTE for the batch: %d" % executes)
    cur.execute("SELECT id, name, amount, at, note FROM %s ORDER BY id" % args.table)
    stored = cur.fetchall()
    print("rows=%d ids=%d..%d" % (len(stored), stored[0][0], stored[-1][0]))
    for row in stored[:3] + stored[-3:]:
        print(repr(row))
    print("all rows as sent: %s" % ([tuple(r[1:]) for r in stored] == rows))
    conn.close()


def procedure(args):
    conn = connector(args)
    cur = conn.cursor()
    cur.execute("CREATE OR REPLACE TABLE %s (id INT PRIMARY KEY, name VARCHAR(40))" % args.table)
    cur.execute("INSERT INTO %s SELECT seq, CONCAT('name-', seq) FROM seq_1_to_25" % args.table)
    cur.execute(LOOP_PROCEDURE.format(table=args.table))
    for _ in range(2):
        cur.execute("CALL %s_loop()" % args.table)
        sets = 0
        while True:
            if cur.description:
                print("result %d: %r" % (sets, cur.fetchall()))
            sets += 1
            if not cur.nextset():
                break
        print("result sets: %d" % sets)
    cur.execute("SELECT 'after the CALLs'")
    print(cur.fetchall())
    conn.close()


LOOP_PROCEDURE = """
CREATE OR REPLACE PROCEDURE {table}_loop()
BEGIN
  DECLARE done INT DEFAULT 0;
  DECLARE v INT;
  DECLARE c CURSOR FOR SELECT id FROM {table} ORDER BY id;
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET done = 1;
  OPEN c;
  each_row: LOOP
    FETCH c INTO v;
    IF done THEN LEAVE each_row; END IF;
    SELECT v AS id, name, REPEAT('r', v * 10) AS filler FROM {table} WHERE id = v;
  END LOOP;
  CLOSE c;
  SELECT COUNT(*) AS total FROM {table};
END
"""


def call_simple(args):
    conn = connector(args)
    cur = conn.cursor()
    cur.execute("CREATE OR REPLACE PROCEDURE %s_two() BEGIN SELECT 1 AS one; SELECT 'two' AS two; END" % args.table)
    for _ in range(2):
        cur.execute("CALL %s_two()" % args.table)
        results = []
        while True:
            if cur.description:
                results.append(cur.fetchall())
            if not cur.nextset():
                break
        print("CALL: %r" % results)
    conn.close()


def cursor_error(args):
    import capi as c

    sql = "SELECT 1 < (SELECT a FROM %s)" % args.table
    conn = c.Conn(args.host, args.port, args.user, args.password, args.db)
    for setup in ["CREATE OR REPLACE TABLE %s (a INT)" % args.table, "INSERT INTO %s VALUES (1), (2)" % args.table]:
        result = conn.query(setup)
        if result and isinstance(result[0], str):
            raise SystemExit("%s: %s" % (setup, result[0]))
    for attempt in range(2):
        stmt = c.LIB.mysql_stmt_init(conn.mysql)
        kind = ctypes.c_ulong(c.CURSOR_TYPE_READ_ONLY)
        c.LIB.mysql_stmt_attr_set(stmt, c.STMT_ATTR_CURSOR_TYPE, ctypes.byref(kind))
        if c.LIB.mysql_stmt_prepare(stmt, sql.encode(), len(sql.encode())):
            raise SystemExit("prepare: %s" % c.LIB.mysql_stmt_error(stmt).decode())
        rc = c.LIB.mysql_stmt_execute(stmt)
        print("Connector/C cursor execute %d: rc=%d errno=%d %s" % (
            attempt, rc, c.LIB.mysql_stmt_errno(stmt), c.LIB.mysql_stmt_error(stmt).decode()))
        c.LIB.mysql_stmt_close(stmt)
        print("Connector/C then: %r" % conn.query("SELECT 'still usable', %d" % attempt))
    conn.close()

    import mariadb

    m = connector(args)
    for attempt in range(2):
        cur = m.cursor(cursor_type=mariadb.constants.CURSOR.READ_ONLY, prepared=True)
        try:
            cur.execute(sql)
            print("Connector/Python cursor %d: rows %r" % (attempt, cur.fetchall()))
        except mariadb.Error as e:
            print("Connector/Python cursor %d: errno=%s sqlstate=%s %s" % (attempt, e.errno, e.sqlstate, e.msg))
        cur.close()
        check = m.cursor()
        check.execute("SELECT 'still usable', ?", (attempt,))
        print("Connector/Python then: %r" % check.fetchall())
        check.close()
    m.close()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("mode", choices=["bulk", "procedure", "call-simple", "cursor-error"])
    p.add_argument("--host", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--user", required=True)
    p.add_argument("--password", required=True)
    p.add_argument("--db", required=True)
    p.add_argument("--table", required=True)
    args = p.parse_args()
    modes = {"bulk": bulk, "procedure": procedure, "call-simple": call_simple, "cursor-error": cursor_error}
    modes[args.mode](args)


if __name__ == "__main__":
    main()
