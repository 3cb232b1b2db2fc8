"""Helpers for tiered storage tests: the metadata as a client reads `__remote_log_metadata`, the
records of the remote tier read from the store, and the checks every test ends with."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import crc32c
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.protocol.batch import ATTR_OFFSET, read_header
from samsa.protocol.records import decode_batch, iter_batches
from samsa.storage.remote.local_store import LocalDirectoryRemoteStorageManager
from samsa.storage.remote.metadata import TOPIC, RemoteLogMetadataCache, decode_event
from samsa.storage.remote.rsm import (
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    RemoteResourceNotFound,
)
from samsa.testing import SamsaBroker

SEG = 16384  # segment.bytes of the test topics: many small segments
TIERED_BROKER = {
    "remote.log.storage.system.enable": "true",
    "remote.log.manager.task.interval.ms": "200",
    "log.retention.check.interval.ms": "200",
    "rlmm.config.remote.log.metadata.topic.num.partitions": "3",
}


def store(b: SamsaBroker) -> LocalDirectoryRemoteStorageManager:
    rsm = LocalDirectoryRemoteStorageManager()
    rsm.configure({"dir": b.overrides.get("rsm.config.dir")
                   or str(b.data_dir / "remote-storage")})
    return rsm


def read_metadata(bootstrap: str, timeout: float = 15.0) -> RemoteLogMetadataCache:
    """Replay `__remote_log_metadata` through a Kafka consumer, as any client could."""
    cache = RemoteLogMetadataCache()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    md = admin.list_topics(timeout=10)
    t = md.topics.get(TOPIC)
    if t is None or t.error is not None:
        return cache
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "tiered-test-meta",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        ends = {}
        for p in t.partitions:
            _lo, hi = c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)
            if hi > 0:
                ends[p] = hi
        c.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in ends])
        done: dict[int, int] = {}
        deadline = time.monotonic() + timeout
        while any(done.get(p, 0) < hi for p, hi in ends.items()):
            assert time.monotonic() < deadline, f"metadata not read in {timeout}s: {done} {ends}"
            m = c.poll(0.5)
            if m is None or m.error() is not None:
                continue
            done[m.partition()] = m.offset() + 1
            ev = decode_event(m.value())
            assert ev is not None, m.value()
            cache.apply(ev)
    finally:
        c.close()
    return cache


def check_batches(data: bytes, start: int, end: int) -> list[tuple[int, bytes | None]]:
    """Every batch whole and CRC-valid, offsets within [start, end]: (offset, value) records."""
    out = []
    pos_end = 0
    for pos, size in iter_batches(data):
        h = read_header(data, pos)
        assert crc32c.crc32c(data[pos + ATTR_OFFSET:pos + size]) == h.crc, "corrupt batch"
        assert start <= h.base_offset and h.last_offset <= end, (h.base_offset, start, end)
        if not h.is_control:
            out += [(r.offset, r.value) for r in decode_batch(data, pos)]
        pos_end = pos + size
    assert pos_end == len(data), "a torn batch at the end of a remote segment"
    return out


def remote_records(b: SamsaBroker, topic: str, partition: int = 0
                   ) -> tuple[dict[int, bytes | None], list[RemoteLogSegmentMetadata]]:
    """The records of the readable (COPY_SEGMENT_FINISHED) remote segments, each checked whole."""
    cache = read_metadata(b.bootstrap)
    rsm = store(b)
    out: dict[int, bytes | None] = {}
    segs = []
    for tp in cache.topic_partitions():
        if tp.topic != topic or tp.partition != partition:
            continue
        for m in cache.segments(tp):
            try:
                data = rsm.fetch_log_segment(m, 0)
            except RemoteResourceNotFound:
                # deleted since the metadata was read (retention)? Then no longer readable
                now = read_metadata(b.bootstrap)
                assert m.id not in {x.id for x in now.segments(tp)}, \
                    f"readable segment {m.id} is not in the store"
                continue
            assert len(data) == m.segment_size_in_bytes, "a half-copied segment is visible"
            for off, v in check_batches(data, m.start_offset, m.end_offset):
                out[off] = v
            segs.append(m)
    return out, segs


def broker_records(bootstrap: str, topic: str, partition: int = 0,
                  timeout: float = 30.0) -> dict[int, bytes | None]:
    """What a consumer reads from the earliest offset the broker offers (ListOffsets EARLIEST:
    the start across tiers once the read path serves remote offsets) to the end."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "tiered-test-local",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "fetch.max.bytes": 1 << 20})
    out: dict[int, bytes | None] = {}
    try:
        lo, hi = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        c.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        deadline = time.monotonic() + timeout
        last = lo - 1
        while last < hi - 1:
            assert time.monotonic() < deadline, f"read to {last} of {hi} in {timeout}s"
            m = c.poll(0.5)
            if m is None or m.error() is not None:
                continue
            out[m.offset()] = m.value()
            last = m.offset()
    finally:
        c.close()
    return out


def produce(bootstrap: str, topic: str, n: int, start: int = 0, size: int = 200,
            timestamp: int | None = None, stop: Any = None,
            budget_s: float = 30.0) -> dict[int, bytes]:
    """Produce n records (acks=all, idempotent); returns the acknowledged ones by offset. Stops
    early (without raising) once `stop()` is true (a broker that died)."""
    acked: dict[int, bytes] = {}
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2, "batch.size": 4096,
                  "acks": "all", "enable.idempotence": True, "message.timeout.ms": 10000,
                  "retry.backoff.ms": 50, "reconnect.backoff.max.ms": 200})

    def cb(err: Any, msg: Any) -> None:
        if err is None:
            acked[msg.offset()] = msg.value()

    deadline = time.monotonic() + budget_s
    for i in range(start, start + n):
        if stop is not None and stop():
            break
        if time.monotonic() > deadline:
            break
        v = (f"{i:08d}-" + "v" * size).encode()[:size]
        kw: dict[str, Any] = {"timestamp": timestamp} if timestamp is not None else {}
        while True:
            try:
                p.produce(topic, value=v, on_delivery=cb, **kw)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    flush_until = time.monotonic() + 12
    while len(p) > 0 and time.monotonic() < flush_until:
        p.flush(0.2)
        if stop is not None and stop():  # a dead broker acknowledges nothing more
            p.purge()
            p.flush(1)
            break
    return acked


def wait_for(cond: Any, timeout: float, what: str, interval: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}"
        time.sleep(interval)


def local_log_bytes(b: SamsaBroker, topic: str, partition: int = 0) -> int:
    d = Path(b.data_dir) / "logs" / f"{topic}-{partition}"
    return sum(p.stat().st_size for p in d.glob("*.log"))


def local_log_start(b: SamsaBroker, topic: str, partition: int = 0) -> int:
    """The base offset of the first local segment (what local retention left)."""
    d = Path(b.data_dir) / "logs" / f"{topic}-{partition}"
    return min(int(p.stem) for p in d.glob("*.log"))


def assert_store_clean(b: SamsaBroker, topic: str | None = None) -> RemoteLogMetadataCache:
    """No segment stuck in COPY_SEGMENT_STARTED or DELETE_SEGMENT_STARTED, and every object in the
    store belongs to a COPY_SEGMENT_FINISHED segment (no orphan, no half copy)."""
    cache = read_metadata(b.bootstrap)
    stuck = [m for tp in cache.topic_partitions() for m in cache.list_remote_log_segments(tp)
             if m.state != RemoteLogSegmentState.COPY_SEGMENT_FINISHED]
    assert not stuck, f"segments left half done: {[(m.state.name, m.id) for m in stuck]}"
    finished = {m.id for tp in cache.topic_partitions() for m in cache.segments(tp)}
    for o in store(b).list_segments():
        if topic is not None and o.segment_id.tp.topic != topic:
            continue
        assert o.segment_id.id in finished, f"orphaned object {o}"
        assert not any(".tmp-" in f for f in o.files), f"half-written object {o}"
    return cache


def create(b: SamsaBroker, name: str, **configs: str) -> None:
    """A tiered topic (one partition) with small segments."""
    a = AdminClient({"bootstrap.servers": b.bootstrap})
    cfg = {"remote.storage.enable": "true", "segment.bytes": str(SEG), **configs}
    a.create_topics([NewTopic(name, 1, 1, config=cfg)])[name].result(15)
