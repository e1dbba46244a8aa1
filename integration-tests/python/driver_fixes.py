"""Patterns whose fix depends on the driver, run by a real driver, for rttscope to name it.

Modes (--driver pymysql or connector, MariaDB Connector/Python over libmariadb):
  setup   create df_orders and df_customers (50 each) and df_writes
  loop    an N+1 loop: the orders, then one query per order for its customer
  inserts 40 single-row INSERTs into df_writes, one after another
Each prints a line the test checks for the rows it expects.
"""

import argparse


def connect(a):
    if a.driver == "pymysql":
        import pymysql

        return pymysql.connect(host=a.host, port=a.port, user=a.user, password=a.password, database=a.db)
    import mariadb

    return mariadb.connect(host=a.host, port=a.port, user=a.user, password=a.password, database=a.db)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["setup", "loop", "inserts"])
    p.add_argument("--driver", choices=["pymysql", "connector"], default="pymysql")
    for flag in ["--host", "--user", "--password", "--db"]:
        p.add_argument(flag)
    p.add_argument("--port", type=int)
    a = p.parse_args()
    conn = connect(a)
    mark = "%s" if a.driver == "pymysql" else "?"
    if a.mode == "setup":
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
    elif a.mode == "loop":
        cur = conn.cursor()
        cur.execute("SELECT id, customer FROM df_orders ORDER BY id")
        names = []
        for _order, customer in cur.fetchall():
            cur.execute("SELECT name FROM df_customers WHERE id = " + mark, (customer,))
            names.append(cur.fetchone()[0])
        print("names=%d" % len(names))
    elif a.mode == "inserts":
        cur = conn.cursor()
        cur.execute("DELETE FROM df_writes")
        conn.commit()
        for i in range(40):
            cur.execute("INSERT INTO df_writes (id, name) VALUES (%s, %s)" % (mark, mark), (i, "w%d" % i))
        conn.commit()
        print("inserted=40")
    conn.close()


main()
