"""Node-to-node certificates rotated without a restart (issue 17): a 3-node cluster whose
controller and inter-broker listeners are SSL with client certificates required moves, by
dynamic listener config alone (IncrementalAlterConfigs of listener.name.<l>.ssl.* per broker, as
kafka-configs --alter does), from CA A to CA B: every node first trusts both CAs, then presents a
certificate of CA B, then trusts CA B only. From then on a node reaches another only if its own
client side presents the NEW certificate and trusts the NEW CA (Kafka: the inter-broker client
shares the listener's reconfigurable SSL factory). kill -9 of the partition leader, which is also
the active controller, makes the survivors open new connections to each other (replica fetches
from the new leader, heartbeats to the new controller); an idempotent acks=all producer with
min.insync.replicas=2 is acknowledged only if those work, and nothing acknowledged is lost. The
killed node comes back (its server.properties renewed: a restarted node reaches the quorum
before it reads the dynamic configs) and rejoins the ISR."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from samsa.testing import SamsaCluster
from samsa.testing.cluster import write_config
from samsa.testing.secure_cluster import SecureSettings, secure
from samsa.testing.tls import TlsFiles
from tests.cluster_util import wait_until

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow, pytest.mark.serial]

OVERRIDES = {"broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "500",
             "replica.lag.time.max.ms": "3000", "offsets.topic.replication.factor": "3",
             "offsets.topic.num.partitions": "1"}
LISTENERS = ("ssl", "controller")  # secure(): SSL:// for clients and brokers, CONTROLLER://
RELOADED = "node-to-node client TLS key store / trust store reloaded"
TOPIC = "rotated"


def client(tls: TlsFiles, user: str, ca: Path) -> dict[str, Any]:
    """confluent-kafka settings: `user`'s certificate of `tls`'s CA, trusting the CAs in `ca`."""
    crt, key = tls.clients[user]
    return {"security.protocol": "SSL", "ssl.ca.location": str(ca),
            "ssl.certificate.location": str(crt), "ssl.key.location": str(key)}


def alter_all(c: SamsaCluster, admin: dict[str, Any], setting: str, value: str) -> None:
    """listener.name.{ssl,controller}.<setting>=value on every node (per broker: Kafka takes key
    and trust stores only per broker), each node's two client contexts then reloaded."""
    before = {n.node_id: n.log_text().count(RELOADED) for n in c.nodes}
    a = AdminClient({**admin, "bootstrap.servers": c.bootstrap})
    for n in c.nodes:  # one broker resource per request (librdkafka's rule)
        res = ConfigResource(ResourceType.BROKER, str(n.node_id), incremental_configs=[
            ConfigEntry(f"listener.name.{ln}.{setting}", value,
                        incremental_operation=AlterConfigOpType.SET) for ln in LISTENERS])
        a.incremental_alter_configs([res])[res].result(30)
    wait_until(f"every node's client side reloaded {setting}", lambda: all(
        n.log_text().count(RELOADED) >= before[n.node_id] + len(LISTENERS) for n in c.nodes), 30)


def view(admin: AdminClient) -> tuple[int, list[int]]:
    try:
        p = admin.list_topics(TOPIC, timeout=5).topics[TOPIC].partitions[0]
    except Exception:
        return -1, []
    return p.leader, list(p.isrs)


def produce(conf: dict[str, Any], start: int, n: int) -> list[bytes]:
    """n idempotent acks=all records; the values acknowledged (every failure asserted)."""
    acked: list[bytes] = []
    errors: list[Any] = []

    def report(err: Any, msg: Any) -> None:
        (errors.append(err) if err is not None else acked.append(msg.value()))

    p = Producer({**conf, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
                  "message.timeout.ms": 30000})
    for i in range(start, start + n):
        p.produce(TOPIC, f"{i:08d}".encode() + b"x" * 504, on_delivery=report)
        p.poll(0)
    p.flush(45)
    assert errors == [], f"{len(errors)} records not acknowledged, first: {errors[0]}"
    assert len(acked) == n
    return acked


def consume_all(conf: dict[str, Any], want: set[bytes]) -> set[bytes]:
    c = Consumer({**conf, "group.id": "reader", "enable.auto.commit": False})
    c.assign([TopicPartition(TOPIC, 0, 0)])
    got: set[bytes] = set()
    deadline = time.monotonic() + 40
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


def test_node_certificates_rotate_to_a_new_ca_without_restart(tmp_path: Path) -> None:
    old = TlsFiles.create(tmp_path / "ca-a", clients=("admin", "producer"))
    new = TlsFiles.create(tmp_path / "ca-b", clients=("admin", "producer"))
    both = tmp_path / "a-and-b.pem"
    both.write_text(old.ca_file.read_text() + new.ca_file.read_text())
    c = SamsaCluster(3, overrides=OVERRIDES, data_dir=tmp_path / "cluster")
    secure(c, old, "SSL")
    try:
        c.start()
        # the active controller leads the partition too: its kill moves both
        k = c.wait_for_leader(30)
        others = [n for n in (1, 2, 3) if n != k]
        conf = client(old, "admin", old.ca_file)
        admin = AdminClient({**conf, "bootstrap.servers": c.bootstrap})
        admin.create_topics([NewTopic(TOPIC, num_partitions=1, replica_assignment=[[k, *others]],
                                      config={"min.insync.replicas": "2"})])[TOPIC].result(30)
        wait_until("3 in sync", lambda: len(view(admin)[1]) == 3, 30)
        # no other partition is led elsewhere: the survivors have no fetch connection between
        # them, so after the kill they must open one
        listed = admin.list_topics(timeout=10).topics
        assert {p.leader for t in listed.values() for p in t.partitions.values()} == {k}
        acked = produce({**conf, "bootstrap.servers": c.bootstrap}, 0, 200)

        # the rotation, by dynamic config only: trust A and B; present B; trust B only
        alter_all(c, conf, "ssl.truststore.location", str(both))
        alter_all(c, conf, "ssl.keystore.location", str(new.server_file))
        conf = client(new, "admin", both)  # servers present B now; clients get B certificates
        alter_all(c, conf, "ssl.truststore.location", str(new.ca_file))
        conf = client(new, "admin", new.ca_file)
        c.wire_security = SecureSettings("SSL", new, bootstrap=c.bootstrap).node_security()
        admin = AdminClient({**conf, "bootstrap.servers": c.bootstrap})
        producer = {**conf, "bootstrap.servers": c.bootstrap}
        # a certificate of CA A is refused everywhere now
        stale = AdminClient({**client(old, "admin", both), "bootstrap.servers": c.bootstrap})
        with pytest.raises(KafkaException):
            stale.list_topics(timeout=3)
        acked += produce(producer, 200, 100)

        # kill -9 the leader and active controller: new node-to-node connections
        c.node(k).kill()
        wait_until("a new leader", lambda: view(admin)[0] in others, 30)
        wait_until("a new active controller", lambda: c.active_controller() in others, 30)
        acked += produce(producer, 300, 200)  # acks=all, 2 in sync: the survivors replicate
        assert len(set(acked)) == 500
        got = consume_all(producer, set(acked))
        assert set(acked) <= got, f"{len(set(acked) - got)} acknowledged records lost"

        # the killed node comes back (its static stores renewed too) and catches up
        c.node_overrides[k].update({"ssl.keystore.location": str(new.server_file),
                                    "ssl.truststore.location": str(new.ca_file)})
        write_config(c.node(k).spec, c.voters, {**c.overrides, **c.node_overrides[k]})
        c.node(k).start()
        c.wait_brokers(3, 60)
        wait_until("the killed node back in the ISR", lambda: k in view(admin)[1], 60)
        assert set(acked) <= consume_all(producer, set(acked))
    finally:
        c.close()
