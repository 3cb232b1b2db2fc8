"""TLS for the registry's HTTPS listeners, from Confluent Schema Registry's `ssl.*` settings
(PEM key and trust stores, as the broker): the server context, and the client context one
registry instance uses to forward writes to an HTTPS leader."""

from __future__ import annotations

import ssl

from samsa.config import ConfigError
from samsa.security.ssl_context import SSL_KEYS, TlsSettings, build_server_context

from .auth import Lookup

_AUTHENTICATION = {"NONE": "none", "REQUESTED": "requested", "REQUIRED": "required"}


def client_auth(get: Lookup) -> str:
    """Confluent's `ssl.client.authentication` (NONE/REQUESTED/REQUIRED), else the older boolean
    `ssl.client.auth` (true: REQUIRED)."""
    mode = get("ssl.client.authentication")
    if mode is not None:
        if mode.strip().upper() not in _AUTHENTICATION:
            raise ConfigError(f"Invalid value {mode} for configuration ssl.client.authentication: "
                              f"String must be one of: NONE, REQUESTED, REQUIRED")
        return _AUTHENTICATION[mode.strip().upper()]
    legacy = (get("ssl.client.auth") or "false").strip().lower()
    if legacy not in ("true", "false"):
        raise ConfigError(f"Invalid value {legacy} for configuration ssl.client.auth: Expected "
                          f"value to be either true or false")
    return "required" if legacy == "true" else "none"


def server_context(get: Lookup, listener: str) -> ssl.SSLContext:
    """The context of an https:// listener (ConfigError naming the listener when it cannot load)."""
    auth = client_auth(get)
    values = tuple((k, auth if k == "ssl.client.auth" else get(k)) for k in SSL_KEYS)
    return build_server_context(TlsSettings(values), listener)


def forwarding_context(get: Lookup) -> ssl.SSLContext:
    """What a follower presents to an https:// leader: trusts `ssl.truststore.*` (else the
    system's CAs), shows its key store when the leader asks for a client certificate."""
    ctx = ssl.create_default_context()
    try:
        if get("ssl.truststore.location"):
            ctx = ssl.create_default_context(cafile=get("ssl.truststore.location"))
        if get("ssl.truststore.certificates"):
            ctx.load_verify_locations(cadata=get("ssl.truststore.certificates"))
        if get("ssl.keystore.location"):
            loc = get("ssl.keystore.location")
            ctx.load_cert_chain(loc, loc, get("ssl.key.password"))  # type: ignore[arg-type]
    except (OSError, ssl.SSLError, ValueError) as e:
        raise ConfigError(f"Failed to load the registry's SSL stores for forwarding: {e}") from None
    alg = get("ssl.endpoint.identification.algorithm")
    if alg is not None and alg.strip() == "":
        ctx.check_hostname = False
    return ctx
