"""Replication control on a real 3-node cluster (issue 14): AlterPartition on the CONTROLLER
listener (the request a partition leader sends), and ElectLeaders, AlterPartitionReassignments and
ListPartitionReassignments sent to every broker (those that are not the active controller forward
them), through kafka-python's and confluent-kafka's admin clients and raw frames.

Broker epochs and partition epochs are nowhere in the client APIs: the tests read them the way a
KRaft observer does, by fetching `__cluster_metadata` from the active controller and replaying it
into a MetadataImage. Until partition data replication lands, followers never join an ISR, so a
reassignment's completion is covered by the controller's unit tests; here the reassignments
either complete at once (within the ISR) or wait on a fenced broker."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from samsa.cluster.metadata.image import MetadataImage, PartitionState
from samsa.cluster.metadata.records import decode
from samsa.cluster.quorum.wire.entries import decode_entries
from samsa.cluster.quorum.wire.frames import METADATA_TOPIC_ID
from samsa.testing import SamsaCluster
from tests.wire import Wire

pytestmark = pytest.mark.timeout(300)

ALTER_PARTITION, ELECT_LEADERS, ALTER_REASSIGN, LIST_REASSIGN = 56, 43, 45, 46
NONE, UNKNOWN_TOPIC_OR_PARTITION, NOT_CONTROLLER, INVALID_REQUEST = 0, 3, 41, 42
INVALID_REPLICA_ASSIGNMENT, FENCED_LEADER_EPOCH, STALE_BROKER_EPOCH = 39, 74, 77
ELECTION_NOT_NEEDED, NO_REASSIGNMENT_IN_PROGRESS = 84, 85
PREFERRED_LEADER_NOT_AVAILABLE, INVALID_UPDATE_VERSION = 80, 95
UNKNOWN_TOPIC_ID, INELIGIBLE_REPLICA = 100, 107


@pytest.fixture(scope="module")
def cluster() -> Iterator[SamsaCluster]:
    with SamsaCluster(3, overrides={"broker.session.timeout.ms": "2000",
                                    "broker.heartbeat.interval.ms": "300",
                                    "offsets.topic.num.partitions": "3"}) as c:
        c.wait_brokers(3)
        yield c


def call(address: str, key: int, version: int, body: dict[str, Any]) -> Any:
    w = Wire(address)
    try:
        return w.request(key, version, body)
    finally:
        w.close()


def metadata_image(c: SamsaCluster) -> MetadataImage:
    """The committed metadata, replayed from the active controller's log as an observer."""
    leader = c.wait_for_leader()
    quorum_epoch = max(e for _, e in c.quorum_views().values())
    w = Wire(c.node(leader).controller_address)
    image = MetadataImage(cluster_id=c.cluster_id)
    offset, epoch = 0, 0
    try:
        for _ in range(10_000):
            resp = w.request(1, 17, {
                "cluster_id": c.cluster_id, "replica_state": {"replica_id": 3000,
                                                              "replica_epoch": -1},
                "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
                "session_id": 0, "session_epoch": -1, "topics": [
                    {"topic_id": METADATA_TOPIC_ID, "partitions": [
                        {"partition": 0, "current_leader_epoch": quorum_epoch,
                         "fetch_offset": offset,
                         "last_fetched_epoch": epoch, "log_start_offset": -1,
                         "partition_max_bytes": 1 << 20, "replica_directory_id": None}]}],
                "forgotten_topics_data": [], "rack_id": ""})
            p = resp.responses[0].partitions[0]
            assert p.error_code == 0, p
            entries = decode_entries(p.records, offset)
            for e in entries:
                if offset < p.high_watermark and not e.control:
                    image.apply(decode(e.data), offset)
                offset += 1
                epoch = e.epoch
            if offset >= p.high_watermark or not entries:
                return image
    finally:
        w.close()
    raise AssertionError("the metadata log did not end")


def wait_image(c: SamsaCluster, cond: Any, what: str, timeout: float = 30.0) -> MetadataImage:
    deadline = time.monotonic() + timeout
    while True:
        image = metadata_image(c)
        if cond(image):
            return image
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def create(c: SamsaCluster, name: str, assignment: list[list[int]]) -> uuid.UUID:
    resp = call(c.bootstrap.split(",")[0], 19, 7, {"topics": [{
        "name": name, "num_partitions": -1, "replication_factor": -1, "configs": [],
        "assignments": [{"partition_index": i, "broker_ids": b}
                        for i, b in enumerate(assignment)]}], "timeout": 20000,
        "validate_only": False})
    assert resp.topics[0].error_code == 0, resp.topics[0]
    image = wait_image(c, lambda im: name in im.topics, f"{name} created")
    return image.topics[name].topic_id


def state(image: MetadataImage, name: str, p: int = 0) -> PartitionState:
    return image.topics[name].partitions[p]


def alter_partition(address: str, broker: int, broker_epoch: int, topic_id: uuid.UUID,
                    ps: PartitionState, isr: list[tuple[int, int]], p: int = 0,
                    version: int = 3, **change: int) -> Any:
    part: dict[str, Any] = {"partition_index": p,
                            "leader_epoch": change.get("leader_epoch", ps.leader_epoch),
                            "leader_recovery_state": change.get("recovery", 0),
                            "partition_epoch": change.get("partition_epoch", ps.partition_epoch)}
    if version >= 3:
        part["new_isr_with_epochs"] = [{"broker_id": b, "broker_epoch": e} for b, e in isr]
    else:
        part["new_isr"] = [b for b, _ in isr]
    return call(address, ALTER_PARTITION, version, {
        "broker_id": broker, "broker_epoch": broker_epoch,
        "topics": [{"topic_id": topic_id, "partitions": [part]}]})


def metadata_of(address: str, name: str, want: dict[int, tuple[int, tuple[int, ...]]] | None,
                timeout: float = 10.0) -> dict[int, tuple[int, tuple[int, ...]]]:
    """{partition: (leader, replicas)} in `address`'s Metadata; with `want`, asked again (bounded)
    until it matches: other brokers apply a change a little later than the controller."""
    deadline = time.monotonic() + timeout
    while True:
        md = call(address, 3, 12, {"topics": [{"name": name, "topic_id": None}],
                                   "allow_auto_topic_creation": False,
                                   "include_topic_authorized_operations": False})
        got = {p.partition_index: (p.leader_id, tuple(p.replica_nodes))
               for p in md.topics[0].partitions}
        if want is None or got == want or time.monotonic() > deadline:
            return got
        time.sleep(0.1)


def partition_code(resp: Any) -> int:
    assert resp.error_code == 0, resp
    return int(resp.topics[0].partitions[0].error_code)


def others(c: SamsaCluster, active: int) -> list[int]:
    return [n.node_id for n in c.nodes if n.node_id != active]


# ---- AlterPartition -------------------------------------------------------------------------------

def test_alter_partition_on_the_controller_listener(cluster: SamsaCluster) -> None:
    active = cluster.wait_for_leader()
    a, b = others(cluster, active)
    tid = create(cluster, "ap", [[a, b, active]])
    image = metadata_image(cluster)
    ps = state(image, "ap")
    assert ps.leader == a and sorted(ps.isr) == sorted((a, b, active))  # all start in sync
    epochs = {i: r.broker_epoch for i, r in image.brokers.items()}
    ctl = cluster.node(active).controller_address
    # listed by ApiVersions on the CONTROLLER listener, v2 and v3
    keys = {k.api_key: (k.min_version, k.max_version)
            for k in call(ctl, 18, 3, {"client_software_name": "t",
                                       "client_software_version": "1"}).api_keys}
    assert keys[ALTER_PARTITION] == (2, 3)
    # the leader, its ISR as it is: accepted (v3 with broker epochs, v2 without), nothing moves
    for version in (3, 2):
        resp = alter_partition(ctl, a, epochs[a], tid, ps, [(x, epochs[x]) for x in ps.isr],
                               version=version)
        got = resp.topics[0].partitions[0]
        assert (resp.error_code, got.error_code, got.leader_id, tuple(got.isr),
                got.leader_epoch, got.partition_epoch) == \
            (0, 0, a, ps.isr, ps.leader_epoch, ps.partition_epoch)
    # bad input, each with Kafka's code
    assert alter_partition(ctl, a, epochs[a] + 10_000, tid, ps, [(a, -1)]).error_code == \
        STALE_BROKER_EPOCH
    assert alter_partition(ctl, 42, 7, tid, ps, [(a, -1)]).error_code == STALE_BROKER_EPOCH
    assert partition_code(alter_partition(ctl, a, epochs[a], uuid.uuid4(), ps,
                                          [(a, -1)])) == UNKNOWN_TOPIC_ID
    assert partition_code(alter_partition(ctl, a, epochs[a], tid, ps, [(a, -1)],
                                          p=3)) == UNKNOWN_TOPIC_OR_PARTITION
    assert partition_code(alter_partition(ctl, b, epochs[b], tid, ps,
                                          [(a, -1), (b, -1)])) == INVALID_REQUEST
    assert partition_code(alter_partition(ctl, a, epochs[a], tid, ps, [(b, -1)])) == \
        INVALID_REQUEST
    assert partition_code(alter_partition(ctl, a, epochs[a], tid, ps,
                                          [(a, -1), (b, epochs[b] - 1)])) == INELIGIBLE_REPLICA
    assert partition_code(alter_partition(ctl, a, epochs[a], tid, ps, [(a, -1)],
                                          leader_epoch=ps.leader_epoch - 1)) == \
        FENCED_LEADER_EPOCH
    assert partition_code(alter_partition(ctl, a, epochs[a], tid, ps, [(a, -1)],
                                          partition_epoch=ps.partition_epoch - 1)) == \
        INVALID_UPDATE_VERSION
    # a controller that is not the active one
    resp = alter_partition(cluster.node(a).controller_address, a, epochs[a], tid, ps, [(a, -1)])
    assert resp.error_code == NOT_CONTROLLER
    assert state(metadata_image(cluster), "ap") == ps  # nothing was written


# ---- elections and reassignments, through every broker ---------------------------------------------

def test_reassignment_and_election_errors_on_every_broker(cluster: SamsaCluster) -> None:
    from confluent_kafka import ElectionType, KafkaError, TopicPartition
    from confluent_kafka.admin import AdminClient

    a, b = 1, 2
    create(cluster, "bad", [[a, b]])
    for node in cluster.nodes:
        addr = node.bootstrap
        resp = call(addr, ALTER_REASSIGN, 0, {"timeout": 10000, "topics": [
            {"name": "bad", "partitions": [
                {"partition_index": 0, "replicas": [a, 99]},
                {"partition_index": 0, "replicas": [a, a]},
                {"partition_index": 0, "replicas": []},
                {"partition_index": 0, "replicas": None},
                {"partition_index": 7, "replicas": [a]}]},
            {"name": "nope", "partitions": [{"partition_index": 0, "replicas": [a]}]}]})
        assert resp.error_code == 0
        got = [(p.error_code, p.error_message) for t in resp.responses for p in t.partitions]
        assert got == [
            (INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes broker 99, "
                                         "but no such broker is registered."),
            (INVALID_REPLICA_ASSIGNMENT, f"The manual partition assignment includes the broker "
                                         f"{a} more than once."),
            (INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty "
                                         "replica list."),
            (NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress."),
            (UNKNOWN_TOPIC_OR_PARTITION, "Unable to find partition bad:7."),
            (UNKNOWN_TOPIC_OR_PARTITION, "Unable to find a topic named nope."),
        ], addr
        listed = call(addr, LIST_REASSIGN, 0, {"timeout": 10000, "topics": None})
        assert (listed.error_code, listed.topics) == (0, ())
        bad_type = call(addr, ELECT_LEADERS, 2, {"election_type": 3, "timeout": 10000,
                                                 "topic_partitions": [{"topic": "bad",
                                                                       "partitions": [0]}]})
        assert bad_type.error_code == INVALID_REQUEST
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for kind in (ElectionType.PREFERRED, ElectionType.UNCLEAN):
        res = admin.elect_leaders(kind, [TopicPartition("bad", 0), TopicPartition("bad", 4),
                                         TopicPartition("nope", 0)]).result(timeout=30)
        assert {(tp.topic, tp.partition): (e.code() if e else 0) for tp, e in res.items()} == {
            ("bad", 0): KafkaError.ELECTION_NOT_NEEDED,
            ("bad", 4): KafkaError.UNKNOWN_TOPIC_OR_PART,
            ("nope", 0): KafkaError.UNKNOWN_TOPIC_OR_PART}
    assert state(metadata_image(cluster), "bad").replicas == (a, b)


def test_reassignment_within_the_isr_then_preferred_election(cluster: SamsaCluster) -> None:
    """The leader's ISR grows (its AlterPartition), a reassignment reorders the replicas (done at
    once: both are in sync) and a preferred election through a broker that is not the active
    controller makes the new first replica the leader; every broker's Metadata shows it."""
    from kafka import TopicPartition as KTopicPartition
    from kafka.admin import KafkaAdminClient

    active = cluster.wait_for_leader()
    a, b = others(cluster, active)
    tid = create(cluster, "mv", [[a, b]])
    image = metadata_image(cluster)
    epochs = {i: r.broker_epoch for i, r in image.brokers.items()}
    ctl = cluster.node(active).controller_address
    resp = alter_partition(ctl, a, epochs[a], tid, state(image, "mv"),
                           [(a, epochs[a]), (b, epochs[b])])
    assert partition_code(resp) == NONE and tuple(resp.topics[0].partitions[0].isr) == (a, b)
    kadmin = KafkaAdminClient(bootstrap_servers=cluster.node(b).bootstrap,
                              request_timeout_ms=20000)
    try:
        assert kadmin.alter_partition_reassignments({KTopicPartition("mv", 0): [b, a]}) == \
            {KTopicPartition("mv", 0): None}
    finally:
        kadmin.close()
    ps = state(metadata_image(cluster), "mv")
    assert (ps.replicas, ps.isr, ps.leader, ps.adding_replicas) == ((b, a), (a, b), a, ())
    resp = call(cluster.node(b).bootstrap, ELECT_LEADERS, 2, {
        "election_type": 0, "timeout": 10000,
        "topic_partitions": [{"topic": "mv", "partitions": [0]}]})
    assert [(p.partition_id, p.error_code) for r in resp.replica_election_results
            for p in r.partition_result] == [(0, NONE)]
    ps = state(metadata_image(cluster), "mv")
    assert (ps.leader, ps.leader_epoch) == (b, 1)
    # the broker that forwarded the election waited for its own image to show it
    assert metadata_of(cluster.node(b).bootstrap, "mv", None) == {0: (b, (b, a))}
    for node in cluster.nodes:
        assert metadata_of(node.bootstrap, "mv", {0: (b, (b, a))}) == {0: (b, (b, a))}


def test_create_partitions_with_assignments_across_brokers(cluster: SamsaCluster) -> None:
    from confluent_kafka.admin import AdminClient, NewPartitions

    create(cluster, "cp", [[1, 2]])
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_partitions([NewPartitions("cp", 3, [[2, 3], [3, 1]])])["cp"].result(30)
    want = {0: (1, (1, 2)), 1: (2, (2, 3)), 2: (3, (3, 1))}
    for node in cluster.nodes:
        assert metadata_of(node.bootstrap, "cp", want) == want, node.node_id
    # bad assignments, sent raw to each broker (forwarded by all but the active controller)
    cases = [
        (5, [[1, 2]], "Attempted to add 2 additional partition(s), but only 1 assignment(s) "
                      "were specified."),
        (4, [[1, 9]], "The manual partition assignment includes broker 9, but no such broker "
                      "is registered."),
        (4, [[2, 2]], "The manual partition assignment includes the broker 2 more than once."),
        (4, [[1]], "The manual partition assignment includes a partition with 1 replica(s), but "
                   "this is not consistent with previous partitions, which have 2 replica(s)."),
        (4, [[]], "The manual partition assignment includes an empty replica list."),
    ]
    for node in cluster.nodes:
        for count, assignment, message in cases:
            resp = call(node.bootstrap, 37, 3, {"topics": [
                {"name": "cp", "count": count,
                 "assignments": [{"broker_ids": b} for b in assignment]}],
                "timeout_ms": 10000, "validate_only": False})
            r = resp.results[0]
            assert (r.error_code, r.error_message) == (INVALID_REPLICA_ASSIGNMENT, message), \
                (node.node_id, count, assignment)
    assert len(metadata_image(cluster).topics["cp"].partitions) == 3


def test_fenced_broker(cluster: SamsaCluster) -> None:
    """A killed broker is fenced: its old AlterPartition is refused (FENCED_LEADER_EPOCH, then
    STALE_BROKER_EPOCH once it registered again), a reassignment onto it waits (listed, then
    cancelled), its partition is offline until an unclean election, and the preferred replica
    being away, a preferred election is refused."""
    active = cluster.wait_for_leader()
    x, a = others(cluster, active)
    tid = create(cluster, "fx", [[x], [a]])
    image = metadata_image(cluster)
    old_epoch = image.brokers[x].broker_epoch
    before = state(image, "fx")
    cluster.node(x).kill()
    image = wait_image(cluster, lambda im: im.brokers[x].fenced, f"broker {x} fenced")
    ps = state(image, "fx")
    assert (ps.leader, ps.isr, ps.leader_epoch) == (-1, (x,), before.leader_epoch + 1)
    ctl = cluster.node(active).controller_address
    # new partitions cannot be placed on fenced brokers only
    resp = call(cluster.node(a).bootstrap, 37, 3, {"topics": [
        {"name": "fx", "count": 3, "assignments": [{"broker_ids": [x]}]}],
        "timeout_ms": 10000, "validate_only": False})
    assert (resp.results[0].error_code, resp.results[0].error_message) == (
        INVALID_REPLICA_ASSIGNMENT, "All brokers specified in the manual partition assignment "
        "for partition 2 are fenced or in controlled shutdown.")
    # x's last request, from before it died
    assert partition_code(alter_partition(ctl, x, old_epoch, tid, before, [(x, old_epoch)])) \
        == FENCED_LEADER_EPOCH
    # a reassignment onto a fenced broker is accepted and waits for it
    bootstrap = cluster.node(a).bootstrap
    resp = call(bootstrap, ALTER_REASSIGN, 0, {"timeout": 10000, "topics": [
        {"name": "fx", "partitions": [{"partition_index": 1, "replicas": [a, x]}]}]})
    assert [p.error_code for t in resp.responses for p in t.partitions] == [NONE]
    listed = call(bootstrap, LIST_REASSIGN, 0, {"timeout": 10000, "topics": [
        {"name": "fx", "partition_indexes": [0, 1]}, {"name": "nope", "partition_indexes": [0]}]})
    assert [(t.name, [(p.partition_index, tuple(p.replicas), tuple(p.adding_replicas),
                       tuple(p.removing_replicas)) for p in t.partitions])
            for t in listed.topics] == [("fx", [(1, (a, x), (x,), ())])]
    resp = call(bootstrap, ALTER_REASSIGN, 0, {"timeout": 10000, "topics": [
        {"name": "fx", "partitions": [{"partition_index": 1, "replicas": None}]}]})
    assert [p.error_code for t in resp.responses for p in t.partitions] == [NONE]
    assert state(metadata_image(cluster), "fx", 1).replicas == (a,)
    # fx-0 lives on x alone: give it a second replica (which cannot catch up: x is offline),
    # then an unclean election makes that replica the leader
    resp = call(bootstrap, ALTER_REASSIGN, 0, {"timeout": 10000, "topics": [
        {"name": "fx", "partitions": [{"partition_index": 0, "replicas": [x, a]}]}]})
    assert [p.error_code for t in resp.responses for p in t.partitions] == [NONE]
    resp = call(bootstrap, ELECT_LEADERS, 2, {"election_type": 0, "timeout": 10000,
                                              "topic_partitions": [{"topic": "fx",
                                                                    "partitions": [0]}]})
    assert resp.replica_election_results[0].partition_result[0].error_code == \
        PREFERRED_LEADER_NOT_AVAILABLE
    resp = call(bootstrap, ELECT_LEADERS, 2, {"election_type": 1, "timeout": 10000,
                                              "topic_partitions": [{"topic": "fx",
                                                                    "partitions": [0]}]})
    assert resp.replica_election_results[0].partition_result[0].error_code == NONE
    ps = state(metadata_image(cluster), "fx")
    assert (ps.leader, ps.isr, ps.leader_recovery_state) == (a, (a,), 1)
    assert "Unclean leader election for fx-0" in cluster.node(active).log_text()
    # x comes back with a new broker epoch: the old one is stale now
    cluster.node(x).start()
    wait_image(cluster, lambda im: not im.brokers[x].fenced and
               im.brokers[x].broker_epoch != old_epoch, f"broker {x} back")
    assert alter_partition(ctl, x, old_epoch, tid, before, [(x, old_epoch)]).error_code == \
        STALE_BROKER_EPOCH
