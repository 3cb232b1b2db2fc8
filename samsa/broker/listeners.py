"""Listeners: Kafka's `listeners` / `advertised.listeners` strings, and the start-up checks Kafka's
broker makes on them (so a misconfigured node refuses to start with Kafka's reasons).

A node binds every listener in `listeners`; brokers advertise the non-controller ones (or
`advertised.listeners`) to clients, controllers are reached on the first of
`controller.listener.names`, brokers reach each other on `inter.broker.listener.name`.
"""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass

from samsa.config import BROKER_CONFIGS, BrokerConfig, ConfigError

# NAME://host:port, host possibly empty (all interfaces) or a bracketed IPv6 address
_LISTENER = re.compile(r"^([A-Za-z0-9_]+)://(\[[0-9A-Za-z%.:]*\]|[0-9A-Za-z\-%._]*):(-?[0-9]+)$")
SERVED_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})


@dataclass(frozen=True, slots=True)
class Listener:
    name: str  # upper case, as Kafka normalises listener names
    host: str  # "" binds every interface
    port: int
    security_protocol: str

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


def _csv(value: str | None) -> list[str]:
    return [x.strip() for x in (value or "").split(",") if x.strip()]


def parse_protocol_map(value: str) -> dict[str, str]:
    """`NAME:PROTOCOL,...` -> {NAME: PROTOCOL} (Kafka's listener.security.protocol.map)."""
    out: dict[str, str] = {}
    for item in _csv(value):
        name, sep, proto = item.partition(":")
        if not sep or not name.strip() or not proto.strip():
            raise ConfigError(f"Invalid value {value!r} for configuration "
                              f"listener.security.protocol.map: map entry {item!r} is not "
                              f"NAME:PROTOCOL")
        proto = proto.strip().upper()
        if proto not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
            raise ConfigError(f"Invalid value {value!r} for configuration "
                              f"listener.security.protocol.map: unknown security protocol {proto}")
        out[name.strip().upper()] = proto
    return out


def parse_listeners(value: str, protocol_map: dict[str, str] | None = None, *,
                    what: str = "listeners", distinct_ports: bool = True) -> list[Listener]:
    """Parse a listener list. Names must be unique (and ports, unless `distinct_ports` is False or
    the port is 0); every name must have a security protocol in `protocol_map` (Kafka's default
    map when None)."""
    pmap = protocol_map if protocol_map is not None else \
        parse_protocol_map(BROKER_CONFIGS["listener.security.protocol.map"].default or "")
    out: list[Listener] = []
    for item in _csv(value):
        m = _LISTENER.match(item)
        if m is None:
            raise ConfigError(f"Error creating broker listeners from '{value}' ({what}): "
                              f"unable to parse {item} to a broker endpoint (NAME://host:port)")
        name, host, port = m.group(1).upper(), m.group(2), int(m.group(3))
        if not 0 <= port <= 65535:
            raise ConfigError(f"Error creating broker listeners from '{value}' ({what}): "
                              f"port {port} of {item} is not in 0..65535")
        if name not in pmap:
            raise ConfigError(f"Error creating broker listeners from '{value}' ({what}): "
                              f"No security protocol defined for listener {name}")
        out.append(Listener(name, host.strip("[]"), port, pmap[name]))
    names = [x.name for x in out]
    if len(set(names)) != len(names):
        raise ConfigError(f"Each listener must have a different name, {what}: {value}")
    ports = [x.port for x in out if x.port != 0]
    if distinct_ports and len(set(ports)) != len(ports):
        raise ConfigError(f"Each listener must have a different port, {what}: {value}")
    return out


def controller_listener_names(config: BrokerConfig) -> list[str]:
    return [n.upper() for n in _csv(config.get("controller.listener.names"))]


def effective_protocol_map(config: BrokerConfig) -> dict[str, str]:
    """The security protocol map; while it is not set explicitly, controller listener names
    missing from Kafka's default map are PLAINTEXT (as Kafka's effectiveListenerSecurityProtocolMap)."""
    pmap = parse_protocol_map(config.get("listener.security.protocol.map") or "")
    if "listener.security.protocol.map" not in config.values:
        for name in controller_listener_names(config):
            pmap.setdefault(name, "PLAINTEXT")
    return pmap


def roles(config: BrokerConfig) -> set[str]:
    return set(_csv(config.get("process.roles")))


def quorum_configured(config: BrokerConfig) -> bool:
    """False for the embedded default: no voters and no bootstrap servers (a combined single-voter
    node that needs no controller listener)."""
    return bool(_csv(config.get("controller.quorum.voters"))
                or _csv(config.get("controller.quorum.bootstrap.servers")))


def listeners_for(config: BrokerConfig) -> tuple[list[Listener], list[Listener]]:
    """(listeners to bind, listeners to advertise to clients), after Kafka's start-up checks;
    ConfigError names the first that fails."""
    pmap = effective_protocol_map(config)
    bind = parse_listeners(config.get("listeners") or "", pmap)
    for x in bind:
        if x.security_protocol not in SERVED_PROTOCOLS:
            raise ConfigError(f"Listener {x} uses security protocol {x.security_protocol}: Samsa "
                              f"serves only {', '.join(SERVED_PROTOCOLS)} (docs/compatibility.md)")
    cnames = controller_listener_names(config)
    node_roles = roles(config)
    explicit_adv = config.get("advertised.listeners")
    if explicit_adv:
        adv = parse_listeners(explicit_adv, pmap, what="advertised.listeners",
                              distinct_ports=False)
    else:
        adv = [x if x.host else Listener(x.name, socket.gethostname(), x.port, x.security_protocol)
               for x in bind if x.name not in cnames]
    bind_names = {x.name for x in bind}
    adv_names = {x.name for x in adv}
    if "controller" in node_roles and quorum_configured(config):
        if not any(n in bind_names for n in cnames):
            raise ConfigError("controller.listener.names must contain at least one value appearing "
                              "in the 'listeners' configuration when running the KRaft controller "
                              "role")
        if not all(n in bind_names for n in cnames):
            raise ConfigError("controller.listener.names must only contain values appearing in the "
                              "'listeners' configuration when running the KRaft controller role")
    if node_roles == {"controller"}:
        if explicit_adv:
            raise ConfigError("The advertised.listeners config must be empty when "
                              "process.roles=controller")
        if adv:
            raise ConfigError("The listeners config must only contain KRaft controller listeners "
                              "from controller.listener.names when process.roles=controller")
    if "broker" in node_roles:
        if node_roles == {"broker"}:
            if not cnames:
                raise ConfigError("controller.listener.names must contain at least one value when "
                                  "running KRaft with just the broker role")
            if any(n in bind_names for n in cnames):
                raise ConfigError("controller.listener.names must not contain a value appearing in "
                                  "the 'listeners' configuration when running KRaft with just the "
                                  "broker role")
            for n in cnames:
                if n not in pmap:
                    raise ConfigError(f"Controller listener with name {n} defined in "
                                      f"controller.listener.names not found in "
                                      f"listener.security.protocol.map")
        if any(n in cnames for n in adv_names):
            raise ConfigError("The advertised.listeners config must not contain KRaft controller "
                              "listeners from controller.listener.names when process.roles "
                              "contains the broker role because Kafka clients that send requests "
                              "via advertised listeners do not send requests to KRaft controllers "
                              "-- they only send requests to KRaft brokers.")
        if not adv:
            raise ConfigError("There must be at least one advertised listener. Perhaps all "
                              "listeners appear in controller.listener.names?")
        ib = inter_broker_listener_name(config)
        if ib not in adv_names:
            raise ConfigError(f"inter.broker.listener.name must be a listener name defined in "
                              f"advertised.listeners. The valid options based on currently "
                              f"configured listeners are {','.join(sorted(adv_names))}")
        if not adv_names <= bind_names:
            raise ConfigError(f"advertised.listeners listener names must be equal to or a subset "
                              f"of the ones defined in listeners. Found "
                              f"{','.join(sorted(adv_names))} The valid options based on the "
                              f"current configuration are {', '.join(sorted(bind_names))}")
        # node-to-node TLS / SASL (sec-cluster; samsa.cluster.node_security): Kafka's check
        ib_proto = pmap.get(ib, "PLAINTEXT")
        if ib_proto.startswith("SASL_"):
            mech = config.get("sasl.mechanism.inter.broker.protocol") or "GSSAPI"
            enabled = _csv(config.values.get(f"listener.name.{ib.lower()}.sasl.enabled.mechanisms")
                           or config.get("sasl.enabled.mechanisms"))
            if mech not in enabled:
                raise ConfigError("sasl.mechanism.inter.broker.protocol must be included in "
                                  "sasl.enabled.mechanisms when SASL is used for inter-broker "
                                  "communication")
    for x in adv:
        if x.host == "0.0.0.0":
            raise ConfigError("advertised.listeners cannot use the nonroutable meta-address "
                              "0.0.0.0. Use a routable IP address.")
    return bind, adv


def inter_broker_listener_name(config: BrokerConfig) -> str:
    """Kafka's rule: inter.broker.listener.name, or the listener named after
    security.inter.broker.protocol; setting both is an error."""
    if "security.inter.broker.protocol" in config.values:
        if "inter.broker.listener.name" in config.values:
            raise ConfigError("Only one of inter.broker.listener.name and "
                              "security.inter.broker.protocol should be set.")
        proto = (config.values["security.inter.broker.protocol"] or "").strip().upper()
        if proto not in SERVED_PROTOCOLS:
            raise ConfigError(f"Invalid value {proto} for configuration "
                              f"security.inter.broker.protocol: must be one of "
                              f"{', '.join(SERVED_PROTOCOLS)}")
        return proto
    return (config.get("inter.broker.listener.name") or "").upper()


def controller_listeners(config: BrokerConfig) -> list[Listener]:
    """Bound listeners named in controller.listener.names, in that order (the first is the one
    other nodes connect to)."""
    by_name = {x.name: x for x in listeners_for(config)[0]}
    return [by_name[n] for n in controller_listener_names(config) if n in by_name]


def inter_broker_listener(config: BrokerConfig) -> Listener:
    """The advertised listener other brokers reach this broker on."""
    name = inter_broker_listener_name(config)
    for x in listeners_for(config)[1]:
        if x.name == name:
            return x
    raise ConfigError(f"inter.broker.listener.name {name} is not an advertised listener")


def validate_node(config: BrokerConfig) -> tuple[list[Listener], list[Listener]]:
    """Kafka's start-up checks of a node's roles against the quorum configuration, then its
    listeners (listeners_for); returns what listeners_for returns."""
    from samsa.cluster.quorum.config import QuorumConfigError, parse_voters

    node_roles = roles(config)
    if not node_roles:
        raise ConfigError("process.roles is empty: it must name broker, controller or both "
                          "(Samsa runs in KRaft mode only)")
    try:
        voters = parse_voters(config.get("controller.quorum.voters") or "")
    except QuorumConfigError as e:
        raise ConfigError(str(e)) from None
    node_id = config.node_id
    if node_roles != {"broker", "controller"} and not quorum_configured(config):
        raise ConfigError(f"If using process.roles={','.join(sorted(node_roles))}, "
                          f"controller.quorum.voters must contain a parseable set of voters "
                          f"(or set controller.quorum.bootstrap.servers); only a combined "
                          f"broker,controller node may run without them, as a single voter")
    if "controller" in node_roles and voters and node_id not in voters:
        raise ConfigError(f"If process.roles contains the 'controller' role, the node id "
                          f"{node_id} must be included in the set of voters "
                          f"controller.quorum.voters={sorted(voters)}")
    if node_roles == {"broker"} and node_id in voters:
        raise ConfigError(f"If process.roles contains just the 'broker' role, the node id "
                          f"{node_id} must not be included in the set of voters "
                          f"controller.quorum.voters={sorted(voters)}")
    return listeners_for(config)
