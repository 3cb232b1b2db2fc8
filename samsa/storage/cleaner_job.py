"""One cleaning pass over one partition log, as Kafka's log cleaner does it; runs off the event loop.

The pass works on plain file paths and a snapshot taken on the event loop (a `Plan`: segment sizes,
the live producers' last batches, the aborted-transaction index), never on live objects, so it can
run in a thread or a separate process:

1. `prepare`: the offset map (key -> latest offset) is built over the dirty range
   [first dirty, first uncleanable) (which stops at the last stable offset), skipping aborted
   transactional data, stopping early when `log.cleaner.dedupe.buffer.size` is used up.
2. `clean_group`: segments below the map's end are cleaned in groups (up to segment.bytes of input
   each) into one `<first base>.log.cleaned` segment, fsynced; the event loop then swaps it in
   (`PartitionLog.replace_segments`).

Batch rules are Kafka's: offsets never change (a rewritten batch keeps its base offset and last
offset delta, so producer sequences stay valid); a record stays if it is the latest for its key or
above the map's end; keyless records and aborted transactional data go; a tombstone (null value) or a
transaction marker with nothing left to mark gets a delete horizon (attribute bit 6, base timestamp =
now + delete.retention.ms, record timestamp deltas rebased) the first time it is cleaned and goes on
the first pass after the horizon; a marker goes only once its transaction has no data left
(and its aborted-index entry with it: `GroupResult.emptied_aborts`). An emptied batch is kept as a
bare header when it is a live producer's last (its sequence number matters) or the last batch of
the cleaned range (it carries the range's last offset). Rewritten batches are
re-compressed with their original codec and get a fresh CRC.
"""

from __future__ import annotations

import hashlib
import os
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import crc32c

from samsa.protocol import codecs
from samsa.protocol.batch import ATTR_OFFSET, HEADER_SIZE, LOG_OVERHEAD, BatchHeader, read_header
from samsa.protocol.records import encode_raw_batch, scan_records, write_varint

from .cleaner_scan import index_keys, select_records, timestamp_delta
from .log import CLEANED
from .segment import Segment

DELETE_HORIZON_BIT = 0x40
ABORT, COMMIT = 0, 1
# a map entry's cost in CPython (dict slot, key bytes object of <= 33 bytes, offset int)
MAP_ENTRY_BYTES = 160
_CRC = struct.Struct(">I")


class CleaningAborted(Exception):
    """The pass was stopped (shutdown, topic deleted, parent gone)."""


class CorruptSegment(Exception):
    """A batch in a segment fails its CRC or framing: the partition is left alone (Kafka marks it
    uncleanable) rather than rewriting bad bytes under a fresh CRC."""


@dataclass
class SegInfo:
    base: int
    path: str
    size: int
    index_bytes: int
    tindex_bytes: int


@dataclass
class Plan:
    name: str
    dir: str
    segments: list[SegInfo]  # every segment, the active one last (size as of the snapshot)
    log_start: int
    first_dirty: int
    dirty_pos: int  # file position of first_dirty in its segment
    first_uncleanable: int  # a segment base offset, at or below the last stable offset
    now_ms: int
    delete_retention_ms: int
    segment_bytes: int
    index_interval: int
    max_message_bytes: int
    # live (unexpired) producers: id -> (last offset of its last data batch or -1, epoch)
    producers: dict[int, tuple[int, int]]
    aborted: list[tuple[int, int, int]]  # aborted transactions: (first offset, producer id, marker)
    dedupe_buffer_size: int
    load_factor: float  # log.cleaner.io.buffer.load.factor: how full the map may get
    io_buffer_size: int
    io_max_bytes_per_second: float


@dataclass
class Stats:
    bytes_read: int = 0  # by the cleaning (rewrite) phase
    map_bytes_read: int = 0  # by the offset map and transaction passes
    bytes_written: int = 0
    records_read: int = 0
    records_retained: int = 0
    invalid_records: int = 0
    batches_rewritten: int = 0

    def add(self, other: Stats) -> None:
        for k, v in vars(other).items():
            setattr(self, k, getattr(self, k) + v)


@dataclass
class Prepared:
    end_offset: int  # one past the last offset the map covers: the next first dirty offset
    upper_bound: int  # the first uncleanable offset after capping at open transactions
    groups: list[list[int]]  # indexes into Plan.segments, each group one cleaned segment
    map_entries: int
    map_full: bool
    stats: Stats


@dataclass
class GroupResult:
    base: int
    size: int
    stats: Stats = field(default_factory=Stats)
    emptied_aborts: list[tuple[int, int]] = field(default_factory=list)  # (producer id, marker)


def map_key(key: bytes) -> bytes:
    """Short keys are their own map key; long ones a 256-bit digest, tagged by its 33-byte length
    (no raw key that long is stored) so the two kinds never collide."""
    if len(key) <= 32:
        return key
    return hashlib.blake2b(key, digest_size=32).digest() + b"\x01"


class Throttler:
    """log.cleaner.io.max.bytes.per.second over the reads and writes of one pass."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.start = time.monotonic()
        self.done = 0

    def __call__(self, n: int) -> None:
        if self.rate == float("inf") or self.rate <= 0:
            return
        self.done += n
        ahead = self.done / self.rate - (time.monotonic() - self.start)
        if ahead > 0:
            time.sleep(ahead)


class TxnState:
    """Walks batches in offset order knowing, from the aborted-transaction index, which
    transactions were aborted: decides whether a data batch is aborted and whether a transaction
    marker still marks anything (Kafka's CleanedTransactionMetadata)."""

    def __init__(self, aborted: list[tuple[int, int, int]]) -> None:
        self.pending = sorted(aborted)  # (first offset, producer id, marker offset)
        self.i = 0
        self.committed: set[int] = set()
        self.aborted_open: dict[int, bool] = {}  # producer id -> saw one of its batches
        self.ends: dict[int, int] = {}  # producer id -> its open aborted transaction's marker

    def _advance(self, h: BatchHeader) -> None:
        while self.i < len(self.pending) and self.pending[self.i][0] <= h.last_offset:
            _first, pid, marker = self.pending[self.i]
            self.aborted_open.setdefault(pid, False)
            self.ends[pid] = marker
            self.i += 1
        pid = h.producer_id
        if pid in self.ends and self.ends[pid] < h.base_offset:  # its marker is gone already
            del self.ends[pid]
            self.aborted_open.pop(pid, None)

    def on_batch(self, h: BatchHeader) -> bool:
        """True when the data batch belongs to an aborted transaction."""
        self._advance(h)
        if not h.is_transactional:
            return False
        if h.producer_id in self.aborted_open:
            self.aborted_open[h.producer_id] = True
            return True
        self.committed.add(h.producer_id)
        return False

    def on_control(self, h: BatchHeader, ctype: int | None) -> bool:
        """True when the marker may be discarded (nothing of its transaction is left)."""
        self._advance(h)
        if ctype is None:  # an emptied control batch
            return True
        if ctype == ABORT:
            self.ends.pop(h.producer_id, None)
            return not self.aborted_open.pop(h.producer_id, False)
        if ctype == COMMIT:
            if h.producer_id in self.committed:
                self.committed.discard(h.producer_id)
                return False
            return True
        return False


def control_type(batch: bytes | memoryview, h: BatchHeader) -> int | None:
    """The marker type (0 abort, 1 commit) of a control batch; None when it holds no record."""
    if h.records_count <= 0:
        return None
    payload = codecs.decompress(h.compression, memoryview(batch)[HEADER_SIZE : h.size])
    key = scan_records(payload, 1)[0][5]
    if key is None or len(key) < 4:
        return -1
    return int(struct.unpack_from(">h", key, 2)[0])


class CleanJob:
    def __init__(self, plan: Plan, should_stop: Callable[[], bool] = lambda: False) -> None:
        self.plan = plan
        self.should_stop = should_stop
        self.throttle = Throttler(plan.io_max_bytes_per_second)
        self.offsets: dict[bytes, int] = {}
        self.map_latest = -1
        self.upper = plan.first_uncleanable
        self.txn: TxnState | None = None  # the rewrite phase's, carried across groups
        self.prepared: Prepared | None = None

    # ---- reading ---------------------------------------------------------------------------
    def _batches(self, path: str, start: int, end: int, stats: Stats,
                 for_map: bool) -> Iterator[tuple[memoryview, BatchHeader]]:
        """Whole, CRC-checked batches of a segment file between two positions, read in chunks of
        log.cleaner.io.buffer.size (grown for a batch larger than that)."""
        fd = os.open(path, os.O_RDONLY)
        try:
            pos = start
            want = self.plan.io_buffer_size
            while pos + LOG_OVERHEAD <= end:
                if self.should_stop():
                    raise CleaningAborted()
                chunk = os.pread(fd, min(want, end - pos), pos)
                self.throttle(len(chunk))
                mv = memoryview(chunk)
                off = 0
                while off + HEADER_SIZE <= len(chunk):
                    size = struct.unpack_from(">i", chunk, off + 8)[0] + LOG_OVERHEAD
                    if size < HEADER_SIZE or chunk[off + 16] != 2:
                        raise CorruptSegment(f"{path}: bad batch header at position {pos + off}")
                    if off + size > len(chunk):
                        break
                    batch = mv[off : off + size]
                    if crc32c.crc32c(batch[ATTR_OFFSET:]) != _CRC.unpack_from(batch, 17)[0]:
                        raise CorruptSegment(f"{path}: CRC mismatch in batch at position {pos + off}")
                    yield batch, read_header(batch)
                    off += size
                if off == 0:  # the next batch is larger than the buffer
                    if len(chunk) < HEADER_SIZE:
                        raise CorruptSegment(f"{path}: torn batch at position {pos}")
                    size = struct.unpack_from(">i", chunk, 8)[0] + LOG_OVERHEAD
                    if pos + size > end:
                        raise CorruptSegment(f"{path}: batch at position {pos} overruns the segment")
                    want = max(want, size)
                    continue
                if for_map:
                    stats.map_bytes_read += off
                else:
                    stats.bytes_read += off
                pos += off
                want = self.plan.io_buffer_size
        finally:
            os.close(fd)

    # ---- phase 1: transactions, producers, offset map --------------------------------------
    def prepare(self) -> Prepared:
        plan = self.plan
        stats = Stats()
        segs = plan.segments
        capacity = max(1, int(plan.dedupe_buffer_size * plan.load_factor / MAP_ENTRY_BYTES))
        txn = TxnState(plan.aborted)
        full = False
        latest = -1
        offsets = self.offsets
        for i, seg in enumerate(segs):
            nxt = segs[i + 1].base if i + 1 < len(segs) else None
            if seg.base >= self.upper or full:
                break
            if nxt is not None and nxt <= plan.first_dirty:
                continue
            start = plan.dirty_pos if seg.base <= plan.first_dirty else 0
            for batch, h in self._batches(seg.path, start, seg.size, stats, for_map=True):
                if h.is_control:
                    txn.on_control(h, control_type(batch, h))
                elif not txn.on_batch(h):
                    if len(offsets) + h.records_count > capacity:
                        full = True
                        break
                    payload = codecs.decompress(h.compression, batch[HEADER_SIZE:])
                    index_keys(payload, h.records_count, h.base_offset, offsets, map_key)
                if h.last_offset >= plan.first_dirty:
                    latest = max(latest, h.last_offset)
            if not full and nxt is not None:
                latest = max(latest, min(nxt, self.upper) - 1)  # step over a gap at the end
        self.map_latest = latest
        end = latest + 1
        groups = self._group(end) if end > plan.first_dirty else []
        self.prepared = Prepared(end_offset=max(end, plan.first_dirty), upper_bound=self.upper,
                                 groups=groups, map_entries=len(offsets), map_full=full, stats=stats)
        self.txn = TxnState(plan.aborted)
        return self.prepared

    def _group(self, end: int) -> list[list[int]]:
        """Segments below `end` in groups of at most segment.bytes of input (and of index), whose
        offsets fit the index's 32-bit relative offsets: each group becomes one segment, so small
        cleaned segments merge."""
        plan = self.plan
        segs = plan.segments
        cand = [i for i in range(len(segs) - 1) if segs[i].base < end]
        limit = 10 * 1024 * 1024
        groups: list[list[int]] = []
        j = 0
        while j < len(cand):
            g = [cand[j]]
            size, isz, tsz = segs[cand[j]].size, segs[cand[j]].index_bytes, segs[cand[j]].tindex_bytes
            j += 1
            while j < len(cand):
                s = segs[cand[j]]
                last_bound = (segs[cand[j] + 1].base if cand[j] + 1 < len(segs) else self.upper) - 1
                if (size + s.size > plan.segment_bytes or isz + s.index_bytes > limit
                        or tsz + s.tindex_bytes > limit
                        or (s.size and last_bound - segs[g[0]].base > 2**31 - 1)):
                    break
                g.append(cand[j])
                size += s.size
                isz += s.index_bytes
                tsz += s.tindex_bytes
                j += 1
            groups.append(g)
        return groups

    # ---- phase 2: rewrite one group ----------------------------------------------------------
    def _retain_empty(self, h: BatchHeader) -> bool:
        """Kafka's RETAIN_EMPTY: the last batch of a live producer (its sequence number and epoch
        matter) and the last batch of the cleaned range (it carries the range's last offset)."""
        if h.last_offset + 1 == self.upper:
            return True
        if h.producer_id < 0:
            return False
        info = self.plan.producers.get(h.producer_id)
        if info is None:
            return False
        last_data, epoch = info
        if last_data >= 0:
            return h.last_offset == last_data
        return h.is_control and h.producer_epoch == epoch

    def clean_group(self, index: int) -> GroupResult:
        assert self.prepared is not None and self.txn is not None
        plan = self.plan
        group = [plan.segments[i] for i in self.prepared.groups[index]]
        first = group[0].base
        out = Segment(Path(plan.dir), first, plan.index_interval, suffix=CLEANED)
        os.ftruncate(out.fd, 0)  # a leftover of an aborted pass
        out.size = 0
        out.recover(validate=False)  # creates empty index files
        stats = Stats()
        self.emptied_aborts: list[tuple[int, int]] = []
        try:
            buf = bytearray()
            metas: list[tuple[int, int, int, int]] = []
            for seg in group:
                for batch, h in self._batches(seg.path, 0, seg.size, stats, for_map=False):
                    kept = self._filter(batch, h, stats)
                    if kept is None:
                        continue
                    k = read_header(kept) if kept is not batch else h
                    metas.append((k.base_offset, k.last_offset, k.max_timestamp, len(kept)))
                    buf += kept
                    if len(buf) >= plan.io_buffer_size:
                        out.append_many(buf, metas)
                        self.throttle(len(buf))
                        stats.bytes_written += len(buf)
                        buf, metas = bytearray(), []
            if buf:
                out.append_many(buf, metas)
                stats.bytes_written += len(buf)
            out.flush()
            return GroupResult(base=first, size=out.size, stats=stats,
                               emptied_aborts=self.emptied_aborts)
        finally:
            out.close()

    def _filter(self, batch: memoryview, h: BatchHeader,
                stats: Stats) -> memoryview | bytes | None:
        """The batch to write for `batch`: itself, a rewrite with fewer records (or a delete horizon),
        a bare header, or None."""
        plan = self.plan
        now = plan.now_ms
        assert self.txn is not None
        has_horizon = bool(h.attributes & DELETE_HORIZON_BIT)
        if h.is_control:
            ctype = control_type(batch, h)
            can_discard = self.txn.on_control(h, ctype)
            discard_records = can_discard and has_horizon and h.base_timestamp <= now
            if can_discard and ctype == ABORT:
                self.emptied_aborts.append((h.producer_id, h.base_offset))
        else:
            can_discard = self.txn.on_batch(h)
            discard_records = can_discard
        retain_empty = self._retain_empty(h)
        stats.records_read += max(h.records_count, 0)
        if discard_records and not retain_empty:
            return None
        marker_done = can_discard and h.is_control
        if h.records_count <= 0:
            return batch if retain_empty else None
        payload = b""
        kept: list[int] = []
        tombstones = False
        if not discard_records:
            payload = codecs.decompress(h.compression, batch[HEADER_SIZE:])
            if h.is_control:
                kept = [0, len(payload)]  # one record, kept whole
            else:
                retain_deletes = not has_horizon or now < h.base_timestamp
                kept, tombstones, invalid = select_records(
                    payload, h.records_count, h.base_offset, self.map_latest, self.offsets,
                    retain_deletes, map_key)
                stats.invalid_records += invalid
        count = len(kept) // 2 if not h.is_control else (h.records_count if kept else 0)
        stats.records_retained += count
        need_horizon = (tombstones or marker_done) and not has_horizon
        if count == h.records_count and not need_horizon:
            return batch
        stats.batches_rewritten += 1
        if not count:
            if not retain_empty:
                return None
            attrs = h.attributes & ~(0x07 | DELETE_HORIZON_BIT)
            return encode_raw_batch(
                base_offset=h.base_offset, leader_epoch=h.leader_epoch, attributes=attrs,
                last_offset_delta=h.last_offset_delta, base_timestamp=h.max_timestamp,
                max_timestamp=h.max_timestamp, producer_id=h.producer_id,
                producer_epoch=h.producer_epoch, base_sequence=h.base_sequence, count=0,
                records_body=b"")
        base_ts = h.base_timestamp
        keep_ts = bool(h.attributes & 0x08) or h.is_control  # max timestamp stays the batch's
        if need_horizon:
            new_base = now + plan.delete_retention_ms
            attrs = h.attributes | DELETE_HORIZON_BIT
        else:
            new_base = base_ts
            attrs = h.attributes
        if h.is_control:  # one marker record, rebased below
            spans = [(0, len(payload))]
        else:
            spans = list(zip(kept[::2], kept[1::2], strict=True))
        body = bytearray()
        max_ts = h.max_timestamp if keep_ts else -1
        for start, end in spans:
            if keep_ts and new_base == base_ts:
                body += payload[start:end]
                continue
            ts_delta, after = timestamp_delta(payload, start)
            ts = base_ts + ts_delta
            if ts > max_ts and not keep_ts:
                max_ts = ts
            if new_base == base_ts:
                body += payload[start:end]
            else:
                rec = bytearray(b"\x00")
                write_varint(rec, ts - new_base)
                rec += payload[after:end]
                write_varint(body, len(rec))
                body += rec
        return encode_raw_batch(
            base_offset=h.base_offset, leader_epoch=h.leader_epoch, attributes=attrs,
            last_offset_delta=h.last_offset_delta, base_timestamp=new_base, max_timestamp=max_ts,
            producer_id=h.producer_id, producer_epoch=h.producer_epoch,
            base_sequence=h.base_sequence, count=count, records_body=bytes(body))


# ---- worker-side registry: jobs live where they run (a thread of the broker, or the cleaner
# process), the event loop only passes plans and indexes in and small results out ----------------
_jobs: dict[int, CleanJob] = {}
stop_check: Callable[[], bool] = lambda: False  # noqa: E731 - replaced by the worker


def job_prepare(job_id: int, plan: Plan) -> Prepared:
    job = CleanJob(plan, stop_check)
    _jobs[job_id] = job
    return job.prepare()


def job_clean_group(job_id: int, index: int) -> GroupResult:
    return _jobs[job_id].clean_group(index)


def job_drop(job_id: int) -> None:
    _jobs.pop(job_id, None)
