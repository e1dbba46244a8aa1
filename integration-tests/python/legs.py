"""TLS and compression as Python drivers ask for them: PyMySQL and MariaDB Connector/Python.

Prints a transcript: what the client itself says about its connection (TLS
version or none), what the server says about the connection it sees (its
Ssl_version and Compression, which through rttscope describe the long hop),
who is logged in, and a digest of a workload of text and binary-protocol
results. Nothing printed depends on the connection (no ids, ports, ciphers or
timings), so a run straight to the server and one through rttscope compare
line by line; the tests check the lines that must differ separately.

Modes:
  pymysql    PyMySQL: --ssl-ca FILE verifies the server's certificate and name
             (ssl={"ca": FILE}); without it, ssl_disabled. PyMySQL has no
             compression (compress=True raises NotImplementedError).
  pymysql-results
             PyMySQL, uncompressed, on responses the server flushes part-way
             (multi-statements, CALL, LOAD DATA LOCAL INFILE into --table).
  connector  Connector/Python: --ssl (ssl=True), --ssl-ca FILE with
             ssl_verify_cert, --ssl-cert/--ssl-key, --compress; --change-user
             USER:PASSWORD sends COM_CHANGE_USER (conn.change_user) and prints
             the same again as the new user.
"""

import argparse
import hashlib


def server_view(query):
    """The server's own view of this connection."""
    out = []
    for name in ["Ssl_version", "Compression"]:
        rows = query("SHOW SESSION STATUS LIKE '%s'" % name)
        out.append("server %s=%s" % (name, rows[0][1] or "-"))
    out.append("current_user=%s" % query("SELECT CURRENT_USER()")[0][0])
    return out


def digest(rows):
    sha = hashlib.sha256()
    for row in rows:
        sha.update(repr(tuple(row)).encode() + b"\n")
    return "rows=%d sha256=%s" % (len(rows), sha.hexdigest())


# Several MB of text, some of it incompressible, so TLS records and compressed frames both
# come in many pieces.
WORKLOAD = "SELECT seq, SHA2(seq, 256), REPEAT(CHAR(65 + seq %% 26), seq %% 700) FROM seq_1_to_%d"


def pymysql_mode(args):
    import pymysql

    kwargs = dict(host=args.host, port=args.port, user=args.user, password=args.password, database=args.db,
                  connect_timeout=30, read_timeout=120, write_timeout=120)
    if args.ssl_ca:
        kwargs["ssl"] = {"ca": args.ssl_ca}
    else:
        kwargs["ssl_disabled"] = True
    conn = pymysql.connect(**kwargs)
    sock = conn._sock
    print("client tls=%s" % (sock.version() if hasattr(sock, "version") else "-"))

    def query(sql, params=None):
        with conn.cursor() as cur:
            cur.execute(sql, params)
            return cur.fetchall()

    print("\n".join(server_view(query)))
    print("text %s" % digest(query(WORKLOAD % 20000)))
    print("params %s" % digest(query("SELECT %s, %s, %s", ("ü😀", b"\x00\xff", 1.5))))
    conn.close()


def pymysql_results_mode(args):
    """Responses the server flushes in the middle of: several result sets of one statement
    (multi-statements, CALL) and LOAD DATA LOCAL INFILE's final OK. PyMySQL checks every
    packet's sequence id."""
    import tempfile

    import pymysql
    from pymysql.constants import CLIENT

    conn = pymysql.connect(host=args.host, port=args.port, user=args.user, password=args.password, database=args.db,
                           connect_timeout=30, read_timeout=120, write_timeout=120, ssl_disabled=True,
                           autocommit=True, local_infile=True, client_flag=CLIENT.MULTI_STATEMENTS)
    cur = conn.cursor()

    def run(sql):
        cur.execute(sql)
        results = [cur.fetchall()]
        while cur.nextset():
            results.append(cur.fetchall())
        print("%s -> %r" % (sql.split(" ")[0], results))

    table = args.table
    cur.execute("CREATE OR REPLACE TABLE %s (id INT PRIMARY KEY, name VARCHAR(40))" % table)
    cur.execute("CREATE OR REPLACE PROCEDURE %s_three() BEGIN SELECT 1 AS one; SELECT id, name FROM %s "
                "ORDER BY id LIMIT 3; SELECT COUNT(*) AS total FROM %s; END" % (table, table, table))
    with tempfile.NamedTemporaryFile("w", suffix=".tsv") as data:
        data.write("".join("%d\tname-%d\n" % (i, i * 7) for i in range(1, 5001)))
        data.flush()
        run("LOAD DATA LOCAL INFILE '%s' INTO TABLE %s" % (data.name, table))
    run("SELECT 1 AS a; SELECT 'two' AS b, 2.5 AS c; SELECT seq FROM seq_1_to_3")
    run("CALL %s_three()" % table)
    run("SELECT COUNT(*), MD5(GROUP_CONCAT(id, name ORDER BY id)) FROM %s" % table)
    conn.close()


def connector_mode(args):
    import mariadb

    kwargs = dict(host=args.host, port=args.port, user=args.user, password=args.password, database=args.db,
                  connect_timeout=30, read_timeout=120, write_timeout=120)
    if args.ssl:
        kwargs["ssl"] = True
    if args.ssl_ca:
        kwargs.update(ssl_ca=args.ssl_ca, ssl_verify_cert=True)
    if args.ssl_cert:
        kwargs.update(ssl_cert=args.ssl_cert, ssl_key=args.ssl_key)
    if args.compress:
        kwargs["compress"] = True
    conn = mariadb.connect(**kwargs)

    def query(sql, params=None, prepared=False):
        cur = conn.cursor(prepared=prepared)
        cur.execute(sql, params)
        rows = cur.fetchall()
        cur.close()
        return rows

    def transcript():
        print("client tls=%s" % (conn.tls_version or "-"))
        print("\n".join(server_view(query)))
        print("text %s" % digest(query(WORKLOAD % 20000)))
        binary = "SELECT seq, SHA2(seq, 256), REPEAT('b', seq % 900) FROM seq_1_to_8000 WHERE seq > ?"
        print("binary %s" % digest(query(binary, (0,), prepared=True)))

    transcript()
    if args.change_user:
        user, password = args.change_user.split(":", 1)
        conn.change_user(user, password, args.db)
        print("-- after COM_CHANGE_USER")
        transcript()
    conn.close()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("mode", choices=["pymysql", "pymysql-results", "connector"])
    p.add_argument("--host", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--user", required=True)
    p.add_argument("--password", required=True)
    p.add_argument("--db", required=True)
    p.add_argument("--ssl", action="store_true")
    p.add_argument("--ssl-ca")
    p.add_argument("--ssl-cert")
    p.add_argument("--ssl-key")
    p.add_argument("--compress", action="store_true")
    p.add_argument("--change-user", help="USER:PASSWORD")
    p.add_argument("--table", default="legs_results")
    args = p.parse_args()
    modes = {"pymysql": pymysql_mode, "pymysql-results": pymysql_results_mode, "connector": connector_mode}
    modes[args.mode](args)


if __name__ == "__main__":
    main()
