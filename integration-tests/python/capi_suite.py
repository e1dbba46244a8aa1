"""MariaDB Connector/C's command API, called through ctypes: the legacy commands an application
linked against libmariadb can send, each with a deterministic transcript.

  mysql_list_fields       COM_FIELD_LIST (column definitions with default values, then EOF)
  mysql_list_processes    COM_PROCESS_INFO (a result set)
  mysql_kill              (a KILL query: Connector/C 3.3 no longer sends COM_PROCESS_KILL)
  mysql_set_server_option COM_SET_OPTION (answered with an EOF packet)
  mysql_stmt_send_long_data  COM_STMT_SEND_LONG_DATA (no answer at all; one chunk over 16 MiB)
  mysql_stmt_reset        COM_STMT_RESET
  mysql_change_user       COM_CHANGE_USER, with an auth switch to ed25519 and a wrong password
  mysql_refresh, mysql_stat, mysql_select_db, mysql_reset_connection, mysql_ping
"""

import argparse
import ctypes
import hashlib

import capi
from capi import LIB


def fields(conn, table):
    res = LIB.mysql_list_fields(conn.mysql, table.encode(), None)
    if not res:
        return "error " + conn.error()
    out = []
    for i in range(LIB.mysql_num_fields(res)):
        f = LIB.mysql_fetch_field_direct(res, i).contents
        default = ctypes.string_at(f.def_, f.def_length) if f.def_ else None
        out.append("%s.%s type=%d length=%d flags=%#x default=%r" % (f.table.decode(), f.name.decode(), f.type,
                                                                    f.length, f.flags, default))
    LIB.mysql_free_result(res)
    return out


def long_data(conn):
    stmt = LIB.mysql_stmt_init(conn.mysql)
    sql = b"INSERT INTO capi_long (id, body) VALUES (?, ?)"
    if LIB.mysql_stmt_prepare(stmt, sql, len(sql)):
        return "prepare error " + LIB.mysql_stmt_error(stmt).decode()
    ident = ctypes.c_int(0)
    binds = (capi.MYSQL_BIND * 2)()
    binds[0].buffer_type, binds[0].buffer = capi.MYSQL_TYPE_LONG, ctypes.cast(ctypes.byref(ident), ctypes.c_void_p)
    binds[1].buffer_type = capi.MYSQL_TYPE_BLOB
    LIB.mysql_stmt_bind_param(stmt, binds)
    out = []
    # Chunks of every size, one of them more than a packet can hold.
    for ident.value, chunks in [(1, [b"a" * 10, b"b" * 70000, b"c"]), (2, [bytes(range(256)) * 65600 + b"end"]),
                                (3, [])]:
        digest = hashlib.sha256()
        for chunk in chunks:
            digest.update(chunk)
            if LIB.mysql_stmt_send_long_data(stmt, 1, chunk, len(chunk)) != b"\0":
                out.append("send_long_data error " + LIB.mysql_stmt_error(stmt).decode())
        rc = LIB.mysql_stmt_execute(stmt)
        out.append("id=%d sent=%d bytes sha256=%s execute=%s" % (
            ident.value, sum(map(len, chunks)), digest.hexdigest()[:16],
            LIB.mysql_stmt_error(stmt).decode() if rc else "ok"))
        LIB.mysql_stmt_reset(stmt)  # COM_STMT_RESET: drops the long data sent so far
    LIB.mysql_stmt_close(stmt)
    out += conn.query("SELECT id, LENGTH(body), SHA2(body, 256) FROM capi_long ORDER BY id")
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name in ["host", "user", "password", "db", "other-user", "other-password", "ed25519-user",
                 "ed25519-password"]:
        p.add_argument("--" + name, required=True)
    p.add_argument("--port", type=int, required=True)
    a = p.parse_args()
    connect = lambda user=a.user, password=a.password: capi.Conn(a.host, a.port, user, password, a.db,
                                                                 capi.CLIENT_MULTI_STATEMENTS)
    conn = connect()
    conn.query("CREATE OR REPLACE TABLE capi_fields (id INT NOT NULL PRIMARY KEY, name VARCHAR(30) DEFAULT 'ünnamed', "
               "price DECIMAL(8,3) DEFAULT 1.5, at DATETIME(6) DEFAULT '2024-01-01 00:00:00', body BLOB, "
               "kind ENUM('a','b') DEFAULT 'b', flag BIT(3) DEFAULT b'101')")
    conn.query("CREATE OR REPLACE TABLE capi_long (id INT PRIMARY KEY, body LONGBLOB)")
    conn.query("CREATE OR REPLACE VIEW capi_view AS SELECT id, name AS view_name FROM capi_fields")

    print("## COM_FIELD_LIST")
    for table in ["capi_fields", "capi_view", "no_such_table"]:
        print(table, fields(conn, table))

    print("## COM_PROCESS_INFO")
    res = LIB.mysql_list_processes(conn.mysql)
    rows = conn.rows(res) if res else "error " + conn.error()
    mine = [r for r in rows if int(r[0]) == LIB.mysql_thread_id(conn.mysql)]
    print("own row: user=%r db=%r command=%r" % (mine[0][1], mine[0][3], mine[0][4]))

    print("## COM_SET_OPTION")
    for option in [capi.MYSQL_OPTION_MULTI_STATEMENTS_OFF, capi.MYSQL_OPTION_MULTI_STATEMENTS_ON]:
        rc = LIB.mysql_set_server_option(conn.mysql, option)
        print("option", option, "rc", rc, conn.query("SELECT 1; SELECT 2"))

    print("## COM_STMT_SEND_LONG_DATA, COM_STMT_RESET")
    for line in long_data(conn):
        print(line)

    print("## mysql_kill")
    victim = connect()
    print("kill rc", LIB.mysql_kill(conn.mysql, LIB.mysql_thread_id(victim.mysql)))
    print("victim ping rc", LIB.mysql_ping(victim.mysql) != 0)
    print("kill unknown", LIB.mysql_kill(conn.mysql, 4000000000), conn.error())

    print("## COM_REFRESH, COM_STATISTICS, COM_PING, COM_INIT_DB")
    rc = LIB.mysql_refresh(conn.mysql, capi.REFRESH_TABLES | capi.REFRESH_STATUS)
    print("refresh rc", rc, conn.error() if rc else "")
    print("stat starts with", LIB.mysql_stat(conn.mysql).decode().split(":")[0])
    print("ping rc", LIB.mysql_ping(conn.mysql))
    print("select_db rc", LIB.mysql_select_db(conn.mysql, b"information_schema"), conn.query("SELECT DATABASE()"))
    print("select_db missing rc", LIB.mysql_select_db(conn.mysql, b"no_such_db") != 0, conn.error())

    print("## COM_CHANGE_USER, COM_RESET_CONNECTION")
    for user, password in [(a.ed25519_user, a.ed25519_password), (a.other_user, "wrong"), (a.other_user, a.other_password)]:
        failed = LIB.mysql_change_user(conn.mysql, user.encode(), password.encode(), a.db.encode()) != b"\0"
        print("change_user", user, "failed: " + conn.error() if failed else conn.query("SELECT CURRENT_USER(), DATABASE()"))
    conn.query("SET @v = 'kept?'")
    print("reset rc", LIB.mysql_reset_connection(conn.mysql), conn.query("SELECT @v"))
    conn.close()
    print("done")


if __name__ == "__main__":
    main()
