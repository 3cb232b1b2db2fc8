"""OAUTHBEARER between the nodes of a cluster (issue 17): three nodes whose controller and
inter-broker listeners are SASL_SSL and which log in to each other with SASL/OAUTHBEARER
(sasl.mechanism.controller.protocol and sasl.mechanism.inter.broker.protocol), each with an
unsecured JWS token of `sub` node (a super user) as Kafka's OAuthBearerLoginModule makes from
unsecuredLoginStringClaim_sub, with the StandardAuthorizer on. Sessions are limited to 4 s
(connections.max.reauth.ms, KIP-368) so the nodes must keep renewing them, which they do in
place: over 10 idle seconds no node opens a new connection to the controllers (each connection
re-authenticates on itself, as Kafka's nodes do). An idempotent
acks=all producer keeps every acknowledged record through kill -9 of the partition leader, and
the killed node comes back into the ISR (quorum, registration and replica fetches all log in with
OAUTHBEARER). The token's `sub` is the node's principal: a fourth node whose token says `alice`
is authenticated, then refused CLUSTER_ACTION, and never registers."""

from __future__ import annotations

import re
import time
import urllib.request
from pathlib import Path

import pytest

from samsa.testing import SamsaCluster, free_port
from samsa.testing.secure_cluster import oauth_jaas, secure
from samsa.testing.tls import TlsFiles
from tests.cluster_util import wait_until
from tests.integration.security.test_cluster_security import (
    OVERRIDES,
    USERS,
    failover,
    start_nodes,
)

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow, pytest.mark.serial]

CREATED = re.compile(r'^kafka_server_socket_server_metrics_connection_creation_total\{[^}]*'
                     r'listener="CONTROLLER"[^}]*\} ([0-9.e+]+)$', re.M)


def controller_connections(admin_urls: dict[int, str]) -> int:
    """Connections the CONTROLLER listeners of these nodes have accepted (their /metrics)."""
    total = 0
    for url in admin_urls.values():
        with urllib.request.urlopen(f"{url}/metrics", timeout=10) as r:
            total += sum(int(float(v)) for v in CREATED.findall(r.read().decode()))
    return total


def test_oauthbearer_between_nodes_keeps_acknowledged_records_through_leader_kill(
        tmp_path: Path) -> None:
    tls = TlsFiles.create(tmp_path / "tls", clients=("admin",))
    c = SamsaCluster(4, controllers=3, data_dir=tmp_path / "cluster",
                     overrides={**OVERRIDES, "connections.max.reauth.ms": "4000"})
    sec = secure(c, tls, "SASL_SSL", users=USERS, inter_broker_mechanism="OAUTHBEARER",
                 controller_mechanism="OAUTHBEARER")
    assert c.overrides["sasl.mechanism.controller.protocol"] == "OAUTHBEARER"
    assert c.overrides["sasl.mechanism.inter.broker.protocol"] == "OAUTHBEARER"
    c.node_overrides[4].update({"listener.name.sasl_ssl.oauthbearer.sasl.jaas.config":
                                oauth_jaas("alice"),
                                "listener.name.controller.oauthbearer.sasl.jaas.config":
                                oauth_jaas("alice")})
    admin_urls = {i: f"http://127.0.0.1:{free_port()}" for i in (1, 2, 3)}
    for i, url in admin_urls.items():
        c.node_overrides[i]["admin.http.listeners"] = url
    try:
        start_nodes(c, [1, 2, 3])
        failover(c, sec, "User:alice")
        logs = {n.node_id: n.log_text() for n in c.nodes[:3]}
        # the nodes logged in to each other as User:node with OAUTHBEARER, and renewed their
        # sessions in time (no connection was cut off by its expiry)
        assert not [i for i, text in logs.items()
                    if "SASL session expired without re-authentication" in text]
        assert not [i for i, text in logs.items() if "failed authentication" in text]
        # KIP-368 in place: 10 s idle (2.5 sessions) and no new connection to a controller
        before = controller_connections(admin_urls)
        assert before > 0  # the metric is read (quorum links, registrations)
        time.sleep(10)
        assert controller_connections(admin_urls) == before
        assert not ["x" for n in c.nodes[:3]
                    if "SASL session expired without re-authentication" in n.log_text()]
        # a token is the principal it names: sub alice is no node (no CLUSTER_ACTION)
        node = c.node(4)
        node.launch()
        wait_until("node 4 says it is not authorized", lambda: "CLUSTER_AUTHORIZATION_FAILED"
                   in node.log_text(), 60)
        wait_until("a controller logs the denied CLUSTER_ACTION", lambda: any(
            "Principal = User:alice is Denied operation = CLUSTER_ACTION" in n.log_text()
            for n in c.controllers), 30)
        assert 4 not in [b for b, _ in c.describe_cluster()]
    finally:
        c.close()
