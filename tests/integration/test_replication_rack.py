"""Follower fetching (KIP-392): with `replica.selector.class` = RackAwareReplicaSelector, a
consumer with a `client.rack` is sent by the leader to the in-sync replica in its rack
(`preferred_read_replica`), which serves it up to its own high watermark; a consumer in the
leader's rack, or with no rack, reads the leader."""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterator
from typing import Any

import pytest

from samsa.testing import SamsaCluster
from tests.cluster_util import wait_until
from tests.wire import Wire

pytestmark = [pytest.mark.timeout(180)]

TOPIC = "racked"
SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


@pytest.fixture(scope="module")
def cluster() -> Iterator[SamsaCluster]:
    racks = {1: {"broker.rack": "r1"}, 2: {"broker.rack": "r2"}, 3: {"broker.rack": "r3"}}
    with SamsaCluster(3, overrides={"replica.selector.class": SELECTOR},
                      node_overrides=racks) as c:
        c.wait_brokers(3)
        from confluent_kafka import Producer
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, replica_assignment=[[1, 2, 3]])])[TOPIC] \
            .result(30)
        p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all"})
        for i in range(50):
            p.produce(TOPIC, f"r-{i}".encode())
        assert p.flush(30) == 0
        yield c


def _fetch(address: str, topic_id: Any, rack: str, offset: int = 0) -> Any:
    w = Wire(address)
    try:
        return w.request(1, 12, {
            "replica_id": -1, "max_wait": datetime.timedelta(0), "min_bytes": 0,
            "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": TOPIC, "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": offset,
                 "last_fetched_epoch": -1, "log_start_offset": -1,
                 "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": rack}).responses[0].partitions[0]
    finally:
        w.close()


def test_leader_sends_a_consumer_to_its_rack_and_the_follower_serves_it(
        cluster: SamsaCluster) -> None:
    leader = cluster.node(1).bootstrap
    # the follower in r2 has every record (acks=all put them on the full ISR)
    p = wait_until("a preferred replica", lambda: (r := _fetch(leader, None, "r2"))
                   .preferred_read_replica == 2 and r, 30)
    assert p.error_code == 0 and not p.records  # sent elsewhere: no records from the leader
    assert _fetch(leader, None, "r1").preferred_read_replica == -1  # the leader's own rack
    assert _fetch(leader, None, "").preferred_read_replica == -1  # no rack: the leader
    # a follower learns the high watermark from its next fetch: it serves up to it
    served = wait_until("the follower's high watermark", lambda: (
        r := _fetch(cluster.node(2).bootstrap, None, "r2")).high_watermark == 50 and r, 30)
    assert served.error_code == 0 and served.records
    # an old-style fetch (before v11) from a follower is refused: clients that cannot be sent
    # elsewhere read leaders only
    w = Wire(cluster.node(2).bootstrap)
    try:
        old = w.request(1, 10, {
            "replica_id": -1, "max_wait": datetime.timedelta(0), "min_bytes": 0,
            "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": TOPIC, "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                 "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": []}).responses[0].partitions[0]
    finally:
        w.close()
    assert old.error_code == 6  # NOT_LEADER_OR_FOLLOWER


def test_consumer_with_client_rack_reads_everything(cluster: SamsaCluster) -> None:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "rack-reader",
                  "client.rack": "r3", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(TOPIC, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < 50 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.close()
    assert got == [f"r-{i}".encode() for i in range(50)]
