"""Connection churn with PyMySQL: the same queries over a connection each, or over one.

Modes:
  per-query N       N times: connect, SELECT, close (what a script or a PHP page does)
  one-connection N  connect once, N SELECTs, close
Prints `connections=C queries=Q connect_us=T total_us=U`: what the client did, and the time it
spent in connect() and in the whole run, as it measured them itself.
"""

import argparse
import time

import pymysql


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["per-query", "one-connection"])
    p.add_argument("count", type=int)
    for flag in ["--host", "--user", "--password", "--db"]:
        p.add_argument(flag)
    p.add_argument("--port", type=int)
    a = p.parse_args()

    def connect():
        # autocommit=None: PyMySQL then sends no SET AUTOCOMMIT (it still sends SET NAMES
        # within connect()). ssl_disabled: PyMySQL otherwise builds a TLS context for every connect()
        # (60 ms of its own CPU here), time no proxy sees and no link changes, which would
        # drown the setup time the test compares with what rttscope recorded.
        return pymysql.connect(
            host=a.host,
            port=a.port,
            user=a.user,
            password=a.password,
            database=a.db,
            autocommit=None,
            ssl_disabled=True,
        )

    def select(conn, i):
        with conn.cursor() as cur:
            cur.execute("SELECT %s + 1", (i,))
            (value,) = cur.fetchone()
            assert value == i + 1, value

    connections = queries = 0
    connect_s = 0.0
    started = time.perf_counter()
    if a.mode == "per-query":
        for i in range(a.count):
            t = time.perf_counter()
            conn = connect()
            connect_s += time.perf_counter() - t
            connections += 1
            select(conn, i)
            queries += 1
            conn.close()
    else:
        t = time.perf_counter()
        conn = connect()
        connect_s += time.perf_counter() - t
        connections += 1
        for i in range(a.count):
            select(conn, i)
            queries += 1
        conn.close()
    total_s = time.perf_counter() - started
    print(
        "connections=%d queries=%d connect_us=%d total_us=%d"
        % (connections, queries, connect_s * 1e6, total_s * 1e6)
    )


if __name__ == "__main__":
    main()
