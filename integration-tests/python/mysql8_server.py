"""A MySQL-8-style server for the auth tests: mysql-mimic (a third-party Python implementation
of the server protocol) with caching_sha2_password and sha256_password written here from
MySQL's documentation, not from rttscope's behaviour:

- caching_sha2_password: the client sends SHA256(pw) XOR SHA256(SHA256(SHA256(pw)) + nonce).
  Fast authentication when the account is in the server's cache (AuthMoreData 0x03, then
  OK); otherwise full authentication (AuthMoreData 0x04): over TLS the client sends the
  password in clear, NUL-terminated; over a plain connection it asks for the public key
  (0x02), gets it (AuthMoreData + PEM) and sends RSA-OAEP(SHA-1) of the password XOR the
  nonce. A successful full authentication fills the cache; FLUSH PRIVILEGES empties it.
- sha256_password: always the password in full, the same way (its key request is 0x01).
- mysql_native_password: mysql-mimic's own; absent in --mysql9 mode, as in MySQL 9.

Usage: mysql8_server.py LOG_FILE [--tls] [--mysql9] [--sha256-default] (the greeting names
sha256_password, as with MySQL's default_authentication_plugin=sha256_password). Prints "port N" once listening. Every
login appends "USER PLUGIN PATH LEG RESULT" to LOG_FILE (PATH fast or full, LEG tls or plain);
SIGHUP empties the cache (as a restart does) and appends "- flush". MySQL's protocol features
beyond MariaDB's (compression with zstd, session tracking, optional metadata, query attributes)
come from mysql8_protocol.py.
"""

import asyncio
import asyncio.sslproto
import contextvars
import datetime
import hashlib
import os
import signal
import ssl
import sys
import tempfile

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.x509.oid import NameOID
from mysql_mimic import MysqlServer, Session, User, packets, utils
from mysql_mimic.auth import AuthPlugin, Forbidden, IdentityProvider, NativePasswordAuthPlugin, Success
from mysql_mimic.connection import Connection
from mysql_mimic.constants import DEFAULT_SERVER_CAPABILITIES
from mysql_mimic.stream import MysqlStream

import mysql8_protocol

PASSWORDS = {
    "u_sha2": ("caching_sha2_password", "a-sha2-password-longer-than-20"),
    "u_sha256": ("sha256_password", "sha256-pw"),
    "u_native": ("mysql_native_password", "native-pw"),
}
CACHE = set()
CONNECTION = contextvars.ContextVar("connection")
RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
PUBLIC_PEM = RSA_KEY.public_key().public_bytes(
    serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
)
LOG = None
FEATURES = mysql8_protocol.Features()


def sha256(data):
    return hashlib.sha256(data).digest()


def stored_hash(password):
    return sha256(sha256(password.encode()))


def log(user, plugin, path, result):
    secure = "tls" if is_secure() else "plain"
    LOG.write(f"{user} {plugin} {path} {secure} {result}\n")
    LOG.flush()


def log_line(line):
    LOG.write(f"{line}\n")
    LOG.flush()


def flush_cache():
    CACHE.clear()
    LOG.write("- flush\n")
    LOG.flush()


def is_secure():
    return CONNECTION.get().stream.writer.get_extra_info("ssl_object") is not None


def connection_scramble():
    """The greeting's scramble, which MySQL sends again in an auth switch ("generate the
    scramble, or reuse the old one" in its plugins): clients keep the last one they were sent
    and hash with it at the next COM_CHANGE_USER. None while the greeting is being made."""
    conn = CONNECTION.get(None)
    data = conn.handshake_auth_data if conn is not None else None
    return data[:20] if data else None


def nonce_of(auth_info):
    """The connection's scramble, as MySQL reuses it (COM_CHANGE_USER too)."""
    if auth_info and auth_info.handshake_auth_data:
        return auth_info.handshake_auth_data[:20], auth_info
    return None, auth_info


def switch_nonce():
    """The scramble an auth switch sends: the connection's, or a new one for the greeting."""
    return connection_scramble() or utils.nonce(20)


def decrypt_password(data, nonce):
    plain = RSA_KEY.decrypt(
        data, padding.OAEP(mgf=padding.MGF1(algorithm=hashes.SHA1()), algorithm=hashes.SHA1(), label=None)
    )
    xored = bytes(b ^ nonce[i % len(nonce)] for i, b in enumerate(plain))
    return xored.rstrip(b"\0").decode()


def received_password(data, nonce):
    """The password a full authentication sent: in clear over a secure connection, else
    encrypted with the server's key; None when it reads as neither."""
    try:
        return data.rstrip(b"\0").decode() if is_secure() else decrypt_password(data, nonce)
    except Exception:  # pylint: disable=broad-except
        return None


def denied(data, stored):
    """How a denied full authentication is logged: `denied-in-clear` when a plain connection
    carried the password itself, which a client must encrypt there."""
    if not is_secure():
        try:
            if stored_hash(data.rstrip(b"\0").decode()) == stored:
                return "denied-in-clear"
        except Exception:  # pylint: disable=broad-except
            pass
    return "denied"


class CachingSha2(AuthPlugin):
    name = "caching_sha2_password"
    client_plugin_name = "caching_sha2_password"

    async def auth(self, auth_info=None):
        nonce, auth_info = nonce_of(auth_info)
        if nonce is None:
            nonce = switch_nonce()
            auth_info = yield nonce + b"\0"
        user = auth_info.user
        stored = bytes.fromhex(user.auth_string)
        scramble = auth_info.data
        if user.name in CACHE and len(scramble) == 32:
            candidate = bytes(a ^ b for a, b in zip(scramble, sha256(stored + nonce)))
            if sha256(candidate) == stored:
                conn = CONNECTION.get()
                await conn.stream.write(packets.make_auth_more_data(b"\x03"))
                log(user.name, self.name, "fast", "ok")
                yield Success(user.name)
                return
        auth_info = yield b"\x04"
        data = auth_info.data
        if not is_secure() and data == b"\x02":
            auth_info = yield PUBLIC_PEM
            data = auth_info.data
        password = received_password(data, nonce)
        if password is not None and stored_hash(password) == stored:
            CACHE.add(user.name)
            log(user.name, self.name, "full", "ok")
            yield Success(user.name)
        else:
            log(user.name, self.name, "full", denied(data, stored))
            yield Forbidden()


class Sha256(AuthPlugin):
    name = "sha256_password"
    client_plugin_name = "sha256_password"

    async def auth(self, auth_info=None):
        nonce, auth_info = nonce_of(auth_info)
        if nonce is None:
            nonce = switch_nonce()
            auth_info = yield nonce + b"\0"
        user = auth_info.user
        data = auth_info.data
        if not is_secure() and data == b"\x01":
            auth_info = yield PUBLIC_PEM
            data = auth_info.data
        password = received_password(data, nonce)
        stored = bytes.fromhex(user.auth_string)
        ok = password is not None and stored_hash(password) == stored
        log(user.name, self.name, "full", "ok" if ok else denied(data, stored))
        yield Success(user.name) if ok else Forbidden()


class Native(NativePasswordAuthPlugin):
    async def auth(self, auth_info=None):
        scramble = connection_scramble()
        if auth_info is None and scramble:
            # An auth switch: the connection's scramble again, as MySQL sends it (mysql-mimic
            # would make a new one).
            auth_info = yield scramble + b"\0"
            auth_info = auth_info.copy(auth_info.data)
            auth_info.handshake_auth_data = scramble
            auth_info.handshake_plugin_name = self.name
        elif auth_info and auth_info.handshake_auth_data:
            # A client that answered the greeting as mysql_native_password (Node's mysql2
            # does, whatever the greeting names) hashed the greeting's scramble: MySQL checks
            # against that one, where mysql-mimic would send a new one.
            auth_info = auth_info.copy(auth_info.data)
            auth_info.handshake_plugin_name = self.name
        state = super().auth(auth_info)
        decision = await state.__anext__()
        while isinstance(decision, bytes):
            decision = await state.asend((yield decision))
        log(CONNECTION.get().session.variables.get("external_user"), self.name, "full",
            "ok" if isinstance(decision, Success) else "denied")
        yield decision


class Accounts(IdentityProvider):
    def __init__(self, mysql9, sha256_default):
        self.mysql9 = mysql9
        self.sha256_default = sha256_default

    def get_plugins(self):
        # The first is the default, which the greeting names.
        plugins = [Sha256(), CachingSha2()] if self.sha256_default else [CachingSha2(), Sha256()]
        return plugins if self.mysql9 else plugins + [Native()]

    async def get_user(self, username):
        plugin, password = PASSWORDS.get(username, (None, None))
        if plugin is None or (self.mysql9 and plugin == "mysql_native_password"):
            return None
        if plugin == "mysql_native_password":
            return User(name=username, auth_string=Native.create_auth_string(password), auth_plugin=plugin)
        return User(name=username, auth_string=stored_hash(password).hex(), auth_plugin=plugin)


class EchoUser(Session):
    """Answers every query with who logged in and whether over TLS; FLUSH PRIVILEGES empties the
    cache, as on MySQL."""

    async def handle_query(self, sql, attrs):
        if sql.strip().upper().startswith("FLUSH PRIVILEGES"):
            CACHE.clear()
            return [], []
        if "CURRENT_USER" in sql.upper():
            return [(f"{self.username} {'tls' if is_secure() else 'plain'}",)], ["who"]
        answer = FEATURES.answer(CONNECTION.get(), sql, attrs)
        if answer is not None:
            return answer
        return await super().handle_query(sql, attrs)

    async def use(self, database):
        self.database = database
        FEATURES.used(CONNECTION.get(), database)

    async def query(self, expression, sql, attrs):
        return [(1,)], ["1"]


original_authenticate = Connection.authenticate


async def authenticate(self, *args, **kwargs):
    CONNECTION.set(self)
    return await original_authenticate(self, *args, **kwargs)


async def start_tls(self, context):
    """mysql-mimic's start_tls, handing the TLS layer what the client pipelined behind its
    SSLRequest (rustls sends its ClientHello at once): asyncio's start_tls would drop it."""
    pending = bytes(self.reader._buffer)  # pylint: disable=protected-access
    self.reader._buffer.clear()  # pylint: disable=protected-access
    transport = self.writer.transport
    loop = asyncio.get_running_loop()
    waiter = loop.create_future()
    tls = asyncio.sslproto.SSLProtocol(
        loop, transport.get_protocol(), context, waiter, server_side=True, call_connection_made=False
    )
    transport.pause_reading()
    transport.set_protocol(tls)
    loop.call_soon(tls.connection_made, transport)

    def feed():
        buf = tls.get_buffer(len(pending))
        buf[: len(pending)] = pending
        tls.buffer_updated(len(pending))

    if pending:
        loop.call_soon(feed)
    loop.call_soon(transport.resume_reading)
    await waiter
    app = tls._app_transport  # pylint: disable=protected-access
    self.writer._transport = app  # pylint: disable=protected-access
    self.reader._transport = app  # pylint: disable=protected-access


def tls_context(directory):
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "mysql8-test-server")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1)).sign(key, hashes.SHA256())
    )
    cert_path, key_path = os.path.join(directory, "cert.pem"), os.path.join(directory, "key.pem")
    with open(cert_path, "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(key_path, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_path, key_path)
    return context


async def main():
    global LOG  # pylint: disable=global-statement
    LOG = open(sys.argv[1], "a", encoding="utf-8")
    mysql9 = "--mysql9" in sys.argv
    Connection.authenticate = authenticate
    MysqlStream.start_tls = start_tls
    mysql8_protocol.install(log_line)
    with tempfile.TemporaryDirectory() as directory:
        context = tls_context(directory) if "--tls" in sys.argv else None
        accounts = Accounts(mysql9, "--sha256-default" in sys.argv)
        capabilities = DEFAULT_SERVER_CAPABILITIES | mysql8_protocol.CAPABILITIES
        server = MysqlServer(
            identity_provider=accounts, session_factory=EchoUser, ssl=context, capabilities=capabilities
        )
        await server.start_server(host="127.0.0.1", port=0)
        port = server._server.sockets[0].getsockname()[1]  # pylint: disable=protected-access
        # SIGHUP: the cache emptied, as by a server restart; the log says when.
        asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, flush_cache)
        print(f"port {port}", flush=True)
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
