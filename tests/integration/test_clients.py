"""Acceptance with real clients: confluent-kafka, kafka-python and aiokafka each create a topic,
produce keyed messages with headers under every codec, read them back complete and in order per
partition, list offsets by timestamp, describe configs and delete the topic."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict

import pytest

from samsa.testing import SamsaBroker

pytestmark = pytest.mark.timeout(600)

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
N = 100_000
PARTITIONS = 3

Msg = tuple[bytes, bytes, list[tuple[str, bytes]], int]  # key, value, headers, timestamp


def expected(i: int) -> tuple[bytes, bytes, list[tuple[str, bytes]]]:
    return (f"key-{i}".encode(), f"value-{i}-".encode() * 3, [("idx", str(i).encode()),
                                                             ("src", b"test")])


def check_received(by_part: dict[int, list[Msg]], t_start: int, t_end: int) -> None:
    total = sum(len(v) for v in by_part.values())
    assert total == N
    seen = set()
    for msgs in by_part.values():
        idxs = [int(m[2][0][1]) for m in msgs]
        assert idxs == sorted(idxs), "out of order within a partition"
        for key, value, headers, ts in msgs:
            i = int(headers[0][1])
            assert (key, value, headers) == expected(i)
            assert t_start - 1000 <= ts <= t_end + 1000
            seen.add(i)
    assert seen == set(range(N))


# ---------------------------------------------------------------- confluent-kafka
@pytest.mark.parametrize("codec", CODECS)
def test_confluent_kafka(samsa_broker: SamsaBroker, codec: str) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    bs = samsa_broker.bootstrap
    topic = f"ck-{codec}"
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1, config={"retention.ms": "86400000"})])[
        topic].result(10)
    t_start = int(time.time() * 1000)
    p = Producer({"bootstrap.servers": bs, "compression.type": codec, "linger.ms": 5,
                  "enable.idempotence": True})
    for i in range(N):
        k, v, h = expected(i)
        p.produce(topic, key=k, value=v, headers=h)
        if i % 20000 == 0:
            p.poll(0)
    assert p.flush(60) == 0
    t_end = int(time.time() * 1000)

    c = Consumer({"bootstrap.servers": bs, "group.id": "unused", "enable.auto.commit": False,
                  "check.crcs": True})
    c.assign([TopicPartition(topic, i, 0) for i in range(PARTITIONS)])
    by_part: dict[int, list[Msg]] = defaultdict(list)
    deadline = time.time() + 120
    got = 0
    while got < N and time.time() < deadline:
        for m in c.consume(5000, 1.0):
            assert m.error() is None, m.error()
            hdrs = [(hk, bytes(hv)) for hk, hv in (m.headers() or [])]
            by_part[m.partition()].append((m.key(), m.value(), hdrs, m.timestamp()[1]))
            got += 1
    check_received(by_part, t_start, t_end)

    # offsets by timestamp: before everything -> 0; after everything -> end (-1)
    res = c.offsets_for_times([TopicPartition(topic, 0, t_start - 10_000),
                               TopicPartition(topic, 1, t_end + 60_000)], timeout=10)
    assert res[0].offset == 0 and res[1].offset == -1
    mid = by_part[2][len(by_part[2]) // 2]
    r = c.offsets_for_times([TopicPartition(topic, 2, mid[3])], timeout=10)[0]
    first_at_ts = next(i for i, m in enumerate(by_part[2]) if m[3] >= mid[3])
    assert r.offset == first_at_ts
    c.close()

    cfg = admin.describe_configs([ConfigResource("topic", topic)])
    entries = next(iter(cfg.values())).result(10)
    assert entries["retention.ms"].value == "86400000" and not entries["retention.ms"].is_default
    assert entries["cleanup.policy"].value == "delete" and entries["cleanup.policy"].is_default
    admin.delete_topics([topic])[topic].result(10)
    assert topic not in admin.list_topics(timeout=10).topics


# ---------------------------------------------------------------- kafka-python
@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python(samsa_broker: SamsaBroker, codec: str) -> None:
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import ConfigResource, ConfigResourceType, NewTopic

    bs = samsa_broker.bootstrap
    topic = f"kp-{codec}"
    admin = KafkaAdminClient(bootstrap_servers=bs)
    admin.create_topics([NewTopic(topic, PARTITIONS, 1, topic_configs={"segment.bytes": "1048576"})])
    t_start = int(time.time() * 1000)
    p = KafkaProducer(bootstrap_servers=bs, compression_type=None if codec == "none" else codec,
                      linger_ms=5, batch_size=64 * 1024)
    for i in range(N):
        k, v, h = expected(i)
        p.send(topic, key=k, value=v, headers=h)
    p.flush(60)
    p.close()
    t_end = int(time.time() * 1000)

    c = KafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False, check_crcs=True)
    tps = [TopicPartition(topic, i) for i in range(PARTITIONS)]
    c.assign(tps)
    c.seek_to_beginning()
    by_part: dict[int, list[Msg]] = defaultdict(list)
    deadline = time.time() + 180
    got = 0
    while got < N and time.time() < deadline:
        for tp, msgs in c.poll(1000, max_records=10000).items():
            for m in msgs:
                by_part[tp.partition].append((m.key, m.value, list(m.headers), m.timestamp))
                got += 1
    check_received(by_part, t_start, t_end)
    r = c.offsets_for_times({tps[0]: t_start - 10_000, tps[1]: t_end + 60_000})
    assert r[tps[0]].offset == 0 and r[tps[1]] is None
    assert c.end_offsets(tps) == {tp: len(by_part[tp.partition]) for tp in tps}
    c.close()

    got_cfg = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    assert got_cfg["topic"][topic]["segment.bytes"]["value"] == "1048576"
    admin.delete_topics([topic])
    assert topic not in admin.list_topics()
    admin.close()


# ---------------------------------------------------------------- aiokafka
@pytest.mark.parametrize("codec", CODECS)
def test_aiokafka(samsa_broker: SamsaBroker, codec: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    bs = samsa_broker.bootstrap
    topic = f"aio-{codec}"

    async def run() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=bs)
        await admin.start()
        await admin.create_topics([NewTopic(topic, PARTITIONS, 1,
                                            topic_configs={"max.message.bytes": "2000000"})])
        t_start = int(time.time() * 1000)
        p = AIOKafkaProducer(bootstrap_servers=bs,
                             compression_type=None if codec == "none" else codec,
                             linger_ms=5, max_batch_size=64 * 1024)
        await p.start()
        futs = []
        for i in range(N):
            k, v, h = expected(i)
            futs.append(await p.send(topic, key=k, value=v, headers=h))
        await asyncio.gather(*futs)
        await p.stop()
        t_end = int(time.time() * 1000)

        c = AIOKafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False,
                             auto_offset_reset="earliest", check_crcs=True)
        await c.start()
        tps = [TopicPartition(topic, i) for i in range(PARTITIONS)]
        c.assign(tps)
        await c.seek_to_beginning()
        by_part: dict[int, list[Msg]] = defaultdict(list)
        deadline = time.time() + 180
        got = 0
        while got < N and time.time() < deadline:
            for tp, msgs in (await c.getmany(timeout_ms=1000, max_records=10000)).items():
                for m in msgs:
                    by_part[tp.partition].append((m.key, m.value, list(m.headers), m.timestamp))
                    got += 1
        check_received(by_part, t_start, t_end)
        r = await c.offsets_for_times({tps[0]: t_start - 10_000})
        assert r[tps[0]].offset == 0
        await c.stop()
        res = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
        entries = {e[0]: e[1] for e in res[0].resources[0][4]}
        assert entries["max.message.bytes"] == "2000000"
        await admin.delete_topics([topic])
        assert topic not in await admin.list_topics()
        await admin.close()

    asyncio.run(run())
