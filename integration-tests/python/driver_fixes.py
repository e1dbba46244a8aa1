"""Patterns whose fix depends on the driver, run by a real driver, for rttscope to name it, and
the fix each driver is advised, run by that driver, for rttscope to find nothing.

Drivers (--driver): pymysql; connector, MariaDB Connector/Python over libmariadb; mysqlclient
(MySQLdb) over libmariadb; oracle, Oracle's MySQL Connector/Python in pure Python (use_pure),
and oracle-c, the same over its C extension.

Modes:
  setup            create df_orders and df_customers (50 each) and df_writes
  loop             an N+1 loop: the orders, then one query per order for its customer
  loop-advised     the orders, then their customers in one query with an IN list of the keys
  inserts          40 single-row INSERTs into df_writes, one after another
  inserts-advised  the same 40 rows by `cursor.executemany(sql, rows)`
  inserts-multirow the same 40 rows as one `INSERT ... VALUES (?, ?), (?, ?), ...`
  churn            40 queries, each on a connection of its own
  chatty           60 requests on one connection, each setting autocommit and time_zone again
  chatty-advised   the same requests, the settings made once in connect() (PyMySQL and
                   mysqlclient: autocommit= and init_command=)
  churn-advised    the same 40 queries on one connection kept open
Each prints a line the test checks for the rows it read or wrote, read back from the server.
"""

import argparse

ORDERS = "SELECT id, customer FROM df_orders ORDER BY id"
ROWS = [(i, "w%d" % i) for i in range(40)]


TIME_ZONE = "SET time_zone = '+00:00'"


def connect(a, **settings):
    if a.driver == "pymysql":
        import pymysql

        return pymysql.connect(host=a.host, port=a.port, user=a.user, password=a.password, database=a.db, **settings)
    if a.driver.startswith("oracle"):
        import mysql.connector

        pure = a.driver == "oracle"
        return mysql.connector.connect(
            host=a.host, port=a.port, user=a.user, password=a.password, database=a.db, use_pure=pure
        )
    if a.driver == "mysqlclient":
        import MySQLdb

        return MySQLdb.connect(host=a.host, port=a.port, user=a.user, password=a.password, database=a.db, **settings)
    import mariadb

    return mariadb.connect(host=a.host, port=a.port, user=a.user, password=a.password, database=a.db)


def setup(conn):
    cur = conn.cursor()
    for sql in [
        "CREATE OR REPLACE TABLE df_customers (id INT PRIMARY KEY, name VARCHAR(20))",
        "CREATE OR REPLACE TABLE df_orders (id INT PRIMARY KEY, customer INT)",
        "CREATE OR REPLACE TABLE df_writes (id INT PRIMARY KEY, name VARCHAR(20))",
        "INSERT INTO df_customers SELECT seq, CONCAT('c', seq) FROM seq_1_to_50",
        "INSERT INTO df_orders SELECT seq, seq FROM seq_1_to_50",
    ]:
        cur.execute(sql)
    conn.commit()
    print("setup done")


def loop(conn, mark, advised, driver):
    cur = conn.cursor()
    cur.execute(ORDERS)
    customers = [customer for _order, customer in cur.fetchall()]
    if not advised:
        names = []
        for customer in customers:
            cur.execute("SELECT name FROM df_customers WHERE id = " + mark, (customer,))
            names.append(cur.fetchone()[0])
    elif driver == "pymysql":
        # PyMySQL's words: a tuple parameter becomes a parenthesised list.
        cur.execute("SELECT id, name FROM df_customers WHERE id IN %s", (tuple(customers),))
        names = [name for _id, name in cur.fetchall()]
    else:
        # The C library's words: `IN (?, ?, ...)`, one placeholder per key.
        cur.execute("SELECT id, name FROM df_customers WHERE id IN (" + ", ".join([mark] * len(customers)) + ")", customers)
        names = [name for _id, name in cur.fetchall()]
    print("names=%d distinct=%d" % (len(names), len(set(names))))


def inserts(conn, mark, how):
    cur = conn.cursor()
    cur.execute("DELETE FROM df_writes")
    conn.commit()
    sql = "INSERT INTO df_writes (id, name) VALUES (%s, %s)" % (mark, mark)
    # In one explicit transaction, as an application writes a batch.
    cur.execute("BEGIN")
    if how == "inserts":
        for row in ROWS:
            cur.execute(sql, row)
    elif how == "inserts-advised":
        cur.executemany(sql, ROWS)
    else:
        values = ", ".join(["(%s, %s)" % (mark, mark)] * len(ROWS))
        cur.execute("INSERT INTO df_writes (id, name) VALUES " + values, [v for row in ROWS for v in row])
    conn.commit()
    cur.execute("SELECT COUNT(*), SUM(id), MAX(name) FROM df_writes")
    count, total, last = cur.fetchone()
    print("inserted=%d sum=%d max=%s" % (count, total, last))


def churn(a, advised):
    pool = None
    if advised and a.driver == "oracle":
        # Connector/Python's words: a pool, and a connection from it per request. (Over its C
        # extension it names itself as libmysql does and gets the C library's words.)
        from mysql.connector.pooling import MySQLConnectionPool

        # Without pool_reset_session=False each return to the pool resets the session and sets
        # it up again: as many round trips as the logins it saves.
        pool = MySQLConnectionPool(
            pool_name="advice", pool_size=2, pool_reset_session=False, host=a.host, port=a.port, user=a.user,
            password=a.password, database=a.db, use_pure=True,
        )
    conn = connect(a) if advised and not pool else None
    total = 0
    for i in range(1, 41):
        each = pool.get_connection() if pool else conn or connect(a)
        cur = each.cursor()
        cur.execute("SELECT %d AS v" % i)
        total += int(cur.fetchone()[0])
        cur.close()
        if each is not conn:
            # Back to the pool, or closed.
            each.close()
    if conn:
        conn.close()
    print("queries=40 sum=%d" % total)


def chatty(a, advised):
    conn = connect(a, autocommit=True, init_command=TIME_ZONE) if advised else connect(a)
    cur = conn.cursor()
    names = 0
    for i in range(60):
        if not advised:
            cur.execute("SET autocommit = 1")
            cur.execute(TIME_ZONE)
        cur.execute("SELECT name FROM df_customers WHERE id = %d" % (i % 50 + 1))
        names += len(cur.fetchall())
    cur.execute("SELECT @@autocommit, @@time_zone")
    autocommit, zone = cur.fetchone()
    print("requests=60 names=%d autocommit=%s time_zone=%s" % (names, autocommit, zone))
    conn.close()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["setup", "loop", "loop-advised", "inserts", "inserts-advised", "inserts-multirow", "churn", "churn-advised", "chatty", "chatty-advised"])
    p.add_argument("--driver", choices=["pymysql", "connector", "mysqlclient", "oracle", "oracle-c"], default="pymysql")
    for flag in ["--host", "--user", "--password", "--db"]:
        p.add_argument(flag)
    p.add_argument("--port", type=int)
    a = p.parse_args()
    if a.mode.startswith("churn"):
        return churn(a, a.mode == "churn-advised")
    if a.mode.startswith("chatty"):
        return chatty(a, a.mode == "chatty-advised")
    conn = connect(a)
    mark = "?" if a.driver == "connector" else "%s"
    if a.mode == "setup":
        setup(conn)
    elif a.mode.startswith("loop"):
        loop(conn, mark, a.mode == "loop-advised", a.driver)
    else:
        inserts(conn, mark, a.mode)
    conn.close()


main()
