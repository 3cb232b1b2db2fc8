"""Replica and quorum admin APIs answered as a one-broker, one-log-dir Kafka 4.0 answers them, through
real admin clients (kafka-python, confluent-kafka) and raw frames; plus the versions added to match
Kafka 4.0 (ListOffsets v9/v10, Fetch v17, Metadata v13, DescribeCluster v2)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import kafka.errors as kerr
import pytest
from confluent_kafka import ElectionType, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import TopicPartition as KTopicPartition
from kafka.admin import KafkaAdminClient
from kafka.protocol.consumer.offsets import OffsetSpec
from kafka.structs import TopicPartitionReplica

from samsa.testing import SamsaBroker
from tests.wire import Wire

ELECTION_NOT_NEEDED = 84
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_TOPIC_EXCEPTION = 17
INVALID_REQUEST = 42
INVALID_REPLICA_ASSIGNMENT = 39
NO_REASSIGNMENT_IN_PROGRESS = 85
LOG_DIR_NOT_FOUND = 57
TOPIC_OPERATIONS = 3576  # READ..ALTER_CONFIGS bits: what Kafka reports without an authorizer


@pytest.fixture(scope="module")
def setup(samsa_broker: SamsaBroker) -> Iterator[dict[str, Any]]:
    admin = AdminClient({"bootstrap.servers": samsa_broker.bootstrap})
    futs = admin.create_topics([NewTopic("dtp-a", 3, 1), NewTopic("dtp-b", 2, 1)],
                               operation_timeout=10)
    for f in futs.values():
        f.result(timeout=30)
    kadmin = KafkaAdminClient(bootstrap_servers=samsa_broker.bootstrap, request_timeout_ms=10000)
    node = kadmin.describe_cluster()["brokers"][0]["broker_id"]
    yield {"admin": admin, "kadmin": kadmin, "node": node}
    kadmin.close()


def request(broker: SamsaBroker, key: int, version: int, body: dict[str, Any]) -> Any:
    w = Wire(broker.bootstrap)
    try:
        return w.request(key, version, body)
    finally:
        w.close()


# ---- DescribeTopicPartitions ---------------------------------------------------------------------
def test_describe_topic_partitions_sorted_with_errors(setup: dict[str, Any]) -> None:
    node = setup["node"]
    res = setup["kadmin"].describe_topic_partitions(["no-such", "dtp-b", "bad name!", "dtp-a"])
    assert res["next_cursor"] is None
    topics = res["topics"]
    assert [(t["name"], t["error_code"]) for t in topics] == [
        ("bad name!", INVALID_TOPIC_EXCEPTION), ("dtp-a", 0), ("dtp-b", 0),
        ("no-such", UNKNOWN_TOPIC_OR_PARTITION)]
    assert topics[0]["topic_id"] in (None, uuid.UUID(int=0))  # kafka-python: zero id -> None
    assert topics[0]["partitions"] == []
    a = topics[1]
    assert a["topic_id"] != uuid.UUID(int=0) and a["is_internal"] is False
    assert a["topic_authorized_operations"] == TOPIC_OPERATIONS
    assert a["partitions"] == [
        {"error_code": 0, "partition_index": i, "leader_id": node, "leader_epoch": 0,
         "replica_nodes": [node], "isr_nodes": [node], "eligible_leader_replicas": None,
         "last_known_elr": None, "offline_replicas": []} for i in range(3)]


def _page(res: dict[str, Any]) -> list[tuple[str, int]]:
    return [(t["name"], p["partition_index"]) for t in res["topics"] for p in t["partitions"]]


def test_describe_topic_partitions_pages_with_cursor(setup: dict[str, Any]) -> None:
    kadmin = setup["kadmin"]
    names = ["dtp-b", "dtp-a"]
    first = kadmin.describe_topic_partitions(names, response_partition_limit=2)
    assert _page(first) == [("dtp-a", 0), ("dtp-a", 1)]
    assert first["next_cursor"] == {"topic_name": "dtp-a", "partition_index": 2}
    second = kadmin.describe_topic_partitions(names, 2, first["next_cursor"])
    assert _page(second) == [("dtp-a", 2), ("dtp-b", 0)]
    assert second["next_cursor"] == {"topic_name": "dtp-b", "partition_index": 1}
    third = kadmin.describe_topic_partitions(names, 2, second["next_cursor"])
    assert _page(third) == [("dtp-b", 1)] and third["next_cursor"] is None
    # a limit that ends exactly at a topic's end: the cursor points at the next topic's start
    exact = kadmin.describe_topic_partitions(names, response_partition_limit=3)
    assert _page(exact) == [("dtp-a", 0), ("dtp-a", 1), ("dtp-a", 2)]
    assert exact["next_cursor"] == {"topic_name": "dtp-b", "partition_index": 0}


def test_describe_topic_partitions_cursor_outside_topics_is_invalid(setup: dict[str, Any]) -> None:
    res = setup["kadmin"].describe_topic_partitions(
        ["dtp-a"], cursor={"topic_name": "dtp-b", "partition_index": 0})
    assert [(t["name"], t["error_code"], t["partitions"]) for t in res["topics"]] == [
        ("dtp-a", INVALID_REQUEST, [])]


def test_describe_topic_partitions_all_topics_from_cursor(samsa_broker: SamsaBroker,
                                                          setup: dict[str, Any]) -> None:
    resp = request(samsa_broker, 75, 0, {"topics": [], "response_partition_limit": 100,
                                         "cursor": {"topic_name": "dtp-a", "partition_index": 1}})
    got = [(t.name, [p.partition_index for p in t.partitions]) for t in resp.topics]
    assert got[:2] == [("dtp-a", [1, 2]), ("dtp-b", [0, 1])]
    assert all(name >= "dtp-a" for name, _ in got)
    assert resp.next_cursor is None


# ---- ElectLeaders --------------------------------------------------------------------------------
def test_elect_leaders_confluent(setup: dict[str, Any]) -> None:
    admin = setup["admin"]
    for election in (ElectionType.PREFERRED, ElectionType.UNCLEAN):
        res = admin.elect_leaders(election, [TopicPartition("dtp-a", 0), TopicPartition("dtp-a", 7),
                                             TopicPartition("nope", 0)]).result(timeout=30)
        codes = {(tp.topic, tp.partition): (err.code() if err is not None else 0)
                 for tp, err in res.items()}
        assert codes == {("dtp-a", 0): KafkaError.ELECTION_NOT_NEEDED,
                         ("dtp-a", 7): KafkaError.UNKNOWN_TOPIC_OR_PART,
                         ("nope", 0): KafkaError.UNKNOWN_TOPIC_OR_PART}


def test_elect_leaders_all_partitions_and_bad_type(samsa_broker: SamsaBroker,
                                                   setup: dict[str, Any]) -> None:
    # every partition: those already led by their preferred leader are left out of the results
    resp = request(samsa_broker, 43, 2, {"election_type": 0, "topic_partitions": None,
                                         "timeout": 10000})
    assert resp.error_code == 0
    results = {r.topic: r.partition_result for r in resp.replica_election_results}
    assert results["dtp-a"] == () and results["dtp-b"] == ()
    v0 = request(samsa_broker, 43, 0, {"topic_partitions": [{"topic": "dtp-b",
                                                             "partitions": [1]}],
                                       "timeout": 10000})
    assert [(r.topic, [(p.partition_id, p.error_code) for p in r.partition_result])
            for r in v0.replica_election_results] == [("dtp-b", [(1, ELECTION_NOT_NEEDED)])]
    bad = request(samsa_broker, 43, 2, {"election_type": 5, "topic_partitions": [
        {"topic": "dtp-a", "partitions": [0]}], "timeout": 10000})
    assert bad.error_code == INVALID_REQUEST
    assert bad.replica_election_results[0].partition_result[0].error_code == INVALID_REQUEST


# ---- Partition reassignments ---------------------------------------------------------------------
def test_alter_partition_reassignments(setup: dict[str, Any]) -> None:
    kadmin, node = setup["kadmin"], setup["node"]
    res = kadmin.alter_partition_reassignments({
        KTopicPartition("dtp-a", 0): [node],            # already the assignment: accepted
        KTopicPartition("dtp-a", 1): [node, 99],        # broker 99 is not registered
        KTopicPartition("dtp-a", 2): [node, node],      # a broker twice
        KTopicPartition("dtp-b", 0): None,              # cancel: nothing in progress
        KTopicPartition("dtp-b", 5): [node],            # no such partition
        KTopicPartition("nope", 0): [node],             # no such topic
    })
    assert res == {
        KTopicPartition("dtp-a", 0): None,
        KTopicPartition("dtp-a", 1): kerr.InvalidReplicationAssignmentError,
        KTopicPartition("dtp-a", 2): kerr.InvalidReplicationAssignmentError,
        KTopicPartition("dtp-b", 0): kerr.NoReassignmentInProgressError,
        KTopicPartition("dtp-b", 5): kerr.UnknownTopicOrPartitionError,
        KTopicPartition("nope", 0): kerr.UnknownTopicOrPartitionError,
    }


def test_alter_partition_reassignments_empty_replicas(samsa_broker: SamsaBroker,
                                                      setup: dict[str, Any]) -> None:
    resp = request(samsa_broker, 45, 0, {"timeout": 10000, "topics": [
        {"name": "dtp-a", "partitions": [{"partition_index": 0, "replicas": []}]}]})
    assert resp.error_code == 0
    part = resp.responses[0].partitions[0]
    assert (part.partition_index, part.error_code) == (0, INVALID_REPLICA_ASSIGNMENT)


def test_list_partition_reassignments_is_empty(setup: dict[str, Any]) -> None:
    kadmin = setup["kadmin"]
    assert kadmin.list_partition_reassignments() == {}
    assert kadmin.list_partition_reassignments({"dtp-a": [0, 1], "nope": [0]}) == {}


# ---- AlterReplicaLogDirs -------------------------------------------------------------------------
def test_alter_replica_log_dirs(samsa_broker: SamsaBroker, setup: dict[str, Any]) -> None:
    kadmin, node = setup["kadmin"], setup["node"]
    log_dir = str(samsa_broker.data_dir / "logs")
    res = kadmin.alter_replica_log_dirs({
        TopicPartitionReplica("dtp-a", 0, node): log_dir,         # where it is: nothing to do
        TopicPartitionReplica("dtp-a", 1, node): "/no/such/dir",  # not a log dir
        TopicPartitionReplica("dtp-b", 0, node): "logs",          # relative: not a log dir's path
        TopicPartitionReplica("dtp-b", 9, node): log_dir,         # no such partition
    })
    assert res == {
        TopicPartitionReplica("dtp-a", 0, node): kerr.NoError,
        TopicPartitionReplica("dtp-a", 1, node): kerr.LogDirNotFoundError,
        TopicPartitionReplica("dtp-b", 0, node): kerr.LogDirNotFoundError,
        TopicPartitionReplica("dtp-b", 9, node): kerr.UnknownTopicOrPartitionError,
    }
    assert kerr.LogDirNotFoundError.errno == LOG_DIR_NOT_FOUND


# ---- DescribeQuorum ------------------------------------------------------------------------------
def test_describe_quorum_single_voter(samsa_broker: SamsaBroker, setup: dict[str, Any]) -> None:
    kadmin, node = setup["kadmin"], setup["node"]
    q = kadmin.describe_metadata_quorum()
    [topic] = q["topics"]
    assert topic["topic_name"] == "__cluster_metadata"
    [part] = topic["partitions"]
    assert part["partition_index"] == 0 and part["error"] is None
    assert part["leader_id"] == node and part["observers"] == []
    [voter] = part["current_voters"]
    assert voter["replica_id"] == node
    assert voter["log_end_offset"] == part["high_watermark"] > 0
    assert [(n["node_id"], [(lst["host"], lst["port"]) for lst in n["listeners"]])
            for n in q["nodes"]] == [(node, [("127.0.0.1", samsa_broker.port)])]
    # creating a topic writes the metadata log: its end offset moves
    setup["admin"].create_topics([NewTopic("quorum-grows", 1, 1)])["quorum-grows"].result(30)
    after = kadmin.describe_metadata_quorum()["topics"][0]["partitions"][0]
    assert after["high_watermark"] > part["high_watermark"]


def test_describe_quorum_other_partition(samsa_broker: SamsaBroker) -> None:
    resp = request(samsa_broker, 55, 1, {"topics": [
        {"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 1}]}]})
    assert resp.error_code == 0
    p = resp.topics[0].partitions[0]
    assert (p.partition_index, p.error_code) == (1, UNKNOWN_TOPIC_OR_PARTITION)


# ---- Versions added to match Kafka 4.0 -----------------------------------------------------------
def test_list_offsets_v10_tiered_specs(setup: dict[str, Any]) -> None:
    kadmin = setup["kadmin"]
    tp = KTopicPartition("dtp-a", 0)
    tiered = kadmin.list_partition_offsets({tp: OffsetSpec.LATEST_TIERED})[tp]
    assert (tiered.offset, tiered.timestamp, tiered.leader_epoch) == (-1, -1, None)
    local = kadmin.list_partition_offsets({tp: OffsetSpec.EARLIEST_LOCAL})[tp]
    assert local.offset == 0


def test_fetch_v17_metadata_v13_describe_cluster_v2(samsa_broker: SamsaBroker,
                                                    setup: dict[str, Any]) -> None:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": samsa_broker.bootstrap})
    p.produce("dtp-b", b"v17", partition=1)
    assert p.flush(30) == 0
    meta = request(samsa_broker, 3, 13, {"topics": [{"name": "dtp-b", "topic_id": None}],
                                         "allow_auto_topic_creation": False,
                                         "include_topic_authorized_operations": False})
    assert meta.error_code == 0 and meta.topics[0].name == "dtp-b"
    tid = meta.topics[0].topic_id
    fetched = request(samsa_broker, 1, 17, {
        "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
        "topics": [{"topic_id": tid, "partitions": [
            {"partition": 1, "current_leader_epoch": -1, "fetch_offset": 0,
             "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]})
    part = fetched.responses[0].partitions[0]
    assert part.error_code == 0 and part.high_watermark == 1 and b"v17" in part.records
    cluster = request(samsa_broker, 60, 2, {"include_cluster_authorized_operations": False,
                                            "endpoint_type": 1, "include_fenced_brokers": True})
    assert [(b.broker_id, b.is_fenced) for b in cluster.brokers] == [(setup["node"], False)]


def test_describe_topic_partitions_capped_by_broker_limit() -> None:
    """The broker's max.request.partition.size.limit caps a larger response_partition_limit."""
    with SamsaBroker(overrides={"max.request.partition.size.limit": "3"}) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("capped", 5, 1)])["capped"].result(timeout=30)
        resp = request(broker, 75, 0, {"topics": [{"name": "capped"}],
                                       "response_partition_limit": 2000, "cursor": None})
        assert [p.partition_index for p in resp.topics[0].partitions] == [0, 1, 2]
        assert (resp.next_cursor.topic_name, resp.next_cursor.partition_index) == ("capped", 3)
