"""Absurd or inconsistent CreateTopics / CreatePartitions / DeleteTopics requests are refused with
Kafka's error codes before any work: nothing is created, no partition directory appears, and the
broker keeps answering. Real admin clients send what they can; raw frames (tests/wire.py) send
what the clients refuse to (2^31-1 partitions, duplicate partition indexes, name plus id)."""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kafka.admin import KafkaAdminClient

from samsa.protocol.errors import Err
from samsa.testing import SamsaBroker
from tests.wire import Wire

# a hang (the broker creating 2^31-1 partitions) fails the test instead of eating the suite's time
pytestmark = pytest.mark.timeout(60)

INT32_MAX = 2**31 - 1
EXCESSIVE = "Excessively large number of partitions per request."


def _topic(name: str, partitions: int = 1, rf: int = 1,
           assignments: list[tuple[int, list[int]]] | None = None) -> dict[str, Any]:
    return {"name": name, "num_partitions": partitions, "replication_factor": rf,
            "assignments": [{"partition_index": i, "broker_ids": b} for i, b in assignments or []],
            "configs": []}


def _create(bootstrap: str, topics: list[dict[str, Any]],
            validate_only: bool = False) -> list[tuple[str, int, str | None]]:
    w = Wire(bootstrap, timeout=20)
    try:
        resp = w.request(19, 7, {"topics": topics, "timeout": 10000,
                                 "validate_only": validate_only})
    finally:
        w.close()
    return [(t.name, int(t.error_code), t.error_message) for t in resp.topics]


def _create_partitions(bootstrap: str, topics: list[dict[str, Any]],
                       validate_only: bool = False) -> list[tuple[str, int, str | None]]:
    w = Wire(bootstrap, timeout=20)
    try:
        resp = w.request(37, 3, {"topics": topics, "timeout": 10000,
                                 "validate_only": validate_only})
    finally:
        w.close()
    return [(r.name, int(r.error_code), r.error_message) for r in resp.results]


def _partitions(bootstrap: str) -> dict[str, int]:
    """Topic -> partition count, from Metadata; also proves the broker answers (bounded wait)."""
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    return {name: len(t.partitions) for name, t in md.topics.items()}


def _dirs(broker: SamsaBroker, prefix: str) -> list[str]:
    logs = broker.data_dir / "logs"
    return sorted(p.name for p in logs.iterdir() if p.name.startswith(prefix))


def _assert_nothing(broker: SamsaBroker, prefix: str) -> None:
    assert not [t for t in _partitions(broker.bootstrap) if t.startswith(prefix)]
    assert _dirs(broker, prefix) == []


@pytest.fixture(scope="module")
def kp(samsa_broker: SamsaBroker) -> Iterator[KafkaAdminClient]:
    a = KafkaAdminClient(bootstrap_servers=samsa_broker.bootstrap, request_timeout_ms=20000)
    yield a
    a.close()


def test_create_topic_with_2_31_partitions_is_refused_at_once(samsa_broker: SamsaBroker) -> None:
    for validate_only in (False, True):
        res = _create(samsa_broker.bootstrap, [_topic("huge-a", INT32_MAX)], validate_only)
        assert res == [("huge-a", Err.POLICY_VIOLATION, EXCESSIVE)]
    # the limit is per request: two topics of 6,000 each fail together, neither is created
    res = _create(samsa_broker.bootstrap, [_topic("huge-b", 6000), _topic("huge-c", 6000)])
    assert res == [("huge-b", Err.POLICY_VIOLATION, EXCESSIVE),
                   ("huge-c", Err.POLICY_VIOLATION, EXCESSIVE)]
    _assert_nothing(samsa_broker, "huge-")


def test_kafka_python_huge_num_partitions_is_refused(samsa_broker: SamsaBroker,
                                                     kp: KafkaAdminClient) -> None:
    r = kp.create_topics({"kphuge": {"num_partitions": INT32_MAX, "replication_factor": 1}},
                         raise_errors=False)
    assert [(t["name"], t["error_code"]) for t in r["topics"]] == [("kphuge",
                                                                    Err.POLICY_VIOLATION)]
    _assert_nothing(samsa_broker, "kphuge")


def test_create_partitions_to_2_31_is_refused_at_once(samsa_broker: SamsaBroker) -> None:
    assert _create(samsa_broker.bootstrap, [_topic("grow", 2)]) == [("grow", 0, None)]
    for validate_only in (False, True):
        res = _create_partitions(samsa_broker.bootstrap,
                                 [{"name": "grow", "count": INT32_MAX, "assignments": None}],
                                 validate_only)
        assert res == [("grow", Err.POLICY_VIOLATION, EXCESSIVE)]
    assert _partitions(samsa_broker.bootstrap)["grow"] == 2
    assert _dirs(samsa_broker, "grow-") == ["grow-0", "grow-1"]


BAD_SIZES = [  # (num_partitions, replication_factor, error code, Kafka's message)
    (0, 1, Err.INVALID_PARTITIONS,
     "Number of partitions was set to an invalid non-positive value."),
    (-2, 1, Err.INVALID_PARTITIONS,
     "Number of partitions was set to an invalid non-positive value."),
    (1, 0, Err.INVALID_REPLICATION_FACTOR,
     "Replication factor must be larger than 0, or -1 to use the default value."),
    (1, -2, Err.INVALID_REPLICATION_FACTOR,
     "Replication factor must be larger than 0, or -1 to use the default value."),
    # Kafka checks the replication factor first
    (0, 0, Err.INVALID_REPLICATION_FACTOR,
     "Replication factor must be larger than 0, or -1 to use the default value."),
    (1, 3, Err.INVALID_REPLICATION_FACTOR,
     "Unable to replicate the partition 3 time(s): The target replication factor of 3 cannot be "
     "reached because only 1 broker(s) are registered."),
]


def test_bad_sizes_get_kafkas_errors(samsa_broker: SamsaBroker, kp: KafkaAdminClient) -> None:
    for partitions, rf, code, message in BAD_SIZES:
        for validate_only in (False, True):
            r = kp.create_topics({"badsize": {"num_partitions": partitions,
                                              "replication_factor": rf}},
                                 validate_only=validate_only, raise_errors=False)
            got = [(t["name"], t["error_code"], t["error_message"]) for t in r["topics"]]
            assert got == [("badsize", code, message)], (partitions, rf, validate_only)
    _assert_nothing(samsa_broker, "badsize")


@pytest.mark.parametrize(("assignments", "code", "message"), [
    pytest.param([(0, [1]), (0, [1])], Err.INVALID_REPLICA_ASSIGNMENT,
                 "Found multiple manual partition assignments for partition 0", id="index-twice"),
    pytest.param([(0, [1]), (2, [1])], Err.INVALID_REPLICA_ASSIGNMENT,
                 "partitions should be a consecutive 0-based integer sequence", id="gap"),
    pytest.param([(0, [1]), (1, [7])], Err.INVALID_REPLICA_ASSIGNMENT,
                 "The manual partition assignment includes broker 7, but no such broker is "
                 "registered.", id="unknown-broker"),
    pytest.param([(0, [1, 1])], Err.INVALID_REPLICA_ASSIGNMENT,
                 "The manual partition assignment includes the broker 1 more than once.",
                 id="broker-twice"),
    pytest.param([(0, [])], Err.INVALID_REPLICA_ASSIGNMENT,
                 "The manual partition assignment includes an empty replica list.", id="empty"),
    pytest.param([(i, [1]) for i in range(10_001)], Err.POLICY_VIOLATION, EXCESSIVE,
                 id="10001-partitions"),
])
def test_bad_manual_assignments(samsa_broker: SamsaBroker, assignments: list[tuple[int, list[int]]],
                                code: int, message: str) -> None:
    res = _create(samsa_broker.bootstrap, [_topic("assign", -1, -1, assignments)])
    assert res == [("assign", code, message)]
    _assert_nothing(samsa_broker, "assign")


def test_manual_assignment_with_sizes_set_is_invalid_request(samsa_broker: SamsaBroker,
                                                             kp: KafkaAdminClient) -> None:
    r = kp.create_topics({"asz": {"num_partitions": 1, "assignments": {0: [1]}},
                          "asr": {"replication_factor": 1, "assignments": {0: [1]}},
                          "agap": {"assignments": {0: [1], 2: [1]}}}, raise_errors=False)
    assert sorted((t["name"], t["error_code"]) for t in r["topics"]) == [
        ("agap", Err.INVALID_REPLICA_ASSIGNMENT), ("asr", Err.INVALID_REQUEST),
        ("asz", Err.INVALID_REQUEST)]
    for name in ("asz", "asr", "agap"):
        _assert_nothing(samsa_broker, name)
    # a valid manual assignment, given in any order, creates its partitions
    res = _create(samsa_broker.bootstrap, [_topic("manual", -1, -1, [(1, [1]), (0, [1])])])
    assert res == [("manual", 0, None)]
    assert _partitions(samsa_broker.bootstrap)["manual"] == 2


def test_duplicate_topics_in_one_request(samsa_broker: SamsaBroker) -> None:
    res = _create(samsa_broker.bootstrap, [_topic("dup"), _topic("dup"), _topic("dup-ok")])
    assert res == [("dup", Err.INVALID_REQUEST, "Duplicate topic name."),
                   ("dup", Err.INVALID_REQUEST, "Duplicate topic name."), ("dup-ok", 0, None)]
    assert "dup" not in _partitions(samsa_broker.bootstrap)
    res = _create_partitions(samsa_broker.bootstrap,
                             [{"name": "dup-ok", "count": 2, "assignments": None}] * 2)
    assert res == [("dup-ok", Err.INVALID_REQUEST, "Duplicate topic name.")] * 2
    assert _partitions(samsa_broker.bootstrap)["dup-ok"] == 1
    w = Wire(samsa_broker.bootstrap)
    resp = w.request(20, 6, {"topics": [{"name": "dup-ok", "topic_id": None}] * 2,
                             "timeout": 10000})
    w.close()
    assert [(r.name, int(r.error_code)) for r in resp.responses] == [
        ("dup-ok", Err.INVALID_REQUEST)] * 2
    assert "dup-ok" in _partitions(samsa_broker.bootstrap)


def test_delete_topics_name_and_id_rules(samsa_broker: SamsaBroker) -> None:
    assert _create(samsa_broker.bootstrap, [_topic("del-me")]) == [("del-me", 0, None)]
    w = Wire(samsa_broker.bootstrap)
    try:
        some_id = uuid.uuid4()
        resp = w.request(20, 6, {"topics": [{"name": "del-me", "topic_id": some_id},
                                            {"name": None, "topic_id": None},
                                            {"name": None, "topic_id": some_id},
                                            {"name": "never-was", "topic_id": None}],
                                 "timeout": 10000})
    finally:
        w.close()
    assert [(int(r.error_code), r.error_message) for r in resp.responses] == [
        (Err.INVALID_REQUEST, "You may not specify both topic name and topic id."),
        (Err.INVALID_REQUEST, "Neither topic name nor id were specified."),
        (Err.UNKNOWN_TOPIC_ID, None),
        (Err.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")]
    assert "del-me" in _partitions(samsa_broker.bootstrap)


def test_create_partitions_checks(samsa_broker: SamsaBroker) -> None:
    admin = AdminClient({"bootstrap.servers": samsa_broker.bootstrap})
    admin.create_topics([NewTopic("cp", 2, 1)])["cp"].result(10)

    def err(np: NewPartitions, validate_only: bool = False) -> Any:
        f = admin.create_partitions([np], validate_only=validate_only,
                                    request_timeout=10)[np.topic]
        with pytest.raises(Exception) as e:
            f.result(15)
        return e.value.args[0]

    for validate_only in (False, True):
        e = err(NewPartitions("cp", 2), validate_only)
        assert (e.code(), e.str()) == (Err.INVALID_PARTITIONS, "Topic already has 2 partition(s).")
        e = err(NewPartitions("cp", 1), validate_only)
        assert (e.code(), e.str()) == (Err.INVALID_PARTITIONS,
                                       "The topic cp currently has 2 partition(s); 1 would not be "
                                       "an increase.")
        e = err(NewPartitions("cp", 4, [[1]]), validate_only)
        assert (e.code(), e.str()) == (Err.INVALID_REPLICA_ASSIGNMENT,
                                       "Attempted to add 2 additional partition(s), but only 1 "
                                       "assignment(s) were specified.")
        e = err(NewPartitions("cp", 3, [[5]]), validate_only)
        assert e.code() == Err.INVALID_REPLICA_ASSIGNMENT
        e = err(NewPartitions("nope", 3), validate_only)
        assert e.code() == Err.UNKNOWN_TOPIC_OR_PARTITION
    assert _partitions(samsa_broker.bootstrap)["cp"] == 2
    assert _dirs(samsa_broker, "cp-") == ["cp-0", "cp-1"]
    admin.create_partitions([NewPartitions("cp", 3, [[1]])])["cp"].result(15)
    assert _partitions(samsa_broker.bootstrap)["cp"] == 3


def test_topic_names(samsa_broker: SamsaBroker) -> None:
    res = _create(samsa_broker.bootstrap, [_topic("n" * 250), _topic("bad/name"),
                                           _topic("a.b"), _topic(".")])
    assert [c for _, c, _ in res] == [Err.INVALID_TOPIC_EXCEPTION, Err.INVALID_TOPIC_EXCEPTION,
                                      0, Err.INVALID_TOPIC_EXCEPTION]
    # '.' and '_' collide in Kafka's metric names: the second spelling is refused
    res = _create(samsa_broker.bootstrap, [_topic("a_b")])
    assert res == [("a_b", Err.INVALID_TOPIC_EXCEPTION,
                    "Topic 'a_b' collides with existing topic: a.b")]
    names = _partitions(samsa_broker.bootstrap)
    assert "a_b" not in names and "n" * 250 not in names
    assert _dirs(samsa_broker, "a_b") == [] and _dirs(samsa_broker, "n" * 250) == []


@pytest.fixture(scope="module")
def capped() -> Iterator[SamsaBroker]:
    with SamsaBroker(overrides={"max.broker.partitions": "20"}) as b:
        yield b


def test_max_broker_partitions(capped: SamsaBroker) -> None:
    admin = AdminClient({"bootstrap.servers": capped.bootstrap})
    f = admin.create_topics([NewTopic("cap-big", 21, 1)], request_timeout=10)["cap-big"]
    with pytest.raises(Exception) as e:
        f.result(15)
    assert e.value.args[0].code() == Err.POLICY_VIOLATION
    assert "max.broker.partitions=20" in e.value.args[0].str()
    _assert_nothing(capped, "cap-big")

    admin.create_topics([NewTopic("cap-a", 15, 1)])["cap-a"].result(15)
    # 15 + 6 > 20: refused, also with validate_only; 15 + 5 fits
    for validate_only in (True, False):
        f = admin.create_topics([NewTopic("cap-b", 6, 1)], validate_only=validate_only,
                                request_timeout=10)["cap-b"]
        with pytest.raises(Exception) as e:
            f.result(15)
        assert e.value.args[0].code() == Err.POLICY_VIOLATION
        f = admin.create_partitions([NewPartitions("cap-a", 21)], validate_only=validate_only,
                                    request_timeout=10)["cap-a"]
        with pytest.raises(Exception) as e:
            f.result(15)
        assert e.value.args[0].code() == Err.POLICY_VIOLATION
    admin.create_partitions([NewPartitions("cap-a", 20)])["cap-a"].result(15)
    # full: a Metadata auto-create is refused too (the topic is simply unknown)
    md = admin.list_topics(topic="cap-auto", timeout=10)
    assert md.topics["cap-auto"].error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    # the broker's own internal topics are still created (a group lookup needs __consumer_offsets)
    g = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("cap-group")],
                                          request_timeout=10)["cap-group"].result(15)
    assert g.group_id == "cap-group"
    assert _partitions(capped.bootstrap).get("__consumer_offsets") == 50
    parts = _partitions(capped.bootstrap)
    assert parts.get("cap-a") == 20 and "cap-b" not in parts and "cap-auto" not in parts
    assert _dirs(capped, "cap-b") == [] and _dirs(capped, "cap-auto") == []
    assert len(_dirs(capped, "cap-a-")) == 20


def _nothing_to_read(w: Wire) -> bool:
    """No byte of a response has arrived yet (peek, do not wait)."""
    w.sock.setblocking(False)
    try:
        data = w.sock.recv(1, socket.MSG_PEEK)
    except BlockingIOError:
        return True
    finally:
        w.sock.settimeout(60)
    if not data:
        raise ConnectionError("the broker closed the connection")
    return False


def test_broker_answers_while_a_large_topic_is_created(samsa_broker: SamsaBroker) -> None:
    """Each partition costs file creation and fsyncs; the broker serves other clients in between
    instead of holding every request until the last of 600 partitions exists."""
    creator, other = Wire(samsa_broker.bootstrap, timeout=60), Wire(samsa_broker.bootstrap)
    try:
        creator.send_raw(creator.encode(19, 7, {"topics": [_topic("wide", 600)], "timeout": 60000,
                                                "validate_only": False}))
        time.sleep(0.5)  # let the creation get going
        md = other.request(3, 12, {"topics": None, "allow_auto_topic_creation": False,
                                   "include_topic_authorized_operations": False})
        assert md.brokers  # answered...
        assert _nothing_to_read(creator)  # ...while the creation was still running
        frame = creator.recv_frame()  # and the creation completes
    finally:
        creator.close()
        other.close()
    assert frame  # a CreateTopics response arrived
    assert _partitions(samsa_broker.bootstrap)["wide"] == 600
    assert len(_dirs(samsa_broker, "wide-")) == 600


def test_topic_deleted_while_being_created_leaves_no_partition_dirs(
        samsa_broker: SamsaBroker) -> None:
    """The creation yields between partitions; a DeleteTopics in that window must not be followed
    by more partition directories of the deleted topic."""
    creator, other = Wire(samsa_broker.bootstrap, timeout=60), Wire(samsa_broker.bootstrap)
    try:
        creator.send_raw(creator.encode(19, 7, {"topics": [_topic("doomed", 600)],
                                                "timeout": 60000, "validate_only": False}))
        time.sleep(0.5)
        resp = other.request(20, 6, {"topics": [{"name": "doomed", "topic_id": None}],
                                     "timeout": 10000})
        assert [int(r.error_code) for r in resp.responses] == [0]
        assert creator.recv_frame()
    finally:
        creator.close()
        other.close()
    assert "doomed" not in _partitions(samsa_broker.bootstrap)
    assert [d for d in _dirs(samsa_broker, "doomed-") if not d.endswith("-delete")] == []
