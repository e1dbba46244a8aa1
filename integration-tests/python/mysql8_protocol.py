"""MySQL's protocol features beyond MariaDB's, added to mysql-mimic for mysql8_server.py, each
written from MySQL's client/server protocol documentation (not from rttscope's behaviour):

- the compressed protocol with zlib (CLIENT_COMPRESS) or zstd at the level the client's
  handshake response names (CLIENT_ZSTD_COMPRESSION_ALGORITHM): frames of 3-byte compressed
  length, compressed sequence id, 3-byte uncompressed length (0: the payload went as it is);
  as MySQL's server does, a frame that starts a command must have sequence id 0 and no
  other frame may (the connection is closed otherwise, "compression out of step" logged);
- session state tracking (CLIENT_SESSION_TRACK): an OK packet after `SET [SESSION] var = value`,
  `USE db` / COM_INIT_DB or a write carries SERVER_SESSION_STATE_CHANGED and the changes
  (system variable, schema, GTIDs, state change), as MySQL's default
  session_track_* settings report them;
- optional result-set metadata (CLIENT_OPTIONAL_RESULTSET_METADATA): after
  `SET resultset_metadata = NONE` the column count is preceded by 0 and no column definitions
  follow;
- query attributes: `SELECT mysql_query_attribute_string('name')` answers the attribute the
  statement carried, as MySQL's query_attributes component does;
- what MySQL answers and mysql-mimic did not: the rows of a result end with an OK whose affected
  rows are 0, Connector/J's first statement (a SET with an expression) is accepted, and a
  COM_CHANGE_USER without an auth response gets an auth switch with a fresh scramble.

Every login's compression is logged ("compression ALGORITHM LEVEL") to the server's log.
"""

import asyncio
import ctypes
import ctypes.util
import re
import zlib

from mysql_mimic import packets
from mysql_mimic.connection import Connection
from mysql_mimic.types import Capabilities

CAPABILITIES = (
    Capabilities.CLIENT_COMPRESS
    | Capabilities.CLIENT_ZSTD_COMPRESSION_ALGORITHM
    | Capabilities.CLIENT_SESSION_TRACK
    | Capabilities.CLIENT_OPTIONAL_RESULTSET_METADATA
    | Capabilities.CLIENT_MULTI_RESULTS
    | Capabilities.CLIENT_TRANSACTIONS
)
SERVER_SESSION_STATE_CHANGED = 0x4000
# session_state_type (MySQL's enum_session_state_type).
SYSTEM_VARIABLES, SCHEMA, STATE_CHANGE, GTIDS = 0, 1, 2, 3
SERVER_UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"

SET_VARIABLE = re.compile(r"^\s*SET\s+(?:SESSION\s+|@@SESSION\.|@@)?(\w+)\s*=\s*'?([^']*?)'?\s*;?\s*$", re.I)
WRITE = re.compile(r"^\s*(INSERT|UPDATE|DELETE)\b", re.I)
CONNECTOR_J_SETUP = re.compile(r"^set autocommit=1, sql_mode = concat\(@@sql_mode,',STRICT_TRANS_TABLES'\)$", re.I)
ATTRIBUTE = re.compile(r"mysql_query_attribute_string\('([^']*)'\)", re.I)


def lenenc_int(n):
    if n < 251:
        return bytes([n])
    if n < 1 << 16:
        return b"\xfc" + n.to_bytes(2, "little")
    if n < 1 << 24:
        return b"\xfd" + n.to_bytes(3, "little")
    return b"\xfe" + n.to_bytes(8, "little")


def lenenc_str(data):
    return lenenc_int(len(data)) + data


class Zstd:
    """zstd through the system's libzstd (ctypes): no Python package needed."""

    def __init__(self):
        lib = ctypes.CDLL(ctypes.util.find_library("zstd") or "libzstd.so.1")
        lib.ZSTD_compressBound.restype = ctypes.c_size_t
        lib.ZSTD_compressBound.argtypes = [ctypes.c_size_t]
        lib.ZSTD_compress.restype = ctypes.c_size_t
        lib.ZSTD_compress.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int]
        lib.ZSTD_decompress.restype = ctypes.c_size_t
        lib.ZSTD_decompress.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
        lib.ZSTD_isError.restype = ctypes.c_uint
        lib.ZSTD_isError.argtypes = [ctypes.c_size_t]
        self.lib = lib

    def compress(self, data, level):
        out = ctypes.create_string_buffer(self.lib.ZSTD_compressBound(len(data)))
        n = self.lib.ZSTD_compress(out, len(out), data, len(data), level)
        if self.lib.ZSTD_isError(n):
            raise ValueError("zstd compression failed")
        return out.raw[:n]

    def decompress(self, data, size):
        out = ctypes.create_string_buffer(max(size, 1))
        n = self.lib.ZSTD_decompress(out, len(out), data, len(data))
        if self.lib.ZSTD_isError(n) or n != size:
            raise ValueError("zstd decompression failed")
        return out.raw[:n]


class CompressedLink:
    """The compressed protocol under mysql-mimic's stream: a reader fed with the payloads of
    decompressed frames, and a writer whose every drain goes out as one frame. The frames'
    sequence ids follow the client's: a command's frames start at 0, the answer's continue."""

    def __init__(self, reader, writer, algorithm, level, log_line):
        self.raw_reader, self.raw_writer = reader, writer
        self.algorithm, self.level = algorithm, level
        self.log_line = log_line
        self.zstd = Zstd() if algorithm == "zstd" else None
        self.reader = asyncio.StreamReader()
        self.seq = 0
        # Where the packet stream inside the frames is: body bytes left of the packet under
        # way, or the part of a header read so far.
        self.body_left = 0
        self.header = bytearray()
        self.pending = bytearray()
        self.pump = asyncio.ensure_future(self.read_frames())

    def compress(self, data):
        return self.zstd.compress(data, self.level) if self.zstd else zlib.compress(data)

    def decompress(self, data, size):
        return self.zstd.decompress(data, size) if self.zstd else zlib.decompress(data)

    async def read_frames(self):
        try:
            while True:
                head = await self.raw_reader.readexactly(7)
                length = int.from_bytes(head[:3], "little")
                self.seq = (head[3] + 1) % 256
                size = int.from_bytes(head[4:7], "little")
                body = await self.raw_reader.readexactly(length)
                payload = self.decompress(body, size) if size else body
                if (head[3] == 0) != self.starts_command(payload):
                    # MySQL answers "Got packets out of order" and closes.
                    self.log_line(f"compression out of step: frame {head[3]} starts {bytes(payload[:5])!r}")
                    self.raw_writer.close()
                    break
                self.reader.feed_data(payload)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        self.reader.feed_eof()

    def starts_command(self, payload):
        """Whether a frame's payload starts a command (a packet with sequence id 0, at a
        packet boundary); follows the packets through it."""
        starts = self.body_left == 0 and not self.header and len(payload) >= 4 and payload[3] == 0
        i = 0
        while i < len(payload):
            if self.body_left:
                n = min(self.body_left, len(payload) - i)
                self.body_left, i = self.body_left - n, i + n
                continue
            need = 4 - len(self.header)
            self.header += payload[i : i + need]
            i += need
            if len(self.header) == 4:
                self.body_left, self.header = int.from_bytes(self.header[:3], "little"), bytearray()
        return starts

    # The writer's side, as mysql-mimic's stream uses it.
    def write(self, data):
        self.pending.extend(data)

    async def drain(self):
        data, self.pending = bytes(self.pending), bytearray()
        for i in range(0, len(data), 0xFFFFFF):
            chunk = data[i : i + 0xFFFFFF]
            # MySQL sends payloads under 50 bytes as they are; so does this server.
            body, size = (chunk, 0) if len(chunk) < 50 else (self.compress(chunk), len(chunk))
            head = len(body).to_bytes(3, "little") + bytes([self.seq]) + size.to_bytes(3, "little")
            self.seq = (self.seq + 1) % 256
            self.raw_writer.write(head + body)
        await self.raw_writer.drain()

    def __getattr__(self, name):
        return getattr(self.raw_writer, name)


def compression_of(conn):
    caps = conn.capabilities
    if Capabilities.CLIENT_ZSTD_COMPRESSION_ALGORITHM in caps:
        # MySQL's default level when the client names none.
        return "zstd", conn.zstd_compression_level or 3
    if Capabilities.CLIENT_COMPRESS in caps:
        return "zlib", 6
    return None, None


def session_state(changes):
    """The session_state_info of an OK packet: each change as type + lenenc data."""
    out = b""
    for kind, data in changes:
        out += bytes([kind]) + lenenc_str(data)
    return out


def tracked(conn, kind, *values):
    """Remembers a change for the next OK, if the client tracks session state."""
    if Capabilities.CLIENT_SESSION_TRACK not in conn.capabilities:
        return
    if kind == GTIDS:
        data = b"\x00" + lenenc_str(values[0].encode())  # encoding specification 0: the GTID set as text
    else:
        data = b"".join(lenenc_str(v.encode()) for v in values)
    conn.session_changes = getattr(conn, "session_changes", []) + [(kind, data)]


def ok(self, **kwargs):
    """mysql-mimic's OK packet, carrying the session state changes since the last one."""
    changes = getattr(self, "session_changes", [])
    if not changes or kwargs.get("eof"):
        return packets.make_ok(capabilities=self.capabilities, status_flags=self.status_flags, **kwargs)
    self.session_changes = []
    kwargs["flags"] = kwargs.get("flags", 0) | SERVER_SESSION_STATE_CHANGED
    base = packets.make_ok(capabilities=self.capabilities, status_flags=self.status_flags, **kwargs)
    # The state-change entry is the byte '1' alone, as MySQL's server writes it (its
    # documentation says a length-encoded string; libmysqlclient reads the byte).
    return base + lenenc_str(b"") + lenenc_str(session_state(changes + [(STATE_CHANGE, b"1")]))


async def write_text_resultset(self, result_set):
    """mysql-mimic's text result set, without the column definitions when the client has
    optional metadata and asked for none (`resultset_metadata = NONE`)."""
    optional = Capabilities.CLIENT_OPTIONAL_RESULTSET_METADATA in self.capabilities
    full = not optional or getattr(self, "resultset_metadata", "FULL") == "FULL"
    # The column count, then (libmysqlclient reads it there, as MySQL's server writes it) the
    # metadata flag: RESULTSET_METADATA_FULL 1, NONE 0. mysql-mimic put it first.
    header = [lenenc_int(len(result_set.columns)) + (bytes([1 if full else 0]) if optional else b"")]
    if full:
        for column in result_set.columns:
            header.append(packets.make_column_definition_41(
                server_charset=self.server_charset, name=column.name, column_type=column.type,
                character_set=column.character_set))
    if not self.deprecate_eof():
        header.append(self.eof())
    self.stream.write_many(header)
    self.stream.write_text_rows(list(result_set.rows), result_set.columns)
    # MySQL ends the rows with affected rows 0 (mysql-mimic put the row count there, which
    # Connector/J, skipping that field as a string, read past the packet's end).
    await self.stream.write(self.ok_or_eof())


original_connection_phase = Connection.connection_phase


async def connection_phase(self):
    """After the login's OK (sent as it is), the compressed protocol, if negotiated."""
    await original_connection_phase(self)
    algorithm, level = compression_of(self)
    if algorithm is None:
        return
    self.log_line(f"compression {algorithm} {level}")
    stream = self.stream
    link = CompressedLink(stream.reader, stream.writer, algorithm, level, self.log_line)
    stream.reader, stream.writer = link.reader, link


original_parse_com_change_user = packets.parse_com_change_user


def parse_com_change_user(*args, **kwargs):
    """A COM_CHANGE_USER whose auth response is empty (libmysqlclient's, for the SHA-256
    plugins: its plugin waits for the server's scramble) is answered with an AuthSwitchRequest
    carrying a fresh one, as MySQL does; mysql-mimic would go on with the connection's
    scramble and nothing to check it against. Dropping the client's plugin name makes it
    switch."""
    change = original_parse_com_change_user(*args, **kwargs)
    if not change.auth_response:
        change.client_plugin = None
    return change


def install(log_line):
    """Adds the features to mysql-mimic's Connection; `log_line` appends to the server's log."""
    packets.parse_com_change_user = parse_com_change_user
    Connection.log_line = lambda self, line: log_line(line)
    Connection.ok = ok
    Connection.write_text_resultset = write_text_resultset
    Connection.connection_phase = connection_phase


class Features:
    """What a session does with the statements that exercise the features; `answer` returns
    (rows, columns) for a statement it handles, else None."""

    def answer(self, conn, sql, attrs):
        attribute = ATTRIBUTE.search(sql)
        if attribute:
            return [(attrs.get(attribute.group(1)),)], [attribute.group(0)]
        if CONNECTOR_J_SETUP.match(sql):
            # Connector/J's first statement; mysql-mimic takes no expression in a SET.
            return [], []
        variable = SET_VARIABLE.match(sql)
        if variable and not variable.group(1).upper() == "NAMES":
            name, value = variable.group(1).lower(), variable.group(2)
            if name == "resultset_metadata":
                conn.resultset_metadata = value.upper()
            tracked(conn, SYSTEM_VARIABLES, name, value)
            return [], []
        if WRITE.match(sql):
            # Numbered per connection (MySQL's are per server), so that a run through rttscope
            # reads as the same run directly.
            conn.gtid = getattr(conn, "gtid", 0) + 1
            tracked(conn, GTIDS, f"{SERVER_UUID}:1-{conn.gtid}")
            return [], []
        if re.search(r"\bFROM\s+items\b", sql, re.I):
            one = re.search(r"\bid\s*=\s*(\d+)", sql)
            ids = [int(one.group(1))] if one else range(1, 21)
            return [(i, f"item-{i}") for i in ids if 1 <= i <= 20], ["id", "name"]
        return None

    @staticmethod
    def used(conn, database):
        tracked(conn, SCHEMA, database)
