"""Issue #38's sql_mode cases through PyMySQL, each on its own connection: the mode changes in a
way a proxy cannot simply read, then a statement whose literal holds a marker that read under
the other mode would come out as a word. Prints `case marker value` for each marker the server
returned, so the test knows the server read it as a literal.

Usage: sql_mode_leaks.py --host H --port P --user U --password PW --db DB --admin-user AU --admin-password AP
"""

import argparse

import pymysql
from pymysql.constants import CLIENT, COMMAND

# Each statement's first item names its case (`1 AS case_numeric`), a name in every reading, so
# that the test finds the case's statement among those recorded.
# Valid under ANSI_QUOTES: an alias `a\` then a string. Read without it, a string runs from the
# first `"` to the third, and the marker after it is a word.
ANSI = "SELECT 1 AS case_{c}, 1 AS \"a\\\", 'x\"{m}'"
# Valid under NO_BACKSLASH_ESCAPES: two strings. Read with escapes, the marker is a word.
NBE = "SELECT 1 AS case_{c}, 'a\\', '{m}'"


def args():
    p = argparse.ArgumentParser()
    for name in ["host", "user", "password", "db", "admin-user", "admin-password"]:
        p.add_argument("--" + name, required=True)
    p.add_argument("--port", type=int, required=True)
    return p.parse_args()


A = args()


def connect(user=A.user, password=A.password, multi=False):
    flags = CLIENT.MULTI_STATEMENTS if multi else 0
    return pymysql.connect(host=A.host, port=A.port, user=user, password=password, database=A.db,
                           autocommit=True, client_flag=flags)


def show(case, rows):
    for row in rows:
        for value in row:
            if isinstance(value, str) and "LEAK" in value:
                print(case, value)


def run(case, setup, sql, repeat=1):
    """`setup` statements, then `sql` (repeat times), on a fresh connection."""
    c = connect()
    cur = c.cursor()
    for s in setup:
        cur.execute(s)
    if repeat > 1:
        # An N+1 loop, a finding: one query per row of a parent query, with the row's value.
        cur.execute(f"SELECT seq FROM seq_1_to_{repeat}")
        for (i,) in cur.fetchall():
            # From a derived table: a query without FROM is housekeeping, never a loop.
            cur.execute(sql.replace("SELECT ", f"SELECT {i} AS n, d.* FROM (SELECT ", 1) + ") AS d")
    else:
        cur.execute(sql)
    show(case, cur.fetchall())
    c.close()


def multi(case, sql):
    """One multi-statement query; the last result holds the marker."""
    c = connect(multi=True)
    cur = c.cursor()
    cur.execute(sql)
    while cur.nextset():
        show(case, cur.fetchall())
    c.close()


def pipelined(case, setup, first, second):
    """`first` and `second` sent back to back, before the answer to `first` is read."""
    c = connect()
    cur = c.cursor()
    for s in setup:
        cur.execute(s)
    # In one write, so that rttscope has both before the server answers the first.
    packets = b""
    for sql in (first, second):
        payload = bytes([COMMAND.COM_QUERY]) + sql.encode()
        packets += len(payload).to_bytes(3, "little") + b"\0" + payload
    c._write_bytes(packets)
    c._next_seq_id = 1
    c._read_query_result()
    # Each answer's sequence ids start again after its command's.
    c._next_seq_id = 1
    c._read_query_result()
    show(case, c._result.rows or [])
    c.close()


run("numeric", ["SET sql_mode=4"], ANSI.format(c="numeric", m="LEAKNUMERIC"))
# Repeated: an N+1 loop, so the statement is in a finding too.
run("unquoted", ["SET sql_mode=ANSI_QUOTES"], ANSI.format(c="unquoted", m="LEAKUNQUOTED"), repeat=25)
run("hex", ["SET sql_mode=0x414e53495f51554f544553"], ANSI.format(c="hex", m="LEAKHEX"))
run("prepare", ["PREPARE s FROM 'SET sql_mode=''ANSI_QUOTES'''", "EXECUTE s"], ANSI.format(c="prepare", m="LEAKPREPARE"))
run("immediate", ["EXECUTE IMMEDIATE 'SET sql_mode=''ANSI_QUOTES'''"], ANSI.format(c="immediate", m="LEAKIMMEDIATE"))
run("variable", ["SET @m='ANSI_QUOTES'", "SET sql_mode=@m"], ANSI.format(c="variable", m="LEAKVARIABLE"))
run("concat", ["SET sql_mode=CONCAT(@@sql_mode, ',ANSI_QUOTES')"], ANSI.format(c="concat", m="LEAKCONCAT"))

# The global mode, which a new session takes; put back at once (the server may be shared).
admin = connect(A.admin_user, A.admin_password)
acur = admin.cursor()
acur.execute("SELECT @@GLOBAL.sql_mode")
saved = acur.fetchone()[0]
try:
    acur.execute("SET GLOBAL sql_mode=CONCAT(@@GLOBAL.sql_mode, ',ANSI_QUOTES')")
    c = connect()
finally:
    acur.execute("SET GLOBAL sql_mode=%s", (saved,))
    admin.close()
cur = c.cursor()
cur.execute(ANSI.format(c="global", m="LEAKGLOBAL"))
show("global", cur.fetchall())
c.close()

multi("multi", "SET sql_mode=CONCAT(@@sql_mode, ',NO_BACKSLASH_ESCAPES'); " + NBE.format(c="multi", m="LEAKMULTI"))
pipelined("pipelined_on", [], "SET sql_mode='NO_BACKSLASH_ESCAPES'", NBE.format(c="pipelined_on", m="LEAKPIPEON"))
pipelined("pipelined_off", ["SET sql_mode='NO_BACKSLASH_ESCAPES'"], "SET sql_mode=''",
          "SELECT 1 AS case_pipelined_off, 'a\\'LEAKPIPEOFF'")
run("executable", [], "SELECT 1 AS case_executable, /*! 'a*/ LEAKEXECUTABLE '*/")
# A version above the server's: a comment that ends at its first `*/`, strings or not (one
# nested comment in it), so the marker is in the string after it. Read as SQL, the comment
# would end at the second `*/` and the marker would be a word.
run("versioned", [], "SELECT 1 AS case_versioned, 1 /*!99999 ' */, ' */ LEAKVERSIONED '")
run("nested", [], "SELECT 1 AS case_nested, 1 /*!99999 /* x */ ' */, ' */ LEAKNESTED '")
