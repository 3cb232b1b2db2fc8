"""Per-listener SASL set-up from Kafka's broker configs, checked at start-up:
`sasl.enabled.mechanisms` (or `listener.name.<l>.sasl.enabled.mechanisms`), the JAAS config of
each mechanism (`listener.name.<l>.<mechanism>.sasl.jaas.config`, else `sasl.jaas.config`),
`sasl.server.max.receive.size` and `connections.max.reauth.ms` (both listener-overridable)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from samsa.config import BrokerConfig, ConfigError

from .authenticator import SaslListener
from .jaas import parse_jaas
from .plain import PLAIN_LOGIN_MODULE, PlainServer, users_from_options
from .scram import MECHANISMS as SCRAM_MECHANISMS
from .scram import ScramCredential, ScramServer

SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTH_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")

ScramLookup = Callable[[str, str], ScramCredential | None]


def listener_value(config: BrokerConfig, listener: str, name: str) -> str | None:
    """The listener-prefixed value of a config if set, else the plain one (Kafka's rule)."""
    v = config.values.get(f"listener.name.{listener.lower()}.{name}")
    return v if v is not None else config.get(name)


def _jaas(config: BrokerConfig, listener: str, mechanism: str) -> tuple[str, dict[str, str]] | None:
    value = config.values.get(f"listener.name.{listener.lower()}.{mechanism.lower()}"
                              f".sasl.jaas.config") or config.values.get("sasl.jaas.config")
    if not value:
        return None
    return parse_jaas(value)


def build_listener(config: BrokerConfig, name: str, protocol: str,
                   scram_lookup: ScramLookup) -> SaslListener:
    mechs = [m.strip() for m in (listener_value(config, name, "sasl.enabled.mechanisms") or "")
             .split(",") if m.strip()]
    if not mechs:
        raise ConfigError(f"Listener {name} ({protocol}): sasl.enabled.mechanisms is empty")
    factories: dict[str, Callable[[], Any]] = {}
    for mech in mechs:
        if mech not in SUPPORTED_MECHANISMS:
            raise ConfigError(f"Listener {name}: SASL mechanism {mech} in sasl.enabled.mechanisms "
                              f"is not supported by Samsa (supported: "
                              f"{', '.join(SUPPORTED_MECHANISMS)}; docs/compatibility.md)")
        if mech == "PLAIN":
            jaas = _jaas(config, name, mech)
            if jaas is None or jaas[0] != PLAIN_LOGIN_MODULE:
                raise ConfigError(f"Listener {name}: PLAIN is enabled but no JAAS config with "
                                  f"{PLAIN_LOGIN_MODULE} is set (listener.name.{name.lower()}"
                                  f".plain.sasl.jaas.config)")
            users = users_from_options(jaas[1])
            factories[mech] = lambda users=users: PlainServer(users)  # type: ignore[misc]
        elif mech in SCRAM_MECHANISMS:
            factories[mech] = lambda m=mech: ScramServer(m, scram_lookup)  # type: ignore[misc]
        elif mech == "OAUTHBEARER":
            from .oauthbearer import oauth_factory

            factories[mech] = oauth_factory(config, name, _jaas(config, name, mech))
    return SaslListener(
        name, protocol, mechs, factories,
        max_receive=int(listener_value(config, name, "sasl.server.max.receive.size") or 524288),
        reauth_ms=int(listener_value(config, name, "connections.max.reauth.ms") or 0))


def build_sasl_listeners(config: BrokerConfig, listeners: Iterable[Any],
                         scram_lookup: ScramLookup) -> dict[str, SaslListener]:
    """{listener name: SaslListener} for the SASL listeners among `listeners`; ConfigError (the
    node refuses to start) for a mechanism Samsa lacks or a missing JAAS config."""
    return {ln.name: build_listener(config, ln.name, ln.security_protocol, scram_lookup)
            for ln in listeners if ln.security_protocol in SASL_PROTOCOLS}
