"""An N+1 loop and its fix, through PyMySQL, for `rttscope report --diff`.

Modes:
  setup  creates rd_orders (N orders) and rd_customers, one customer per order.
  loop   the N+1 loop: the orders, then one query per order for its customer's name.
  join   the fix: one JOIN.
Each read mode prints how many names it read, so a run can be checked for its rows.
"""

import argparse

import pymysql

N = 50


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["setup", "loop", "join"])
    for flag in ["--host", "--user", "--password", "--db"]:
        p.add_argument(flag)
    p.add_argument("--port", type=int)
    a = p.parse_args()
    conn = pymysql.connect(host=a.host, port=a.port, user=a.user, password=a.password, database=a.db)
    cur = conn.cursor()
    if a.mode == "setup":
        cur.execute("CREATE OR REPLACE TABLE rd_customers (id INT PRIMARY KEY, name VARCHAR(20))")
        cur.execute("CREATE OR REPLACE TABLE rd_orders (id INT PRIMARY KEY, customer INT)")
        cur.execute("INSERT INTO rd_customers SELECT seq, CONCAT('c', seq) FROM seq_1_to_%d" % N)
        cur.execute("INSERT INTO rd_orders SELECT seq, seq FROM seq_1_to_%d" % N)
        conn.commit()
        print("setup orders=%d" % N)
    elif a.mode == "loop":
        cur.execute("SELECT id, customer FROM rd_orders ORDER BY id")
        names = []
        for _order, customer in cur.fetchall():
            cur.execute("SELECT name FROM rd_customers WHERE id = %s", (customer,))
            names.append(cur.fetchone()[0])
        print("names=%d" % len(names))
    else:
        cur.execute(
            "SELECT o.id, c.name FROM rd_orders o JOIN rd_customers c ON c.id = o.customer ORDER BY o.id"
        )
        print("names=%d" % len(cur.fetchall()))
    conn.close()


main()
