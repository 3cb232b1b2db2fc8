"""The `flush.*` topic configs, seen through the file-system recorder (samsa.testing.crashfs) on a
broker running in this process, driven by confluent-kafka:
- flush.messages=1: when the producer gets its answer, the record's bytes are already durable
  (fsynced, in a file whose directory entries are synced), so a power loss at that instant keeps it;
- default policy: answers come before any fsync (the control: the check can fail);
- flush.ms: a record left alone gets fsynced by the background flush;
- a power loss at an acknowledgement: the broker restarts on the disk state and serves every
  acknowledged record.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.broker.broker import Broker
from samsa.config import BrokerConfig
from samsa.testing import free_port
from samsa.testing.crashfs import Disk, FsRecorder, _Replay

pytestmark = pytest.mark.timeout(120)


class InProcessBroker:
    """A Broker on an event loop in a thread (so the recorder sees its file-system calls)."""

    def __init__(self, log_dir: Path) -> None:
        self.port = free_port()
        self.config = BrokerConfig({"listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
                                    "log.dirs": str(log_dir)})
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.broker: Broker | None = None

    def __enter__(self) -> InProcessBroker:
        self.thread.start()
        self.broker = Broker(self.config)
        asyncio.run_coroutine_threadsafe(self.broker.start(), self.loop).result(30)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.broker is not None:
            asyncio.run_coroutine_threadsafe(self.broker.stop(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"


@pytest.fixture
def recorded(tmp_path: Path) -> Iterator[tuple[FsRecorder, InProcessBroker]]:
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    with FsRecorder(log_dir) as rec, InProcessBroker(log_dir) as broker:
        yield rec, broker


def _create(bs: str, name: str, config: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(name, 1, 1, config=config)])[name].result(15)


def _produce_marking(bs: str, rec: FsRecorder, topic: str, n: int) -> None:
    """Produce n records one at a time; mark each acknowledgement in the operation log."""
    p = Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 0})
    for i in range(n):
        value = f"{topic}-record-{i}-{random.random()}".encode()

        def cb(err: object, msg: object, value: bytes = value) -> None:
            assert err is None, err
            rec.mark("ack", topic, value)

        p.produce(topic, value=value, on_delivery=cb)
        assert p.flush(15) == 0


def _durable_bytes(disk: Disk, topic: str) -> bytes:
    """The contents of the partition's segment files a power loss would leave reachable."""
    part = disk.dirs[""].get(f"{topic}-0")
    if part is None:
        return b""
    return b"".join(bytes(disk.files.get(ref, b"")) for name, (kind, ref) in
                    disk.dirs[part[1]].items() if kind == "f" and name.endswith(".log"))


def _acked_not_durable(ops: list[tuple[object, ...]], topic: str) -> tuple[int, int]:
    """(acknowledged records of the topic, those not durable at their acknowledgement)."""
    replay = _Replay()
    acked = lost = 0
    for op in ops:
        replay.step(op)
        if op[0] == "mark" and op[2] == topic:
            acked += 1
            value = op[3]
            assert isinstance(value, bytes)
            if value not in _durable_bytes(replay.durable, topic):
                lost += 1
    return acked, lost


def _durable_now(ops: list[tuple[object, ...]], topic: str) -> int:
    """How many acknowledged records of the topic a power loss now would keep."""
    replay = _Replay()
    for op in ops:
        replay.step(op)
    data = _durable_bytes(replay.durable, topic)
    return sum(1 for op in replay.marks if op[2] == topic and isinstance(op[3], bytes)
               and op[3] in data)


def test_flush_messages_1_answers_after_fsync(recorded: tuple[FsRecorder, InProcessBroker]) -> None:
    rec, broker = recorded
    _create(broker.bootstrap, "synced", {"flush.messages": "1", "segment.bytes": "2000"})
    _create(broker.bootstrap, "unsynced", {})
    _produce_marking(broker.bootstrap, rec, "synced", 30)
    _produce_marking(broker.bootstrap, rec, "unsynced", 5)
    ops = list(rec.ops)
    acked, lost = _acked_not_durable(ops, "synced")
    assert acked == 30 and lost == 0, f"{lost} of {acked} acknowledged before they were durable"
    # segment.bytes=2000 made it roll: the answers after a roll waited for the new file's entry too
    logs = {op[2] for op in ops if op[0] == "creat" and op[1] == "synced-0" and op[2].endswith(".log")}
    assert len(logs) > 1
    # the control: with the default policy the answer does not wait for an fsync
    acked, lost = _acked_not_durable(ops, "unsynced")
    assert acked == 5 and lost == 5


def test_flush_ms_flushes_in_the_background(recorded: tuple[FsRecorder, InProcessBroker]) -> None:
    rec, broker = recorded
    _create(broker.bootstrap, "timed", {"flush.ms": "200"})
    _create(broker.bootstrap, "untimed", {})
    _produce_marking(broker.bootstrap, rec, "timed", 1)
    _produce_marking(broker.bootstrap, rec, "untimed", 1)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and _durable_now(list(rec.ops), "timed") == 0:
        time.sleep(0.2)
    assert _durable_now(list(rec.ops), "timed") == 1, "flush.ms never flushed"
    # nothing flushes the topic without a policy (no roll, no shutdown yet)
    assert _durable_now(list(rec.ops), "untimed") == 0


def _consume_all(bs: str, topic: str, n: int) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bs, "group.id": "after-power-loss",
                  "enable.auto.commit": False, "check.crcs": True})
    c.assign([TopicPartition(topic, 0, 0)])
    out: list[bytes] = []
    deadline = time.monotonic() + 20
    while len(out) < n and time.monotonic() < deadline:
        for m in c.consume(100, 0.5):
            assert m.error() is None, m.error()
            out.append(m.value())
    c.close()
    return out


def test_broker_restarts_on_power_loss_states(tmp_path: Path) -> None:
    """The whole broker (metadata log included) under power loss: states built from its recorded
    operations at acknowledgement points (only synced data, or a random part of the rest) are
    started as brokers; the topic is there with every record acknowledged before the crash."""
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    with FsRecorder(log_dir) as rec, InProcessBroker(log_dir) as broker:
        _create(broker.bootstrap, "synced", {"flush.messages": "1", "segment.bytes": "2000"})
        _produce_marking(broker.bootstrap, rec, "synced", 20)
        ops = list(rec.ops)  # the power goes off here
    acks = [i for i, op in enumerate(ops) if op[0] == "mark"]
    assert len(acks) == 20
    rng = random.Random(5)
    for k, point in enumerate((acks[0] + 1, acks[9] + 1, acks[-1] + 1, len(ops))):
        replay = _Replay()
        for op in ops[:point]:
            replay.step(op)
        for variant in ("none", "random"):
            state = replay.state(rng, point, variant)
            acked = [op[3] for op in state.marks]
            target = tmp_path / f"state-{k}-{variant}"
            state.disk.materialize(target)
            with InProcessBroker(target) as b:
                got = _consume_all(b.bootstrap, "synced", len(acked))
            assert got[:len(acked)] == acked, (point, variant)
