"""Tiered storage, the read side (issue 19), against a real broker with the local-directory store:
every offset of a topic whose old segments live only in the remote tier reads back byte-identical
through confluent-kafka and kcat, with and without read_committed (transactions committed and
aborted); ListOffsets -2/-4/-5 and offsets-for-times across tiers; DeleteRecords across tiers;
DescribeLogDirs and `samsa log-dirs` show local vs remote size; a store that fails, hangs or holds
a corrupted object gets a retriable error or an empty answer in bounded time, never bad data.

The 1 GiB / local.retention.bytes = 50 MiB test of the issue is marked slow."""

from __future__ import annotations

import base64
import json
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.protocol import log_dirs_remote
from samsa.testing import SamsaBroker
from tests.wire import Wire

KCAT = "/usr/bin/kcat"
T0 = int(time.time() * 1000) - 3_600_000  # record timestamps: T0 + record index
STORAGE_ERROR = 56
REQUEST_TIMED_OUT = 7
OUT_OF_RANGE = 1

# values: slices of one deterministic printable buffer (kcat prints them as text)
_BUF = base64.b64encode(random.Random(19).randbytes(3 << 20))


def value(i: int, size: int) -> bytes:
    start = (i * 7919) % (len(_BUF) - size)
    return _BUF[start:start + size]


def key(i: int) -> bytes:
    return b"k%09d" % i


def tiered_overrides(store: Path) -> dict[str, str]:
    return {"remote.log.storage.system.enable": "true",
            "rsm.config.dir": str(store),
            "remote.log.manager.task.interval.ms": "200",
            "log.retention.check.interval.ms": "200",
            "remote.fetch.max.wait.ms": "2000"}


@pytest.fixture(scope="module")
def tiered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SamsaBroker, Path]]:
    root = tmp_path_factory.mktemp("tiered")
    store = root / "store"
    b = SamsaBroker(root / "data", overrides=tiered_overrides(store))
    b.start()
    try:
        yield b, store
    finally:
        b.close()


def create(bs: str, topic: str, segment: int, local: int, partitions: int = 1,
           **extra: str) -> None:
    cfg = {"remote.storage.enable": "true", "segment.bytes": str(segment),
           "local.retention.bytes": str(local), "retention.ms": "-1", **extra}
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(topic, partitions, 1, config=cfg)])[topic].result(15)


def list_offset(w: Wire, topic: str, ts: int, version: int = 8,
                partition: int = 0) -> tuple[int, int, int]:
    """(error, offset, leader epoch) of ListOffsets for one timestamp spec."""
    p = w.request(2, version, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": partition, "current_leader_epoch": -1,
                                        "timestamp": ts}]}]}).topics[0].partitions[0]
    return int(p.error_code), int(p.offset), int(p.leader_epoch)


def fetch(w: Wire, topic: str, offset: int, max_bytes: int = 1 << 20,
          isolation: int = 0, retry_empty: bool = True) -> Any:
    """One partition's answer to a Fetch. `retry_empty`: fetch again (bounded) while the answer
    has neither records nor an error: a remote read not back within remote.fetch.max.wait.ms
    (a loaded machine) is answered empty, as Kafka does, and read again by the next Fetch."""
    for _ in range(20):
        p = w.request(1, 11, {"replica_id": -1, "max_wait": 100, "min_bytes": 1,
                              "max_bytes": max_bytes, "isolation_level": isolation,
                              "session_id": 0, "session_epoch": -1, "rack_id": "",
                              "forgotten_topics_data": [], "topics": [
                                  {"topic": topic, "partitions": [
                                      {"partition": 0, "current_leader_epoch": -1,
                                       "fetch_offset": offset, "log_start_offset": -1,
                                       "partition_max_bytes": max_bytes}]}]}
                      ).responses[0].partitions[0]
        if not retry_empty or p.records or p.error_code:
            break
    return p


def wait_tiered(bs: str, topic: str, local_start_at_least: int, timeout: float = 60,
                partition: int = 0) -> int:
    """Wait until the local log starts at or past the given offset (copied, then deleted
    locally); returns the local log start."""
    w = Wire(bs)
    try:
        deadline = time.monotonic() + timeout
        while True:
            err, local, _ = list_offset(w, topic, -4, partition=partition)
            assert err == 0
            if local >= local_start_at_least:
                return local
            assert time.monotonic() < deadline, f"local log start still {local}"
            time.sleep(0.2)
    finally:
        w.close()


def produce(bs: str, topic: str, start: int, n: int, size: int,
            txn: tuple[str, bool] | None = None, batch: int = 16 << 10,
            partition: int = 0) -> None:
    """Records start..start+n-1 (key, value, timestamp derived from the index); `txn`:
    (transactional id, commit?) writes them in one transaction."""
    conf: dict[str, Any] = {"bootstrap.servers": bs, "linger.ms": 20, "batch.size": batch,
                            "enable.idempotence": True, "queue.buffering.max.kbytes": 1 << 20}
    if txn is not None:
        conf["transactional.id"] = txn[0]
    p = Producer(conf)
    if txn is not None:
        p.init_transactions(30)
        p.begin_transaction()
    for i in range(start, start + n):
        while True:
            try:
                p.produce(topic, key=key(i), value=value(i, size), timestamp=T0 + i,
                          partition=partition)
                break
            except BufferError:
                p.poll(0.05)
    if txn is not None:
        if txn[1]:
            p.commit_transaction(60)
        else:
            assert p.flush(60) == 0  # written first: an abort purges what is still queued
            p.abort_transaction(60)
    assert p.flush(120) == 0


def consume_all(bs: str, topic: str, expected: list[int], size: int, committed: bool,
                timeout: float = 120, offsets: list[int] | None = None) -> int:
    """Read the partition from offset 0 with confluent-kafka; every record must be the next
    expected index, byte for byte. Returns the first offset read; `offsets` collects each
    record's offset."""
    c = Consumer({"bootstrap.servers": bs, "group.id": f"g-{topic}-{committed}",
                  "enable.auto.commit": False, "auto.offset.reset": "error",
                  "isolation.level": "read_committed" if committed else "read_uncommitted",
                  "fetch.max.bytes": 8 << 20, "max.partition.fetch.bytes": 4 << 20,
                  "check.crcs": True})
    c.assign([TopicPartition(topic, 0, 0)])
    first = -1
    k = 0
    deadline = time.monotonic() + timeout
    try:
        while k < len(expected):
            assert time.monotonic() < deadline, f"read {k} of {len(expected)} records"
            for m in c.consume(10000, 1.0):
                if m.error():
                    raise KafkaException(m.error())
                i = expected[k]
                if first < 0:
                    first = m.offset()
                assert m.key() == key(i), (m.offset(), m.key(), i)
                assert m.value() == value(i, size), m.offset()
                assert m.timestamp()[1] == T0 + i
                if offsets is not None:
                    offsets.append(m.offset())
                k += 1
    finally:
        c.close()
    return first


def kcat_all(bs: str, topic: str, expected: list[int], size: int, committed: bool) -> None:
    """The same with kcat: every record's offset, key and value as text."""
    args = [KCAT, "-C", "-b", bs, "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q",
            "-f", "%o %k %s\n", "-X", "fetch.max.bytes=8388608"]
    # (librdkafka's default is read_committed)
    args += ["-X", f"isolation.level=read_{'committed' if committed else 'uncommitted'}"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    timer = threading.Timer(180, proc.kill)
    timer.start()
    k = 0
    last_off = -1
    try:
        for line in proc.stdout:
            off_s, k_s, v_s = line.rstrip(b"\n").split(b" ", 2)
            i = expected[k]
            assert k_s == key(i) and v_s == value(i, size), (off_s, k_s, i)
            assert int(off_s) > last_off
            last_off = int(off_s)
            k += 1
        assert proc.wait(30) == 0, proc.stderr.read() if proc.stderr else ""
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
    assert k == len(expected), f"kcat read {k} of {len(expected)} records"


def log_dirs(bs: str, topic: str) -> dict[str, Any]:
    r = subprocess.run([sys.executable, "-m", "samsa.cli.main", "log-dirs", "describe",
                        "--bootstrap-server", bs, "--topic-list", topic],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout.strip().splitlines()[-1])
    (part,) = [p for b in doc["brokers"] for d in b["logDirs"] for p in d["partitions"]]
    return part  # type: ignore[no-any-return]


# ---- the fast path: a few MiB, small segments --------------------------------------------------
SMALL = 2000  # value bytes


def test_remote_reads_across_tiers(tiered: tuple[SamsaBroker, Path]) -> None:
    b, _store = tiered
    bs = b.bootstrap
    topic = "tiered-reads"
    create(bs, topic, segment=64 << 10, local=192 << 10)
    n = 3000  # ~6 MiB: ~90 segments, all but the last few only in the remote tier
    produce(bs, topic, 0, n, SMALL)
    local_start = wait_tiered(bs, topic, n // 2)
    everything = list(range(n))
    assert consume_all(bs, topic, everything, SMALL, committed=False) == 0
    kcat_all(bs, topic, everything, SMALL, committed=False)

    w = Wire(bs)
    try:
        assert list_offset(w, topic, -2)[:2] == (0, 0)  # EARLIEST: the remote tier's start
        err, local, _ = list_offset(w, topic, -4)  # EARLIEST_LOCAL
        assert err == 0 and local >= local_start > 0
        err, tiered_end, _ = list_offset(w, topic, -5, version=9)  # LATEST_TIERED (KIP-1005)
        assert err == 0 and local - 1 <= tiered_end < n
        # a fetch of offset 0 is served from the remote tier, with the log start across tiers
        p = fetch(w, topic, 0)
        assert p.error_code == 0 and p.log_start_offset == 0 and p.records
        # offsets for times: in the remote tier, in the local log, past the end
        c = Consumer({"bootstrap.servers": bs, "group.id": "oft"})
        try:
            targets = [0, 1, 137, local // 2, local - 1, local, n - 1]
            got = [c.offsets_for_times([TopicPartition(topic, 0, T0 + i)], 15)[0].offset
                   for i in targets]
            assert got == targets
            (past,) = c.offsets_for_times([TopicPartition(topic, 0, T0 + n + 5)], 15)
            assert past.offset == -1
            lo, hi = c.get_watermark_offsets(TopicPartition(topic, 0), 15)
            assert (lo, hi) == (0, n)
        finally:
            c.close()
        # MAX_TIMESTAMP (-3) across tiers: the last record here (timestamps grow)
        assert list_offset(w, topic, -3, version=7)[:2] == (0, n - 1)

        # local vs remote size: the local log comes down to local.retention.bytes (plus the
        # active segment) once the copies are done; the remote tier holds the rest
        deadline = time.monotonic() + 60
        while True:
            part = log_dirs(bs, topic)
            if part["size"] <= (192 << 10) + 2 * (64 << 10):
                break
            assert time.monotonic() < deadline, part
            time.sleep(0.5)
        assert part["remoteSize"] > n * SMALL // 2 > part["size"]
        # on the wire: v1 (not flexible) has the local size only; v4 adds the remote size as a
        # tagged field, which decoders that know the tag read and others skip
        v1 = w.request(35, 1, {"topics": [{"topic": topic, "partitions": [0]}]})
        (p1,) = [p for r in v1.results for t in r.topics if t.name == topic for p in t.partitions]
        assert p1.partition_size == part["size"]
        w.send_raw(w.encode(35, 4, {"topics": [{"topic": topic, "partitions": [0]}]}))
        frame = w.recv_frame()
        v4 = log_dirs_remote.reader(4)(frame, 5)[0]  # after the v1 response header (flexible)
        (p4,) = [p for r in v4.results for t in r.topics if t.name == topic for p in t.partitions]
        assert (p4.partition_size, p4.remote_size) == (part["size"], part["remoteSize"])

        # DeleteRecords inside the remote tier: the start across tiers moves, reads below fail
        cut = local // 3
        r = w.request(21, 2, {"topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "offset": cut}]}], "timeout": 10000})
        pr = r.topics[0].partitions[0]
        assert (pr.error_code, pr.low_watermark) == (0, cut)
        assert list_offset(w, topic, -2)[:2] == (0, cut)
        assert list_offset(w, topic, -4)[1] >= local  # the local log is untouched
        assert fetch(w, topic, cut - 1).error_code == OUT_OF_RANGE
        p = fetch(w, topic, cut)
        assert p.error_code == 0 and p.log_start_offset == cut and p.records
    finally:
        w.close()
    assert consume_from(bs, topic, cut, n) == n - cut


def consume_from(bs: str, topic: str, start: int, end: int) -> int:
    c = Consumer({"bootstrap.servers": bs, "group.id": f"from-{start}",
                  "auto.offset.reset": "error", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, start)])
    n = 0
    deadline = time.monotonic() + 60
    try:
        nxt = start
        while nxt < end:
            assert time.monotonic() < deadline
            for m in c.consume(1000, 1.0):
                if m.error():
                    raise KafkaException(m.error())
                assert m.offset() == nxt and m.key() == key(nxt)
                nxt += 1
                n += 1
    finally:
        c.close()
    return n


def test_read_committed_from_the_remote_tier(tiered: tuple[SamsaBroker, Path]) -> None:
    b, _store = tiered
    bs = b.bootstrap
    topic = "tiered-txn"
    create(bs, topic, segment=48 << 10, local=96 << 10)
    committed: list[int] = []
    everything: list[int] = []
    i = 0
    for r in range(12):
        n = 60
        kind = r % 3  # 0: plain, 1: a committed transaction, 2: an aborted one
        produce(bs, topic, i, n, SMALL, None if kind == 0 else (f"tx-{topic}", kind == 1))
        everything += range(i, i + n)
        if kind != 2:
            committed += range(i, i + n)
        i += n
    produce(bs, topic, i, 200, SMALL)  # a tail, so the transactions roll out of the local log
    everything += range(i, i + 200)
    committed += range(i, i + 200)
    wait_tiered(bs, topic, 500)
    assert consume_all(bs, topic, committed, SMALL, committed=True) == 0
    assert consume_all(bs, topic, everything, SMALL, committed=False) == 0
    kcat_all(bs, topic, committed, SMALL, committed=True)
    kcat_all(bs, topic, everything, SMALL, committed=False)
    # the aborted transactions are reported by a read_committed fetch of the remote part
    w = Wire(bs)
    try:
        # offsets: 0-59 plain, 60-119 committed + marker 120, 121-180 aborted + marker 181
        assert list_offset(w, topic, -4)[1] > 181  # all of it only in the remote tier
        p = fetch(w, topic, 121, max_bytes=8 << 20, isolation=1)
        assert p.error_code == 0 and p.records
        assert [a.first_offset for a in p.aborted_transactions] == [121]
    finally:
        w.close()


def test_several_remote_partitions_in_one_fetch(tiered: tuple[SamsaBroker, Path]) -> None:
    """Kafka serves remote data for one partition per Fetch; Samsa reads several at once, within
    the response's byte limits."""
    b, _store = tiered
    bs = b.bootstrap
    topic = "tiered-parts"
    create(bs, topic, segment=32 << 10, local=64 << 10, partitions=3)
    for p in range(3):
        produce(bs, topic, 0, 300, SMALL, partition=p)
    for p in range(3):
        wait_tiered(bs, topic, 100, partition=p)
    w = Wire(bs)
    try:
        def fetch3(max_bytes: int, part_max: int) -> Any:
            return w.request(1, 11, {
                "replica_id": -1, "max_wait": 100, "min_bytes": 1, "max_bytes": max_bytes,
                "isolation_level": 0, "session_id": 0, "session_epoch": -1, "rack_id": "",
                "forgotten_topics_data": [], "topics": [{"topic": topic, "partitions": [
                    {"partition": p, "current_leader_epoch": -1, "fetch_offset": 0,
                     "log_start_offset": -1, "partition_max_bytes": part_max}
                    for p in range(3)]}]}).responses[0].partitions
        for _ in range(20):  # (reads not back in time on a loaded machine: fetched again)
            parts = fetch3(1 << 20, 20_000)
            if all(p.records for p in parts):
                break
        assert [p.error_code for p in parts] == [0, 0, 0]
        assert all(p.records for p in parts)  # all three from the store, in one answer
        for p in parts:
            assert len(p.records) <= 20_000  # (batches are ~16 KiB: partition_max_bytes holds)
            assert offsets_first(p.records) == 0
        # the response limit holds across them: the first gets its first batch whole, the
        # others only what fits
        for _ in range(20):
            parts = fetch3(5000, 1 << 20)
            if parts[0].records:
                break
        sizes = [len(p.records or b"") for p in parts]
        assert sizes[0] > 0 and sum(sizes[1:]) <= max(5000 - sizes[0], 0)
    finally:
        w.close()
    c = Consumer({"bootstrap.servers": bs, "group.id": "parts", "auto.offset.reset": "error",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(3)])
    seen: dict[int, list[int]] = {0: [], 1: [], 2: []}
    deadline = time.monotonic() + 60
    try:
        while sum(map(len, seen.values())) < 900:
            assert time.monotonic() < deadline, {p: len(v) for p, v in seen.items()}
            for m in c.consume(1000, 1.0):
                assert not m.error(), m.error()
                assert m.key() == key(m.offset()) and m.value() == value(m.offset(), SMALL)
                seen[m.partition()].append(m.offset())
    finally:
        c.close()
    assert all(v == list(range(300)) for v in seen.values())


def offsets_first(records: bytes) -> int:
    return int.from_bytes(records[:8], "big")


def test_max_timestamp_in_the_remote_tier(tiered: tuple[SamsaBroker, Path]) -> None:
    """ListOffsets MAX_TIMESTAMP (-3) finds the largest timestamp when only the remote tier holds
    it (Kafka's brokers look at local segments only: KAFKA-17552, not merged)."""
    b, _store = tiered
    bs = b.bootstrap
    topic = "tiered-maxts"
    create(bs, topic, segment=32 << 10, local=64 << 10)
    top = int(time.time() * 1000) + 600_000  # within message.timestamp.after.max.ms
    p = Producer({"bootstrap.servers": bs, "linger.ms": 5})
    p.produce(topic, key=key(0), value=value(0, SMALL), timestamp=T0, partition=0)
    p.produce(topic, key=key(1), value=value(1, SMALL), timestamp=top, partition=0)
    assert p.flush(30) == 0
    produce(bs, topic, 2, 300, SMALL)
    wait_tiered(bs, topic, 100)
    w = Wire(bs)
    try:
        err, off, _ = list_offset(w, topic, -3, version=7)
        assert (err, off) == (0, 1)
    finally:
        w.close()


# ---- a failing store ---------------------------------------------------------------------------
def segment_objects(store: Path, topic: str) -> list[Path]:
    (pdir,) = [d for d in store.iterdir() if d.name.startswith(f"{topic}-0-")]
    return sorted(pdir.glob("*.log"), key=lambda p: int(p.name.split("-", 1)[0]))


def test_store_errors_and_a_corrupted_object(tmp_path: Path) -> None:
    store = tmp_path / "store"
    topic = "tiered-bad"
    with SamsaBroker(tmp_path / "data", overrides=tiered_overrides(store)
                     | {"remote.fetch.max.wait.ms": "1000"}) as b:
        bs = b.bootstrap
        create(bs, topic, segment=32 << 10, local=64 << 10)
        produce(bs, topic, 0, 600, SMALL)
        wait_tiered(bs, topic, 300)
        objs = segment_objects(store, topic)
        assert len(objs) >= 5
        w = Wire(bs, timeout=30)
        try:
            # 1. an object that is gone (store errors): Kafka's retriable storage error, at once
            first = objs[0]
            hidden = first.with_name(first.name + ".away")
            first.rename(hidden)
            t = time.monotonic()
            p = fetch(w, topic, 0)
            assert p.error_code == STORAGE_ERROR and not p.records
            assert time.monotonic() - t < 10
            hidden.rename(first)
            p = fetch(w, topic, 0)
            assert p.error_code == 0 and p.records

            # 2. a corrupted object: detected by CRC, never served
            victim = objs[2]
            start = int(victim.name.split("-", 1)[0])
            data = bytearray(victim.read_bytes())
            first_len = int.from_bytes(data[8:12], "big") + 12
            data[first_len // 2] ^= 0x5A  # inside the first batch's records (CRC-covered)
            victim.write_bytes(bytes(data))
            p = fetch(w, topic, start)
            assert p.error_code == STORAGE_ERROR and not p.records
            # a ListOffsets by time that must read that batch: the same retriable error
            assert list_offset(w, topic, T0 + start + 1)[0] == STORAGE_ERROR
            # a consumer is never handed the bad bytes: it reads up to the object, then stops
            c = Consumer({"bootstrap.servers": bs, "group.id": "bad", "auto.offset.reset":
                          "error", "check.crcs": True, "fetch.error.backoff.ms": 100})
            c.assign([TopicPartition(topic, 0, 0)])
            seen: list[int] = []
            errors = 0
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and errors < 3:
                for m in c.consume(500, 0.5):
                    if m.error():
                        errors += 1
                    else:
                        assert m.value() == value(m.offset(), SMALL)
                        seen.append(m.offset())
            c.close()
            assert seen == list(range(start)), (seen[-3:], start)

            # 3. a store that hangs (the object is a FIFO nobody writes): answered empty after
            # remote.fetch.max.wait.ms, and the broker keeps serving other requests meanwhile
            victim.unlink()
            os.mkfifo(victim)
            t = time.monotonic()
            p = fetch(w, topic, start, retry_empty=False)
            assert p.error_code == 0 and not p.records
            assert time.monotonic() - t < 10
            w2 = Wire(bs)
            assert list_offset(w2, topic, -1)[:2] == (0, 600)
            # a ListOffsets by time waiting on the hung store: REQUEST_TIMED_OUT at its timeout
            t = time.monotonic()
            lo = w2.request(2, 10, {"replica_id": -1, "isolation_level": 0, "timeout": 700,
                                    "topics": [{"name": topic, "partitions": [
                                        {"partition_index": 0, "current_leader_epoch": -1,
                                         "timestamp": T0 + start}]}]}).topics[0].partitions[0]
            assert lo.error_code == REQUEST_TIMED_OUT
            assert time.monotonic() - t < 10
            w2.close()
            # a clean stop is not held up by reader threads stuck in the store
            proc = b.proc
            assert proc is not None
            t = time.monotonic()
            b.stop(timeout=30)
            assert proc.returncode == 0 and time.monotonic() - t < 30
        finally:
            w.close()


# ---- the test: 1 GiB written, local.retention.bytes = 50 MiB -----------------------------
BIG_VALUE = 8 << 10
BIG_SEGMENT = 8 << 20
BIG_LOCAL = 50 << 20


def partition_disk_bytes(b: SamsaBroker, topic: str) -> int:
    d = b.data_dir / "logs" / f"{topic}-0"
    return sum(p.stat().st_size for p in d.iterdir() if p.is_file())


@pytest.mark.slow
def test_one_gib_with_50_mib_local_reads_every_offset(tmp_path: Path) -> None:
    store = tmp_path / "store"
    topic = "tiered-1g"
    with SamsaBroker(tmp_path / "data", overrides=tiered_overrides(store)) as b:
        bs = b.bootstrap
        create(bs, topic, segment=BIG_SEGMENT, local=BIG_LOCAL)
        rounds, per = 32, (32 << 20) // BIG_VALUE  # 32 rounds of 32 MiB: 1 GiB
        everything: list[int] = []
        committed: list[int] = []
        peak = 0
        for r in range(rounds):
            i = r * per
            kind = {3: "abort", 6: "commit"}.get(r % 8, "plain")
            produce(bs, topic, i, per, BIG_VALUE,
                    None if kind == "plain" else (f"tx-{topic}", kind == "commit"),
                    batch=1 << 20)
            everything += range(i, i + per)
            if kind != "abort":
                committed += range(i, i + per)
            peak = max(peak, partition_disk_bytes(b, topic))
        total = rounds * per * BIG_VALUE
        # local disk stays bounded: at the end within local.retention.bytes (+ the active and one
        # closed segment), and at no point near what was written
        deadline = time.monotonic() + 120
        while partition_disk_bytes(b, topic) > BIG_LOCAL + 2 * BIG_SEGMENT + (1 << 20):
            assert time.monotonic() < deadline, partition_disk_bytes(b, topic)
            time.sleep(0.5)
        assert peak < total // 4, (peak, total)
        part = log_dirs(bs, topic)
        assert part["size"] <= BIG_LOCAL + 2 * BIG_SEGMENT
        assert part["remoteSize"] >= total - BIG_LOCAL - 2 * BIG_SEGMENT

        offsets: list[int] = []
        assert consume_all(bs, topic, everything, BIG_VALUE, committed=False, timeout=600,
                           offsets=offsets) == 0
        assert consume_all(bs, topic, committed, BIG_VALUE, committed=True, timeout=600) == 0
        kcat_all(bs, topic, everything, BIG_VALUE, committed=False)
        kcat_all(bs, topic, committed, BIG_VALUE, committed=True)

        # offsets for times across tiers (timestamps grow with the index)
        w = Wire(bs)
        try:
            local_start = list_offset(w, topic, -4)[1]
            assert local_start > offsets[len(offsets) // 2]  # most of it is remote only
            assert list_offset(w, topic, -2)[:2] == (0, 0)
        finally:
            w.close()
        c = Consumer({"bootstrap.servers": bs, "group.id": "oft-1g"})
        try:
            step = len(everything) // 40
            for i in [*range(0, len(everything), step), len(everything) - 1]:
                (got,) = c.offsets_for_times([TopicPartition(topic, 0, T0 + i)], 30)
                assert got.offset == offsets[i], (i, got.offset, offsets[i])
        finally:
            c.close()


def test_remote_fetch_quota(tmp_path: Path) -> None:
    """remote.log.manager.fetch.max.bytes.per.second: once this broker's remote reads exceed it,
    remote-only partitions are answered without records and without an error (Kafka skips the
    remote read); local reads go on."""
    topic = "tiered-quota"
    over = tiered_overrides(tmp_path / "store") | {
        "remote.log.manager.fetch.max.bytes.per.second": "1000"}
    with SamsaBroker(tmp_path / "data", overrides=over) as b:
        bs = b.bootstrap
        create(bs, topic, segment=32 << 10, local=64 << 10)
        produce(bs, topic, 0, 300, SMALL)
        wait_tiered(bs, topic, 100)  # segments below offset 100 are in the remote tier
        w = Wire(bs)
        try:
            p = fetch(w, topic, 0)  # nothing read yet: served (~32 KiB, far above 1000 B/s)
            assert p.error_code == 0 and p.records
            nxt = int.from_bytes(p.records[:8], "big") + 1
            for off in (nxt, 50):
                p = fetch(w, topic, off, retry_empty=False)
                assert p.error_code == 0 and not p.records  # over the quota: skipped, no error
            # the local log is not limited: the last record (its active segment is never
            # deleted; the local start seen earlier may have moved into the remote tier since)
            p = fetch(w, topic, 299)
            assert p.error_code == 0 and p.records
        finally:
            w.close()
