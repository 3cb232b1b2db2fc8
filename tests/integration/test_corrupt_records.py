"""Batches with a valid CRC but corrupt records (every class in tests/corrupt_records.py) are
refused with Kafka's error code and leave the partition exactly as it was: log end offset, size on
disk and the idempotent producer's sequence. Real clients keep producing and consuming."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.protocol.records import encode_batch
from samsa.testing import SamsaBroker
from tests.corrupt_records import TS, batch, cases, good_body, record
from tests.wire import Wire

pytestmark = pytest.mark.timeout(180)
TOPIC = "corrupt-records"


def _produce(w: Wire, records: bytes, version: int = 9) -> Any:
    body = {"transactional_id": None, "acks": -1, "timeout": 5000,
            "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": records}]}]}
    return w.request(0, version, body).responses[0].partition_responses[0]


def _state(w: Wire) -> tuple[int, int]:
    """(log end offset by ListOffsets latest, partition size by DescribeLogDirs)."""
    lo = w.request(2, 5, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": TOPIC, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                        "timestamp": -1}]}]})
    end = lo.topics[0].partitions[0].offset
    dirs = w.request(35, 1, {"topics": [{"topic": TOPIC, "partitions": [0]}]})
    sizes = [p.partition_size for r in dirs.results for t in r.topics if t.name == TOPIC
             for p in t.partitions if p.partition_index == 0]
    assert len(sizes) == 1
    return int(end), int(sizes[0])


@pytest.fixture(scope="module")
def topic(samsa_broker: SamsaBroker) -> str:
    bs = samsa_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(10)
    _idempotent_produce(bs, "before", 20)
    return TOPIC


def _idempotent_produce(bs: str, tag: str, n: int) -> None:
    p = Producer({"bootstrap.servers": bs, "enable.idempotence": True, "linger.ms": 5})
    for i in range(n):
        p.produce(TOPIC, key=f"{tag}-{i}".encode(), value=b"good")
    assert p.flush(15) == 0


@pytest.mark.parametrize("name,build,code", cases(), ids=[c[0] for c in cases()])
def test_corrupt_records_are_refused_and_leave_the_log_unchanged(samsa_broker: SamsaBroker, topic: str,
                                                                 name: str, build, code: int) -> None:  # type: ignore[no-untyped-def]
    w = Wire(samsa_broker.bootstrap)
    before = _state(w)
    r = _produce(w, build())
    assert (r.error_code, r.base_offset) == (code, -1), (name, r.error_message)
    assert _state(w) == before, name
    w.close()


def test_zstd_needs_produce_v7(samsa_broker: SamsaBroker, topic: str) -> None:
    """KIP-110: zstd batches in Produce v3-6 get UNSUPPORTED_COMPRESSION_TYPE (76)."""
    w = Wire(samsa_broker.bootstrap)
    before = _state(w)
    zstd = encode_batch([(b"z", b"zstd", [], TS)], compression=4)
    assert _produce(w, zstd, version=6).error_code == 76
    assert _state(w) == before
    r = _produce(w, zstd, version=7)
    assert (r.error_code, r.base_offset) == (0, before[0])
    w.close()


def test_a_refused_batch_does_not_advance_the_producer_sequence(samsa_broker: SamsaBroker,
                                                                 topic: str) -> None:
    w = Wire(samsa_broker.bootstrap)
    ip = w.request(22, 2, {"transactional_id": None, "transaction_timeout_ms": 60000,
                           "producer_id": -1, "producer_epoch": -1})
    assert ip.error_code == 0
    pid, epoch = int(ip.producer_id), int(ip.producer_epoch)

    def idem(body: bytes, count: int, seq: int) -> bytes:
        import crc32c
        raw = bytearray(batch(body, count))
        raw[43:57] = pid.to_bytes(8, "big", signed=True) + epoch.to_bytes(2, "big", signed=True) + \
            seq.to_bytes(4, "big", signed=True)
        raw[17:21] = crc32c.crc32c(bytes(raw[21:])).to_bytes(4, "big")
        return bytes(raw)

    assert _produce(w, idem(good_body(2), 2, 0)).error_code == 0
    before = _state(w)
    bad = _produce(w, idem(good_body(2) + b"\x01", 2, 2))  # the next sequence, trailing byte
    assert bad.error_code == 87
    bad = _produce(w, idem(record(0, klen=999) + record(1), 2, 2))
    assert bad.error_code == 87
    assert _state(w) == before
    ok = _produce(w, idem(good_body(3), 3, 2))  # sequence 2 is still the expected one
    assert (ok.error_code, ok.base_offset) == (0, before[0])
    w.close()


def test_real_clients_still_produce_and_consume(samsa_broker: SamsaBroker, topic: str) -> None:
    bs = samsa_broker.bootstrap
    w = Wire(bs)
    for _name, build, _code in cases()[:10]:
        _produce(w, build())
    assert _produce(w, encode_batch([(b"raw", b"good", [], TS)])).error_code == 0
    end_before, _ = _state(w)
    w.close()
    _idempotent_produce(bs, "after", 20)
    c = Consumer({"bootstrap.servers": bs, "group.id": "corrupt-check", "enable.auto.commit": False,
                  "check.crcs": True, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(TOPIC, 0, 0)])
    got: list[tuple[int, bytes]] = []
    for _ in range(60):
        for m in c.consume(500, 1):
            assert m.error() is None, m.error()
            got.append((m.offset(), m.value()))
        if len(got) >= end_before + 20:
            break
    c.close()
    offsets = [o for o, _ in got]
    assert offsets == list(range(len(got)))
    assert len(got) == end_before + 20
    values = {v for _, v in got}  # only what the tests here stored with error 0
    assert b"good" in values and values <= {b"good", b"v" * 20, b"zstd"}
