"""Client-side security settings, the way Kafka's clients take them, for every Samsa component
that connects to a broker (the CLI, the Spark source and sink, the Connect worker).

Kafka's tools read Java client properties (`security.protocol`, `sasl.mechanism`,
`sasl.jaas.config`, `ssl.truststore.location`, `ssl.keystore.*`); Samsa's clients are librdkafka
(confluent-kafka) plus a few raw-protocol connections. This module
- reads a Java `.properties` file (`read_client_properties`, with `\\` line continuations),
- turns Java client properties into librdkafka settings (`librdkafka_config`; librdkafka's own
  names pass through unchanged, so a file may use either),
- drives TLS and SASL (PLAIN, SCRAM-SHA-256/512, OAUTHBEARER with an unsecured token) for the
  raw-protocol clients (`ClientSecurity`, `handshake_requests`, `secure_socket`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import io
import json
import os
import socket
import ssl
import struct
import time
from collections.abc import Generator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")

# Java settings with no librdkafka counterpart that do not change what a client does here.
_DROPPED = {"ssl.truststore.type", "ssl.keystore.type", "ssl.truststore.password",
            "ssl.protocol", "ssl.enabled.protocols", "ssl.keymanager.algorithm",
            "ssl.trustmanager.algorithm", "ssl.secure.random.implementation",
            "ssl.engine.factory.class", "sasl.login.class"}
_UNSUPPORTED = {"sasl.login.callback.handler.class", "sasl.client.callback.handler.class",
                "sasl.kerberos.service.name"}


class SecurityConfigError(ValueError):
    """Client security settings that cannot be used (with the setting named)."""


class AuthenticationError(Exception):
    """The broker refused the TLS handshake or the SASL authentication."""


def is_security_key(key: str) -> bool:
    """True for the settings that make a client's security (what Spark's `kafka.` options and
    Connect's worker settings pass to every client)."""
    return key == "security.protocol" or key.startswith(("sasl.", "ssl.")) \
        or key == "enable.sasl.oauthbearer.unsecure.jwt"


# ---- properties files -----------------------------------------------------------------------

def read_client_properties(path: str | Path) -> dict[str, str]:
    """A Java .properties file (`key=value` or `key: value`, `#`/`!` comments, a trailing `\\`
    continues the line, as Kafka's `--command-config` files use for sasl.jaas.config).
    Raises OSError for an unreadable file and SecurityConfigError for a malformed line."""
    text = Path(path).read_text()
    out: dict[str, str] = {}
    logical = ""
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip() if not logical else raw.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            logical += line[:-1]
            continue
        logical += line
        seps = [i for i in (logical.find("="), logical.find(":")) if i >= 0]
        if not seps:
            raise SecurityConfigError(f"{path}:{n}: expected key=value, got {logical[:60]!r}")
        i = min(seps)
        key = logical[:i].strip()
        if not key:
            raise SecurityConfigError(f"{path}:{n}: empty key")
        out[key] = logical[i + 1:].strip()
        logical = ""
    if logical:
        raise SecurityConfigError(f"{path}: the last line ends with a continuation '\\'")
    return out


# ---- Java properties -> librdkafka --------------------------------------------------------

def _jaas_options(value: str) -> tuple[str, dict[str, str]]:
    from samsa.config import ConfigError
    from samsa.security.sasl.jaas import parse_jaas

    try:
        return parse_jaas(value)
    except ConfigError as e:
        raise SecurityConfigError(f"sasl.jaas.config: {e}") from None


def _pem_or_refuse(kind: str, store_type: str | None, what: str) -> None:
    t = (store_type or "PEM").upper()
    if t != "PEM":
        raise SecurityConfigError(
            f"ssl.{kind}.type={t} is not supported for {what}: use PEM files "
            f"(ssl.{kind}.type=PEM) or librdkafka's ssl.* settings")


def librdkafka_config(props: Mapping[str, Any]) -> dict[str, Any]:
    """Kafka (Java) client properties as librdkafka settings. Keys librdkafka already knows pass
    through; `sasl.jaas.config` becomes sasl.username/password (PLAIN, SCRAM) or an unsecured
    OAUTHBEARER principal; PEM trust/key stores become ssl.ca.* / ssl.certificate.* /
    ssl.key.*; a PKCS12 key store becomes ssl.keystore.*. JKS stores are refused."""
    src = dict(props)
    out: dict[str, Any] = {}
    for key in _UNSUPPORTED & src.keys():
        raise SecurityConfigError(f"{key} is not supported (Java classes cannot be loaded)")
    ts_type = src.pop("ssl.truststore.type", None)
    ks_type = src.pop("ssl.keystore.type", None)
    for key in _DROPPED:
        src.pop(key, None)
    jaas = src.pop("sasl.jaas.config", None)
    if jaas:
        module, opts = _jaas_options(str(jaas))
        if module.endswith("OAuthBearerLoginModule"):
            sub = opts.get("unsecuredLoginStringClaim_sub")
            if sub is None:
                raise SecurityConfigError(
                    "sasl.jaas.config: OAuthBearerLoginModule needs unsecuredLoginStringClaim_sub "
                    "(only unsecured tokens can be made here; use librdkafka's "
                    "sasl.oauthbearer.* settings for an identity provider)")
            cfg = [f"principal={sub}"]
            if "unsecuredLoginLifetimeSeconds" in opts:
                cfg.append(f"lifeSeconds={opts['unsecuredLoginLifetimeSeconds']}")
            out["enable.sasl.oauthbearer.unsecure.jwt"] = True
            out["sasl.oauthbearer.config"] = " ".join(cfg)
        else:
            if "username" in opts:
                out["sasl.username"] = opts["username"]
            if "password" in opts:
                out["sasl.password"] = opts["password"]
    if "ssl.truststore.location" in src:
        _pem_or_refuse("truststore", ts_type, "trust stores")
        out["ssl.ca.location"] = src.pop("ssl.truststore.location")
    if "ssl.truststore.certificates" in src:
        out["ssl.ca.pem"] = src.pop("ssl.truststore.certificates")
    if "ssl.keystore.location" in src:
        t = (ks_type or "PEM").upper()
        loc = src.pop("ssl.keystore.location")
        if t == "PEM":  # one file with the key and the chain: librdkafka reads each from it
            out["ssl.certificate.location"] = loc
            out["ssl.key.location"] = loc
            src.pop("ssl.keystore.password", None)
        elif t == "PKCS12":
            out["ssl.keystore.location"] = loc
        else:
            _pem_or_refuse("keystore", t, "key stores")
    if "ssl.keystore.certificate.chain" in src:
        out["ssl.certificate.pem"] = src.pop("ssl.keystore.certificate.chain")
    if "ssl.keystore.key" in src:
        out["ssl.key.pem"] = src.pop("ssl.keystore.key")
    if "ssl.endpoint.identification.algorithm" in src:
        v = str(src.pop("ssl.endpoint.identification.algorithm")).strip()
        out["ssl.endpoint.identification.algorithm"] = "none" if v == "" else v.lower()
    for k, v in src.items():
        out.setdefault(k, v)
    if "security.protocol" in out:
        proto = str(out["security.protocol"]).upper()
        if proto not in PROTOCOLS:
            raise SecurityConfigError(f"security.protocol={out['security.protocol']}: expected "
                                      f"one of {', '.join(PROTOCOLS)}")
        out["security.protocol"] = proto
    return out


def fail_on_auth_error(err: Any) -> None:
    """A librdkafka `error_cb` that raises a failed TLS handshake or SASL login out of the
    client's poll()/flush()/consume() (librdkafka itself would retry until a timeout, where the
    Java client fails the call at once)."""
    from confluent_kafka import KafkaError, KafkaException

    if err.code() in (KafkaError._AUTHENTICATION, KafkaError._SSL):
        raise KafkaException(err)


# ---- raw-protocol clients -----------------------------------------------------------------

@dataclass(frozen=True)
class ClientSecurity:
    """What a raw-protocol client needs for TLS and SASL, read from librdkafka settings."""

    protocol: str = "PLAINTEXT"
    mechanism: str = "GSSAPI"
    username: str | None = None
    password: str | None = None
    oauth_principal: str | None = None
    oauth_life_s: int = 3600
    ca_location: str | None = None
    ca_pem: str | None = None
    cert_location: str | None = None
    cert_pem: str | None = None
    key_location: str | None = None
    key_pem: str | None = None
    key_password: str | None = None
    check_hostname: bool = True

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @classmethod
    def from_config(cls, conf: Mapping[str, Any]) -> ClientSecurity:
        """From librdkafka settings (or Java ones: they are translated first)."""
        c = librdkafka_config(conf)
        proto = str(c.get("security.protocol", "PLAINTEXT")).upper()
        mech = str(c.get("sasl.mechanism", c.get("sasl.mechanisms", "GSSAPI"))).upper()
        if proto in ("SASL_PLAINTEXT", "SASL_SSL") and mech not in MECHANISMS:
            raise SecurityConfigError(f"sasl.mechanism={mech} is not supported (choose from "
                                      f"{', '.join(MECHANISMS)})")
        principal, life = None, 3600
        for part in str(c.get("sasl.oauthbearer.config", "")).split():
            k, _, v = part.partition("=")
            if k == "principal":
                principal = v
            elif k == "lifeSeconds" and v.isdigit():
                life = int(v)
        if mech == "OAUTHBEARER" and proto.startswith("SASL") and principal is None:
            raise SecurityConfigError("OAUTHBEARER needs sasl.oauthbearer.config=principal=<name> "
                                      "(an unsecured token) or sasl.jaas.config")
        if mech in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512") and proto.startswith("SASL") \
                and (c.get("sasl.username") is None or c.get("sasl.password") is None):
            raise SecurityConfigError(f"{mech} needs sasl.username and sasl.password "
                                      f"(or sasl.jaas.config)")
        algo = str(c.get("ssl.endpoint.identification.algorithm", "https")).lower()
        return cls(protocol=proto, mechanism=mech, username=c.get("sasl.username"),
                   password=c.get("sasl.password"), oauth_principal=principal,
                   oauth_life_s=life, ca_location=c.get("ssl.ca.location"),
                   ca_pem=c.get("ssl.ca.pem"), cert_location=c.get("ssl.certificate.location"),
                   cert_pem=c.get("ssl.certificate.pem"), key_location=c.get("ssl.key.location"),
                   key_pem=c.get("ssl.key.pem"), key_password=c.get("ssl.key.password"),
                   check_hostname=algo != "none")

    def ssl_context(self) -> ssl.SSLContext:
        """A client TLS context: the configured CA (else the system's), a client certificate
        when one is set, host name checks unless ssl.endpoint.identification.algorithm=none."""
        try:
            ctx = ssl.create_default_context(cafile=self.ca_location, cadata=self.ca_pem)
            ctx.check_hostname = self.check_hostname
            if self.cert_location or self.cert_pem:
                self._load_cert(ctx)
        except (OSError, ssl.SSLError, ValueError) as e:
            raise SecurityConfigError(f"cannot load the TLS settings: {e}") from None
        return ctx

    def _load_cert(self, ctx: ssl.SSLContext) -> None:
        if self.cert_location:
            ctx.load_cert_chain(self.cert_location, self.key_location or self.cert_location,
                                password=self.key_password)
            return
        import tempfile

        with tempfile.TemporaryDirectory() as d:  # ssl loads chains from files only
            crt, key = Path(d, "c.pem"), Path(d, "k.pem")
            crt.write_text(self.cert_pem or "")
            key.write_text(self.key_pem or "")
            ctx.load_cert_chain(str(crt), str(key), password=self.key_password)

    def sasl_client(self) -> SaslClient:
        return SaslClient(self.mechanism, self.username or "", self.password or "",
                          self.oauth_principal, self.oauth_life_s)


class SaslClient:
    """One SASL exchange from the client's side (sans I/O): `first()` is the initial token,
    `answer(challenge)` the next one (None when the exchange is over and verified)."""

    def __init__(self, mechanism: str, username: str, password: str,
                 oauth_principal: str | None = None, oauth_life_s: int = 3600) -> None:
        self.mechanism = mechanism
        self.username = username
        self.password = password
        self.oauth_principal = oauth_principal
        self.oauth_life_s = oauth_life_s
        self._hash = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}.get(mechanism)
        self._nonce = ""
        self._first_bare = ""
        self._server_signature = b""
        self._step = 0

    def first(self) -> bytes:
        if self.mechanism == "PLAIN":
            return f"\0{self.username}\0{self.password}".encode()
        if self.mechanism == "OAUTHBEARER":
            now = int(time.time())
            claims = {"sub": self.oauth_principal, "iat": now, "exp": now + self.oauth_life_s}
            token = f"{_NONE_HEADER}.{_b64url(json.dumps(claims).encode())}."
            return f"n,,\x01auth=Bearer {token}\x01\x01".encode()
        name = self.username.replace("=", "=3D").replace(",", "=2C")
        self._nonce = base64.b64encode(os.urandom(24)).decode()
        self._first_bare = f"n={name},r={self._nonce}"
        return f"n,,{self._first_bare}".encode()

    def answer(self, challenge: bytes) -> bytes | None:
        """The next token for the server's `challenge`; AuthenticationError if it is wrong."""
        if self._hash is None:
            if self.mechanism == "OAUTHBEARER" and challenge:
                raise AuthenticationError(f"OAUTHBEARER token refused: {challenge.decode(errors='replace')}")
            return None
        h = self._hash
        text = challenge.decode(errors="replace")
        attrs = dict(p.split("=", 1) for p in text.split(",") if len(p) > 1 and p[1] == "=")
        self._step += 1
        if self._step == 1:
            nonce, salt, iters = attrs.get("r", ""), attrs.get("s"), attrs.get("i", "")
            if not nonce.startswith(self._nonce) or salt is None or not iters.isdigit():
                raise AuthenticationError(f"{self.mechanism}: bad server-first message")
            salted = hashlib.pbkdf2_hmac(h, self.password.encode(), base64.b64decode(salt),
                                         int(iters))
            client_key = hmac.digest(salted, b"Client Key", h)
            stored = hashlib.new(h, client_key).digest()
            without_proof = f"c=biws,r={nonce}"  # biws: base64 of the gs2 header "n,,"
            auth = f"{self._first_bare},{text},{without_proof}".encode()
            proof = bytes(a ^ b for a, b in zip(client_key, hmac.digest(stored, auth, h),
                                                strict=True))
            self._server_signature = hmac.digest(hmac.digest(salted, b"Server Key", h), auth, h)
            return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()
        if "e" in attrs:
            raise AuthenticationError(f"{self.mechanism}: {attrs['e']}")
        if base64.b64decode(attrs.get("v", "")) != self._server_signature:
            raise AuthenticationError(f"{self.mechanism}: the server's signature is wrong")
        return None


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


_NONE_HEADER = _b64url(b'{"alg":"none"}')


SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
_UNSUPPORTED_MECHANISM = 33


def handshake_requests(sec: ClientSecurity) -> Generator[tuple[int, int, dict[str, Any]], Any, None]:
    """The SASL exchange as (api key, version, body) requests; send each and `.send()` its
    decoded response back. Raises AuthenticationError when the broker refuses."""
    client = sec.sasl_client()
    hs = yield SASL_HANDSHAKE, 1, {"mechanism": sec.mechanism}
    if int(hs.error_code) == _UNSUPPORTED_MECHANISM:
        raise AuthenticationError(f"the broker does not enable SASL mechanism {sec.mechanism} "
                                  f"(enabled: {', '.join(hs.mechanisms) or 'none'})")
    if int(hs.error_code) != 0:
        raise AuthenticationError(f"SaslHandshake failed with error {int(hs.error_code)}")
    token: bytes | None = client.first()
    for _ in range(8):  # no mechanism here takes more than three rounds
        if token is None:
            return
        resp = yield SASL_AUTHENTICATE, 1, {"auth_bytes": token}
        if int(resp.error_code) != 0:
            raise AuthenticationError(resp.error_message or "SASL authentication failed")
        token = client.answer(bytes(resp.auth_bytes))
    raise AuthenticationError("the SASL exchange does not end")


_I32 = struct.Struct(">i")


def encode_frame(key: int, version: int, correlation_id: int, client_id: str,
                 body: dict[str, Any]) -> bytes:
    """A size-prefixed request (kio schemas)."""
    from kio.index import load_request_schema
    from kio.serial import entity_writer

    from samsa.protocol.codec import build

    req_cls = load_request_schema(key, version)
    out = io.BytesIO()
    entity_writer(req_cls.__header_schema__)(out, build(req_cls.__header_schema__, {
        "request_api_key": key, "request_api_version": version,
        "correlation_id": correlation_id, "client_id": client_id}))
    entity_writer(req_cls)(out, build(req_cls, body))
    payload = out.getvalue()
    return _I32.pack(len(payload)) + payload


def decode_frame(key: int, version: int, frame: bytes) -> Any:
    from kio.index import load_response_schema
    from kio.serial import entity_reader

    resp_cls = load_response_schema(key, version)
    _, n = entity_reader(resp_cls.__header_schema__)(frame, 0)
    return entity_reader(resp_cls)(frame, n)[0]


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise AuthenticationError("the broker closed the connection during authentication")
        buf += chunk
    return bytes(buf)


def secure_socket(host: str, port: int, sec: ClientSecurity, timeout_s: float,
                  client_id: str = "samsa") -> socket.socket:
    """A blocking connection to a broker with TLS and SASL done as `sec` says. OSError if the
    broker cannot be reached, AuthenticationError if TLS or SASL fails."""
    sock = socket.create_connection((host, port), timeout=timeout_s)
    try:
        if sec.uses_tls:
            try:
                sock = sec.ssl_context().wrap_socket(sock, server_hostname=host)
            except ssl.SSLError as e:
                raise AuthenticationError(f"TLS handshake with {host}:{port} failed: "
                                          f"{e.reason or e}") from None
            except ssl.CertificateError as e:
                raise AuthenticationError(f"TLS handshake with {host}:{port} failed: {e}") from None
        if sec.uses_sasl:
            steps = handshake_requests(sec)
            req = next(steps)
            corr = 0
            try:
                while True:
                    corr += 1
                    k, v, body = req
                    sock.sendall(encode_frame(k, v, corr, client_id, body))
                    (size,) = _I32.unpack(_recv_exact(sock, 4))
                    req = steps.send(decode_frame(k, v, _recv_exact(sock, size)))
            except StopIteration:
                pass
    except BaseException:
        sock.close()
        raise
    return sock
