"""kill -9 while the log cleaner is cleaning, repeatedly, under a keyed produce load. After each
restart and at the end: every batch passes its CRC, offsets are the ones acknowledged, the latest
acknowledged value of every key is still there, and once the cleaner has caught up each live key
appears exactly once and tombstoned keys are gone."""

from __future__ import annotations

import json
import os
import random
import re
import threading
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.storage.cleaner import STATS_FILE
from samsa.testing import SamsaBroker

pytestmark = pytest.mark.timeout(180)
TOPIC = "crashy"
PARTS = 2
KEYS = 1500
CONFIG = {"cleanup.policy": "compact", "segment.bytes": "65536", "segment.ms": "300",
          "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "500"}

Acked = dict[tuple[int, int], tuple[bytes, bytes | None]]  # (partition, offset) -> (key, value)
# keys of tombstones whose delivery failed at a kill: they may or may not have been written
Unsure = set[bytes]


def produce_until(bs: str, stop: threading.Event, acked: Acked, round_no: int,
                  unsure: Unsure) -> None:
    p = Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 5, "retries": 0,
                  "message.timeout.ms": 3000, "enable.idempotence": False,
                  "compression.type": random.choice(["none", "lz4", "zstd"]),
                  "reconnect.backoff.max.ms": 200})

    def cb(err: KafkaError | None, msg: Any) -> None:
        if err is None:
            acked[(msg.partition(), msg.offset())] = (msg.key(), msg.value())
            unsure.discard(msg.key())  # a later acknowledged write settles the key again
        elif msg.value() is None:
            unsure.add(msg.key())

    i = 0
    rnd = random.Random(round_no)
    while not stop.is_set():
        k = b"key-%05d" % rnd.randrange(KEYS)
        v = None if rnd.random() < 0.05 else b"r%d-%d-" % (round_no, i) + k + b"-" + b"v" * 60
        try:
            p.produce(TOPIC, key=k, value=v, partition=int(k[4:]) % PARTS, on_delivery=cb)
            i += 1
        except BufferError:
            p.poll(0.05)
        if i % 500 == 0:
            p.poll(0)
    p.flush(10)


def cleaner_partitions(b: SamsaBroker) -> dict[str, Any]:
    try:
        return json.loads((b.data_dir / "logs" / STATS_FILE).read_text())["partitions"]  # type: ignore[no-any-return]
    except (FileNotFoundError, json.JSONDecodeError, KeyError):
        return {}


def read_all(bs: str) -> dict[int, list[tuple[int, bytes | None, bytes | None]]]:
    c = Consumer({"bootstrap.servers": bs, "group.id": "verify", "enable.auto.commit": False,
                  "check.crcs": True})
    out = {}
    for p in range(PARTS):
        _lo, hi = c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)
        c.assign([TopicPartition(TOPIC, p, 0)])
        rows: list[tuple[int, bytes | None, bytes | None]] = []
        deadline = time.time() + 30
        while (not rows or rows[-1][0] < hi - 1) and time.time() < deadline:
            for m in c.consume(5000, 0.5):
                assert m.error() is None, m.error()
                rows.append((m.offset(), m.key(), m.value()))
        out[p] = rows
    c.close()
    return out


def check(data: dict[int, list[tuple[int, bytes | None, bytes | None]]], acked: Acked,
          unsure: Unsure) -> None:
    """What must hold at any moment: ordered offsets, acknowledged offsets hold what was
    acknowledged, and the latest acknowledged write of every key is there (or a later one; a
    tombstone lost at a kill but written may have removed the key)."""
    latest: dict[tuple[int, bytes], int] = {}
    for (p, off), (k, _v) in acked.items():
        latest[(p, k)] = max(latest.get((p, k), -1), off)
    for p, rows in data.items():
        offs = [r[0] for r in rows]
        assert offs == sorted(set(offs)), f"partition {p}: offsets out of order"
        newest: dict[bytes, int] = {}
        for off, k, v in rows:
            assert k is not None
            if (p, off) in acked:
                assert acked[(p, off)] == (k, v), f"partition {p} offset {off} changed"
            elif v is not None and k.startswith(b"key-"):
                assert k in v  # an unacknowledged (in-flight at a kill) but well-formed write
            newest[k] = off
        for (pp, k), off in latest.items():
            if pp != p:
                continue
            if acked[(p, off)][1] is not None and k not in unsure:
                assert newest.get(k, -1) >= off, f"partition {p}: latest value of {k!r} lost"


def test_kill9_while_cleaning_never_loses_latest_values() -> None:
    with SamsaBroker(overrides={"log.cleaner.backoff.ms": "50"}) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTS, 1, config=CONFIG)])[TOPIC].result(10)
        acked: Acked = {}
        unsure: Unsure = set()
        mid_clean = 0
        rounds = 5
        for round_no in range(rounds):
            stop = threading.Event()
            t = threading.Thread(target=produce_until, args=(b.bootstrap, stop, acked, round_no, unsure))
            t.start()
            # wait for a cleaning pass to start, then kill somewhere inside it
            started = b.log_text().count("Cleaning ")
            deadline = time.time() + 15
            while b.log_text().count("Cleaning ") == started and time.time() < deadline:
                time.sleep(0.01)
            time.sleep(random.uniform(0.0, 0.25))
            assert b.proc is not None
            children = _children(b.proc.pid)
            tail = b.log_text()
            b.kill()
            last_start, last_end = tail.rfind("Cleaning "), tail.rfind("Cleaned ")
            mid_clean += last_start > last_end
            stop.set()
            t.join(30)
            time.sleep(0.3)
            assert not [c for c in children if _alive(c)], "the cleaner process outlived the broker"
            b.start()
            check(read_all(b.bootstrap), acked, unsure)
        assert mid_clean >= rounds // 2, f"only {mid_clean} of {rounds} kills hit a cleaning pass"
        assert len(acked) > 10000
        # let the cleaner catch up: everything before a final marker compacted, twice (the second
        # pass, after delete.retention.ms, removes tombstones; some new data makes it dirty enough)
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5})
        marks: dict[int, int] = {}
        for _ in range(2):
            for i in range(400):
                p.produce(TOPIC, key=b"~fill-%03d" % i, value=b"f" * 50, partition=i % PARTS)
            assert p.flush(10) == 0
            time.sleep(0.6)  # past segment.ms: the marker rolls the active segment
            marks.clear()
            for part in range(PARTS):
                p.produce(TOPIC, key=b"~mark", value=b"m", partition=part,
                          on_delivery=lambda e, m: marks.__setitem__(m.partition(), m.offset()))
            assert p.flush(10) == 0
            deadline = time.time() + 60
            while time.time() < deadline:
                st = cleaner_partitions(b)
                if all(st.get(f"{TOPIC}-{q}", {}).get("first_dirty_offset", -1) >= marks[q]
                       for q in range(PARTS)):
                    break
                time.sleep(0.1)
            else:
                raise AssertionError(f"cleaner did not catch up: {cleaner_partitions(b)}")
        data = read_all(b.bootstrap)
        check(data, acked, unsure)
        for part, rows in data.items():
            keys = [r[1] for r in rows if r[1] != b"~mark" and r[0] < marks[part]]
            assert len(keys) == len(set(keys)), f"partition {part}: a key appears twice"
            assert all(r[2] is not None for r in rows), "a tombstone outlived delete.retention.ms"
        errors = re.findall(r".*(?:ERROR|Traceback).*", b.log_text())
        assert not errors, errors[:5]


def _children(pid: int) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(d))
            except (OSError, ValueError, IndexError):
                continue
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
