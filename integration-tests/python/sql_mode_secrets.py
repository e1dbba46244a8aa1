"""Generated statements, each with a fresh secret in some form of literal, sent under each
combination of ANSI_QUOTES and NO_BACKSLASH_ESCAPES (set on the connection, or globally for a
new one), some runs changing the mode mid-stream in ways rttscope can and cannot follow. Every
form puts the secret in a literal or a comment as the server reads it in the mode it is in;
many statements are rejected, which is fine: rttscope records them all the same.

Secrets start with the prefixes the test looks for: a word (what a leak into a name shows), hex
digits, binary digits, decimal digits. Prints `sent N`: the queries sent.

Usage: sql_mode_secrets.py --host H --port P --user U --password PW --db DB
       --admin-user AU --admin-password AP --seed S [--statements N]
"""

import argparse
import random

import pymysql
from pymysql.constants import CLIENT

WORD, HEX, BITS, NUMBER = "qzvsecret", "f00dfacecafe", "1011001110001111", "7130291577"
MODES = {(False, False): "", (True, False): "NO_BACKSLASH_ESCAPES", (False, True): "ANSI_QUOTES",
         (True, True): "ANSI_QUOTES,NO_BACKSLASH_ESCAPES"}


def args():
    p = argparse.ArgumentParser()
    for name in ["host", "user", "password", "db", "admin-user", "admin-password"]:
        p.add_argument("--" + name, required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--statements", type=int, default=250)
    return p.parse_args()


A = args()
rng = random.Random(A.seed)
counter = 0
sent = 0


def fresh():
    global counter
    counter += 1
    return counter


def word(n):
    return f"{WORD}{A.seed}x{n}"


# A form: (nbe, ansi, n) -> a fragment with secret number n in a literal or a comment as the
# server reads it in that mode, or None where it would read the secret as a name.
FORMS = [
    lambda nbe, ansi, n: f"'{word(n)}'",
    lambda nbe, ansi, n: f"'it''s {word(n)}'",
    lambda nbe, ansi, n: f"'tab\\t{word(n)}\\\\'",
    lambda nbe, ansi, n: f"'a\\'{word(n)}'" if not nbe else f"'a\\', '{word(n)}'",
    lambda nbe, ansi, n: f"'x\\\\\\'{word(n)}'" if not nbe else None,
    lambda nbe, ansi, n: f"\"{word(n)}\"",
    lambda nbe, ansi, n: f"\"a\"\"{word(n)}\"",
    lambda nbe, ansi, n: f"\"a\\\"{word(n)}\"" if not nbe and not ansi else None,
    # Valid under ANSI_QUOTES only: a name `a\`, then a string.
    lambda nbe, ansi, n: f"1 AS \"a\\\", 'x\"{word(n)}'" if ansi else None,
    lambda nbe, ansi, n: f"N'{word(n)}'",
    lambda nbe, ansi, n: f"_utf8mb4'{word(n)}'",
    lambda nbe, ansi, n: f"_binary \"{word(n)}\"" if not ansi else None,
    lambda nbe, ansi, n: f"X'{HEX}{n:06x}'",
    lambda nbe, ansi, n: f"0x{HEX}{n:06x}",
    lambda nbe, ansi, n: f"b'{BITS}{n:b}'",
    lambda nbe, ansi, n: f"0b{BITS}{n:b}",
    lambda nbe, ansi, n: f"{NUMBER}{n:05d}",
    lambda nbe, ansi, n: f"-{NUMBER}{n:05d}.5",
    lambda nbe, ansi, n: f"{NUMBER}{n:05d}e3",
    lambda nbe, ansi, n: f"1 /* {word(n)} */",
    lambda nbe, ansi, n: f"1 -- {word(n)}\n",
    lambda nbe, ansi, n: f"1 # {word(n)}\n",
    lambda nbe, ansi, n: f"1 /*! , '{word(n)}' */",
    lambda nbe, ansi, n: f"1 /*!40101 , '{word(n)}' */",
    # An executable comment's body is SQL: a `*/` in its string does not end it.
    lambda nbe, ansi, n: f"/*! 'a*/ {word(n)} '*/",
    lambda nbe, ansi, n: f"1 /*+ QB_NAME('{word(n)}') */",
    # A version above the server's: a comment to its first `*/`, strings or not, with one
    # nested comment in it; `/*M!` is MariaDB's marker, an ordinary comment to MySQL. Read as
    # SQL, the comment would end at the second `*/`, and the secret would be a word.
    lambda nbe, ansi, n: f"1 /*!99999 ' */, ' */ {word(n)} '",
    lambda nbe, ansi, n: f"1 /*!99999 /* x */ ' */, ' */ {word(n)} '",
    lambda nbe, ansi, n: f"1 /*M!999999 ' */, ' */ {word(n)} '",
    # MariaDB skips MySQL 5.7's and 8's versions.
    lambda nbe, ansi, n: f"1 /*!50701 ' */, ' */ {word(n)} '" if MARIADB else None,
]


def fragment(mode):
    while True:
        n = fresh()
        f = rng.choice(FORMS)(*mode, n)
        if f is not None:
            return f


def statement(mode):
    f = lambda: fragment(mode)
    return rng.choice([
        lambda: f"SELECT {f()}",
        lambda: f"SELECT {f()}, {f()}",
        lambda: f"SELECT 1 FROM DUAL WHERE {f()} IS NOT NULL AND 2 IN ({f()}, {f()})",
        lambda: f"INSERT INTO secrets (v) VALUES ({f()}), ({f()})",
        lambda: f"UPDATE secrets SET v = {f()} WHERE v = {f()}",
        lambda: f"SELECT v FROM secrets WHERE v LIKE {f()} LIMIT {rng.randint(1, 99)}",
        lambda: f"/* app */ SELECT /*+ NO_INDEX(secrets) */ {f()}",
    ])()


def connect(user=A.user, password=A.password):
    return pymysql.connect(host=A.host, port=A.port, user=user, password=password, database=A.db,
                           autocommit=True, client_flag=CLIENT.MULTI_STATEMENTS)


def execute(cur, sql):
    """Sends `sql`; an error from the server is part of the test (many statements are invalid)."""
    global sent
    sent += 1
    try:
        cur.execute(sql)
        while cur.nextset():
            pass
    except pymysql.err.MySQLError:
        pass


def mode_of(cur):
    cur.execute("SELECT @@sql_mode")
    modes = cur.fetchone()[0].split(",")
    global sent
    sent += 1
    return ("NO_BACKSLASH_ESCAPES" in modes, "ANSI_QUOTES" in modes)


def change_mode(cur):
    """Sets a random mode in one of the ways a client may; returns the mode the server is in.
    A statement that may follow in the same text is generated for the new mode."""
    target = rng.choice(list(MODES.values()))
    quoted = target.replace("'", "''")
    how = rng.choice([
        f"SET sql_mode='{target}'",
        f"SET sql_mode={target or 0}" if target and "," not in target else "SET sql_mode=0",
        f"/*!40101 SET SQL_MODE='{target}' */",
        f"EXECUTE IMMEDIATE 'SET sql_mode=''{quoted}'''",
        "SET sql_mode=CONCAT(@@sql_mode, ',ANSI_QUOTES')",
        "SET sql_mode=REPLACE(@@sql_mode, 'NO_BACKSLASH_ESCAPES', '')",
        f"SET @m='{target}'; SET sql_mode=@m",
    ])
    if rng.random() < 0.3:
        # The new mode and a statement in it, in one text: the server reads the second part
        # in the mode the first set.
        execute(cur, "SET @before=@@sql_mode")
        execute(cur, how)
        after = mode_of(cur)
        execute(cur, "SET sql_mode=@before")
        execute(cur, f"{how}; {statement(after)}")
    else:
        execute(cur, how)
    return mode_of(cur)


def run(mode, changes, on_global):
    """One connection in `mode`, `A.statements` statements, changing the mode mid-stream if
    `changes`."""
    if on_global:
        # The global mode, which a new session takes; put back at once (the server is shared).
        admin = connect(A.admin_user, A.admin_password)
        acur = admin.cursor()
        acur.execute("SELECT @@GLOBAL.sql_mode")
        saved = acur.fetchone()[0]
        try:
            acur.execute("SET GLOBAL sql_mode=%s", (MODES[mode],))
            c = connect()
        finally:
            acur.execute("SET GLOBAL sql_mode=%s", (saved,))
            admin.close()
    else:
        c = connect()
        execute(c.cursor(), f"SET sql_mode='{MODES[mode]}'")
    cur = c.cursor()
    execute(cur, "CREATE TEMPORARY TABLE secrets (v TEXT)")
    mode = mode_of(cur)
    for _ in range(A.statements):
        if changes and rng.random() < 0.1:
            mode = change_mode(cur)
        execute(cur, statement(mode))
    c.close()


probe = connect()
MARIADB = "MariaDB" in probe.get_server_info()
probe.close()
for i, mode in enumerate(MODES):
    run(mode, changes=False, on_global=i % 2 == 1)
for _ in range(2):
    run(rng.choice(list(MODES)), changes=True, on_global=rng.random() < 0.5)
print("sent", sent)
