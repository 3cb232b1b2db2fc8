"""Clients cannot write to the broker's internal topics (__consumer_offsets, __transaction_state):
Kafka answers INVALID_TOPIC_EXCEPTION to a Produce or DeleteRecords for them (only its own
coordinators write there). Otherwise any principal with WRITE on them (a `TOPIC:*` ACL, or no
authorizer) could rewrite any group's committed offsets, bypassing the group's READ ACL, or feed
the coordinators records they never wrote."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from samsa.cluster.internal_topic import partition_for
from samsa.protocol.records import encode_batch
from samsa.testing import SamsaBroker
from tests.wire import Wire

pytestmark = pytest.mark.timeout(120)
INVALID_TOPIC = 17
GROUP = "g-internal"


@pytest.fixture(scope="module")
def broker() -> Iterator[SamsaBroker]:
    with SamsaBroker() as b:
        yield b


def _commit(b: SamsaBroker, offset: int) -> None:
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": GROUP, "log_level": 0,
                  "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition("data", 0, offset)], asynchronous=False)
    finally:
        c.close()


def _committed(b: SamsaBroker) -> int:
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": GROUP, "log_level": 0})
    try:
        return int(c.committed([TopicPartition("data", 0)], timeout=30)[0].offset)
    finally:
        c.close()


def test_produce_to_internal_topics_is_refused(broker: SamsaBroker) -> None:
    p = Producer({"bootstrap.servers": broker.bootstrap})
    p.produce("data", b"x")
    assert p.flush(30) == 0
    del p
    _commit(broker, 1)
    n = int(broker.overrides.get("offsets.topic.num.partitions", 50))
    part = partition_for(GROUP, n)
    garbage = encode_batch([(b"\x00\x01garbage-key", b"garbage-value", [], 1_700_000_000_000)])
    w = Wire(broker.bootstrap)
    try:
        r = w.request(0, 9, {"transactional_id": None, "acks": -1, "timeout": 5000, "topic_data": [
            {"name": "__consumer_offsets", "partition_data": [{"index": part, "records": garbage}]}]})
    finally:
        w.close()
    assert r.responses[0].partition_responses[0].error_code == INVALID_TOPIC
    # nor can a client delete their records (Kafka: whatever the topic's cleanup policy)
    w = Wire(broker.bootstrap)
    try:
        d = w.request(21, 2, {"topics": [{"name": "__consumer_offsets", "partitions": [
            {"partition_index": part, "offset": -1}]}], "timeout": 5000})
    finally:
        w.close()
    assert d.topics[0].partitions[0].error_code == INVALID_TOPIC
    # the group's offsets are intact, also after the coordinator replays its partition
    broker.restart()
    assert _committed(broker) == 1


def test_empty_transactional_id_is_an_invalid_request(broker: SamsaBroker) -> None:
    """InitProducerId with "" as the transactional id: Kafka's coordinator answers INVALID_REQUEST
    (no transaction state is made for it)."""
    w = Wire(broker.bootstrap)
    try:
        r = w.request(22, 4, {"transactional_id": "", "transaction_timeout": 60000,
                              "producer_id": -1, "producer_epoch": -1})
    finally:
        w.close()
    assert r.error_code == 42 and r.producer_id == -1
