"""Server TLS contexts from Kafka's `ssl.*` settings (PEM key stores), per listener.

A listener's settings are `listener.name.<listener>.ssl.*` where set, else `ssl.*` (Kafka's
listener prefix override), each looked up in the broker's dynamic per-broker configs, the
dynamic cluster defaults, then server.properties. `ListenerTls` holds the live context a listener
accepts with; `reload()` builds a fresh one from the current settings and new connections
take it (samsa/net/tls_transport.py wraps each with `current`), so a renewed certificate takes
effect without a restart; established connections keep their session.
"""

from __future__ import annotations

import logging
import os
import re
import ssl
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

from samsa.config import ConfigError

from .principal import ANONYMOUS, KafkaPrincipal
from .ssl_principal import SslPrincipalMapper

log = logging.getLogger("samsa.tls")

Lookup = Callable[[str], str | None]

# The ssl.* settings a server context is built from (and whose change triggers a reload).
SSL_KEYS = ("ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password",
            "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.key.password",
            "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
            "ssl.truststore.certificates", "ssl.client.auth", "ssl.enabled.protocols",
            "ssl.cipher.suites", "ssl.principal.mapping.rules", "ssl.protocol")

_PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
                "required": ssl.CERT_REQUIRED}


def listener_prefix(listener: str) -> str:
    """Kafka's ListenerName.configPrefix: listener.name.<lower-case name>."""
    return f"listener.name.{listener.lower()}."


def listener_setting(lookup: Lookup, listener: str, key: str) -> str | None:
    """The listener-prefixed value if set, else the plain one."""
    v = lookup(listener_prefix(listener) + key)
    return v if v is not None else lookup(key)


def _csv(value: str | None) -> list[str]:
    return [x.strip() for x in (value or "").split(",") if x.strip()]


def openssl_cipher(name: str) -> str:
    """Kafka (Java) takes IANA cipher suite names; OpenSSL has its own. TLS_ECDHE_RSA_WITH_
    AES_128_GCM_SHA256 -> ECDHE-RSA-AES128-GCM-SHA256; OpenSSL names pass through."""
    m = re.fullmatch(r"TLS_(\w+?)_WITH_(\w+)", name)
    if m is None:
        return name
    kx = m.group(1).replace("_", "-")
    bulk = m.group(2).replace("AES_128", "AES128").replace("AES_256", "AES256")
    bulk = bulk.replace("CHACHA20_POLY1305", "CHACHA20-POLY1305").replace("_", "-")
    if kx == "RSA":  # plain RSA key exchange: OpenSSL names start with the cipher
        return bulk
    return f"{kx}-{bulk}"


@dataclass(frozen=True)
class TlsSettings:
    """One listener's effective ssl.* values (as strings, None when unset)."""

    values: tuple[tuple[str, str | None], ...]

    @classmethod
    def read(cls, lookup: Lookup, listener: str, protocol: str = "SSL") -> TlsSettings:
        """KIP-684: on a SASL_SSL listener only a listener-prefixed ssl.client.auth applies (the
        client authenticates with SASL; a plain ssl.client.auth is meant for SSL listeners)."""
        values = [(k, listener_setting(lookup, listener, k)) for k in SSL_KEYS]
        if protocol == "SASL_SSL":
            auth = lookup(listener_prefix(listener) + "ssl.client.auth")
            values = [(k, auth if k == "ssl.client.auth" else v) for k, v in values]
        return cls(tuple(values))

    def get(self, key: str) -> str | None:
        return dict(self.values)[key]


def _pem_file(text: str, tmpdir: str, name: str) -> str:
    path = os.path.join(tmpdir, name)
    with open(path, "w") as f:
        f.write(text if text.endswith("\n") else text + "\n")
    return path


def build_server_context(s: TlsSettings, listener: str) -> ssl.SSLContext:
    """A server SSLContext as Kafka's DefaultSslEngineFactory would configure it; ConfigError
    (Kafka's wording where it has one) for settings that cannot work."""
    where = f"listener {listener}"
    ks_type = (s.get("ssl.keystore.type") or "PEM").upper()
    ts_type = (s.get("ssl.truststore.type") or "PEM").upper()
    for what, t in (("ssl.keystore.type", ks_type), ("ssl.truststore.type", ts_type)):
        if t != "PEM":
            raise ConfigError(f"{what}={t} on {where}: Samsa reads PEM key stores only "
                              f"(set {what}=PEM; docs/security.md)")
    location = s.get("ssl.keystore.location")
    chain, key = s.get("ssl.keystore.certificate.chain"), s.get("ssl.keystore.key")
    key_password = s.get("ssl.key.password")
    if location and (chain or key):
        raise ConfigError(f"Invalid {where}: ssl.keystore.location cannot be combined with "
                          f"ssl.keystore.certificate.chain / ssl.keystore.key")
    if bool(chain) != bool(key):
        raise ConfigError(f"Invalid {where}: ssl.keystore.certificate.chain and "
                          f"ssl.keystore.key must be set together")
    if (location or chain) and s.get("ssl.keystore.password"):
        raise ConfigError("SSL key store password cannot be specified with PEM format, only key "
                          f"password may be specified ({where})")
    if not location and not chain:
        raise ConfigError(f"Invalid {where}: an SSL listener needs a key store "
                          f"(ssl.keystore.location, or ssl.keystore.certificate.chain and "
                          f"ssl.keystore.key)")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    protocols = _csv(s.get("ssl.enabled.protocols") or "TLSv1.2,TLSv1.3")
    versions = []
    for p in protocols:
        if p not in _PROTOCOLS:
            raise ConfigError(f"Invalid value {p!r} in ssl.enabled.protocols ({where}): Samsa "
                              f"supports TLSv1.2 and TLSv1.3")
        versions.append(_PROTOCOLS[p])
    ctx.minimum_version, ctx.maximum_version = min(versions), max(versions)
    ciphers = _csv(s.get("ssl.cipher.suites"))
    tls12 = [openssl_cipher(c) for c in ciphers if not re.fullmatch(r"TLS_(AES|CHACHA20)\w+", c)]
    if tls12:
        try:
            ctx.set_ciphers(":".join(tls12))
        except ssl.SSLError:
            raise ConfigError(f"Invalid ssl.cipher.suites ({where}): none of {ciphers} is "
                              f"available") from None
    auth = (s.get("ssl.client.auth") or "none").lower()
    if auth not in _CLIENT_AUTH:
        raise ConfigError(f"Invalid value {auth} for configuration ssl.client.auth: String must "
                          f"be one of: required, requested, none")
    try:
        with tempfile.TemporaryDirectory(prefix="samsa-tls-") as tmp:
            if chain and key:
                # inline PEM (Kafka's ssl.keystore.certificate.chain / ssl.keystore.key)
                ctx.load_cert_chain(_pem_file(chain, tmp, "chain.pem"),
                                    _pem_file(key, tmp, "key.pem"), key_password)
            else:
                assert location is not None
                ctx.load_cert_chain(location, location, key_password)
            trust_location = s.get("ssl.truststore.location")
            trust_inline = s.get("ssl.truststore.certificates")
            if trust_location:
                ctx.load_verify_locations(cafile=trust_location)
            if trust_inline:
                ctx.load_verify_locations(cadata=trust_inline)
    except (OSError, ssl.SSLError, ValueError) as e:
        raise ConfigError(f"Failed to load SSL key store or trust store for {where}: {e}") from None
    ctx.verify_mode = _CLIENT_AUTH[auth]
    return ctx


def _mapper(s: TlsSettings) -> SslPrincipalMapper:
    try:
        return SslPrincipalMapper.parse(s.get("ssl.principal.mapping.rules") or "DEFAULT")
    except ValueError as e:
        raise ConfigError(f"Invalid value for configuration ssl.principal.mapping.rules: "
                          f"{e}") from None


def _tapped(ctx: ssl.SSLContext) -> ssl.SSLContext:
    """A listener context whose TLS 1.3 client secrets reach the listener's record reader
    (samsa/net/tls_secrets.py); unchanged where that cannot run."""
    from samsa.net import tls_secrets

    tap = tls_secrets.tap()
    if tap is not None:
        tap.attach(ctx)
    return ctx


class ListenerTls:
    """The TLS side of one listener: the context it accepts with, reloadable, and the principal
    of a connection's client certificate (ssl.principal.mapping.rules)."""

    def __init__(self, listener: str, protocol: str, lookup: Lookup) -> None:
        self.listener = listener
        self.protocol = protocol
        self.lookup = lookup
        self.settings = TlsSettings.read(lookup, listener, protocol)
        self.current = _tapped(build_server_context(self.settings, listener))
        self.mapper = _mapper(self.settings)
        self.reloads = 0

    def reload(self, force: bool = False) -> bool:
        """Rebuild the context if the settings changed (or `force`: the same paths, renewed
        files). On failure the listener keeps its current certificate and the error is raised."""
        settings = TlsSettings.read(self.lookup, self.listener, self.protocol)
        if settings == self.settings and not force:
            return False
        ctx = _tapped(build_server_context(settings, self.listener))
        mapper = _mapper(settings)
        self.settings, self.current, self.mapper = settings, ctx, mapper
        self.reloads += 1
        log.info("listener %s: TLS key store / trust store reloaded", self.listener)
        return True

    def principal(self, ssl_object: ssl.SSLObject | None) -> KafkaPrincipal:
        """User:<mapped DN> for a client that presented a certificate, else User:ANONYMOUS."""
        if ssl_object is None:
            return ANONYMOUS
        der = ssl_object.getpeercert(binary_form=True)
        if not der:
            return ANONYMOUS
        from cryptography import x509

        cert = x509.load_der_x509_certificate(der)
        return KafkaPrincipal("User", self.mapper.name(cert.subject.rfc4514_string()))
