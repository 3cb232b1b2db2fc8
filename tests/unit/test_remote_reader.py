"""The remote log reader (samsa.storage.remote.reader) over real segment files: byte-identical
reads at every offset across chunk boundaries, sequential prefetch, bounded caches, CRC checks of
a corrupted object, store failures, timestamp lookups and the aborted-transaction index."""

from __future__ import annotations

import struct
import time
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

from samsa.protocol.records import decode_batch, encode_batch, iter_batches
from samsa.storage.log import LogConfig, PartitionLog
from samsa.storage.remote.reader import (
    CorruptRemoteData,
    ReaderBusy,
    ReaderConfig,
    RemoteLogReader,
    RemoteReadError,
    parse_txn_index,
    verify_batches,
)
from samsa.storage.remote.rsm import (
    IndexType,
    LogSegmentData,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    RemoteObject,
    RemoteResourceNotFound,
    RemoteStorageError,
    TopicIdPartition,
)

T0 = int(time.time() * 1000) - 3_600_000
TP = TopicIdPartition(uuid.uuid4(), "t", 0)


class DirStore:
    """A store of copied segment files in a directory (the files are copies: corrupting or
    removing them does not touch the local log), with switches to fail like a dead store."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.fail: Exception | None = None
        self.fetches = 0

    def configure(self, configs: Mapping[str, str]) -> None:
        pass

    def _dir(self, meta: RemoteLogSegmentMetadata) -> Path:
        return self.root / str(meta.id)

    def copy_log_segment_data(self, meta: RemoteLogSegmentMetadata,
                              data: LogSegmentData) -> bytes | None:
        d = self._dir(meta)
        d.mkdir(parents=True)
        (d / "log").write_bytes(data.log_segment.read_bytes())
        (d / "index").write_bytes(data.offset_index.read_bytes())
        (d / "timeindex").write_bytes(data.time_index.read_bytes())
        if data.transaction_index is not None:
            (d / "txnindex").write_bytes(data.transaction_index)
        return None

    def fetch_log_segment(self, meta: RemoteLogSegmentMetadata, start_position: int,
                          end_position: int | None = None) -> bytes:
        if self.fail is not None:
            raise self.fail
        self.fetches += 1
        data = (self._dir(meta) / "log").read_bytes()
        return data[start_position:None if end_position is None else end_position + 1]

    def fetch_index(self, meta: RemoteLogSegmentMetadata, index_type: IndexType) -> bytes:
        if self.fail is not None:
            raise self.fail
        p = self._dir(meta) / index_type.value
        if not p.exists():
            raise RemoteResourceNotFound(str(p))
        return p.read_bytes()

    def delete_log_segment_data(self, meta: RemoteLogSegmentMetadata) -> None:
        pass

    def list_segments(self, tp: TopicIdPartition | None = None) -> Iterable[RemoteObject]:
        return []

    def close(self) -> None:
        pass


def batch(start: int, n: int, size: int = 100) -> bytearray:
    return bytearray(encode_batch([(str(start + i).encode(), bytes([i % 251]) * size, [],
                                    T0 + start + i) for i in range(n)]))


def build(tmp: Path, batches: int = 120, per: int = 5,
          txn_index: bytes | None = None) -> tuple[PartitionLog, DirStore, list[RemoteLogSegmentMetadata]]:
    lg = PartitionLog.open(tmp / "t-0", "t", 0, LogConfig(segment_bytes=16_000, index_interval=700),
                           True)
    off = 0
    for _ in range(batches):
        lg.append(batch(off, per))
        off += per
    store = DirStore(tmp / "store")
    metas = []
    for seg, nxt in zip(lg.segments, lg.segments[1:], strict=False):
        seg.flush()
        meta = RemoteLogSegmentMetadata(
            RemoteLogSegmentId(TP, uuid.uuid4()), seg.base, nxt.base - 1, seg.max_timestamp, 1,
            0, seg.size, ((0, seg.base),), RemoteLogSegmentState.COPY_SEGMENT_FINISHED)
        store.copy_log_segment_data(meta, LogSegmentData(seg.log_path, seg.index_path,
                                                         seg.tindex_path, txn_index, None, b""))
        metas.append(meta)
    return lg, store, metas


def offsets_of(data: bytes) -> list[int]:
    return [r.offset for pos, _n in iter_batches(data) for r in decode_batch(data, pos)]


def test_every_offset_reads_byte_identical_across_chunks(tmp_path: Path) -> None:
    lg, store, metas = build(tmp_path)
    assert len(metas) >= 3
    # chunks smaller than a batch run: reads cross chunk boundaries all the time
    r = RemoteLogReader(store, ReaderConfig(threads=2, chunk_bytes=4096, cache_bytes=1 << 20))
    try:
        for meta in metas:
            for off in range(meta.start_offset, meta.end_offset + 1):
                got = r.read(meta, off, 3000)
                local = lg.read(off, 3000, True)
                # the remote read serves whole batches only: a prefix of the local bytes
                assert got.records and local.startswith(got.records)
                assert offsets_of(got.records)[0] <= off <= offsets_of(got.records)[-1]
                assert got.next_offset == offsets_of(got.records)[-1] + 1
    finally:
        r.close()


def test_first_batch_served_whole_and_max_bytes_respected(tmp_path: Path) -> None:
    _lg, store, metas = build(tmp_path)
    r = RemoteLogReader(store, ReaderConfig(threads=1, chunk_bytes=4096))
    try:
        got = r.read(metas[0], 0, 10)  # smaller than one batch: KIP-74 serves the first whole
        assert len(list(iter_batches(got.records))) == 1
        assert r.read(metas[0], 0, 10, whole_first=False).records == b""
        big = r.read(metas[0], 0, 5000)
        assert 0 < len(big.records) <= 5000
        # upper bound: nothing at or past it
        capped = r.read(metas[0], 0, 1 << 20, upper=10)
        assert max(offsets_of(capped.records)) < 10
    finally:
        r.close()


def test_sequential_prefetch_fills_the_cache_ahead(tmp_path: Path) -> None:
    _lg, store, metas = build(tmp_path)
    r = RemoteLogReader(store, ReaderConfig(threads=2, chunk_bytes=2048, cache_bytes=1 << 20,
                                            prefetch_chunks=3))
    try:
        meta = metas[0]
        r.read(meta, 0, 2048)
        deadline = time.monotonic() + 10
        while r.prefetches == 0 or r.pending:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert r.prefetches >= 1
        # the chunks right after the first read are in memory before anyone asks for them
        assert (meta.id, 1) in r.chunks and (meta.id, 2) in r.chunks
        before = store.fetches
        got = r.read(meta, r.read(meta, 0, 2048).next_offset, 2048)
        assert got.records
        # the second sequential read found its bytes in the cache (or being read ahead)
        assert store.fetches - before <= 1
    finally:
        r.close()


def test_chunk_cache_stays_within_its_bound(tmp_path: Path) -> None:
    _lg, store, metas = build(tmp_path)
    r = RemoteLogReader(store, ReaderConfig(threads=1, chunk_bytes=4096, cache_bytes=3 * 4096,
                                            prefetch_chunks=0))
    try:
        for meta in metas:
            off = meta.start_offset
            while off <= meta.end_offset:
                off = r.read(meta, off, 4096).next_offset
                assert r.chunks.size <= 3 * 4096
        assert len(r.chunks) <= 3
    finally:
        r.close()


def test_index_cache_bounded(tmp_path: Path) -> None:
    _lg, store, metas = build(tmp_path)
    r = RemoteLogReader(store, ReaderConfig(threads=1, index_cache_bytes=200, prefetch_chunks=0))
    try:
        for meta in metas:
            r.read(meta, meta.start_offset, 100)
            assert r.indexes.size <= 200
    finally:
        r.close()


def test_corrupted_object_is_detected_and_never_served(tmp_path: Path) -> None:
    lg, store, metas = build(tmp_path)
    meta = metas[1]
    path = store.root / str(meta.id) / "log"
    good = path.read_bytes()
    bad = bytearray(good)
    bad[len(bad) // 2] ^= 0xFF  # a flipped bit inside some batch's records
    path.write_bytes(bytes(bad))
    r = RemoteLogReader(store, ReaderConfig(threads=1, chunk_bytes=4096))
    try:
        with pytest.raises(CorruptRemoteData):
            off = meta.start_offset
            while off <= meta.end_offset:
                got = r.read(meta, off, 1 << 20)
                off = got.next_offset
        # a length field wrecked: detected too, not followed into garbage
        bad2 = bytearray(good)
        struct.pack_into(">i", bad2, 8, 7)
        path.write_bytes(bytes(bad2))
        r2 = RemoteLogReader(store, ReaderConfig(threads=1, chunk_bytes=4096))
        with pytest.raises(CorruptRemoteData):
            r2.read(meta, meta.start_offset, 1 << 20)
        r2.close()
        # the object repaired: the next read is served, identical to the local bytes
        path.write_bytes(good)
        got = r.read(meta, meta.start_offset, 1 << 20)
        assert got.records and lg.read(meta.start_offset, 1 << 20).startswith(got.records)
    finally:
        r.close()


def test_verify_batches_rejects_a_bad_crc() -> None:
    b = bytearray(batch(0, 3))
    assert verify_batches(bytes(b), 0, None, True, 1 << 20) == (len(b), 3)
    b[-1] ^= 1
    with pytest.raises(CorruptRemoteData):
        verify_batches(bytes(b), 0, None, True, 1 << 20)


def test_store_failures_are_read_errors(tmp_path: Path) -> None:
    _lg, store, metas = build(tmp_path)
    r = RemoteLogReader(store, ReaderConfig(threads=1))
    try:
        store.fail = RemoteStorageError("store unreachable")
        with pytest.raises(RemoteReadError):
            r.read(metas[0], 0, 1000)
        store.fail = ConnectionResetError("peer reset")  # a backend's own exception type
        with pytest.raises(RemoteReadError):
            r.read(metas[0], 0, 1000)
        store.fail = None
        assert r.read(metas[0], 0, 1000).records
        assert r.failures == 2
    finally:
        r.close()


def test_pending_reads_are_bounded(tmp_path: Path) -> None:
    _lg, store, _metas = build(tmp_path, batches=10)
    r = RemoteLogReader(store, ReaderConfig(threads=1, max_pending=2))
    import threading

    gate = threading.Event()
    try:
        f1 = r.submit(gate.wait, 10)
        f2 = r.submit(gate.wait, 10)
        with pytest.raises(ReaderBusy):
            r.submit(gate.wait, 10)
        gate.set()
        f1.result(10), f2.result(10)
        time.sleep(0.05)
        assert r.submit(lambda: 1).result(10) == 1
    finally:
        gate.set()
        r.close()


def test_offset_for_timestamp_matches_the_local_log(tmp_path: Path) -> None:
    lg, store, metas = build(tmp_path)
    r = RemoteLogReader(store, ReaderConfig(threads=1, chunk_bytes=4096))
    try:
        for meta in metas:
            for off in (meta.start_offset, (meta.start_offset + meta.end_offset) // 2,
                        meta.end_offset):
                ts = T0 + off
                assert r.offset_for_timestamp(meta, ts, 0) == lg.offset_for_timestamp(ts)
            # past the segment's last timestamp: not here
            assert r.offset_for_timestamp(meta, meta.max_timestamp_ms + 1, 0) is None
        # the lookup honours a start offset (records below the log start are not answers)
        m = metas[0]
        assert r.offset_for_timestamp(m, T0, 7) == (7, T0 + 7)
        assert r.max_timestamp(m) == (m.end_offset, T0 + m.end_offset)
    finally:
        r.close()


def test_aborted_transactions_from_the_txn_index(tmp_path: Path) -> None:
    entries = [(7, 3, 9, 3), (8, 20, 40, 20), (9, 100, 110, 100)]
    raw = b"".join(struct.pack(">qqqq", *e) for e in entries)
    assert parse_txn_index(raw) == [(7, 3, 9), (8, 20, 40), (9, 100, 110)]
    _lg, store, metas = build(tmp_path, txn_index=raw)
    r = RemoteLogReader(store, ReaderConfig(threads=1))
    try:
        assert r.aborted(metas[0], 10, 30) == [(8, 20)]
        assert r.aborted(metas[0], 0, 200) == [(7, 3), (8, 20), (9, 100)]
        got = r.read(metas[0], 0, 1 << 20, committed=True)
        assert got.aborted is not None
        assert all(first < got.next_offset for _pid, first in got.aborted)
    finally:
        r.close()


def test_verify_batches_rejects_offsets_out_of_place() -> None:
    """The base offset is outside the CRC: a batch going backwards or past the segment's end
    is corruption too."""
    a, b = bytes(batch(0, 3)), bytearray(batch(3, 3))
    struct.pack_into(">q", b, 0, 3)
    assert verify_batches(a + bytes(b), 0, None, True, 1 << 20) == (len(a) + len(b), 6)
    struct.pack_into(">q", b, 0, 1)  # overlaps the batch before it
    with pytest.raises(CorruptRemoteData):
        verify_batches(a + bytes(b), 0, None, True, 1 << 20)
    with pytest.raises(CorruptRemoteData):  # past the segment's last offset
        verify_batches(a, 0, None, True, 1 << 20, last_allowed=1)


def test_fit_trims_to_whole_batches() -> None:
    from samsa.broker.handlers.remote_reads import fit
    from samsa.storage.remote.reader import RemoteRead

    parts = []
    for base in (0, 3, 6):
        x = batch(base, 3)
        struct.pack_into(">q", x, 0, base)
        parts.append(bytes(x))
    a, b, c = parts
    got = RemoteRead(a + b + c, 9, None)
    assert fit(got, 1 << 20, False) is got
    two = fit(got, len(a) + len(b) + 10, False)
    assert two is not None and two.records == a + b and two.next_offset == 6
    assert fit(got, 10, False) is None  # nothing fits
    one = fit(got, 10, True)  # the response's first data: its first batch whole (KIP-74)
    assert one is not None and one.records == a and one.next_offset == 3


def test_concurrent_readers_of_a_chunk_share_one_store_request(tmp_path: Path) -> None:
    import threading

    _lg, store, metas = build(tmp_path)
    gate = threading.Event()
    inner = store.fetch_log_segment

    def slow(meta: RemoteLogSegmentMetadata, start: int, end: int | None = None) -> bytes:
        gate.wait(10)
        return inner(meta, start, end)

    store.fetch_log_segment = slow  # type: ignore[method-assign]
    r = RemoteLogReader(store, ReaderConfig(threads=4, prefetch_chunks=0))
    try:
        futs = [r.submit(r.read, metas[0], 0, 1000) for _ in range(4)]
        deadline = time.monotonic() + 10
        while len(r._inflight) < 1:  # the first reader is in the store
            assert time.monotonic() < deadline
            time.sleep(0.01)
        time.sleep(0.1)  # the others find its request under way
        gate.set()
        got = [f.result(10).records for f in futs]
        assert len(set(got)) == 1 and got[0]
        assert store.fetches == 1
    finally:
        gate.set()
        r.close()
