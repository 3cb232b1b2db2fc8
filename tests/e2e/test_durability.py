"""Durability by killing the broker: `kill -9` during a produce load, restart, and check that every
acknowledged message is readable at its acknowledged offset, offsets have no gaps or duplicates,
and no corrupt batch is served."""

from __future__ import annotations

import re
import threading
import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from samsa.testing import SamsaBroker

pytestmark = pytest.mark.timeout(300)
PARTS = 3


def start_kinds(b: SamsaBroker) -> list[str]:
    """How each start of the broker found its data dir ("clean" or "recovered"), in order, from
    the one listening line each start logs."""
    return re.findall(r"listening on \S+ \(cluster \S+, (\w+) start\)", b.log_text())


def topic_id(admin: AdminClient, topic: str) -> str:
    desc = admin.describe_topics(TopicCollection([topic]))[topic].result(10)
    return str(desc.topic_id)


def read_everything(bs: str, topic: str) -> dict[int, list[tuple[int, bytes]]]:
    c = Consumer({"bootstrap.servers": bs, "group.id": "verify", "enable.auto.commit": False,
                  "check.crcs": True})
    out: dict[int, list[tuple[int, bytes]]] = {}
    for p in range(PARTS):
        lo, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
        assert lo == 0
        c.assign([TopicPartition(topic, p, 0)])
        rows: list[tuple[int, bytes]] = []
        deadline = time.time() + 60
        while len(rows) < hi and time.time() < deadline:
            for m in c.consume(10000, 1.0):
                assert m.error() is None, m.error()
                rows.append((m.offset(), m.value()))
        out[p] = rows
        assert len(rows) == hi
    c.close()
    return out


def produce_until(bs: str, topic: str, stop: threading.Event, acked: list[tuple[int, int, bytes]],
                  start: int) -> None:
    p = Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 2,
                  "message.timeout.ms": 3000, "retries": 0, "enable.idempotence": False,
                  "reconnect.backoff.max.ms": 200})

    def cb(err: KafkaError | None, msg: object) -> None:
        if err is None:
            acked.append((msg.partition(), msg.offset(), msg.value()))  # type: ignore[attr-defined]

    i = start
    while not stop.is_set():
        try:
            p.produce(topic, value=f"m{i}".encode(), partition=i % PARTS, on_delivery=cb)
            i += 1
        except BufferError:
            p.poll(0.05)
        if i % 500 == 0:
            p.poll(0)
    p.flush(10)


def test_kill9_during_produce_keeps_every_acked_message() -> None:
    with SamsaBroker() as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic("durable", PARTS, 1)])["durable"].result(10)
        acked: list[tuple[int, int, bytes]] = []
        for round_no in range(3):
            stop = threading.Event()
            t = threading.Thread(target=produce_until,
                                 args=(b.bootstrap, "durable", stop, acked, round_no * 10**7))
            t.start()
            # kill once this round has had a good number of acks (bounded wait), mid-load
            acked_before, deadline = len(acked), time.time() + 30
            while len(acked) < acked_before + 2000 and time.time() < deadline:
                time.sleep(0.05)
            progress = len(acked) - acked_before
            b.kill()  # SIGKILL mid-load
            stop.set()
            t.join(30)
            assert progress >= 2000, f"producer made only {progress} acks before the kill"
            b.start()
        data = read_everything(b.bootstrap, "durable")
        for p, rows in data.items():
            assert [o for o, _ in rows] == list(range(len(rows))), f"gap/dup in partition {p}"
        by_pos = {(p, o): v for p, rows in data.items() for o, v in rows}
        missing = [(p, o, v) for p, o, v in acked if by_pos.get((p, o)) != v]
        assert not missing, f"{len(missing)} acknowledged messages lost, e.g. {missing[:3]}"
        # after recovery, appends continue right after the recovered end
        ends = {p: len(rows) for p, rows in data.items()}
        pr = Producer({"bootstrap.servers": b.bootstrap})
        offs: list[int] = []
        pr.produce("durable", value=b"after", partition=0,
                   on_delivery=lambda e, m: offs.append(m.offset()))
        pr.flush(10)
        assert offs == [ends[0]]
        # the first start found an empty dir; every start after a kill -9 ran recovery
        assert start_kinds(b) == ["clean", "recovered", "recovered", "recovered"]


def test_clean_restart_keeps_data_and_topic_ids() -> None:
    with SamsaBroker() as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic("clean", PARTS, 1, config={"retention.bytes": "99999999"})])[
            "clean"].result(10)
        tid = topic_id(admin, "clean")
        assert tid != "AAAAAAAAAAAAAAAAAAAAAA"  # a real id, not the null Uuid
        parts = len(admin.list_topics(timeout=10).topics["clean"].partitions)
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5})
        for i in range(3000):
            p.produce("clean", value=f"v{i}".encode(), partition=i % PARTS)
        assert p.flush(10) == 0
        b.restart(hard=False)
        # a polite stop leaves nothing to recover: both starts are clean ones
        assert start_kinds(b) == ["clean", "clean"]
        data = read_everything(b.bootstrap, "clean")
        assert sum(len(r) for r in data.values()) == 3000
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        assert len(admin.list_topics(timeout=10).topics["clean"].partitions) == parts == PARTS
        assert topic_id(admin, "clean") == tid
        cfg = admin.describe_configs([ConfigResource("topic", "clean")])
        assert next(iter(cfg.values())).result(10)["retention.bytes"].value == "99999999"
