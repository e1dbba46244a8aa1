"""Sends command bytes the server does not know, through PyMySQL, then a query.

Each command byte given is sent as a bare command packet; the server answers
each with an ERR (1047, unknown command) and the session carries on. Prints
one line per byte, "BYTE ERRNO", then "select 1 -> 1" to show the connection
survived.
"""

import argparse

import pymysql


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for flag in ["--host", "--user", "--password", "--db"]:
        p.add_argument(flag, required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("bytes", nargs="+", help="command bytes, hex (20 21 ...)")
    args = p.parse_args()
    conn = pymysql.connect(host=args.host, port=args.port, user=args.user, password=args.password,
                           database=args.db, ssl_disabled=True)
    for byte in args.bytes:
        # PyMySQL's own framing: a command packet of this byte and no argument.
        conn._execute_command(int(byte, 16), b"")
        try:
            conn._read_packet()
            print("%s ok" % byte)
        except pymysql.err.MySQLError as e:
            print("%s %d" % (byte, e.args[0]))
    with conn.cursor() as cur:
        cur.execute("SELECT 1")
        print("select 1 -> %d" % cur.fetchone()[0])
    conn.close()


if __name__ == "__main__":
    main()
