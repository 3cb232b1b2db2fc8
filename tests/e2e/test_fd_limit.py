"""Many partitions under a low RLIMIT_NOFILE: the broker raises its soft limit to the hard one,
keeps segment files open only while used (an LRU), says in its start-up log how many partitions
the limit allows, and survives `kill -9` + restart with every partition readable and writable.
Before: each segment held three descriptors for good, and the restart failed with "Too many open
files"."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.testing import SamsaBroker

pytestmark = pytest.mark.timeout(240)
TOPIC = "many"
PARTS = 60
ROUNDS = 4  # each round rolls a segment in every partition: 60 x 4 segments, 12 files each
SOFT, HARD = 128, 256


def _produce_round(bs: str, r: int) -> None:
    p = Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 0})
    failed: list[object] = []
    for part in range(PARTS):
        p.produce(TOPIC, value=_value(r, part), partition=part,
                  on_delivery=lambda err, _m: failed.append(err) if err else None)
    assert p.flush(60) == 0
    assert not failed, failed[:3]


def _value(r: int, part: int) -> bytes:
    return f"{r}-{part}-".encode() + b"x" * 700


def _read_all(bs: str, per_part: int) -> dict[int, list[bytes]]:
    c = Consumer({"bootstrap.servers": bs, "group.id": "fd-check", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTS)])
    got: dict[int, list[bytes]] = {p: [] for p in range(PARTS)}
    deadline = time.monotonic() + 90
    while sum(map(len, got.values())) < PARTS * per_part and time.monotonic() < deadline:
        for m in c.consume(500, 1.0):
            assert m.error() is None, m.error()
            got[m.partition()].append(m.value())
    c.close()
    return got


def test_many_partitions_restart_under_a_low_fd_limit() -> None:
    with SamsaBroker(nofile=(SOFT, HARD)) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTS, 1, config={"segment.bytes": "1024"})])[
            TOPIC].result(30)
        for r in range(ROUNDS):
            _produce_round(b.bootstrap, r)
        files = list((b.data_dir / "logs").glob(f"{TOPIC}-*/*.log"))
        assert len(files) >= PARTS * ROUNDS  # more segment files than descriptors allowed
        b.kill()
        b.start()  # an unclean start: every partition is recovered
        _produce_round(b.bootstrap, ROUNDS)
        got = _read_all(b.bootstrap, ROUNDS + 1)
        for part in range(PARTS):
            assert got[part] == [_value(r, part) for r in range(ROUNDS + 1)], part
        text = b.log_text()
        assert "Too many open files" not in text
        assert f"RLIMIT_NOFILE soft limit raised from {SOFT} to {HARD}" in text
        assert "partitions keep their active segment open at once" in text
