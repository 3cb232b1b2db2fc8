"""The client side of node-to-node connections: TLS and SASL when one node dials another.

A node reaches the controllers on the first of `controller.listener.names` and other brokers on
the inter-broker listener (`inter.broker.listener.name`, or `security.inter.broker.protocol`),
with that listener's security protocol from `listener.security.protocol.map`, as Kafka does:

- TLS (SSL, SASL_SSL): the listener's `listener.name.<l>.ssl.*` settings (else `ssl.*`): the
  trust store checks the peer (host name too while `ssl.endpoint.identification.algorithm` is
  `https`, the default), a key store, when set, is presented as the client certificate;
- SASL (SASL_PLAINTEXT, SASL_SSL): `sasl.mechanism.inter.broker.protocol` /
  `sasl.mechanism.controller.protocol`, with the credentials of the listener's JAAS config
  (`listener.name.<l>.<mechanism>.sasl.jaas.config`, else `sasl.jaas.config`): `username` and
  `password` for PLAIN and SCRAM, `unsecuredLoginStringClaim_sub` for OAUTHBEARER's unsecured
  tokens. The exchange (SaslHandshake v1, then SaslAuthenticate v2) runs before the connection
  is handed to its user.

The TLS side is a `ClientTls`: like the listener's server context (samsa.security.ssl_context,
Kafka's reconfigurable SSL factory that the inter-broker client shares), it is rebuilt when a
dynamic `listener.name.<l>.ssl.*` change reaches this node (Broker._on_tls_metadata), and every
connection opened after that presents the new key store and checks peers against the new trust
store; connections already open keep their session.

`open_node_connection` is what NodeChannel and the quorum driver dial with; a refusal by the peer
(wrong credentials, mechanism not enabled, certificate not trusted) is a `NodeAuthError`, which
callers log as such (Kafka: "Connection to node N failed authentication due to: ...").
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import logging
import os
import ssl
import struct
import tempfile
import time
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from samsa.config import BrokerConfig, ConfigError
from samsa.protocol.codec import Chunks, build

SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
API_VERSIONS = 18
SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})
TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})
CLIENT_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
_ERRORS = {33: "UNSUPPORTED_SASL_MECHANISM", 34: "ILLEGAL_SASL_STATE",
           58: "SASL_AUTHENTICATION_FAILED"}
_SIZE = struct.Struct(">i")
MAX_AUTH_FRAME = 1 << 20
log = logging.getLogger("samsa.cluster.node_security")
Lookup = Callable[[str], str | None]


class NodeAuthError(Exception):
    """The peer refused this node's credentials or TLS identity (or this node refused the peer's
    certificate): retrying does not help until a configuration changes."""


@dataclass(frozen=True)
class NodeSecurity:
    """How to reach one kind of listener of other nodes."""

    listener: str = "PLAINTEXT"
    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = field(default=None, compare=False)
    check_hostname: bool = True
    mechanism: str | None = None
    username: str = ""
    password: str = field(default="", repr=False)
    token_claims: tuple[tuple[str, str], ...] = ()  # OAUTHBEARER unsecured login
    live: ClientTls | None = field(default=None, compare=False, repr=False)  # reloadable TLS

    def context(self) -> ssl.SSLContext | None:
        """The TLS context a new connection uses: the reloaded one when the stores changed."""
        return self.live.context if self.live is not None else self.ssl_context

    @property
    def tls(self) -> bool:
        return self.protocol in TLS_PROTOCOLS

    @property
    def sasl(self) -> bool:
        return self.protocol in SASL_PROTOCOLS

    def describe(self) -> str:
        sasl = f", SASL {self.mechanism} as {self.username or '?'}" if self.sasl else ""
        return f"listener {self.listener} ({self.protocol}{sasl})"


PLAINTEXT = NodeSecurity()


# ---- from the node's configuration ------------------------------------------------------------
def _csv(value: str | None) -> list[str]:
    return [x.strip() for x in (value or "").split(",") if x.strip()]


def build_client_context(config: BrokerConfig | Lookup, listener: str,
                         ) -> tuple[ssl.SSLContext, bool]:
    """A client SSLContext from the listener's ssl.* settings (read from the node's config, or
    a lookup such as the broker's dynamic one), and whether host names are checked;
    ConfigError when the stores do not load."""
    from samsa.security.ssl_context import _PROTOCOLS, _pem_file, listener_setting, openssl_cipher

    where = f"listener {listener} (node-to-node client)"
    lookup = config.get if isinstance(config, BrokerConfig) else config

    def get(name: str) -> str | None:
        return listener_setting(lookup, listener, name)

    for what in ("ssl.keystore.type", "ssl.truststore.type"):
        if (get(what) or "PEM").upper() != "PEM":
            raise ConfigError(f"{what}={get(what)} on {where}: Samsa reads PEM key stores only")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    versions = []
    for p in _csv(get("ssl.enabled.protocols") or "TLSv1.2,TLSv1.3"):
        if p not in _PROTOCOLS:
            raise ConfigError(f"Invalid value {p!r} in ssl.enabled.protocols ({where})")
        versions.append(_PROTOCOLS[p])
    ctx.minimum_version, ctx.maximum_version = min(versions), max(versions)
    ciphers = [openssl_cipher(c) for c in _csv(get("ssl.cipher.suites"))
               if not c.startswith(("TLS_AES", "TLS_CHACHA20"))]
    if ciphers:
        try:
            ctx.set_ciphers(":".join(ciphers))
        except ssl.SSLError:
            raise ConfigError(f"Invalid ssl.cipher.suites ({where})") from None
    algorithm = (get("ssl.endpoint.identification.algorithm") or "").strip().lower()
    ctx.check_hostname = algorithm == "https"
    ctx.verify_mode = ssl.CERT_REQUIRED
    location = get("ssl.keystore.location")
    chain, key = get("ssl.keystore.certificate.chain"), get("ssl.keystore.key")
    try:
        with tempfile.TemporaryDirectory(prefix="samsa-tls-") as tmp:
            trust_location, trust_inline = get("ssl.truststore.location"), \
                get("ssl.truststore.certificates")
            if trust_location:
                ctx.load_verify_locations(cafile=trust_location)
            if trust_inline:
                ctx.load_verify_locations(cadata=trust_inline)
            if not trust_location and not trust_inline:
                ctx.load_default_certs()
            if chain and key:
                ctx.load_cert_chain(_pem_file(chain, tmp, "chain.pem"),
                                    _pem_file(key, tmp, "key.pem"), get("ssl.key.password"))
            elif location:
                ctx.load_cert_chain(location, location, get("ssl.key.password"))
    except (OSError, ssl.SSLError, ValueError) as e:
        raise ConfigError(f"Failed to load SSL key store or trust store for {where}: {e}") \
            from None
    return ctx, ctx.check_hostname


# The settings the client context is built from: a change to any of them rebuilds it.
CLIENT_SSL_KEYS = ("ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.certificate.chain",
                   "ssl.keystore.key", "ssl.key.password", "ssl.truststore.type",
                   "ssl.truststore.location", "ssl.truststore.certificates",
                   "ssl.enabled.protocols", "ssl.cipher.suites",
                   "ssl.endpoint.identification.algorithm")


class ClientTls:
    """The client TLS context of one listener, reloadable: Kafka's inter-broker and controller
    clients share the listener's reconfigurable SSL factory, so a key store or trust store
    updated dynamically (kafka-configs --alter --entity-type brokers --entity-name N on
    listener.name.<l>.ssl.keystore.*) is what the node presents, and trusts, on every
    connection it opens afterwards."""

    def __init__(self, listener: str, lookup: Lookup) -> None:
        self.listener = listener
        self.lookup = lookup
        self.settings = self._read(lookup)
        self.context, self.check_hostname = build_client_context(lookup, listener)
        self.reloads = 0

    def _read(self, lookup: Lookup) -> tuple[tuple[str, str | None], ...]:
        from samsa.security.ssl_context import listener_setting

        return tuple((k, listener_setting(lookup, self.listener, k)) for k in CLIENT_SSL_KEYS)

    def reload(self, force: bool = False) -> bool:
        """Rebuild from the current settings if they changed (or `force`: renewed files at the
        same paths). On failure the old context stays and the ConfigError is raised."""
        settings = self._read(self.lookup)
        if settings == self.settings and not force:
            return False
        ctx, check = build_client_context(self.lookup, self.listener)
        self.settings, self.context, self.check_hostname = settings, ctx, check
        self.reloads += 1
        log.info("listener %s: node-to-node client TLS key store / trust store reloaded",
                 self.listener)
        return True


def reloadable_tls(*securities: NodeSecurity | None) -> list[ClientTls]:
    """The distinct reloadable TLS contexts of these node securities (a listener dialled both
    as the inter-broker and the controller listener is one)."""
    out: list[ClientTls] = []
    for sec in securities:
        if sec is not None and sec.live is not None and all(sec.live is not t for t in out):
            out.append(sec.live)
    return out


def node_security(config: BrokerConfig, listener: str, protocol: str,
                  mechanism_key: str) -> NodeSecurity:
    """How to dial `listener` (of protocol `protocol`) of other nodes; ConfigError (the node
    refuses to start) when TLS stores do not load or SASL credentials are missing."""
    listener = listener.upper()
    if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        raise ConfigError(f"Listener {listener}: unknown security protocol {protocol}")
    live = ClientTls(listener, config.get) if protocol in TLS_PROTOCOLS else None
    ctx, check = (live.context, live.check_hostname) if live is not None else (None, True)
    if protocol not in SASL_PROTOCOLS:
        return NodeSecurity(listener, protocol, ctx, check, live=live)
    mech = (config.get(mechanism_key) or "GSSAPI").strip()
    if mech not in CLIENT_MECHANISMS:
        raise ConfigError(f"{mechanism_key}={mech}: Samsa nodes authenticate to each other with "
                          f"{', '.join(CLIENT_MECHANISMS)} (no GSSAPI); set {mechanism_key}")
    from samsa.security.sasl.jaas import parse_jaas

    jaas_key = f"listener.name.{listener.lower()}.{mech.lower()}.sasl.jaas.config"
    value = config.values.get(jaas_key) or config.values.get("sasl.jaas.config")
    if not value:
        raise ConfigError(f"Listener {listener} carries node-to-node traffic over {protocol} "
                          f"with {mech}: set {jaas_key} with the node's own username and "
                          f"password")
    _, opts = parse_jaas(value)
    if mech == "OAUTHBEARER":
        claims = tuple(sorted((k.removeprefix("unsecuredLoginStringClaim_"), v)
                              for k, v in opts.items()
                              if k.startswith("unsecuredLoginStringClaim_")))
        if not dict(claims).get("sub"):
            raise ConfigError(f"{jaas_key}: OAUTHBEARER between nodes needs "
                              f"unsecuredLoginStringClaim_sub (the node's principal)")
        return NodeSecurity(listener, protocol, ctx, check, mech, dict(claims)["sub"], "",
                            claims, live)
    user, password = opts.get("username"), opts.get("password")
    if not user or password is None:
        raise ConfigError(f"{jaas_key}: {mech} between nodes needs username=\"...\" and "
                          f"password=\"...\" (the credentials this node logs in with)")
    return NodeSecurity(listener, protocol, ctx, check, mech, user, password, live=live)


def _protocol_of(config: BrokerConfig, listener: str) -> str:
    from samsa.broker.listeners import effective_protocol_map

    proto = effective_protocol_map(config).get(listener.upper())
    if proto is None:
        raise ConfigError(f"Listener {listener} has no security protocol in "
                          f"listener.security.protocol.map")
    return proto


def inter_broker_security(config: BrokerConfig) -> NodeSecurity:
    from samsa.broker.listeners import inter_broker_listener_name

    name = inter_broker_listener_name(config)
    return node_security(config, name, _protocol_of(config, name),
                         "sasl.mechanism.inter.broker.protocol")


def controller_security(config: BrokerConfig) -> NodeSecurity:
    from samsa.broker.listeners import controller_listener_names

    names = controller_listener_names(config)
    if not names:
        return PLAINTEXT
    return node_security(config, names[0], _protocol_of(config, names[0]),
                         "sasl.mechanism.controller.protocol")


# ---- SASL client mechanisms ------------------------------------------------------------------
class _Plain:
    def __init__(self, sec: NodeSecurity) -> None:
        self.first = b"\0" + sec.username.encode() + b"\0" + sec.password.encode()

    def next(self, challenge: bytes) -> bytes | None:
        return None


def _scram_name(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


@cache
def _salted(hash_name: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(hash_name, password.encode(), salt, iterations)


class _Scram:
    """RFC 5802 client: client-first, then client-final with the proof, then the server's
    signature checked (a peer that cannot prove it knows the credential is refused)."""

    def __init__(self, sec: NodeSecurity) -> None:
        self.hash = "sha256" if sec.mechanism == "SCRAM-SHA-256" else "sha512"
        self.password = sec.password
        self.nonce = base64.b64encode(os.urandom(24)).decode()
        self.bare = f"n={_scram_name(sec.username)},r={self.nonce}"
        self.first = ("n,," + self.bare).encode()
        self.server_signature = b""
        self.step = 0

    def next(self, challenge: bytes) -> bytes | None:
        self.step += 1
        text = challenge.decode(errors="replace")
        attrs = dict(p.split("=", 1) for p in text.split(",") if "=" in p)
        if self.step == 1:
            nonce, salt, iters = attrs.get("r", ""), attrs.get("s"), attrs.get("i", "")
            if not nonce.startswith(self.nonce) or salt is None or not iters.isdigit():
                raise NodeAuthError(f"malformed SCRAM server-first message {text[:80]!r}")
            salted = _salted(self.hash, self.password, base64.b64decode(salt), int(iters))
            client_key = hmac.digest(salted, b"Client Key", self.hash)
            stored = hashlib.new(self.hash, client_key).digest()
            final = f"c=biws,r={nonce}"
            auth = f"{self.bare},{text},{final}".encode()
            sig = hmac.digest(stored, auth, self.hash)
            proof = bytes(a ^ b for a, b in zip(client_key, sig, strict=True))
            server_key = hmac.digest(salted, b"Server Key", self.hash)
            self.server_signature = hmac.digest(server_key, auth, self.hash)
            return f"{final},p={base64.b64encode(proof).decode()}".encode()
        if "e" in attrs:
            raise NodeAuthError(f"SCRAM error from the peer: {attrs['e']}")
        got = base64.b64decode(attrs.get("v", ""))
        if not hmac.compare_digest(got, self.server_signature):
            raise NodeAuthError("the peer's SCRAM server signature is wrong (it does not hold "
                                "this node's credential)")
        return None


class _OAuthUnsecured:
    """An unsigned JWS (alg none) with the JAAS config's unsecuredLoginStringClaim_* claims, as
    Kafka's OAuthBearerUnsecuredLoginCallbackHandler makes; valid for an hour."""

    def __init__(self, sec: NodeSecurity) -> None:
        now = int(time.time())
        claims: dict[str, Any] = {"iat": now, "exp": now + 3600, **dict(sec.token_claims)}

        def part(d: dict[str, Any]) -> str:
            return base64.urlsafe_b64encode(json.dumps(d).encode()).decode().rstrip("=")
        token = f"{part({'alg': 'none'})}.{part(claims)}."
        self.first = f"n,,\x01auth=Bearer {token}\x01\x01".encode()

    def next(self, challenge: bytes) -> bytes | None:
        if challenge:
            raise NodeAuthError(f"OAUTHBEARER token refused: {challenge[:200]!r}")
        return None


def _mechanism(sec: NodeSecurity) -> Any:
    if sec.mechanism == "PLAIN":
        return _Plain(sec)
    if sec.mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        return _Scram(sec)
    return _OAuthUnsecured(sec)


# ---- the exchange on the wire -----------------------------------------------------------------
@cache
def _codecs(key: int, version: int) -> tuple[Any, ...]:
    req = load_request_schema(key, version)
    resp = load_response_schema(key, version)
    return (req, req.__header_schema__, entity_writer(req), entity_writer(req.__header_schema__),
            entity_reader(resp.__header_schema__), entity_reader(resp))


def request_frame(key: int, version: int, corr: int, client_id: str,
                   body: dict[str, Any]) -> tuple[bytes, Any, Any]:
    """A size-prefixed request and the readers of its answer (header, body)."""
    req, hdr, write_body, write_hdr, read_hdr, read_body = _codecs(key, version)
    out = Chunks()
    write_hdr(out, hdr(request_api_key=key, request_api_version=version, correlation_id=corr,
                       client_id=client_id))
    write_body(out, build(req, body))
    frame = b"".join(out)
    return _SIZE.pack(len(frame)) + frame, read_hdr, read_body


async def _call(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, key: int,
                version: int, corr: int, client_id: str, body: dict[str, Any]) -> Any:
    frame, read_hdr, read_body = request_frame(key, version, corr, client_id, body)
    writer.write(frame)
    await writer.drain()
    (size,) = _SIZE.unpack(await reader.readexactly(4))
    if not 4 <= size <= MAX_AUTH_FRAME:
        raise NodeAuthError(f"answer of size {size} during SASL authentication")
    data = await reader.readexactly(size)
    try:
        _, n = read_hdr(data, 0)
        return read_body(data, n)[0]
    except Exception as e:
        raise NodeAuthError(f"undecodable answer during SASL authentication: {e}") from None


Call = Callable[[int, int, dict[str, Any]], Awaitable[Any]]  # (api key, version, body) -> answer


async def _exchange(call: Call, sec: NodeSecurity) -> int:
    """SaslHandshake v1, then SaslAuthenticate v2 rounds until the mechanism is done; the
    session lifetime the peer gave (ms, 0: none)."""
    lifetime = 0
    hs = await call(SASL_HANDSHAKE, 1, {"mechanism": sec.mechanism})
    if hs.error_code:
        raise NodeAuthError(f"{_ERRORS.get(hs.error_code, hs.error_code)}: the peer's "
                            f"{sec.listener} listener does not enable {sec.mechanism} "
                            f"(it enables {', '.join(hs.mechanisms) or 'none'})")
    mech = _mechanism(sec)
    token: bytes | None = mech.first
    rounds = 0
    while token is not None:
        r = await call(SASL_AUTHENTICATE, 2, {"auth_bytes": token})
        rounds += 1
        if r.error_code:
            raise NodeAuthError(f"{_ERRORS.get(r.error_code, r.error_code)}: "
                                f"{r.error_message or ''}".rstrip(": "))
        lifetime = _ms(r.session_lifetime)
        token = mech.next(bytes(r.auth_bytes or b""))
        if rounds >= 8:
            raise NodeAuthError("SASL exchange did not complete in 8 rounds")
    return lifetime


async def sasl_session(call: Call, sec: NodeSecurity) -> int:
    """Run the SASL exchange through `call` (a fresh connection, or one being re-authenticated
    in place: KIP-368); NodeAuthError for a refusal (with the peer's answer), ConnectionError when
    the connection goes. Returns the session lifetime the peer gave (ms, 0: none)."""
    try:
        return await _exchange(call, sec)
    except ssl.SSLError as e:  # TLS 1.3: a refused client certificate shows on the first read
        raise NodeAuthError(f"TLS: the peer refused this node: {e.reason or e}") from None
    except (asyncio.IncompleteReadError, ConnectionError) as e:
        # a refusal is answered before Kafka closes; a bare close is the network or a restart
        raise ConnectionError(f"the peer closed the connection during SASL {sec.mechanism} "
                              f"authentication ({type(e).__name__}: {e})") from None
    except (NodeAuthError, OSError):
        raise
    except Exception as e:  # never a dead connect task over an odd answer
        raise NodeAuthError(f"SASL {sec.mechanism} exchange failed: {type(e).__name__}: "
                            f"{e}") from None


async def authenticate(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                       sec: NodeSecurity, client_id: str) -> int:
    """SASL on a new connection, before anything else is sent on it; the session lifetime."""
    corr = 0

    async def call(key: int, version: int, body: dict[str, Any]) -> Any:
        nonlocal corr
        corr += 1
        return await _call(reader, writer, key, version, corr - 1, client_id, body)
    return await sasl_session(call, sec)


def _ms(value: Any) -> int:
    """kio gives durations as timedelta."""
    if value is None:
        return 0
    if hasattr(value, "total_seconds"):
        return int(value.total_seconds() * 1000)
    return int(value)


# KIP-368: a SASL session the peer limits (connections.max.reauth.ms, a token's expiry) ends
# with its connection unless the client re-authenticates on it first, as Kafka's nodes do: the
# loop time, by writer, after which a connection takes no new requests until it has run
# SaslHandshake + SaslAuthenticate again (NodeChannel, the quorum driver).
REAUTH_MARGIN = 0.8  # of the session lifetime
_retire_at: weakref.WeakKeyDictionary[asyncio.StreamWriter, float] = weakref.WeakKeyDictionary()


def expired(writer: asyncio.StreamWriter) -> bool:
    """The connection's SASL session is near its end: re-authenticate before sending more."""
    at = _retire_at.get(writer)
    return at is not None and asyncio.get_running_loop().time() >= at


def session_started(writer: asyncio.StreamWriter, lifetime_ms: int) -> None:
    """A (re-)authentication gave the session `lifetime_ms` (0: it does not expire)."""
    if lifetime_ms > 0:
        _retire_at[writer] = asyncio.get_running_loop().time() + REAUTH_MARGIN * lifetime_ms / 1000
    else:
        _retire_at.pop(writer, None)


async def _confirm_tls(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str,
                       port: int, client_id: str) -> None:
    """One ApiVersions round trip on a fresh SSL connection: with TLS 1.3 a server refuses a
    client certificate only after the handshake, and asyncio shows its alert as a plain close, so
    a close here is reported as the refusal it is (instead of a dropped connection later)."""
    try:
        await _call(reader, writer, API_VERSIONS, 0, 0, client_id, {})
    except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError) as e:
        raise NodeAuthError(f"TLS: the peer refused the connection after the handshake "
                            f"({type(e).__name__}): does {host}:{port} trust this node's "
                            f"certificate (its ssl.truststore.*, this node's "
                            f"ssl.keystore.*)?") from None


Dialer = Callable[[str, int], tuple[str, int]]


async def open_node_connection(host: str, port: int, sec: NodeSecurity | None, timeout: float,
                               client_id: str = "samsa-node", dial: Dialer | None = None,
                               ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Connect to another node's listener at host:port (`dial` maps it to where to connect: the
    test routes), run TLS and SASL as `sec` says, and return the ready stream. OSError /
    TimeoutError for a network failure, NodeAuthError for a refused identity."""
    sec = sec or PLAINTEXT
    target = dial(host, port) if dial is not None else (host, port)
    ctx = sec.context() if sec.tls else None  # the newest key / trust stores (ClientTls)

    async def run() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        try:
            reader, writer = await asyncio.open_connection(
                *target, ssl=ctx,
                server_hostname=(host if ctx.check_hostname else "") if ctx else None)
        except ssl.SSLCertVerificationError as e:
            raise NodeAuthError(f"TLS: the certificate of {host}:{port} is not trusted: "
                                f"{e.verify_message or e}") from None
        except ssl.SSLError as e:
            raise NodeAuthError(f"TLS handshake with {host}:{port} failed: "
                                f"{e.reason or e}") from None
        try:
            if sec.sasl:
                session_started(writer, await authenticate(reader, writer, sec, client_id))
            elif sec.tls:
                await _confirm_tls(reader, writer, host, port, client_id)
        except BaseException:
            writer.close()
            raise
        return reader, writer

    return await asyncio.wait_for(run(), timeout)


# ---- the same over a blocking socket (tools and the test harness) -----------------------------
def _call_blocking(sock: Any, key: int, version: int, corr: int, client_id: str,
                   body: dict[str, Any]) -> Any:
    frame, read_hdr, read_body = request_frame(key, version, corr, client_id, body)
    sock.sendall(frame)

    def exact(n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            if not chunk:
                raise NodeAuthError("the peer closed the connection during SASL authentication")
            buf += chunk
        return bytes(buf)
    (size,) = _SIZE.unpack(exact(4))
    if not 4 <= size <= MAX_AUTH_FRAME:
        raise NodeAuthError(f"answer of size {size} during SASL authentication")
    data = exact(size)
    _, n = read_hdr(data, 0)
    return read_body(data, n)[0]


def open_blocking(host: str, port: int, sec: NodeSecurity | None, timeout: float,
                  client_id: str = "samsa-tool") -> Any:
    """A blocking socket to host:port with TLS and SASL done as `sec` says."""
    import socket

    sec = sec or PLAINTEXT
    sock: Any = socket.create_connection((host, port), timeout=timeout)
    try:
        if sec.tls:
            ctx = sec.context()
            assert ctx is not None
            sock = ctx.wrap_socket(
                sock, server_hostname=host if ctx.check_hostname else None)
        if sec.sasl:
            hs = _call_blocking(sock, SASL_HANDSHAKE, 1, 0, client_id,
                                {"mechanism": sec.mechanism})
            if hs.error_code:
                raise NodeAuthError(f"{_ERRORS.get(hs.error_code, hs.error_code)}")
            mech = _mechanism(sec)
            token: bytes | None = mech.first
            corr = 1
            while token is not None and corr < 8:
                r = _call_blocking(sock, SASL_AUTHENTICATE, 2, corr, client_id,
                                   {"auth_bytes": token})
                corr += 1
                if r.error_code:
                    raise NodeAuthError(f"{_ERRORS.get(r.error_code, r.error_code)}: "
                                        f"{r.error_message or ''}")
                token = mech.next(bytes(r.auth_bytes or b""))
    except BaseException:
        sock.close()
        raise
    sock.settimeout(timeout)
    return sock
