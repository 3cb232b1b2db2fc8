"""The client side of node-to-node security (samsa.cluster.node_security): the SASL mechanisms a
node logs in with, run against the broker's own mechanism servers, and the settings they come
from (Kafka's names, refused with a reason when they cannot work)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from samsa.cluster import node_security as ns
from samsa.config import BrokerConfig, ConfigError
from samsa.security.sasl import AuthenticationFailed, InvalidCredentials
from samsa.security.sasl.oauthbearer import OAuthBearerServer, unsecured_validator
from samsa.security.sasl.plain import PlainServer
from samsa.security.sasl.scram import ScramServer, make_credential

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTH = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


def run_exchange(sec: ns.NodeSecurity, server: Any) -> Any:
    """The client's tokens through `server` until the client is done; the server."""
    client = ns._mechanism(sec)
    token = client.first
    for _ in range(8):
        answer = server.evaluate(token)
        token = client.next(answer)
        if token is None:
            return server
    raise AssertionError("the exchange did not finish")


def sec(mechanism: str, user: str = "node", password: str = "node-secret") -> ns.NodeSecurity:
    return ns.NodeSecurity("SASL_SSL", "SASL_SSL", None, True, mechanism, user, password)


def test_plain_login_accepted_and_refused() -> None:
    server = run_exchange(sec("PLAIN"), PlainServer({"node": "node-secret"}))
    assert server.complete and server.authorization_id == "node"
    with pytest.raises(AuthenticationFailed, match="Invalid username or password"):
        run_exchange(sec("PLAIN", password="wrong"), PlainServer({"node": "node-secret"}))


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_login_against_the_broker_server(mechanism: str) -> None:
    cred = make_credential(mechanism, "node-secret", 4096)
    creds = {"no,de=": cred}

    def lookup(user: str, mech: str) -> Any:
        return creds.get(user)
    # a name with ',' and '=' is escaped as RFC 5802 says (=2C, =3D)
    server = run_exchange(sec(mechanism, "no,de="), ScramServer(mechanism, lookup))
    assert server.complete and server.authorization_id == "no,de="
    with pytest.raises(InvalidCredentials):
        run_exchange(sec(mechanism, "no,de=", "wrong"), ScramServer(mechanism, lookup))


def test_scram_client_refuses_a_server_without_the_credential() -> None:
    client = ns._mechanism(sec("SCRAM-SHA-256"))
    nonce = client.bare.split("r=", 1)[1]
    client.next(f"r={nonce}xyz,s=c2FsdA==,i=4096".encode())
    with pytest.raises(ns.NodeAuthError, match="server signature"):
        client.next(b"v=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")
    with pytest.raises(ns.NodeAuthError, match="server-first"):
        ns._mechanism(sec("SCRAM-SHA-256")).next(b"r=not-my-nonce,s=c2FsdA==,i=4096")


def test_oauthbearer_unsecured_login() -> None:
    s = ns.NodeSecurity("CONTROLLER", "SASL_PLAINTEXT", None, True, "OAUTHBEARER", "node", "",
                        (("sub", "node"),))
    server = run_exchange(s, OAuthBearerServer(unsecured_validator({})))
    assert server.complete and server.authorization_id == "node"


def cfg(**kv: str) -> BrokerConfig:
    return BrokerConfig(kv)


def test_credentials_from_the_listener_jaas_config() -> None:
    c = BrokerConfig({
        "listener.name.internal.scram-sha-512.sasl.jaas.config":
            f'{SCRAM} required username="broker" password="b-secret";',
        "sasl.jaas.config": f'{PLAIN} required username="fallback" password="f";',
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "sasl.mechanism.controller.protocol": "PLAIN"})
    s = ns.node_security(c, "internal", "SASL_PLAINTEXT", "sasl.mechanism.inter.broker.protocol")
    assert (s.listener, s.mechanism, s.username, s.password) == \
        ("INTERNAL", "SCRAM-SHA-512", "broker", "b-secret")
    assert s.sasl and not s.tls
    # no listener-prefixed entry: sasl.jaas.config
    s = ns.node_security(c, "CONTROLLER", "SASL_PLAINTEXT", "sasl.mechanism.controller.protocol")
    assert (s.mechanism, s.username) == ("PLAIN", "fallback")
    assert ns.node_security(c, "PLAINTEXT", "PLAINTEXT", "x") == ns.NodeSecurity()


@pytest.mark.parametrize(("kv", "why"), [
    ({}, "sasl.mechanism.inter.broker.protocol=GSSAPI: Samsa nodes authenticate to each other "
         "with PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER (no GSSAPI)"),
    ({"sasl.mechanism.inter.broker.protocol": "PLAIN"},
     "set listener.name.sasl_ssl.plain.sasl.jaas.config with the node's own username"),
    ({"sasl.mechanism.inter.broker.protocol": "PLAIN",
      "listener.name.sasl_ssl.plain.sasl.jaas.config": f'{PLAIN} required user_a="b";'},
     "PLAIN between nodes needs username="),
    ({"sasl.mechanism.inter.broker.protocol": "OAUTHBEARER",
      "listener.name.sasl_ssl.oauthbearer.sasl.jaas.config": f"{OAUTH} required;"},
     "needs unsecuredLoginStringClaim_sub"),
])
def test_unusable_settings_are_refused(kv: dict[str, str], why: str) -> None:
    with pytest.raises(ConfigError) as e:
        ns.node_security(BrokerConfig(kv), "SASL_SSL", "SASL_PLAINTEXT",
                         "sasl.mechanism.inter.broker.protocol")
    assert why in str(e.value)


def test_client_tls_context(tmp_path: Path) -> None:
    from samsa.testing.tls import TlsFiles

    tls = TlsFiles.create(tmp_path)
    base = {"listener.name.controller.ssl.truststore.location": str(tls.ca_file),
            "listener.name.controller.ssl.keystore.location": str(tls.server_file)}
    s = ns.node_security(BrokerConfig(base), "CONTROLLER", "SSL", "x")
    assert s.tls and s.check_hostname and s.ssl_context is not None
    s = ns.node_security(BrokerConfig({**base, "ssl.endpoint.identification.algorithm": ""}),
                         "CONTROLLER", "SSL", "x")
    assert not s.check_hostname
    with pytest.raises(ConfigError, match="Failed to load SSL key store or trust store"):
        ns.node_security(BrokerConfig({"ssl.truststore.location": str(tmp_path / "nope.pem")}),
                         "CONTROLLER", "SSL", "x")


def test_client_tls_reloads_dynamic_stores(tmp_path: Path) -> None:
    """The context a node dials with follows its dynamic ssl.* settings: a new key store or
    trust store (or `force`: the same path, renewed) makes a new context for new connections; a
    store that does not load leaves the old one in place."""
    import trustme

    from samsa.testing.tls import TlsFiles

    tls = TlsFiles.create(tmp_path)
    static = {"listener.name.controller.ssl.truststore.location": str(tls.ca_file),
              "listener.name.controller.ssl.keystore.location": str(tls.server_file)}
    dynamic: dict[str, str] = {}
    config = BrokerConfig(static)
    s = ns.node_security(config, "CONTROLLER", "SSL", "x")
    assert s.live is not None and s.context() is s.ssl_context
    s.live.lookup = lambda name: dynamic.get(name, config.get(name))  # the broker's lookup
    first = s.context()
    assert not s.live.reload() and s.context() is first  # nothing changed
    other = trustme.CA()
    renewed = tls.renew_server(tmp_path / "renewed.pem", ca=other)
    dynamic["listener.name.controller.ssl.keystore.location"] = str(renewed)
    assert s.live.reload() and s.context() is not first
    assert s.live.reloads == 1
    second = s.context()
    assert s.live.reload(force=True) and s.context() is not second  # renewed in place
    dynamic["listener.name.controller.ssl.truststore.location"] = str(tmp_path / "nope.pem")
    kept = s.context()
    with pytest.raises(ConfigError, match="Failed to load SSL key store or trust store"):
        s.live.reload()
    assert s.context() is kept
    # a context shared by the controller and inter-broker listener is reloaded once
    assert ns.reloadable_tls(s, s, None, ns.PLAINTEXT) == [s.live]
