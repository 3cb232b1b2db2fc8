"""Helpers for tests that move partition leadership on a real 3-node cluster (issue 14): the
cluster every such module starts, a partition's leader/ISR as a live broker answers Metadata, and
leader changes by kill -9 or controlled shutdown followed by the old leader's return to the ISR."""

from __future__ import annotations

import time
from typing import Any

from samsa.testing import SamsaCluster
from tests.cluster_util import wait_until
from tests.wire import Wire

METADATA = 3

# small timeouts: a kill -9 fences the broker within ~3 s, a lagging follower leaves the ISR in 3 s
CLUSTER_OVERRIDES = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "3000",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.num.partitions": "3",
    "group.initial.rebalance.delay.ms": "0",
}

# Kafka's retriable error codes (RetriableException subclasses) that a leader change may cause
RETRIABLE_CODES = {
    3,   # UNKNOWN_TOPIC_OR_PARTITION
    5,   # LEADER_NOT_AVAILABLE
    6,   # NOT_LEADER_OR_FOLLOWER
    7,   # REQUEST_TIMED_OUT
    13,  # NETWORK_EXCEPTION
    14,  # COORDINATOR_LOAD_IN_PROGRESS
    15,  # COORDINATOR_NOT_AVAILABLE
    16,  # NOT_COORDINATOR
    19,  # NOT_ENOUGH_REPLICAS
    20,  # NOT_ENOUGH_REPLICAS_AFTER_APPEND
    27,  # REBALANCE_IN_PROGRESS (a consumer rejoins)
    41,  # NOT_CONTROLLER
    51,  # CONCURRENT_TRANSACTIONS
    56,  # KAFKA_STORAGE_ERROR
    74,  # FENCED_LEADER_EPOCH
    75,  # UNKNOWN_LEADER_EPOCH
    78,  # OFFSET_NOT_AVAILABLE
}


def create_topic(c: SamsaCluster, name: str, partitions: int = 1, rf: int = 3,
                 configs: dict[str, str] | None = None) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    cfg = {"min.insync.replicas": "2"} if rf == 3 else {}
    cfg.update(configs or {})
    admin.create_topics([NewTopic(name, partitions, rf, config=cfg)])[name].result(30)
    for p in range(partitions):
        wait_full_isr(c, name, p, rf)


def create_topic_on(c: SamsaCluster, name: str, replicas: list[list[int]]) -> None:
    """A topic with an explicit replica assignment (partition p on replicas[p])."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    admin.create_topics([NewTopic(name, len(replicas), replica_assignment=replicas)])[name].result(30)
    for p, r in enumerate(replicas):
        wait_full_isr(c, name, p, len(r))


def partition_view(c: SamsaCluster, topic: str, p: int = 0) -> dict[str, Any]:
    """Leader, epoch, replicas and ISR of a partition, as a live broker's Metadata says."""
    for node in c.brokers:
        if not node.running or node.paused:
            continue
        try:
            w = Wire(node.bootstrap, timeout=5)
        except OSError:
            continue
        try:
            resp = w.request(METADATA, 12, {"topics": [{"name": topic, "topic_id": None}],
                                            "allow_auto_topic_creation": False,
                                            "include_topic_authorized_operations": False})
        except (OSError, ConnectionError):
            continue
        finally:
            w.close()
        for t in resp.topics:
            for part in t.partitions:
                if part.partition_index == p:
                    return {"leader": part.leader_id, "epoch": part.leader_epoch,
                            "replicas": tuple(part.replica_nodes), "isr": tuple(part.isr_nodes)}
    raise AssertionError(f"no live broker answered Metadata for {topic}-{p}")


def wait_full_isr(c: SamsaCluster, topic: str, p: int = 0, n: int = 3,
                  timeout: float = 60) -> dict[str, Any]:
    return wait_until(f"{topic}-{p} led with {n} in sync",
                      lambda: (v := partition_view(c, topic, p))["leader"] >= 0
                      and len(v["isr"]) == n and v, timeout)


def wait_new_leader(c: SamsaCluster, topic: str, p: int, old: int,
                    timeout: float = 30) -> dict[str, Any]:
    return wait_until(f"a leader of {topic}-{p} other than {old}",
                      lambda: (v := partition_view(c, topic, p))["leader"] not in (-1, old) and v,
                      timeout)


def move_leader(c: SamsaCluster, topic: str, p: int, how: str) -> tuple[int, dict[str, Any]]:
    """Take the partition's leader away: how = "kill" (kill -9) or "shutdown" (SIGTERM: a
    controlled shutdown). Returns the old leader and the new view; the old node stays down."""
    before = wait_full_isr(c, topic, p)
    old = before["leader"]
    node = c.node(old)
    if how == "kill":
        node.kill()
    else:
        node.stop()
    after = wait_new_leader(c, topic, p, old)
    assert after["epoch"] > before["epoch"], (before, after)
    return old, after


def bring_back(c: SamsaCluster, node_id: int, topics: list[tuple[str, int]]) -> None:
    """Restart a node and wait until it is in sync again on the given partitions."""
    c.node(node_id).start()
    c.wait_brokers(3, 60)
    for topic, p in topics:
        wait_until(f"node {node_id} back in the ISR of {topic}-{p}",
                   lambda t=topic, q=p: node_id in partition_view(c, t, q)["isr"], 60)


def internal_partition(c: SamsaCluster, key: str, key_type: int) -> tuple[str, int]:
    """The __consumer_offsets (key_type 0) / __transaction_state (1) partition of a key."""
    from samsa.cluster.internal_topic import partition_for

    topic = "__consumer_offsets" if key_type == 0 else "__transaction_state"
    return topic, partition_for(key, 3)


def coordinator(c: SamsaCluster, key: str, key_type: int = 0, timeout: float = 30) -> int:
    """The key's coordinator by FindCoordinator v4, retried while none is available."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        for node in c.brokers:
            if not node.running or node.paused:
                continue
            try:
                w = Wire(node.bootstrap, timeout=5)
                try:
                    r = w.request(10, 4, {"key_type": key_type,
                                          "coordinator_keys": [key]}).coordinators[0]
                finally:
                    w.close()
            except (OSError, ConnectionError) as e:
                last = e
                continue
            if r.error_code == 0:
                return int(r.node_id)
            last = r.error_code
        time.sleep(0.2)
    raise TimeoutError(f"no coordinator for {key}: {last}")
