"""A SamsaCluster whose nodes talk to each other (and to clients) over SSL or SASL_SSL, with the
StandardAuthorizer on: the recipe of docs/security.md ("Between the nodes of a cluster") as test
settings.

    tls = TlsFiles.create(tmp_path / "tls", clients=("admin", "alice"))
    cluster = SamsaCluster(3)
    sec = secure(cluster, tls, "SASL_SSL")        # before start(): configs are written then
    with cluster:
        Producer({"bootstrap.servers": cluster.bootstrap, **sec.client("alice")})

Listeners: `<PROTOCOL>://` for clients and brokers (the inter-broker listener) and `CONTROLLER://`
of the same protocol. SASL_SSL: PLAIN users `node` (every node's own login, a super user),
`admin` (a super user) and the clients given; SSL: client certificates (`ssl.client.auth=required`)
mapped to their CN (`User:samsa-broker` for the nodes, whose server certificate is also their
client certificate). The harness's own questions (DescribeQuorum, DescribeCluster) go as `admin`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from samsa.cluster.node_security import NodeAuthError, NodeSecurity, open_blocking

from .cluster import CONTROLLER, SamsaCluster
from .tls import TlsFiles

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
NODE_USER, NODE_PASSWORD = "node", "node-secret"
CERT_RULES = "RULE:^CN=([^,]*),.*$/$1/,DEFAULT"
NODE_CERT_PRINCIPAL = "User:samsa-broker"  # the CN of TlsFiles' server certificate


def plain_jaas(username: str, password: str, users: dict[str, str]) -> str:
    """A PlainLoginModule entry: this node's own login and the users the listener accepts."""
    accepted = " ".join(f'user_{u}="{p}"' for u, p in users.items())
    return f'{PLAIN_MODULE} required username="{username}" password="{password}" {accepted};'


def oauth_jaas(sub: str) -> str:
    """An OAuthBearerLoginModule entry: the node logs in with an unsecured (alg none) token whose
    `sub` is its principal; the listener validates such tokens (Kafka's development default)."""
    return f'{OAUTH_MODULE} required unsecuredLoginStringClaim_sub="{sub}";'


@dataclass
class SecureSettings:
    protocol: str
    tls: TlsFiles
    users: dict[str, str] = field(default_factory=dict)  # SASL: name -> password
    bootstrap: str = ""

    def client(self, user: str) -> dict[str, Any]:
        """confluent-kafka settings for `user` (SASL_SSL: PLAIN; SSL: its certificate)."""
        conf: dict[str, Any] = {"bootstrap.servers": self.bootstrap,
                                "security.protocol": self.protocol,
                "ssl.ca.location": str(self.tls.ca_file)}
        if self.protocol == "SASL_SSL":
            conf |= {"sasl.mechanism": "PLAIN", "sasl.username": user,
                     "sasl.password": self.users[user]}
        else:
            crt, key = self.tls.clients[user]
            conf |= {"ssl.certificate.location": str(crt), "ssl.key.location": str(key)}
        return conf

    def node_security(self, user: str = "admin", listener: str = "") -> NodeSecurity:
        """How a tool reaches the cluster's listeners as `user`."""
        import ssl

        ctx = ssl.create_default_context(cafile=str(self.tls.ca_file))
        if self.protocol == "SSL":
            crt, key = self.tls.clients[user]
            ctx.load_cert_chain(str(crt), str(key))
            return NodeSecurity(listener or self.protocol, "SSL", ctx, True)
        return NodeSecurity(listener or self.protocol, self.protocol, ctx, True, "PLAIN", user,
                            self.users[user])


def node_overrides(cluster: SamsaCluster, protocol: str, *, password: str = NODE_PASSWORD,
                   users: dict[str, str] | None = None,
                   inter_broker_mechanism: str = "PLAIN",
                   controller_mechanism: str = "PLAIN") -> dict[int, dict[str, str]]:
    """Per node: the listeners of `protocol`, and for SASL the JAAS configs with this node's
    login (`node` / `password`: a wrong one makes a node that cannot join; OAUTHBEARER: an
    unsecured token of sub `node`)."""
    out: dict[int, dict[str, str]] = {}
    for spec in cluster.specs:
        listeners = []
        if spec.is_broker:
            listeners.append(f"{protocol}://{spec.host}:{spec.port}")
        if spec.is_controller:
            listeners.append(f"{CONTROLLER}://{spec.host}:{spec.controller_port}")
        o = {"listeners": ",".join(listeners),
             "listener.security.protocol.map": f"{protocol}:{protocol},{CONTROLLER}:{protocol}",
             "inter.broker.listener.name": protocol}
        if spec.is_broker:
            o["advertised.listeners"] = f"{protocol}://{spec.host}:{spec.port}"
        if protocol.startswith("SASL_"):
            jaas = plain_jaas(NODE_USER, password, users or {})
            o[f"listener.name.{protocol.lower()}.plain.sasl.jaas.config"] = jaas
            o[f"listener.name.{CONTROLLER.lower()}.plain.sasl.jaas.config"] = jaas
            if inter_broker_mechanism.startswith("SCRAM-"):
                o[f"listener.name.{protocol.lower()}.{inter_broker_mechanism.lower()}"
                  f".sasl.jaas.config"] = (f'{SCRAM_MODULE} required username="{NODE_USER}" '
                                           f'password="{password}";')
        if "OAUTHBEARER" in (inter_broker_mechanism, controller_mechanism):
            for ln in (protocol, CONTROLLER):
                o[f"listener.name.{ln.lower()}.oauthbearer.sasl.jaas.config"] = \
                    oauth_jaas(NODE_USER)
        out[spec.node_id] = o
    return out


def secure(cluster: SamsaCluster, tls: TlsFiles, protocol: str = "SASL_SSL",
           users: dict[str, str] | None = None,
           inter_broker_mechanism: str = "PLAIN",
           controller_mechanism: str = "PLAIN") -> SecureSettings:
    """Make `cluster` (not started yet) a secured one; returns the client side of it.
    `inter_broker_mechanism` SCRAM-SHA-256/512: brokers fetch from each other with SCRAM (the
    controller listener stays PLAIN), once the `node` credential exists (`add_node_scram`).
    OAUTHBEARER (as either mechanism): unsecured tokens of sub `node`; clients stay PLAIN."""
    if protocol not in ("SSL", "SASL_SSL"):
        raise ValueError("secure() builds SSL or SASL_SSL clusters")
    all_users = {NODE_USER: NODE_PASSWORD, "admin": "admin-secret", **(users or {})}
    settings = SecureSettings(protocol, tls, all_users, cluster.bootstrap)
    common = {**tls.broker_ssl("none"), "authorizer.class.name": STANDARD_AUTHORIZER}
    if protocol == "SASL_SSL":
        mechs = ",".join(dict.fromkeys(("PLAIN", inter_broker_mechanism, controller_mechanism)))
        common |= {"sasl.enabled.mechanisms": mechs,
                   "sasl.mechanism.inter.broker.protocol": inter_broker_mechanism,
                   "sasl.mechanism.controller.protocol": controller_mechanism,
                   "super.users": f"User:{NODE_USER};User:admin"}
    else:
        if "admin" not in tls.clients:
            tls.add_client("admin")
        common |= {"ssl.client.auth": "required", "ssl.principal.mapping.rules": CERT_RULES,
                   "super.users": f"{NODE_CERT_PRINCIPAL};User:admin"}
    cluster.overrides.update(common)
    for node_id, o in node_overrides(cluster, protocol, users=all_users,
                                     inter_broker_mechanism=inter_broker_mechanism,
                                     controller_mechanism=controller_mechanism).items():
        cluster.node_overrides.setdefault(node_id, {}).update(o)
    cluster.wire_security = settings.node_security("admin")
    return settings


def add_node_scram(settings: SecureSettings, mechanism: str = "SCRAM-SHA-512") -> None:
    """The `node` user's SCRAM credential, set by `admin` (KIP-554), for SCRAM between brokers."""
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    mech = {"SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256,
            "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512}[mechanism]
    admin = AdminClient(settings.client("admin"))
    up = UserScramCredentialUpsertion(NODE_USER, ScramCredentialInfo(mech, 4096),
                                      settings.users[NODE_USER].encode())
    for f in admin.alter_user_scram_credentials([up]).values():
        f.result(30)


class _SecureConnection:
    """samsa.cli._cluster_wire.Connection over TLS / SASL (the harness's questions)."""

    @staticmethod
    def make(host: str, port: int, timeout: float, sec: NodeSecurity) -> Any:
        from samsa.cli import _cluster_wire as w

        class Conn(w.Connection):
            def _open(self) -> Any:
                try:
                    return open_blocking(self.host, self.port, sec, self.timeout, self.client_id)
                except (OSError, NodeAuthError) as e:
                    raise w.CliError(f"cannot reach {self.address} ({e})") from None
        return Conn(host, port, timeout)


def wire_connect(servers: str, timeout: float, sec: NodeSecurity) -> Any:
    """`samsa.cli._cluster_wire.connect` with TLS / SASL."""
    from samsa.cli import _cluster_wire as w

    errors = []
    for host, port in w.parse_servers(servers):
        try:
            conn = _SecureConnection.make(host, port, timeout, sec)
        except w.CliError as e:
            errors.append(str(e))
            continue
        try:
            conn.negotiate()
        except w.CliError as e:
            conn.close()
            errors.append(str(e))
            continue
        return conn
    raise w.CliError("; ".join(errors) or "no server")
