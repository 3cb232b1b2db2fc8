"""Topic configs that change what the broker stores, checked at the broker and through every client:
`compression.type` (the broker recompresses a batch to the topic's codec: the stored batch's codec
bits say so and every client still decodes the records) and `message.timestamp.type=LogAppendTime`
(records carry the broker's append time, typed LOG_APPEND_TIME, and the produce response says it)."""

from __future__ import annotations

import asyncio
import struct
import time
from typing import Any

import pytest
from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.testing import SamsaBroker
from tests.wire import Wire

pytestmark = pytest.mark.timeout(120)

CODEC_BITS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
N = 50
VALUES = [b"value-%03d-" % i + b"x" * 200 for i in range(N)]  # compressible


def create(bs: str, topic: str, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(10)


def stored_batches(bs: str, topic: str) -> list[dict[str, int]]:
    """The record batches of partition 0 exactly as the broker serves them (raw Fetch v11),
    header fields read straight from the bytes (RecordBatch v2 layout)."""
    w = Wire(bs)
    try:
        body = {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 24,
                "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": topic, "partitions": [
                    {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 24,
                     "log_start_offset": -1, "current_leader_epoch": -1}]}],
                "forgotten_topics_data": [], "rack_id": ""}
        resp = w.request(1, 11, body)
    finally:
        w.close()
    part = resp.responses[0].partitions[0]
    assert part.error_code == 0
    data = bytes(part.records or b"")
    out = []
    pos = 0
    while pos + 61 <= len(data):
        base_offset, length = struct.unpack_from(">qi", data, pos)
        magic = data[pos + 16]
        attributes, last_delta, base_ts, max_ts = struct.unpack_from(">hiqq", data, pos + 21)
        (count,) = struct.unpack_from(">i", data, pos + 57)
        out.append({"base_offset": base_offset, "magic": magic, "codec": attributes & 0x07,
                    "log_append_time": (attributes >> 3) & 1, "last_offset_delta": last_delta,
                    "base_timestamp": base_ts, "max_timestamp": max_ts, "count": count})
        pos += 12 + length
    assert pos == len(data), "a partial batch at the end of a fetch that had room for everything"
    return out


def produce(bs: str, topic: str, codec: str, **extra: Any) -> list[Any]:
    """One producer batch of VALUES compressed with `codec`; returns the delivery reports."""
    p = Producer({"bootstrap.servers": bs, "compression.type": codec, "linger.ms": 100,
                  "batch.num.messages": 1000, **extra})
    reports: list[Any] = []
    for v in VALUES:
        p.produce(topic, value=v, partition=0, on_delivery=lambda e, m: reports.append((e, m)))
    assert p.flush(10) == 0
    assert all(e is None for e, _ in reports), reports
    return [m for _, m in reports]


def read_confluent(bs: str, topic: str, n: int = N) -> list[tuple[bytes, tuple[int, int]]]:
    c = Consumer({"bootstrap.servers": bs, "group.id": f"{topic}-ck", "enable.auto.commit": False,
                  "check.crcs": True})
    c.assign([TopicPartition(topic, 0, 0)])
    out: list[tuple[bytes, tuple[int, int]]] = []
    deadline = time.time() + 20
    while len(out) < n and time.time() < deadline:
        for m in c.consume(n, 0.5):
            assert m.error() is None, m.error()
            out.append((m.value(), m.timestamp()))
    c.close()
    return out


def read_kafka_python(bs: str, topic: str, n: int = N) -> list[tuple[bytes, int, int]]:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP
    c = KafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False, check_crcs=True)
    c.assign([KTP(topic, 0)])
    c.seek(KTP(topic, 0), 0)
    out: list[tuple[bytes, int, int]] = []
    deadline = time.time() + 20
    while len(out) < n and time.time() < deadline:
        for recs in c.poll(500).values():
            out += [(r.value, r.timestamp_type, r.timestamp) for r in recs]
    c.close()
    return out


def read_aiokafka(bs: str, topic: str, n: int = N) -> list[tuple[bytes, int, int]]:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition as ATP

    async def run() -> list[tuple[bytes, int, int]]:
        c = AIOKafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False, check_crcs=True)
        await c.start()
        try:
            c.assign([ATP(topic, 0)])
            c.seek(ATP(topic, 0), 0)
            out: list[tuple[bytes, int, int]] = []
            deadline = time.time() + 20
            while len(out) < n and time.time() < deadline:
                for recs in (await c.getmany(timeout_ms=500)).values():
                    out += [(r.value, r.timestamp_type, r.timestamp) for r in recs]
            return out
        finally:
            await c.stop()

    return asyncio.run(run())


@pytest.mark.parametrize(("topic_codec", "producer_codec", "stored"), [
    ("zstd", "gzip", "zstd"),
    ("gzip", "lz4", "gzip"),
    ("snappy", "zstd", "snappy"),
    ("lz4", "none", "lz4"),
    ("uncompressed", "snappy", "none"),
    ("producer", "lz4", "lz4"),
])
def test_topic_compression_type_is_what_is_stored(samsa_broker: SamsaBroker, topic_codec: str,
                                                  producer_codec: str, stored: str) -> None:
    bs = samsa_broker.bootstrap
    topic = f"comp-{topic_codec}-{producer_codec}"
    create(bs, topic, **{"compression.type": topic_codec})
    produce(bs, topic, producer_codec)
    batches = stored_batches(bs, topic)
    assert batches and all(b["magic"] == 2 for b in batches)
    assert {b["codec"] for b in batches} == {CODEC_BITS[stored]}, batches
    assert sum(b["count"] for b in batches) == N
    assert batches[0]["base_offset"] == 0
    # every client decodes the recompressed batches (CRC checked) into the same records
    assert [v for v, _ in read_confluent(bs, topic)] == VALUES
    assert [v for v, _, _ in read_kafka_python(bs, topic)] == VALUES
    assert [v for v, _, _ in read_aiokafka(bs, topic)] == VALUES


def test_log_append_time_replaces_the_producer_timestamp(samsa_broker: SamsaBroker) -> None:
    bs = samsa_broker.bootstrap
    create(bs, "lat", **{"message.timestamp.type": "LogAppendTime"})
    create(bs, "ct")  # CreateTime, the default: the producer's timestamp is kept
    old = 1_600_000_000_000  # far outside message.timestamp.before.max.ms if it were checked
    before = int(time.time() * 1000)
    reports = produce(bs, "lat", "lz4", **{"message.timeout.ms": 10000})
    # produce with an explicit old timestamp too: it must be replaced as well
    p = Producer({"bootstrap.servers": bs})
    extra: list[Any] = []
    p.produce("lat", value=b"old-ts", partition=0, timestamp=old,
              on_delivery=lambda e, m: extra.append((e, m)))
    p.produce("ct", value=b"kept-ts", partition=0, timestamp=before - 5000,
              on_delivery=lambda e, m: extra.append((e, m)))
    assert p.flush(10) == 0
    after = int(time.time() * 1000)
    assert all(e is None for e, _ in extra), extra

    # the produce response carries log_append_time: librdkafka reports it as the message timestamp
    for m in [*reports, extra[0][1]]:
        ts_type, ts = m.timestamp()
        assert ts_type == TIMESTAMP_LOG_APPEND_TIME and before <= ts <= after, (ts_type, ts)
    # kafka-python's RecordMetadata.timestamp is the response's log_append_time when it is set
    from kafka import KafkaProducer
    kp = KafkaProducer(bootstrap_servers=bs)
    md = kp.send("lat", value=b"kp", partition=0, timestamp_ms=old).get(10)
    kp.close()
    assert md.timestamp != old and before <= md.timestamp <= int(time.time() * 1000)

    # stored batches are flagged LogAppendTime with the broker's time as max timestamp
    batches = stored_batches(bs, "lat")
    assert batches and all(b["log_append_time"] == 1 for b in batches)
    assert all(before <= b["max_timestamp"] <= int(time.time() * 1000) for b in batches)
    assert not any(b["log_append_time"] for b in stored_batches(bs, "ct"))

    # consumers see the broker's time, typed LOG_APPEND_TIME, for every record
    total = N + 2  # the batch, the old-timestamp record, kafka-python's record
    got = read_confluent(bs, "lat", total)
    assert len(got) == total
    assert all(t[0] == TIMESTAMP_LOG_APPEND_TIME and before <= t[1] for _, t in got)
    assert {ts for _, (_, ts) in got} == {b["max_timestamp"] for b in batches}
    for reader in (read_kafka_python, read_aiokafka):
        rows = reader(bs, "lat", total)
        assert len(rows) == total
        assert all(tt == 1 and ts != old and before <= ts for _, tt, ts in rows), rows[:3]
    # CreateTime topics keep the producer's timestamp
    (ct,) = read_kafka_python(bs, "ct", 1)
    assert ct == (b"kept-ts", 0, before - 5000)

