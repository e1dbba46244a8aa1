"""Memory per open connection: the figure in docs/benchmarks.md ("Memory per connection").

Starts the given rttscope binary (default target/release/rttscope) in front of a MariaDB
(default 127.0.0.1:3306, user root, no password), reads its RSS, opens 120 PyMySQL
connections through it (each runs a SELECT 1 and stays open), reads it again, runs one
50 MB result through one of them, closes them all, and prints the four readings.

    target/test-venv/bin/python benches/memory_per_connection.py [RTTSCOPE] [HOST:PORT]

(scripts/install-deps.sh makes the venv with PyMySQL.)
"""

import socket
import subprocess
import sys
import time

import pymysql

CONNECTIONS = 120


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else "target/release/rttscope"
    upstream = sys.argv[2] if len(sys.argv) > 2 else "127.0.0.1:3306"
    port, admin = free_port(), free_port()
    proxy = subprocess.Popen(
        [binary, "--listen", f"127.0.0.1:{port}", "--admin", f"127.0.0.1:{admin}", "--upstream", upstream],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.time() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.time() > deadline or proxy.poll() is not None:
                    raise RuntimeError("rttscope did not start listening")
                time.sleep(0.1)
        time.sleep(1)
        before = rss_kib(proxy.pid)
        conns = []
        for _ in range(CONNECTIONS):
            c = pymysql.connect(host="127.0.0.1", port=port, user="root", password="")
            with c.cursor() as cur:
                cur.execute("SELECT 1")
                cur.fetchall()
            conns.append(c)
        time.sleep(2)
        open_ = rss_kib(proxy.pid)
        with conns[0].cursor() as cur:
            # 50,000 rows of 1,000 bytes.
            cur.execute(
                "SELECT REPEAT('x', 1000) FROM information_schema.columns a, information_schema.columns b LIMIT 50000"
            )
            cur.fetchall()
        time.sleep(1)
        large = rss_kib(proxy.pid)
        for c in conns:
            c.close()
        time.sleep(2)
        closed = rss_kib(proxy.pid)
    finally:
        proxy.terminate()
        proxy.wait(timeout=10)
    print(
        f"RSS {before / 1024:.1f} MiB started; {open_ / 1024:.1f} MiB with {CONNECTIONS} connections open "
        f"({(open_ - before) / CONNECTIONS:.1f} KiB each); {large / 1024:.1f} MiB after a 50 MB result "
        f"through one of them; {closed / 1024:.1f} MiB once all closed"
    )


if __name__ == "__main__":
    main()
