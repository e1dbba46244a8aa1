"""Logs in to a MySQL-8-style server (mysql8_server.py), directly or through rttscope, the way
a new user would: for each account, the server's cache emptied (SIGHUP, as a restart), then two
logins — the first takes full authentication, the second fast — each running
SELECT CURRENT_USER() (the server answers "USER LEG").

Usage: mysql8_login.py DRIVER HOST PORT tls|plain SERVER_PID SERVER_LOG USER:PASSWORD...
DRIVER: pymysql, mysqlclient (MySQLdb, on libmariadb), mariadb-cli (the mariadb command) or
connector-j (Debian's MariaDB Connector/J, integration-tests/java/Mysql8Login.java). A HOST starting with / is a Unix socket
(PyMySQL; PORT is then ignored). Prints "USER N: ANSWER" or
"USER N: error CODE MESSAGE" for each login.
"""

import os
import signal
import sys
import time


def connect(driver, host, port, tls, user, password):
    if driver == "pymysql":
        import pymysql

        kwargs = dict(host=host, port=port, user=user, password=password, connect_timeout=10)
        if host.startswith("/"):
            # A Unix socket, which PyMySQL (like libmysqlclient) treats as secure.
            kwargs = dict(unix_socket=host, user=user, password=password, connect_timeout=10)
        if tls:
            kwargs["ssl"] = {"check_hostname": False, "verify_mode": False}
        else:
            kwargs["ssl_disabled"] = True
        return pymysql.connect(**kwargs)
    if driver == "mysqlclient":
        import MySQLdb

        kwargs = dict(host=host, port=port, user=user, password=password, connect_timeout=10)
        if tls:
            kwargs["ssl"] = {"cipher": "DEFAULT"}
        return MySQLdb.connect(**kwargs)
    raise SystemExit(f"unknown driver {driver}")


def flush(pid, log):
    """Empties the server's cache and waits until it says so."""
    before = open(log, encoding="utf-8").read().count("- flush")
    os.kill(pid, signal.SIGHUP)
    deadline = time.time() + 10
    while open(log, encoding="utf-8").read().count("- flush") == before:
        if time.time() > deadline:
            raise SystemExit("the server did not flush its cache")
        time.sleep(0.01)


def cli_login(host, port, tls, user, password):
    """The mariadb CLI (libmariadb's plugins), one query."""
    import re
    import subprocess

    out = subprocess.run(
        ["mariadb", "--no-defaults", "--protocol=TCP", f"--host={host}", f"--port={port}", f"--user={user}",
         f"--password={password}", "--ssl" if tls else "--skip-ssl", "-N", "-e", "SELECT CURRENT_USER()"],
        capture_output=True, text=True, timeout=30, check=False,
    )
    if out.returncode == 0:
        return out.stdout.strip()
    error = re.match(r"ERROR (\d+) \(\w+\)(?: at line \d+)?: (.*)", out.stderr.strip())
    return f"error {error.group(1)} {error.group(2)}" if error else f"error ? {out.stderr.strip()}"


def connector_j_login(host, port, tls, user, password):
    """Connector/J (allowPublicKeyRetrieval on a plain connection), one query."""
    import subprocess

    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "java", "Mysql8Login.java")
    out = subprocess.run(
        ["java", "-cp", "/usr/share/java/mariadb-java-client.jar", source, host, str(port),
         "tls" if tls else "plain", user, password],
        capture_output=True, text=True, timeout=60, check=False,
    )
    return out.stdout.strip() or f"error ? {out.stderr.strip()}"


def login(driver, host, port, tls, user, password):
    if driver == "mariadb-cli":
        return cli_login(host, port, tls, user, password)
    if driver == "connector-j":
        return connector_j_login(host, port, tls, user, password)
    try:
        conn = connect(driver, host, port, tls, user, password)
    except Exception as e:  # pylint: disable=broad-except
        code = e.args[0] if e.args else "?"
        message = str(e.args[1] if len(e.args) > 1 else e).replace("\n", " ")
        return f"error {code} {message}"
    cur = conn.cursor()
    cur.execute("SELECT CURRENT_USER()")
    answer = cur.fetchall()[0][0]
    conn.close()
    return answer


def main():
    driver, host, port, leg, pid, log = sys.argv[1:7]
    for account in sys.argv[7:]:
        user, password = account.split(":", 1)
        flush(int(pid), log)
        for n in (1, 2):
            print(f"{user} {n}: {login(driver, host, int(port), leg == 'tls', user, password)}", flush=True)


main()
