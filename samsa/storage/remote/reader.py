"""Reads of remote (tiered) log segments: what Fetch and ListOffsets serve for offsets that are no
longer on local disk (Kafka's RemoteLogReader and RemoteIndexCache).

Every store call blocks, so all of it runs on `remote.log.reader.threads` worker threads; the
broker loop only awaits a future (bounded by `remote.fetch.max.wait.ms` in the fetch handler), so a
slow or dead store never stalls it. At most `remote.log.reader.max.pending.tasks` reads wait for a
thread; past that a read is refused at once (ReaderBusy) instead of queueing without bound.

Segment bytes are read in aligned chunks (`samsa.remote.fetch.chunk.bytes`) held in a byte-bounded
LRU cache (`samsa.remote.fetch.cache.size.bytes`). A read also schedules the chunks after the
bytes it served (and the first chunks of the next segment when it reaches a segment's end), so a
consumer reading forward finds its next fetch already in memory: sequential prefetch. Concurrent
readers of one chunk share a single store request.

Indexes (offset, time, aborted transactions) are parsed once per segment into a second LRU cache
bounded by `remote.log.index.file.cache.total.size.bytes` (Kafka's name; Kafka keeps the files on
disk, Samsa keeps the parsed arrays in memory).

Nothing unverified is served: every batch handed out is checked (magic, length, CRC32C) and only
whole batches are returned. A batch failing its check makes the read fail with CorruptRemoteData
(and drops the chunks involved from the cache, so a retry reads the store again).
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import queue
import struct
import threading
import uuid
from array import array
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import crc32c

from samsa.protocol.batch import ATTR_OFFSET, HEADER_SIZE, LOG_OVERHEAD, read_header
from samsa.protocol.records import decode_batch

from .rsm import (
    IndexType,
    RemoteLogSegmentMetadata,
    RemoteResourceNotFound,
    RemoteStorageError,
    RemoteStorageManager,
)

log = logging.getLogger("samsa.storage.remote.reader")

_IDX = struct.Struct(">ii")  # relative offset, position
_TIDX = struct.Struct(">qi")  # timestamp, relative offset
_TXN = struct.Struct(">qqqq")  # producer id, first offset, last offset, last stable offset
_LEN = struct.Struct(">i")
_LAST_DELTA = struct.Struct(">i")
MAX_BATCH = 1 << 30  # a batch length past this is corruption, not data

T = TypeVar("T")


class RemoteReadError(Exception):
    """The store failed a read (unreachable, refused, missing object) or returned bad data."""


class CorruptRemoteData(RemoteReadError):
    """A remote batch failed its magic, length or CRC check: never served."""


class ReaderBusy(RemoteReadError):
    """More than remote.log.reader.max.pending.tasks reads are waiting for a thread."""


@dataclass(frozen=True)
class ReaderConfig:
    threads: int = 10  # remote.log.reader.threads
    max_pending: int = 100  # remote.log.reader.max.pending.tasks
    index_cache_bytes: int = 1 << 30  # remote.log.index.file.cache.total.size.bytes
    cache_bytes: int = 128 << 20  # samsa.remote.fetch.cache.size.bytes
    chunk_bytes: int = 1 << 20  # samsa.remote.fetch.chunk.bytes
    prefetch_chunks: int = 4  # chunks read ahead of a sequential reader

    @classmethod
    def from_props(cls, get: Callable[[str], str | None]) -> ReaderConfig:
        def num(name: str, default: int) -> int:
            v = get(name)
            return default if v is None or v == "" else int(v)
        d = cls()
        return cls(threads=max(num("remote.log.reader.threads", d.threads), 1),
                   max_pending=max(num("remote.log.reader.max.pending.tasks", d.max_pending), 1),
                   index_cache_bytes=max(num("remote.log.index.file.cache.total.size.bytes",
                                             d.index_cache_bytes), 0),
                   cache_bytes=max(num("samsa.remote.fetch.cache.size.bytes", d.cache_bytes), 0),
                   chunk_bytes=max(num("samsa.remote.fetch.chunk.bytes", d.chunk_bytes), 4096))


@dataclass
class RemoteRead:
    """What a fetch gets from one remote segment: whole, verified batches (possibly none when the
    offset is past the segment's last batch), the offset after the last one, and for
    read_committed the aborted transactions overlapping them as (producer id, first offset)."""

    records: bytes
    next_offset: int
    aborted: list[tuple[int, int]] | None = None


class _Lru:
    """A thread-safe LRU of values with a byte size, bounded in total bytes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.size = 0
        self.hits = 0
        self.misses = 0
        self._items: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Any:
        with self._lock:
            item = self._items.get(key)
            if item is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return item[0]

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._items

    def put(self, key: Hashable, value: Any, size: int) -> None:
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self.size -= old[1]
            if size > self.limit:
                return  # larger than the whole cache: used once, not kept
            self._items[key] = (value, size)
            self.size += size
            while self.size > self.limit and self._items:
                _k, (_v, n) = self._items.popitem(last=False)
                self.size -= n

    def drop(self, pred: Callable[[Hashable], bool]) -> int:
        with self._lock:
            keys = [k for k in self._items if pred(k)]
            for k in keys:
                self.size -= self._items.pop(k)[1]
            return len(keys)

    def __len__(self) -> int:
        return len(self._items)


@dataclass
class _OffsetIndex:
    """A remote segment's sparse offset index: absolute offsets and their file positions."""

    offsets: array = field(default_factory=lambda: array("q"))
    positions: array = field(default_factory=lambda: array("q"))

    def floor(self, offset: int) -> int:
        i = bisect_right(self.offsets, offset) - 1
        return self.positions[i] if i >= 0 else 0

    @property
    def nbytes(self) -> int:
        return 16 * len(self.offsets) + 64


@dataclass
class _TimeIndex:
    timestamps: array = field(default_factory=lambda: array("q"))
    offsets: array = field(default_factory=lambda: array("q"))

    def last_below(self, ts: int) -> int | None:
        """The offset of the last entry with a timestamp < ts: every record up to it is older."""
        i = bisect_right(self.timestamps, ts - 1) - 1
        return self.offsets[i] if i >= 0 else None

    @property
    def nbytes(self) -> int:
        return 16 * len(self.offsets) + 64


def parse_offset_index(data: bytes, base: int, size: int) -> _OffsetIndex:
    """Entries past the log's size or going backwards are dropped (a damaged index only costs
    a longer scan: positions are checked against the batches themselves)."""
    ix = _OffsetIndex()
    last_off, last_pos = -1, -1
    for rel, pos in _IDX.iter_unpack(data[: len(data) // 8 * 8]):
        off = base + rel
        if pos >= size or pos <= last_pos or off <= last_off:
            continue
        ix.offsets.append(off)
        ix.positions.append(pos)
        last_off, last_pos = off, pos
    return ix


def parse_time_index(data: bytes, base: int) -> _TimeIndex:
    tx = _TimeIndex()
    for ts, rel in _TIDX.iter_unpack(data[: len(data) // 12 * 12]):
        if tx.timestamps and ts <= tx.timestamps[-1]:
            continue
        tx.timestamps.append(ts)
        tx.offsets.append(base + rel)
    return tx


def parse_txn_index(data: bytes) -> list[tuple[int, int, int]]:
    """(producer id, first offset, last offset) of each aborted transaction, by last offset."""
    out = [(pid, first, last) for pid, first, last, _lso in
           _TXN.iter_unpack(data[: len(data) // 32 * 32])]
    out.sort(key=lambda e: e[2])
    return out


def verify_batches(buf: bytes | memoryview, first_offset: int, upper: int | None,
                   whole_first: bool, max_bytes: int,
                   last_allowed: int = 2**63 - 1) -> tuple[int, int]:
    """Walk the batches at the start of `buf`: (bytes of whole verified batches to serve, the
    offset after the last one). Stops before a partial batch, before a batch at or past `upper`,
    and once `max_bytes` would be exceeded (but serves the first batch whole if `whole_first`).
    Raises CorruptRemoteData on a bad magic, length or CRC, and on offsets (which the CRC does
    not cover) that cannot be right: a batch not after the one before it, or one past the
    segment's end offset (`last_allowed`). Per batch, never per record."""
    mv = memoryview(buf)
    n = len(mv)
    pos = 0
    next_offset = first_offset
    prev_last = -1
    while pos + HEADER_SIZE <= n:
        h = read_header(mv, pos)
        size = h.batch_length + LOG_OVERHEAD
        if h.magic != 2 or h.batch_length < HEADER_SIZE - LOG_OVERHEAD or h.batch_length > MAX_BATCH:
            raise CorruptRemoteData(f"bad batch header at offset {h.base_offset} "
                                    f"(magic {h.magic}, length {h.batch_length})")
        if h.last_offset_delta < 0 or h.last_offset > last_allowed or h.base_offset <= prev_last:
            raise CorruptRemoteData(f"batch offsets {h.base_offset}-{h.last_offset} out of place "
                                    f"(after {prev_last}, segment end {last_allowed})")
        prev_last = h.last_offset
        if upper is not None and h.base_offset >= upper:
            break
        if pos + size > n:
            break
        if pos + size > max_bytes and not (pos == 0 and whole_first):
            break
        if crc32c.crc32c(mv[pos + ATTR_OFFSET:pos + size]) != h.crc:
            raise CorruptRemoteData(f"batch at offset {h.base_offset} fails its CRC")
        pos += size
        next_offset = h.last_offset + 1
    return pos, next_offset


class _DaemonPool:
    """A fixed set of daemon worker threads: a store call that never returns (a hung store) must
    not keep the broker process from exiting, as concurrent.futures' joined workers would."""

    def __init__(self, threads: int, name: str) -> None:
        self._q: queue.SimpleQueue[tuple[cf.Future[Any], Callable[..., Any], tuple[Any, ...]]
                                  | None] = queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True)
                         for i in range(threads)]
        self._closed = False
        for t in self._threads:
            t.start()

    def submit(self, fn: Callable[..., T], *args: Any) -> cf.Future[T]:
        if self._closed:
            raise RuntimeError("pool closed")
        fut: cf.Future[T] = cf.Future()
        self._q.put((fut, fn, args))
        return fut

    def _work(self) -> None:
        while True:
            item = self._q.get()
            if item is None:
                return
            fut, fn, args = item
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                fut.set_result(fn(*args))
            except BaseException as e:  # noqa: BLE001 - handed to whoever waits
                fut.set_exception(e)

    def shutdown(self) -> None:
        self._closed = True
        while True:  # queued work is cancelled; running work finishes on its own
            try:
                item = self._q.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                item[0].cancel()
        for _ in self._threads:
            self._q.put(None)


class RemoteLogReader:
    """Reads of remote segments on a thread pool, with the chunk and index caches."""

    def __init__(self, rsm: RemoteStorageManager, config: ReaderConfig | None = None) -> None:
        self.rsm = rsm
        self.cfg = config or ReaderConfig()
        self.pool = _DaemonPool(self.cfg.threads, "remote-reader")
        self.chunks = _Lru(self.cfg.cache_bytes)
        self.indexes = _Lru(self.cfg.index_cache_bytes)
        self._inflight: dict[tuple[uuid.UUID, int], cf.Future[bytes]] = {}
        self._scheduled: set[tuple[uuid.UUID, int]] = set()  # prefetches queued, not started
        self._lock = threading.Lock()
        self._pending = 0
        self.store_reads = 0  # chunk requests sent to the store
        self.store_bytes = 0
        self.prefetches = 0
        self.failures = 0
        self.closed = False

    # ---- the pool ----------------------------------------------------------------------------
    def submit(self, fn: Callable[..., T], *args: Any) -> cf.Future[T]:
        """Run `fn` on a reader thread; ReaderBusy when max_pending tasks already wait."""
        with self._lock:
            if self.closed:
                raise ReaderBusy("the remote log reader is closed")
            if self._pending >= self.cfg.max_pending:
                raise ReaderBusy(f"{self._pending} remote reads already pending "
                                 f"(remote.log.reader.max.pending.tasks)")
            self._pending += 1
        try:
            fut = self.pool.submit(fn, *args)
        except RuntimeError as e:  # shut down meanwhile
            with self._lock:
                self._pending -= 1
            raise ReaderBusy(str(e)) from e
        fut.add_done_callback(self._task_done)
        return fut

    def _task_done(self, _f: object) -> None:
        with self._lock:
            self._pending -= 1

    @property
    def pending(self) -> int:
        return self._pending

    def close(self) -> None:
        with self._lock:
            self.closed = True
        self.pool.shutdown()

    # ---- chunks --------------------------------------------------------------------------------
    def _chunk(self, meta: RemoteLogSegmentMetadata, i: int) -> bytes:
        """Chunk i of a segment's log: from the cache, from a read already under way, or from
        the store (blocking; reader threads only)."""
        key = (meta.id, i)
        data = self.chunks.get(key)
        if data is not None:
            return data  # type: ignore[no-any-return]
        with self._lock:
            fut = self._inflight.get(key)
            mine = fut is None
            if mine:
                fut = cf.Future()
                fut.set_running_or_notify_cancel()
                self._inflight[key] = fut
        assert fut is not None
        if not mine:
            return fut.result()  # the other reader raises for us too
        try:
            data = self._fetch_chunk(meta, i)
        except BaseException as e:
            fut.set_exception(e)
            raise
        finally:
            with self._lock:
                self._inflight.pop(key, None)
        self.chunks.put(key, data, len(data))
        fut.set_result(data)
        return data

    def _fetch_chunk(self, meta: RemoteLogSegmentMetadata, i: int) -> bytes:
        c = self.cfg.chunk_bytes
        start = i * c
        end = min(start + c, meta.segment_size_in_bytes)
        if start >= end:
            return b""
        try:
            data = self.rsm.fetch_log_segment(meta, start, end - 1)
        except RemoteStorageError as e:
            self.failures += 1
            raise RemoteReadError(f"remote segment {meta.id} of {meta.tp}: {e}") from e
        except Exception as e:  # a backend's own exception types: a store failure all the same
            self.failures += 1
            log.warning("remote segment %s of %s: read failed: %r", meta.id, meta.tp, e)
            raise RemoteReadError(f"remote segment {meta.id} of {meta.tp}: {e!r}") from e
        self.store_reads += 1
        self.store_bytes += len(data)
        if len(data) != end - start:
            self.failures += 1
            raise CorruptRemoteData(f"remote segment {meta.id} of {meta.tp}: {len(data)} bytes "
                                    f"at position {start}, expected {end - start}")
        return bytes(data)

    def _range(self, meta: RemoteLogSegmentMetadata, start: int, end: int) -> bytes:
        """Bytes [start, end) of a segment's log (clamped to its size)."""
        end = min(end, meta.segment_size_in_bytes)
        if start >= end:
            return b""
        c = self.cfg.chunk_bytes
        first, last = start // c, (end - 1) // c
        if first == last:
            data = self._chunk(meta, first)
            return data[start - first * c:end - first * c]
        parts = []
        for i in range(first, last + 1):  # only the wanted part of each chunk is copied
            data = self._chunk(meta, i)
            parts.append(memoryview(data)[max(start - i * c, 0):min(end - i * c, len(data))])
        return b"".join(parts)

    def _forget(self, meta: RemoteLogSegmentMetadata) -> None:
        """Drop a segment's cached chunks (after corruption: a retry reads the store again)."""
        self.chunks.drop(lambda k: isinstance(k, tuple) and k[0] == meta.id)

    def prefetch(self, meta: RemoteLogSegmentMetadata, position: int, count: int) -> int:
        """Schedule the `count` chunks from `position` that are neither cached nor being read;
        best effort: never more than half the pending-task budget. Returns chunks scheduled."""
        c = self.cfg.chunk_bytes
        size = meta.segment_size_in_bytes
        first = position // c
        n = 0
        for i in range(first, first + count):
            if i * c >= size:
                break
            key = (meta.id, i)
            if key in self.chunks:
                continue
            with self._lock:
                if (key in self._inflight or key in self._scheduled
                        or self._pending >= self.cfg.max_pending // 2):
                    continue
                self._scheduled.add(key)
            try:
                self.submit(self._prefetch_one, meta, i)
            except ReaderBusy:
                with self._lock:
                    self._scheduled.discard(key)
                break
            n += 1
        self.prefetches += n
        return n

    def _prefetch_one(self, meta: RemoteLogSegmentMetadata, i: int) -> None:
        try:
            self._chunk(meta, i)
        except RemoteReadError as e:
            log.debug("prefetch of %s chunk %d failed: %s", meta.id, i, e)
        finally:
            with self._lock:
                self._scheduled.discard((meta.id, i))

    # ---- indexes -------------------------------------------------------------------------------
    def _index(self, meta: RemoteLogSegmentMetadata, kind: IndexType) -> Any:
        key = (meta.id, kind)
        got = self.indexes.get(key)
        if got is not None:
            return got
        try:
            raw = self.rsm.fetch_index(meta, kind)
        except RemoteResourceNotFound:
            if kind is IndexType.OFFSET or kind is IndexType.TIMESTAMP:
                raw = b""  # missing: a scan from the segment start still finds every batch
            elif kind is IndexType.TRANSACTION:
                raw = b""
            else:
                raise RemoteReadError(f"remote segment {meta.id}: no {kind.name} index") from None
        except RemoteStorageError as e:
            self.failures += 1
            raise RemoteReadError(f"remote segment {meta.id} of {meta.tp}: {kind.name} index: "
                                  f"{e}") from e
        except Exception as e:
            self.failures += 1
            raise RemoteReadError(f"remote segment {meta.id} of {meta.tp}: {kind.name} index: "
                                  f"{e!r}") from e
        parsed: Any
        if kind is IndexType.OFFSET:
            parsed = parse_offset_index(raw, meta.start_offset, meta.segment_size_in_bytes)
            size = parsed.nbytes
        elif kind is IndexType.TIMESTAMP:
            parsed = parse_time_index(raw, meta.start_offset)
            size = parsed.nbytes
        else:
            parsed = parse_txn_index(raw)
            size = 48 * len(parsed) + 64
        self.indexes.put(key, parsed, size)
        return parsed

    # ---- reads (reader threads) -----------------------------------------------------------------
    def _batch_at(self, meta: RemoteLogSegmentMetadata, offset: int) -> int | None:
        """Position of the first batch whose last offset is >= offset, or None past the end."""
        ix: _OffsetIndex = self._index(meta, IndexType.OFFSET)
        pos = ix.floor(offset)
        size = meta.segment_size_in_bytes
        while pos + HEADER_SIZE <= size:
            head = self._range(meta, pos, pos + 27)
            base, length = struct.unpack_from(">qi", head)
            if length < HEADER_SIZE - LOG_OVERHEAD or length > MAX_BATCH:
                self._forget(meta)
                raise CorruptRemoteData(f"remote segment {meta.id} of {meta.tp}: bad batch length "
                                        f"{length} at position {pos}")
            if base + _LAST_DELTA.unpack_from(head, 23)[0] >= offset:
                return pos
            pos += length + LOG_OVERHEAD
        return None

    def read(self, meta: RemoteLogSegmentMetadata, offset: int, max_bytes: int,
             whole_first: bool = True, upper: int | None = None, committed: bool = False,
             next_meta: RemoteLogSegmentMetadata | None = None) -> RemoteRead:
        """Whole verified batches of one segment from `offset`, at most `max_bytes` (but the
        first batch whole when `whole_first`, KIP-74), none at or past `upper`. Blocking."""
        pos = self._batch_at(meta, offset)
        size = meta.segment_size_in_bytes
        if pos is None:
            if next_meta is not None:
                self.prefetch(next_meta, 0, self.cfg.prefetch_chunks)
            return RemoteRead(b"", offset, [] if committed else None)
        want = min(max(max_bytes, 0), size - pos)
        if whole_first:
            first_len = _LEN.unpack(self._range(meta, pos + 8, pos + 12))[0]
            if first_len < HEADER_SIZE - LOG_OVERHEAD or first_len > MAX_BATCH:
                self._forget(meta)
                raise CorruptRemoteData(f"remote segment {meta.id} of {meta.tp}: bad batch "
                                        f"length {first_len} at position {pos}")
            want = max(want, min(first_len + LOG_OVERHEAD, size - pos))
        buf = self._range(meta, pos, pos + want)
        try:
            n, next_offset = verify_batches(buf, offset, upper, whole_first, max(max_bytes, 0),
                                            meta.end_offset)
        except CorruptRemoteData as e:
            self._forget(meta)
            self.failures += 1
            raise CorruptRemoteData(f"remote segment {meta.id} of {meta.tp} (offsets "
                                    f"{meta.start_offset}-{meta.end_offset}): {e}") from None
        records = buf[:n] if n < len(buf) else buf
        end = pos + n
        # sequential prefetch: what the next fetch of this reader will want
        if end < size:
            self.prefetch(meta, end, self.cfg.prefetch_chunks)
        elif next_meta is not None:
            self.prefetch(next_meta, 0, self.cfg.prefetch_chunks)
        aborted = None
        if committed:
            aborted = self.aborted(meta, offset, next_offset) if n else []
        return RemoteRead(records, next_offset if n else offset, aborted)

    def aborted(self, meta: RemoteLogSegmentMetadata, start: int,
                upper: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of aborted transactions with records in [start, upper),
        from the segment's transaction index (it lists every aborted transaction with records
        in the segment)."""
        entries: list[tuple[int, int, int]] = self._index(meta, IndexType.TRANSACTION)
        return [(pid, first) for pid, first, last in entries if last >= start and first < upper]

    def offset_for_timestamp(self, meta: RemoteLogSegmentMetadata, ts: int,
                             start_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record in the segment at or after `start_offset` with
        a timestamp >= ts, or None. Blocking; decodes only the batch that holds it."""
        if meta.max_timestamp_ms < ts or meta.end_offset < start_offset:
            return None
        tx: _TimeIndex = self._index(meta, IndexType.TIMESTAMP)
        below = tx.last_below(ts)
        begin = max(start_offset, below + 1 if below is not None else meta.start_offset)
        pos = self._batch_at(meta, begin)
        size = meta.segment_size_in_bytes
        while pos is not None and pos + HEADER_SIZE <= size:
            h = self._header_at(meta, pos)
            if h.max_timestamp >= ts and not h.is_control and h.last_offset >= start_offset:
                for r in decode_batch(self._checked_batch(meta, pos, h)):
                    if r.timestamp >= ts and r.offset >= start_offset:
                        return r.offset, r.timestamp
            pos += h.size
        return None

    def _header_at(self, meta: RemoteLogSegmentMetadata, pos: int) -> Any:
        """The batch header at `pos`, its length checked (CorruptRemoteData otherwise)."""
        h = read_header(self._range(meta, pos, pos + HEADER_SIZE))
        if h.batch_length < HEADER_SIZE - LOG_OVERHEAD or h.batch_length > MAX_BATCH:
            self._forget(meta)
            raise CorruptRemoteData(f"remote segment {meta.id}: bad batch at position {pos}")
        return h

    def _checked_batch(self, meta: RemoteLogSegmentMetadata, pos: int, h: Any) -> bytes:
        """The whole batch at `pos` (header `h`), its CRC checked (CorruptRemoteData otherwise)."""
        batch = self._range(meta, pos, pos + h.size)
        if len(batch) < h.size or crc32c.crc32c(memoryview(batch)[ATTR_OFFSET:]) != h.crc:
            self._forget(meta)
            raise CorruptRemoteData(f"remote segment {meta.id} of {meta.tp}: batch at "
                                    f"offset {h.base_offset} fails its CRC")
        return batch

    def max_timestamp(self, meta: RemoteLogSegmentMetadata,
                      start_offset: int | None = None) -> tuple[int, int] | None:
        """(offset, timestamp) of the record with the largest timestamp (the first such) in the
        segment, or among its records at or after `start_offset` (a log start inside it: the
        segment's own maximum may be a deleted record's); None if there is none. Blocking: reads
        batch headers, decodes at most two batches."""
        if meta.max_timestamp_ms < 0:
            return None
        if start_offset is None or start_offset <= meta.start_offset:
            return self.offset_for_timestamp(meta, meta.max_timestamp_ms, meta.start_offset)
        pos = self._batch_at(meta, start_offset)
        size = meta.segment_size_in_bytes
        straddle: tuple[int, int] | None = None  # the best record of the batch holding the start
        top = -1  # the largest max timestamp of the batches wholly at or after the start
        while pos is not None and pos + HEADER_SIZE <= size:
            h = self._header_at(meta, pos)
            if not h.is_control and h.base_offset < start_offset:
                for r in decode_batch(self._checked_batch(meta, pos, h)):
                    if r.offset >= start_offset and (straddle is None or r.timestamp > straddle[1]):
                        straddle = (r.offset, r.timestamp)
            elif not h.is_control and h.max_timestamp > top:
                top = h.max_timestamp
            pos += h.size
        if straddle is not None and straddle[1] >= top:
            return straddle
        return self.offset_for_timestamp(meta, top, start_offset) if top >= 0 else None

    def stats(self) -> dict[str, int]:
        return {"chunk_cache_bytes": self.chunks.size, "chunk_cache_hits": self.chunks.hits,
                "chunk_cache_misses": self.chunks.misses, "index_cache_bytes": self.indexes.size,
                "store_reads": self.store_reads, "store_bytes": self.store_bytes,
                "prefetches": self.prefetches, "failures": self.failures,
                "pending": self._pending}
