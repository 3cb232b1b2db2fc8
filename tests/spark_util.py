"""Helpers for the Spark tests: producing known records and reading topics back."""

from __future__ import annotations

import functools
import time
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

KAFKA_SCHEMA = ("key binary, value binary, topic string, partition int, offset bigint, "
                "timestamp timestamp, timestampType int")
KAFKA_SCHEMA_HEADERS = KAFKA_SCHEMA + ", headers array<struct<key:string,value:binary>>"


def create_topic(bs: str, topic: str, partitions: int = 1, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(topic, partitions, config=config)])[topic].result(30)


def produce(bs: str, topic: str, n: int, partitions: int = 1, ts0: int = 1_700_000_000_000,
            headers: bool = True, prefix: str = "") -> list[dict[str, Any]]:
    """n records spread round-robin over partitions, with create timestamps ts0 + i ms; returns them
    with the offsets the broker assigned."""
    sent: list[dict[str, Any]] = []
    p = Producer({"bootstrap.servers": bs, "linger.ms": 5, "enable.idempotence": True})

    def done(hdrs: Any, err: Any, msg: Any) -> None:
        assert err is None, err
        sent.append({"key": msg.key(), "value": msg.value(), "topic": msg.topic(),
                     "partition": msg.partition(), "offset": msg.offset(),
                     "timestamp": msg.timestamp()[1], "headers": hdrs})

    for i in range(n):
        hdrs = [("i", str(i).encode()), ("empty", b"")] if headers and i % 3 else None
        key = None if i % 7 == 6 else f"{prefix}k{i}".encode()
        p.produce(topic, key=key, value=f"{prefix}v{i}".encode(), partition=i % partitions,
                  timestamp=ts0 + i, headers=hdrs,
                  on_delivery=functools.partial(done, hdrs))
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(60) == 0
    return sorted(sent, key=lambda r: (r["partition"], r["offset"]))


def read_all(bs: str, topic: str, committed: bool = True, timeout_s: float = 60.0) -> list[Any]:
    """Every record of every partition of topic up to its (stable) end, as confluent Messages."""
    c = Consumer({"bootstrap.servers": bs, "group.id": "spark-test-reader", "enable.auto.commit": False,
                  "isolation.level": "read_committed" if committed else "read_uncommitted",
                  "enable.partition.eof": True})
    try:
        md = c.list_topics(topic, timeout=10).topics[topic]
        tps = [TopicPartition(topic, p, 0) for p in md.partitions]
        ends = {tp.partition: c.get_watermark_offsets(tp, 10, cached=False)[1] for tp in tps}
        c.assign([TopicPartition(topic, p, 0) for p, e in ends.items() if e > 0])
        pending = {p for p, e in ends.items() if e > 0}
        out = []
        deadline = time.time() + timeout_s
        while pending and time.time() < deadline:
            for m in c.consume(1000, 0.2):
                if m.error() is not None:
                    if m.offset() >= ends[m.partition()]:
                        pending.discard(m.partition())
                    continue
                out.append(m)
        assert not pending, f"did not reach the end of {sorted(pending)}"
        return out
    finally:
        c.close()
