"""Security between the nodes of a cluster (issue 17): three nodes whose controller and
inter-broker listeners are SASL_SSL (PLAIN) or SSL (client certificates mapped to principals),
with the StandardAuthorizer on and no ACL for ANONYMOUS, so every node-to-node request is
authenticated and authorized (the nodes' principal is a super user, docs/security.md's recipe).
An idempotent acks=all producer keeps every acknowledged record through kill -9 of the
partition leader; the killed node rejoins and catches up (registration, quorum and replica
fetches over TLS + SASL). A node with wrong credentials cannot join and says why in its log, and
so do the controllers; a node logging in as a user without CLUSTER_ACTION is refused with
CLUSTER_AUTHORIZATION_FAILED."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from samsa.testing import SamsaCluster
from samsa.testing.cluster import write_config
from samsa.testing.secure_cluster import (
    NODE_USER,
    SecureSettings,
    add_node_scram,
    plain_jaas,
    secure,
)
from samsa.testing.tls import TlsFiles
from tests.cluster_util import wait_until

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow, pytest.mark.serial]

OVERRIDES = {"broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "500",
             "replica.lag.time.max.ms": "3000", "offsets.topic.replication.factor": "3",
             "offsets.topic.num.partitions": "1", "transaction.state.log.replication.factor": "3",
             "transaction.state.log.num.partitions": "1"}
USERS = {"alice": "alice-secret", "mallory": "mallory-secret"}


def start_nodes(c: SamsaCluster, ids: list[int]) -> None:
    """Start some of the nodes (SamsaCluster.start starts all and waits for every broker)."""
    c.format()
    for i in ids:
        c.node(i).launch()
    deadline = time.monotonic() + 90
    for i in ids:
        c.node(i).wait_listening(deadline)
    c.wait_for_leader(60)
    c.wait_brokers(len(ids), 60)


def view(admin: AdminClient, topic: str) -> tuple[int, list[int]]:
    try:
        p = admin.list_topics(topic, timeout=5).topics[topic].partitions[0]
    except Exception:
        return -1, []
    return p.leader, list(p.isrs)


def grant(admin: AdminClient, principal: str, topic: str, group: str) -> None:
    bindings = [AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, principal, "*",
                           op, AclPermissionType.ALLOW)
                for op in (AclOperation.WRITE, AclOperation.READ, AclOperation.DESCRIBE)]
    bindings.append(AclBinding(ResourceType.GROUP, group, ResourcePatternType.LITERAL, principal,
                               "*", AclOperation.READ, AclPermissionType.ALLOW))
    for f in admin.create_acls(bindings).values():
        f.result(30)


def produce(conf: dict[str, Any], topic: str, start: int, n: int) -> list[bytes]:
    """n idempotent acks=all 1 KiB records; the values acknowledged (every failure asserted)."""
    acked: list[bytes] = []
    errors: list[Any] = []

    def report(err: Any, msg: Any) -> None:
        (errors.append(err) if err is not None else acked.append(msg.value()))

    p = Producer({**conf, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
                  "message.timeout.ms": 90000})
    for i in range(start, start + n):
        p.produce(topic, f"{i:08d}".encode() + b"x" * 1016, on_delivery=report)
        p.poll(0)
    assert p.flush(120) == 0
    assert errors == []
    return acked


def consume_all(conf: dict[str, Any], topic: str, group: str, want: set[bytes]) -> set[bytes]:
    c = Consumer({**conf, "group.id": group, "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got: set[bytes] = set()
    deadline = time.monotonic() + 60
    try:
        while not want <= got and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.add(m.value())
            elif m is not None and m.error().code() != KafkaError._PARTITION_EOF:
                raise AssertionError(f"consumer error: {m.error()}")
    finally:
        c.close()
    return got


def failover(c: SamsaCluster, sec: SecureSettings, principal: str) -> None:
    """Produce through kill -9 of the leader, consume everything, bring the node back (its
    quorum, registration and replica fetches are over the secured listeners)."""
    admin = AdminClient(sec.client("admin"))
    topic, group = "orders", "billing"
    admin.create_topics([NewTopic(topic, 1, 3, config={"min.insync.replicas": "2"})])[
        topic].result(30)
    grant(admin, principal, topic, group)
    wait_until("orders led with 3 in sync", lambda: len(view(admin, topic)[1]) == 3, 60)
    acked = produce(sec.client("alice"), topic, 0, 300)
    leader = view(admin, topic)[0]
    c.node(leader).kill()
    wait_until("a new leader", lambda: view(admin, topic)[0] not in (-1, leader), 60)
    acked += produce(sec.client("alice"), topic, 300, 300)
    assert len(acked) == 600
    got = consume_all(sec.client("alice"), topic, group, set(acked))
    assert set(acked) <= got, f"{len(set(acked) - got)} acknowledged records lost"
    # the killed node comes back over the secured listeners and catches up
    c.node(leader).start()
    c.wait_brokers(3, 60)
    wait_until("the old leader back in the ISR", lambda: leader in view(admin, topic)[1], 60)


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return TlsFiles.create(tmp_path_factory.mktemp("tls"), clients=("admin", "alice", "mallory"))


@pytest.fixture(scope="module")
def sasl_cluster(tls: TlsFiles, tmp_path_factory: pytest.TempPathFactory,
                 ) -> Iterator[tuple[SamsaCluster, SecureSettings]]:
    """Voters 1-3 (combined), and broker 4, not started, that the negative tests launch."""
    # sessions of 4 s (KIP-368): nodes must renew theirs or lose their connections
    c = SamsaCluster(4, controllers=3, overrides={**OVERRIDES, "connections.max.reauth.ms": "4000"},
                     data_dir=tmp_path_factory.mktemp("sasl-cluster"))
    # brokers fetch from each other with SCRAM-SHA-512 (credential set once the quorum runs:
    # the controller listener stays PLAIN, as a node must reach it before any credential exists)
    sec = secure(c, tls, "SASL_SSL", users=USERS, inter_broker_mechanism="SCRAM-SHA-512")
    wrong = plain_jaas(NODE_USER, "not-the-password", {})
    c.node_overrides[4].update({"listener.name.sasl_ssl.plain.sasl.jaas.config": wrong,
                                "listener.name.controller.plain.sasl.jaas.config": wrong})
    try:
        start_nodes(c, [1, 2, 3])
        add_node_scram(sec)
        yield c, sec
    finally:
        c.close()


def test_sasl_ssl_cluster_keeps_acknowledged_records_through_leader_kill(
        sasl_cluster: tuple[SamsaCluster, SecureSettings]) -> None:
    c, sec = sasl_cluster
    failover(c, sec, "User:alice")
    # nodes re-authenticated before their 4 s sessions ended (none was cut off)
    assert not [n.node_id for n in c.nodes[:3]
                if "SASL session expired without re-authentication" in n.log_text()]
    # a valid user without ACLs is refused (the authorizer is on, nothing is open)
    errors: list[Any] = []
    p = Producer({**sec.client("mallory"), "message.timeout.ms": 10000})
    p.produce("orders", b"x", on_delivery=lambda err, _m: errors.append(err))
    p.flush(20)
    assert [e.code() for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]


def _log_says(node: Any, text: str) -> bool:
    return text in node.log_text()


def test_node_with_wrong_credentials_cannot_join(
        sasl_cluster: tuple[SamsaCluster, SecureSettings]) -> None:
    c, _ = sasl_cluster
    node = c.node(4)
    node.launch()
    try:
        wait_until("node 4 says why it cannot reach the controllers", lambda: _log_says(
            node, "failed authentication due to: SASL_AUTHENTICATION_FAILED: Authentication "
                  "failed: Invalid username or password"), 60)
        assert node.running
        assert 4 not in [b for b, _ in c.describe_cluster()]
        wait_until("a controller logs the refused login", lambda: any(
            _log_says(n, "Authentication failed: Invalid username or password")
            for n in c.controllers), 30)
    finally:
        node.kill()
    # a valid login that is not a node's (no CLUSTER_ACTION): authenticated, then not authorized
    spec = node.spec
    alice = plain_jaas("alice", USERS["alice"], {})
    write_config(spec, c.voters, {**c.overrides, **c.node_overrides[4],
                                  "listener.name.sasl_ssl.plain.sasl.jaas.config": alice,
                                  "listener.name.controller.plain.sasl.jaas.config": alice})
    node.launch()
    try:
        wait_until("node 4 says it is not authorized", lambda: _log_says(
            node, "CLUSTER_AUTHORIZATION_FAILED"), 60)
        wait_until("a controller logs the denied CLUSTER_ACTION", lambda: any(
            _log_says(n, "Principal = User:alice is Denied operation = CLUSTER_ACTION")
            for n in c.controllers), 30)
        assert 4 not in [b for b, _ in c.describe_cluster()]
    finally:
        node.kill()


def test_ssl_cluster_with_certificate_principals(tls: TlsFiles, tmp_path: Path) -> None:
    import trustme

    c = SamsaCluster(4, controllers=3, overrides=OVERRIDES, data_dir=tmp_path / "ssl-cluster")
    sec = secure(c, tls, "SSL")
    # broker 4's certificate comes from a CA the others do not trust
    stranger = tls.renew_server(tmp_path / "stranger.pem", ca=trustme.CA())
    c.node_overrides[4]["ssl.keystore.location"] = str(stranger)
    try:
        start_nodes(c, [1, 2, 3])
        # alice's certificate CN=alice,OU=eng,O=acme maps to User:alice (ssl.principal.mapping)
        failover(c, sec, "User:alice")
        node = c.node(4)
        node.launch()
        wait_until("node 4 says the controllers refuse its certificate", lambda: _log_says(
            node, "failed authentication due to: TLS: the peer refused the connection after the "
                  "handshake"), 60)
        assert 4 not in [b for b, _ in c.describe_cluster()]
    finally:
        c.close()


def test_controller_listener_authorizes_clients(
        sasl_cluster: tuple[SamsaCluster, SecureSettings]) -> None:
    """A client on the CONTROLLER listener (KIP-919 style) is authorized as Kafka's
    ControllerApis does: DescribeQuorum needs DESCRIBE on the cluster, DescribeCluster ALTER, a
    node RPC CLUSTER_ACTION, CreateTopics the topic's CREATE."""
    from samsa.cli import _cluster_wire as w
    from samsa.testing.secure_cluster import wire_connect

    c, sec = sasl_cluster
    address = c.node(1).controller_address
    body = {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]}
    with wire_connect(address, 5, sec.node_security("mallory", "CONTROLLER")) as conn:
        assert conn.request(w.DESCRIBE_QUORUM, 2, body).error_code == 31
        described = conn.request(w.DESCRIBE_CLUSTER, 1, {"include_cluster_authorized_operations":
                                                         False, "endpoint_type": 2})
        assert described.error_code == 31
        # BrokerHeartbeat from a principal that is no node: CLUSTER_AUTHORIZATION_FAILED
        hb = conn.request(63, 1, {"broker_id": 9, "broker_epoch": 1,
                                  "current_metadata_offset": 0, "want_fence": False,
                                  "want_shut_down": False})
        assert hb.error_code == 31
        created = conn.request(19, 7, {"topics": [{"name": "by-mallory", "num_partitions": 1,
                                                   "replication_factor": 1, "assignments": [],
                                                   "configs": []}],
                                       "timeout": 10000, "validate_only": False})
        assert [t.error_code for t in created.topics] == [29]  # TOPIC_AUTHORIZATION_FAILED
    with wire_connect(address, 5, sec.node_security("admin", "CONTROLLER")) as conn:
        q = conn.request(w.DESCRIBE_QUORUM, 2, body)
        assert q.error_code == 0 and q.topics[0].partitions[0].leader_id in (1, 2, 3)
