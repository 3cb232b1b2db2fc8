"""A partition's log: ordered segments, offsets, appends, reads, retention and recovery.

Appends run on the event loop (one write syscall per batch); fsync runs in a worker thread. The
recovery point (offset below which data was fsynced) and the log start offset are checkpointed in
`partition.meta` so an unclean start only rescans segments above the recovery point.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import json
import logging
import os
import shutil
import struct
import time
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import crc32c

from samsa.protocol.batch import (
    ATTR_OFFSET,
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    read_header,
    set_base_offset,
    set_log_append_time,
)
from samsa.protocol.records import control_marker, decode_batch, encode_control_batch

from . import fsio
from .file_slice import FileSlice
from .leader_epoch import FILE_NAME as EPOCH_FILE
from .leader_epoch import LeaderEpochCache
from .producer_state import ProducerStateManager
from .segment import Segment, segment_name

META = "partition.meta"
SWAP = ".swap"
CLEANED = ".cleaned"
log = logging.getLogger("samsa.storage")

# tests set this to stop a segment swap between two steps (a simulated crash)
swap_hook: Callable[[str], None] | None = None


def swap_name(first_base: int, next_base: int) -> str:
    """`<first>.<next>.swap`: a cleaned segment replacing every segment with a base offset in
    [first, next). The name carries the range so recovery knows what the swap replaces."""
    return f"{segment_name(first_base)}.{segment_name(next_base)}{SWAP}"


def _segment_files(directory: Path) -> list[tuple[int, Path]]:
    out = []
    for p in directory.iterdir():
        if p.suffix in (".log", ".index", ".timeindex") and p.stem.isdigit():
            out.append((int(p.stem), p))
    return out


@dataclass
class LogConfig:
    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * 86400 * 1000
    index_interval: int = 4096
    retention_ms: int = 7 * 86400 * 1000
    retention_bytes: int = -1
    flush_messages: int = 2**63 - 1
    flush_ms: int = 2**63 - 1
    log_append_time: bool = False
    max_message_bytes: int = 1048588
    cleanup_policy: str = "delete"
    compression_type: str = "producer"
    timestamp_after_max_ms: int = 3600000
    timestamp_before_max_ms: int = 2**63 - 1
    delete_retention_ms: int = 86400000
    min_cleanable_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = 2**63 - 1
    # tiered storage (samsa.storage.remote): -2 local retention means the total's value
    remote_storage_enable: bool = False
    local_retention_ms: int = -2
    local_retention_bytes: int = -2
    remote_log_copy_disable: bool = False
    remote_log_delete_on_disable: bool = False

    @property
    def local_ms(self) -> int:
        return self.retention_ms if self.local_retention_ms == -2 else self.local_retention_ms

    @property
    def local_bytes(self) -> int:
        return (self.retention_bytes if self.local_retention_bytes == -2
                else self.local_retention_bytes)

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def roll_ms(self) -> int:
        """Kafka's maxSegmentMs: a compacted topic also rolls by max.compaction.lag.ms, since the
        active segment is never cleaned."""
        if self.compact and self.max_compaction_lag_ms > 0:
            return min(self.segment_ms, self.max_compaction_lag_ms)
        return self.segment_ms

    @classmethod
    def from_topic(cls, c: dict[str, str]) -> LogConfig:
        return cls(
            segment_bytes=int(c.get("segment.bytes", 1 << 30)),
            segment_ms=int(c.get("segment.ms", 604800000)),
            index_interval=int(c.get("index.interval.bytes", 4096)),
            retention_ms=int(c.get("retention.ms", 604800000)),
            retention_bytes=int(c.get("retention.bytes", -1)),
            flush_messages=int(c.get("flush.messages", 2**63 - 1)),
            flush_ms=int(c.get("flush.ms", 2**63 - 1)),
            log_append_time=c.get("message.timestamp.type", "CreateTime") == "LogAppendTime",
            max_message_bytes=int(c.get("max.message.bytes", 1048588)),
            cleanup_policy=c.get("cleanup.policy", "delete"),
            compression_type=c.get("compression.type", "producer"),
            timestamp_after_max_ms=int(c.get("message.timestamp.after.max.ms", 3600000)),
            timestamp_before_max_ms=int(c.get("message.timestamp.before.max.ms", 2**63 - 1)),
            delete_retention_ms=int(c.get("delete.retention.ms", 86400000)),
            min_cleanable_ratio=float(c.get("min.cleanable.dirty.ratio", 0.5)),
            min_compaction_lag_ms=int(c.get("min.compaction.lag.ms", 0)),
            max_compaction_lag_ms=int(c.get("max.compaction.lag.ms", 2**63 - 1)),
            remote_storage_enable=c.get("remote.storage.enable", "false").lower() == "true",
            local_retention_ms=int(c.get("local.retention.ms", -2)),
            local_retention_bytes=int(c.get("local.retention.bytes", -2)),
            remote_log_copy_disable=c.get("remote.log.copy.disable", "false").lower() == "true",
            remote_log_delete_on_disable=c.get("remote.log.delete.on.disable",
                                               "false").lower() == "true",
        )


class OffsetOutOfRange(Exception):
    pass


class FollowerAppendError(Exception):
    """Fetched data a follower cannot append: a batch below its log end offset, or a corrupt one
    (bad magic, length or CRC). Nothing of the call was appended."""


_EPOCH = struct.Struct(">i")
EPOCH_OFFSET = 12  # partitionLeaderEpoch: before the CRC'd part (which starts at byte 21)
INT32_MAX = 2**31 - 1
HW_CHECKPOINT_MS = 5000  # Kafka's replica.high.watermark.checkpoint.interval.ms default


class PartitionLog:
    def __init__(self, directory: Path, topic: str, partition: int, config: LogConfig) -> None:
        self.dir = directory
        self.topic = topic
        self.partition = partition
        self.config = config
        self.segments: list[Segment] = []
        self.bases: list[int] = []
        self.log_start_offset = 0
        self.recovery_point = 0
        self.unflushed_messages = 0
        self.last_flush = time.monotonic()
        self.flushed_offset = 0
        self._flush_task: asyncio.Future[None] | None = None
        # directories whose entries changed (new segment files, a new partition directory) since
        # the last flush: a flush fsyncs them too, or an acknowledged record could sit in a file
        # that a power loss unlinks
        self._sync_dirs: set[Path] = set()
        self._rolled_synced: dict[int, int] = {}  # rolled segments synced out of order
        # the first fsync failure, for good: after a write-back error Linux reports EIO once and
        # marks the pages clean, so a retried fsync succeeds on data that may be lost. Every later
        # flush fails (nothing more is acknowledged as durable) and a shutdown is not clean.
        self.flush_error: BaseException | None = None
        self.waiters: list[asyncio.Future[None]] = []
        self.deleted = False
        self.producers = ProducerStateManager(directory)
        # the leader epoch this broker leads the partition in (stamped on appends); -1 when it
        # does not lead it (set by the replication layer)
        self.leader_epoch = -1
        self.epochs = LeaderEpochCache(directory / EPOCH_FILE)
        # None: the high watermark follows the log end offset (a sole replica); else the value the
        # replication layer set. Persisted in partition.meta while set.
        self._hw: int | None = None
        self._hw_written: int | None = None  # the value partition.meta holds
        self._hw_written_at = 0.0
        # truncations so far: a flush or a rolled segment's fsync that started before one must not
        # move the flushed offset or the recovery point past the new, shorter log
        self.truncations = 0
        self._reset_to: int | None = None  # truncate_fully_and_start_at in progress (meta intent)
        # called with the new log end after a truncation (the log manager clamps the cleaner's
        # clean/dirty boundary with it)
        self.truncate_listeners: list[Callable[[int], None]] = []
        # tiered storage (samsa.storage.remote.manager keeps these): the broker runs the remote
        # log services; the first and last offsets in the remote tier (COPY_SEGMENT_FINISHED
        # segments, -1 when none); the earliest offset across tiers that DeleteRecords set
        self.remote_system_enabled = False
        self.remote_start_offset = -1
        self.remote_highest_offset = -1
        self._global_start: int | None = None

    # ---- lifecycle ---------------------------------------------------------------------
    @classmethod
    def open(cls, directory: Path, topic: str, partition: int, config: LogConfig,
             clean: bool) -> PartitionLog:
        made = fsio.makedirs(directory)
        log = cls(directory, topic, partition, config)
        log._sync_dirs.update(d.parent for d in made)
        log._load(clean)
        return log

    def _load(self, clean: bool) -> None:
        hw = self._read_meta()
        if self._reset_to is not None:
            self._finish_reset()
        for p in self.dir.glob("*" + CLEANED):
            fsio.unlink(p)
        for p in sorted(self.dir.glob("*" + SWAP)):
            self._finish_swap(p)
        bases = sorted(int(p.stem) for p in self.dir.glob("*.log"))
        recovered: list[Segment] = []
        for i, base in enumerate(bases):
            seg = Segment(self.dir, base, self.config.index_interval)
            # the segment holding the recovery point too: after a clean start the recovery point is
            # the end offset, inside the active segment, and what follows it there is unsynced
            needs_scan = not clean and (i == len(bases) - 1 or bases[i + 1] > self.recovery_point)
            cut = 0
            if needs_scan or not seg.load_indexes():
                cut = seg.recover(validate=True)
                recovered.append(seg)
            self.segments.append(seg)
            self.bases.append(base)
            if cut and base != bases[-1]:
                self._drop_after_torn(seg)
                break
        # a segment left empty by a torn tail is harmless except as a zero-length non-active one;
        # dropping it must not move the end offset back (compaction leaves gaps before it)
        while (len(self.segments) > 1 and self.segments[-1].size == 0
               and self.segments[-2].next_offset >= self.segments[-1].base):
            seg = self.segments.pop()
            self.bases.pop()
            seg.delete()
        if not self.segments:
            self._roll_to(self.log_start_offset)
        self.log_start_offset = max(self.log_start_offset, self.segments[0].base)
        # below the recovery point nothing needs a rescan after a crash: what recovery validated
        # (or rebuilt indexes for) there may never have been fsynced (the broker died before the
        # roll's background fsync), so it is synced before the checkpoint says so
        synced = [seg for seg in recovered if seg is not self.active and not seg._closed]
        for seg in synced:
            seg.flush()
        if synced:
            fsio.fsync_dir(self.dir)
        self.recovery_point = self.end_offset if clean else self.active.base
        self.flushed_offset = self.recovery_point
        if hw is not None:
            self._hw = min(max(hw, self.log_start_offset), self.end_offset)
        self._write_meta()
        self._load_producer_state()
        self._load_epochs()

    def _read_meta(self) -> int | None:
        """Load the checkpointed offsets; returns the high watermark if one was stored."""
        try:
            meta = json.loads((self.dir / META).read_text())
        except FileNotFoundError:
            return None
        except ValueError:  # cannot happen with synced writes; a full scan is the safe answer
            log.warning("%s: unreadable %s, rescanning every segment", self.dir.name, META)
            return None
        self.log_start_offset = meta.get("log_start_offset", 0)
        self.recovery_point = meta.get("recovery_point", 0)
        self._reset_to = meta.get("reset_to")
        gs = meta.get("global_start")
        self._global_start = gs if isinstance(gs, int) else None
        hw = meta.get("high_watermark")
        return hw if isinstance(hw, int) else None

    def _finish_reset(self) -> None:
        """A truncate_fully_and_start_at was interrupted after its intent was written: nothing of
        the old log is kept (the log start offset in the meta is already the new one)."""
        log.info("%s: completing an interrupted reset to offset %s", self.dir.name, self._reset_to)
        for p in self.dir.iterdir():
            if p.name.endswith((SWAP, CLEANED)) or (
                    p.suffix in (".log", ".index", ".timeindex") and p.stem.isdigit()):
                fsio.unlink(p)
        self.producers.reset()
        self.epochs.clear()
        self._sync_dirs.add(self.dir)
        self._reset_to = None

    def _load_epochs(self) -> None:
        """Bring the leader epoch cache in line with the log (Kafka does the same at load): a
        malformed file is rebuilt from the batch headers, entries past the log end (an epoch
        assigned, the crash came before its first batch was written) or before its start go."""
        ep = self.epochs
        if ep.needs_rebuild:
            ep.rebuild([(h.leader_epoch, h.base_offset) for _seg, _pos, h in self._headers_from(
                self.log_start_offset)])
        ep.truncate_from_end(self.end_offset)
        ep.truncate_from_start(self.log_start_offset)

    def _headers_from(self, start: int) -> list[tuple[Segment, int, BatchHeader]]:
        """(segment, position, header) of every batch holding an offset >= start."""
        out = []
        for seg in self.segments[self._segment_index(start):]:
            pos = seg.position_of(start)
            if pos is None:
                continue
            for bpos, head in seg.batches_from(pos):
                h = read_header(head)
                if h.last_offset >= start:
                    out.append((seg, bpos, h))
        return out

    def _drop_after_torn(self, torn: Segment) -> None:
        """A torn segment that is not the last: what follows it was never flushed (a flush syncs
        every segment up to the acknowledged offset), so, as Kafka does, the later segments go
        rather than leave a hole in the offsets."""
        later = [p for base, p in _segment_files(self.dir) if base > torn.base]
        log.warning("%s: segment %d had a torn tail; deleting %d later segment files",
                    self.dir.name, torn.base, len(later))
        for p in later:
            fsio.unlink(p)
        self._sync_dirs.add(self.dir)

    def _load_producer_state(self) -> None:
        """Snapshot + the batch headers after it rebuild idempotence and transaction state."""
        self.producers.load_aborted_index(self.end_offset)
        self._replay_producer_state()

    def _replay_producer_state(self) -> None:
        pm = self.producers
        start = max(pm.load_snapshot(self.end_offset), self.log_start_offset)
        for seg, bpos, h in self._headers_from(start):
            if h.producer_id < 0:
                continue
            pm.on_append(h, h.base_offset)
            if h.is_control:
                marker = control_marker(seg.read(bpos, h.size, True))
                if marker is not None:
                    pm.on_marker(h.producer_id, h.producer_epoch, marker[0], h.base_offset,
                                 marker[1], self._lso_for_replay(h.base_offset))

    def _lso_for_replay(self, marker_offset: int) -> int:
        fu = self.producers.first_unstable_offset()
        return marker_offset if fu is None else fu

    def _finish_swap(self, swap: Path) -> None:
        """Complete a segment swap interrupted by a crash: the swap file was written and fsynced
        before it got its name, so it replaces whatever remains of the segments it covers."""
        first_s, _, next_s = swap.stem.partition(".")
        first, nxt = int(first_s), int(next_s)
        for base, p in _segment_files(self.dir):
            if first <= base < nxt:
                fsio.unlink(p)
        fsio.replace(swap, self.dir / f"{segment_name(first)}.log")
        self._sync_dirs.add(self.dir)
        log.info("%s: completed an interrupted swap of cleaned segment %d (replacing [%d, %d))",
                 self.dir.name, first, first, nxt)

    def replace_segments(self, old: list[Segment]) -> bool:
        """Swap the cleaner's output (a closed, fsynced `.cleaned` segment named after old[0]) in for
        `old`, consecutive non-active segments. Runs on the event loop between
        appends. False (and the cleaned files removed) when `old` is no longer exactly in the log
        (retention, DeleteRecords or deletion got there first).

        Crash safety: the `.cleaned` log is renamed to a `.swap` name carrying the replaced offset
        range (the commit point), the old files are deleted, the new indexes renamed in, and last the
        swap renamed to the final `.log`. `_load` finishes an interrupted swap or, before the commit
        point, discards the `.cleaned` files."""
        stem = str(self.dir / segment_name(old[0].base))
        cleaned = [Path(stem + ext + CLEANED) for ext in (".log", ".index", ".timeindex")]
        first = next((i for i, s in enumerate(self.segments) if s is old[0]), -1)
        end = first + len(old)
        if (self.deleted or first < 0 or end >= len(self.segments)
                or any(a is not b for a, b in zip(self.segments[first:end], old, strict=True))):
            for p in cleaned:
                fsio.unlink(p)
            return False
        next_base = self.segments[end].base
        swap = self.dir / swap_name(old[0].base, next_base)
        self._sync_dirs.add(self.dir)  # the cleaner fsyncs it after the swap; a flush may first
        fsio.rename(cleaned[0], swap)
        _step("swap-named")
        for seg in old:
            seg.delete() if seg.base != old[0].base else seg.close()
        _step("old-deleted")
        base_stem = self.dir / segment_name(old[0].base)
        fsio.replace(cleaned[1], base_stem.with_suffix(".index"))
        fsio.replace(cleaned[2], base_stem.with_suffix(".timeindex"))
        _step("indexes-renamed")
        fsio.replace(swap, base_stem.with_suffix(".log"))
        _step("done")
        seg = Segment(self.dir, old[0].base, self.config.index_interval)
        if not seg.load_indexes():
            seg.recover(validate=False)
        self.segments[first:end] = [seg]
        self.bases[first:end] = [seg.base]
        return True

    def _write_meta(self) -> None:
        # synced before the rename: the name must never point at unwritten bytes
        meta: dict[str, int] = {"log_start_offset": self.log_start_offset,
                                "recovery_point": self.recovery_point}
        if self._hw is not None:
            meta["high_watermark"] = self._hw
        if self._reset_to is not None:
            meta["reset_to"] = self._reset_to
        if self._global_start is not None:
            meta["global_start"] = self._global_start
        fsio.replace_file(self.dir / META, json.dumps(meta).encode(), sync=True)
        self._hw_written = self._hw
        self._hw_written_at = time.monotonic()

    def checkpoint_hw(self, interval_ms: int = HW_CHECKPOINT_MS) -> bool:
        """Persist a high watermark that moved since it was last written, at most every
        `interval_ms` (Kafka's replication-offset-checkpoint). True if written."""
        if (self._hw == self._hw_written or self.deleted
                or (time.monotonic() - self._hw_written_at) * 1000 < interval_ms):
            return False
        self._write_meta()
        return True

    def close(self, clean: bool = True) -> None:
        if clean and self.flush_error is None:
            for s in self.segments:
                s.flush()
            self.recovery_point = self.end_offset
            self._write_meta()
            self.producers.snapshot(self.end_offset, sync=True)
            self.producers.take_unsynced_index()
            fsio.fsync_path(self.producers.index_path)
            for d in sorted(self._sync_dirs | {self.dir}, key=lambda p: len(p.parts), reverse=True):
                fsio.fsync_dir(d)
            self._sync_dirs.clear()
        for s in self.segments:
            s.close()
        self._wake()

    def delete(self) -> None:
        self.deleted = True
        for s in self.segments:
            s.close()
        self._wake()
        shutil.rmtree(self.dir, ignore_errors=True)

    # ---- offsets -----------------------------------------------------------------------
    @property
    def active(self) -> Segment:
        return self.segments[-1]

    @property
    def end_offset(self) -> int:
        """Log end offset: the offset the next record gets."""
        return self.active.next_offset

    @property
    def high_watermark(self) -> int:
        """Offsets below it are on every in-sync replica. Until the replication layer sets one it
        is the log end offset (a sole replica is its whole ISR)."""
        hw = self._hw
        return self.active.next_offset if hw is None else hw

    def set_high_watermark(self, hw: int) -> bool:
        """Set the high watermark, clamped to [log start, log end]. True when it moved up (waiting
        fetches are woken then)."""
        hw = min(max(hw, self.log_start_offset), self.end_offset)
        old = self.high_watermark
        was_following = self._hw is None
        self._hw = hw
        if was_following and not self.deleted:
            # from now on the high watermark may trail the log end: a crash before the next
            # checkpoint must not reload it as the log end (uncommitted records exposed)
            self._write_meta()
        if hw > old:
            self._wake()
            return True
        return False

    def follow_leo_hw(self) -> None:
        """The high watermark follows the log end offset again (a leader whose ISR is itself)."""
        old = self.high_watermark
        self._hw = None
        if self.end_offset > old:
            self._wake()

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    # ---- append ------------------------------------------------------------------------
    def _roll_to(self, base: int) -> Segment:
        seg = Segment(self.dir, base, self.config.index_interval)
        seg.recover(validate=False)  # fresh, creates empty index files
        self._sync_dirs.add(self.dir)
        self.segments.append(seg)
        self.bases.append(base)
        return seg

    def _maybe_roll(self, incoming: int, now_ms: int) -> None:
        act = self.active
        if act.size == 0:
            return
        age_ref = act.first_timestamp if act.first_timestamp is not None else act.created * 1000
        if (act.size + incoming > self.config.segment_bytes
                or now_ms - age_ref >= self.config.roll_ms
                or act.index_full):
            self.roll()

    def roll(self, base: int | None = None) -> None:
        """Start a new segment at `base` (default: the log end offset; a follower passes the next
        batch's base offset, past a gap a compacted leader left)."""
        old = self.active
        if old.size == 0:
            return
        self._roll_to(self.end_offset if base is None else max(base, self.end_offset))
        try:
            self.producers.snapshot(self.end_offset)
        except OSError as e:  # a missing snapshot costs only replay at start; the flush must run
            log.warning("%s: producer state snapshot at %d failed: %s", self.dir.name,
                        self.end_offset, e)
        # Kafka flushes the closed segment asynchronously and moves the recovery point past it
        loop = _running_loop()
        gen = self.truncations
        if loop is not None and _pin(old):
            fut = loop.run_in_executor(None, old.flush)
            base = self.active.base
            fut.add_done_callback(lambda f: self._rolled_flushed(f, base, old, old.base, gen))
        else:
            old.flush()
            self._rolled_flushed(None, self.active.base, None, old.base, gen)

    def _rolled_flushed(self, fut: asyncio.Future[None] | None, base: int,
                        pinned: Segment | None = None, old_base: int = -1,
                        gen: int | None = None) -> None:
        """A rolled segment [old_base, base) is synced. The flushed offset and the recovery point
        move past it only once everything before it is synced too: background fsyncs of
        successive rolls may finish out of order."""
        if pinned is not None:
            pinned.release()
        if fut is not None and fut.exception() is not None:
            self._flush_failed(fut.exception())  # type: ignore[arg-type]
            return
        if gen is not None and gen != self.truncations:
            return  # the log was truncated meanwhile: that segment may be gone or shorter
        self._rolled_synced[old_base] = base
        moved = -1
        while True:
            nxt = max((b for start, b in self._rolled_synced.items()
                       if start <= self.flushed_offset < b), default=-1)
            if nxt < 0:
                break
            self.flushed_offset = moved = nxt
        self._rolled_synced = {a: b for a, b in self._rolled_synced.items()
                               if b > self.flushed_offset}
        if not self.deleted and moved > self.recovery_point:
            self.recovery_point = moved  # a segment base: segments from it on are rescanned
            self._write_meta()

    def append(self, batch: bytearray, now_ms: int | None = None,
               leader_epoch: int = -1) -> tuple[int, int]:
        """Append one validated batch (mutable copy). Returns (base offset, log append time or -1).
        A retried idempotent batch is not appended again: its original base offset is returned.
        Raises ProducerStateError for sequence/epoch violations. A leader passes its
        `leader_epoch`: stamped into the batch (outside the CRC) and recorded in the epoch cache
        when new."""
        if now_ms is None:
            now_ms = int(time.time() * 1000)
        h = read_header(batch)
        if h.producer_id >= 0:
            dup = self.producers.check(h)
            if dup is not None:
                return dup, -1
        self._maybe_roll(len(batch), now_ms)
        base = self.end_offset
        set_base_offset(batch, base)
        if leader_epoch >= 0:
            self._stamp_epoch(batch, leader_epoch, base)
        append_time = -1
        if self.config.log_append_time:
            set_log_append_time(batch, now_ms)
            append_time = now_ms
        h = read_header(batch)
        self.active.append(batch, base, h.last_offset, h.max_timestamp)
        self.unflushed_messages += h.records_count
        if h.producer_id >= 0:
            self.producers.on_append(h, base)
            if h.is_control:  # a marker written through the generic path (tests, tools)
                marker = control_marker(bytes(batch))
                if marker is not None:
                    self.producers.on_marker(h.producer_id, h.producer_epoch, marker[0], base,
                                             marker[1], self._lso_for_replay(base))
        self._wake()
        return base, append_time

    def append_marker(self, producer_id: int, epoch: int, marker_type: int,
                      coordinator_epoch: int, now_ms: int | None = None,
                      leader_epoch: int = -1) -> int:
        """Write a transaction COMMIT/ABORT control batch; closes the producer's open transaction
        here (moving the last stable offset) and indexes an abort. Returns the marker's offset."""
        if now_ms is None:
            now_ms = int(time.time() * 1000)
        lso_before = self.last_stable_offset
        batch = bytearray(encode_control_batch(producer_id, epoch, marker_type, coordinator_epoch,
                                               now_ms))
        self._maybe_roll(len(batch), now_ms)
        base = self.end_offset
        set_base_offset(batch, base)
        if leader_epoch >= 0:
            self._stamp_epoch(batch, leader_epoch, base)
        h = read_header(batch)
        self.active.append(batch, base, h.last_offset, h.max_timestamp)
        self.unflushed_messages += 1
        self.producers.on_append(h, base)
        self.producers.on_marker(producer_id, epoch, marker_type, base, coordinator_epoch,
                                 lso_before)
        self._wake()
        return base

    def _stamp_epoch(self, batch: bytearray, leader_epoch: int, base: int) -> None:
        _EPOCH.pack_into(batch, EPOCH_OFFSET, leader_epoch)
        if leader_epoch != self.epochs.latest_epoch:
            # written (synced) before the batch: a crash never leaves records of an epoch the
            # cache does not know; an entry past the log end is dropped at load
            self.epochs.assign(leader_epoch, base)

    def append_as_follower(self, data: bytes | bytearray | memoryview) -> int:
        """Append whole batches fetched from the leader, verbatim (offsets, leader epochs and
        timestamps as the leader wrote them); a trailing partial batch is ignored. Returns the
        bytes appended: 0 for non-empty data means its first batch is larger than what was fetched.
        Every batch is checked first (magic, length, CRC, base offset at or past the log end: gaps
        are fine, a compacted leader leaves them); FollowerAppendError, with nothing appended,
        otherwise. Per batch, never per record."""
        mv = memoryview(data)
        n = len(mv)
        pos = 0
        leo = self.end_offset
        heads: list[tuple[int, BatchHeader]] = []
        while pos + HEADER_SIZE <= n:
            h = read_header(mv, pos)
            size = h.batch_length + LOG_OVERHEAD
            if pos + size > n:
                break  # a partial batch: the fetch size cut it
            if h.magic != 2 or size < HEADER_SIZE or h.last_offset_delta < 0:
                raise FollowerAppendError(f"{self.dir.name}: corrupt batch at offset "
                                          f"{h.base_offset} (magic {h.magic}, length "
                                          f"{h.batch_length})")
            if crc32c.crc32c(mv[pos + ATTR_OFFSET:pos + size]) != h.crc:
                raise FollowerAppendError(f"{self.dir.name}: batch at offset {h.base_offset} "
                                          f"fails its CRC")
            if h.base_offset < leo:
                raise FollowerAppendError(f"{self.dir.name}: batch at offset {h.base_offset} is "
                                          f"below the log end offset {leo}")
            heads.append((pos, h))
            leo = h.last_offset + 1
            pos += size
        if not heads:
            return 0
        run: list[tuple[int, BatchHeader]] = []  # batches for the active segment, one write
        pending = 0
        for bpos, h in heads:
            act = self.active
            # index entries hold offsets relative to the segment base in 32 bits: past a gap a
            # compacted leader left, a new segment starts at the batch
            overflow = h.last_offset - act.base > INT32_MAX
            # segment.ms by record time, as Kafka rolls replicas: the batch's max timestamp
            # against the segment's first (the leader's clock is not known here)
            if act.size + pending > 0 and (
                    overflow or act.size + pending + h.size > self.config.segment_bytes
                    or act.index_full
                    or (act.first_timestamp is not None
                        and h.max_timestamp - act.first_timestamp >= self.config.roll_ms)):
                self._append_run(mv, run)
                run, pending = [], 0
                self.roll(h.base_offset)
            elif overflow:  # an empty active segment far below the batch: start over at it
                self.bases.pop()
                self.segments.pop().delete()
                self._roll_to(h.base_offset)
            if h.leader_epoch >= 0 and h.leader_epoch != self.epochs.latest_epoch:
                self._append_run(mv, run)  # the cache entry precedes the batch on disk
                run, pending = [], 0
                self.epochs.assign(h.leader_epoch, h.base_offset)
            run.append((bpos, h))
            pending += h.size
        self._append_run(mv, run)
        self._wake()
        return pos

    def _append_run(self, mv: memoryview, run: list[tuple[int, BatchHeader]]) -> None:
        """Write consecutive fetched batches to the active segment with one write, then account
        for them (flush policy, producer state)."""
        if not run:
            return
        start = run[0][0]
        last_pos, last_h = run[-1]
        self.active.append_many(mv[start:last_pos + last_h.size], [
            (h.base_offset, h.last_offset, h.max_timestamp, h.size) for _p, h in run])
        pm = self.producers
        for bpos, h in run:
            self.unflushed_messages += h.records_count
            if h.producer_id >= 0:
                pm.on_append(h, h.base_offset)
                if h.is_control:
                    marker = control_marker(mv[bpos:bpos + h.size])
                    if marker is not None:
                        pm.on_marker(h.producer_id, h.producer_epoch, marker[0], h.base_offset,
                                     marker[1], self._lso_for_replay(h.base_offset))

    # ---- truncation ------------------------------------------------------------------------
    def truncate_to(self, offset: int) -> None:
        """Drop [offset, log end): a follower's log diverged from its leader's there. When `offset`
        falls inside a batch the whole batch goes (the log end then lands on its base offset).
        Below the log start offset the log is emptied and restarted at `offset` (as Kafka does).

        Crash-safe order (a kill -9 at any step leaves a prefix of the old log, at least up to
        `offset`): the recovery point is lowered first (the next start rescans what is cut), whole
        segments go from the last one down, then the segment holding `offset` is cut (its indexes
        before its log); the epoch cache, producer snapshots and the aborted index, each of
        which the load also trims to the log end, follow."""
        if offset < self.log_start_offset:
            self.truncate_fully_and_start_at(offset)
            return
        if offset >= self.end_offset:
            return
        self.truncations += 1
        self.recovery_point = min(self.recovery_point, offset)
        self.flushed_offset = min(self.flushed_offset, offset)
        self._rolled_synced = {}
        if self._hw is not None:
            self._hw = min(self._hw, offset)
        self._write_meta()
        _step("truncate-meta")
        dropped = False
        while len(self.segments) > 1 and self.segments[-1].base >= offset:
            self.bases.pop()
            self.segments.pop().delete()
            dropped = True
            _step("truncate-segment-deleted")
        if dropped:  # durable before the cut: a power loss must not bring a later segment back
            fsio.fsync_dir(self.dir)  # after a shorter one (a hole)
        seg = self.active
        cut = seg.truncate_to(offset)
        _step("truncate-segment-cut")
        seg.flush()  # the cut is durable before new data lands on the same bytes
        if cut and seg.size > 0:
            # a new object for the cut segment: a cleaning pass that started before the cut must
            # not swap its output (made from the old contents) in for it later
            fresh = Segment(self.dir, seg.base, self.config.index_interval)
            if not fresh.load_indexes():
                fresh.recover(validate=False)
            seg.close()
            self.segments[-1] = fresh
        end = self.end_offset
        if self._hw is not None:
            self._hw = min(self._hw, end)
        self.recovery_point = min(self.recovery_point, end)
        self.flushed_offset = min(self.flushed_offset, end)
        self.epochs.truncate_from_end(end)
        _step("truncate-epochs")
        pm = self.producers
        pm.truncate_aborted_from(end)
        self._replay_producer_state()  # deletes snapshots above the new end
        _step("truncate-producers")
        self._write_meta()
        self._truncated()

    def _truncated(self) -> None:
        for cb in self.truncate_listeners:
            try:
                cb(self.end_offset)
            except Exception:
                log.exception("%s: truncation listener failed", self.dir.name)
        self._wake()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Empty the log and restart it at `offset` (a follower whose leader no longer has what
        it would fetch next). The intent is written to partition.meta first: a crash at any later
        point is completed by the next load, which then starts the log at `offset`."""
        if offset < 0:
            raise ValueError(f"cannot start a log at offset {offset}")
        self.truncations += 1
        self._reset_to = offset
        self.log_start_offset = self.recovery_point = self.flushed_offset = offset
        self._rolled_synced = {}
        if self._hw is not None:
            self._hw = offset
        self._write_meta()
        fsio.fsync_dir(self.dir)  # the intent is durable before anything it covers goes
        _step("reset-intent")
        for seg in reversed(self.segments):
            seg.delete()
        self.segments = []
        self.bases = []
        _step("reset-segments-deleted")
        self._finish_reset()
        self._roll_to(offset)
        fsio.fsync_dir(self.dir)
        _step("reset-rolled")
        self._write_meta()  # without the intent: done
        self.unflushed_messages = 0
        self._truncated()

    @property
    def last_stable_offset(self) -> int:
        """No transactional record at or above this offset is undecided (read_committed bound)."""
        fu = self.producers.first_unstable_offset()
        hw = self.high_watermark
        return hw if fu is None else min(fu, hw)

    def _wake(self) -> None:
        if self.waiters:
            for w in self.waiters:
                if not w.done():
                    w.set_result(None)
            self.waiters = []

    # ---- durability ----------------------------------------------------------------------
    @property
    def flush_due(self) -> bool:
        return (self.unflushed_messages >= self.config.flush_messages
                or (self.unflushed_messages > 0
                    and (time.monotonic() - self.last_flush) * 1000 >= self.config.flush_ms))

    async def flush(self) -> None:
        """Make everything appended so far durable, in a worker thread: every segment written since
        the last completed flush (a roll may have closed one whose own fsync is still running), the
        aborted-transaction index, and the directories whose entries changed. Concurrent callers
        share the fsyncs."""
        target = self.end_offset
        loop = asyncio.get_running_loop()
        # a truncation meanwhile may leave the log shorter than the target
        while self.flushed_offset < min(target, self.end_offset) and not self.deleted:
            if self.flush_error is not None:
                raise OSError(errno.EIO, f"{self.dir.name}: an earlier fsync failed "
                              f"({self.flush_error}); nothing more is acknowledged as durable")
            if self._flush_task is None or self._flush_task.done():
                upto = self.end_offset
                segs: list[Segment] = []
                try:  # pinning reopens idle segments: EMFILE here must leave nothing pinned or lost
                    for s in self.segments[self._segment_index(self.flushed_offset):]:
                        if _pin(s):
                            segs.append(s)
                except BaseException:
                    _unpin(segs)
                    raise
                dirs, self._sync_dirs = self._sync_dirs, set()
                txn_index = self.producers.take_unsynced_index()
                if txn_index is not None:
                    dirs.add(self.dir)
                self.unflushed_messages = 0
                self.last_flush = time.monotonic()
                gen = self.truncations
                task = loop.run_in_executor(None, _sync, segs, txn_index, dirs)
                task.add_done_callback(functools.partial(_unpin, segs))
                task.add_done_callback(self._flush_done)  # seen even if every caller went away
                self._flush_task = task
                try:
                    await asyncio.shield(task)
                except asyncio.CancelledError:
                    self._sync_dirs |= dirs  # the caller went away; the next flush waits again
                    raise
                except BaseException as e:
                    self._flush_failed(e)  # now, not when the done callback gets its turn
                    raise
                finally:
                    if self._flush_task is task:
                        self._flush_task = None
                if gen == self.truncations:
                    self.flushed_offset = max(self.flushed_offset, upto)
                if self._hw != self._hw_written:
                    self.checkpoint_hw()
            else:
                try:
                    await asyncio.shield(self._flush_task)
                except Exception:
                    pass

    def _flush_done(self, task: asyncio.Future[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            self._flush_failed(task.exception())  # type: ignore[arg-type]

    def _flush_failed(self, e: BaseException) -> None:
        if self.flush_error is None and not self.deleted:
            self.flush_error = e
            log.error("%s: fsync failed (%s); no further flush succeeds and the next start "
                      "recovers this log as after a crash", self.dir.name, e)

    # ---- read --------------------------------------------------------------------------
    def _segment_index(self, offset: int) -> int:
        return max(bisect_right(self.bases, offset) - 1, 0)

    def read(self, offset: int, max_bytes: int, whole_first: bool = True,
             upper: int | None = None) -> bytes:
        """Record bytes from `offset` (raises OffsetOutOfRange). Empty at the end of the log.
        Nothing at or past `upper` is served: clients pass the high watermark (or the last stable
        offset); None reads to the log end (a follower's fetch)."""
        found = self._locate(offset, max_bytes, whole_first, upper)
        if found is None:
            return b""
        seg, pos, n = found
        return os.pread(seg.fd, n, pos)

    def read_slice(self, offset: int, max_bytes: int, whole_first: bool = True,
                   upper: int | None = None) -> FileSlice | None:
        """What `read` would return, as a file slice (pinning its segment) for sendfile; None
        when empty. The caller must release() it (sending does)."""
        found = self._locate(offset, max_bytes, whole_first, upper)
        return None if found is None else FileSlice(*found)

    def _locate(self, offset: int, max_bytes: int, whole_first: bool,
                upper: int | None) -> tuple[Segment, int, int] | None:
        """(segment, position, length) of the bytes to serve from `offset`, or None."""
        end = self.end_offset if upper is None else upper
        if offset < self.log_start_offset or offset > self.end_offset:
            raise OffsetOutOfRange(offset)
        if offset >= end:
            return None
        i = self._segment_index(offset)
        while i < len(self.segments):
            seg = self.segments[i]
            pos = seg.position_of(offset)
            if pos is not None:
                if end < self.end_offset:  # bounded below the log end (last stable offset)
                    stop = seg.position_of(end)
                    if stop is not None:
                        if stop <= pos:
                            return None
                        max_bytes = min(max_bytes, stop - pos)
                        whole_first = whole_first and stop - pos >= 61
                n = seg.extent(pos, max_bytes, whole_first)
                return (seg, pos, n) if n > 0 else None
            i += 1
        return None

    def offset_for_timestamp(self, ts: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= ts, or None."""
        for seg in self.segments:
            if seg.max_timestamp < ts:
                continue
            for pos, head in seg.batches_from(seg.time_lookup_start(ts)):
                h = read_header(head)
                if h.max_timestamp < ts or h.is_control:
                    continue
                batch = seg.read(pos, h.size, True)
                for r in decode_batch(batch):
                    if r.timestamp >= ts and r.offset >= self.log_start_offset:
                        return r.offset, r.timestamp
        return None

    def max_timestamp_offset(self) -> tuple[int, int]:
        best = (-1, -1)
        for seg in self.segments:
            if seg.max_timestamp > best[1]:
                best = (seg.max_timestamp_offset, seg.max_timestamp)
        if best[0] < 0:
            return -1, -1
        # the exact record: scan the batch holding the offset
        seg = self.segments[self._segment_index(best[0])]
        pos = seg.position_of(best[0])
        if pos is not None:
            recs = decode_batch(seg.read(pos, 1, True))
            top = max(recs, key=lambda r: r.timestamp, default=None)
            if top is not None:
                return top.offset, top.timestamp
        return best

    # ---- tiered storage ------------------------------------------------------------------
    @property
    def tiered(self) -> bool:
        """The broker tiers this partition: local retention applies, and a local segment goes
        only once the remote tier holds it (unless copying is disabled, KIP-950)."""
        return self.remote_system_enabled and self.config.remote_storage_enable

    @property
    def global_log_start_offset(self) -> int:
        """The earliest offset readable across both tiers (Kafka's logStartOffset when tiered;
        `log_start_offset` stays the local log's start)."""
        start = self.log_start_offset
        if self.remote_start_offset >= 0:
            start = min(start, self.remote_start_offset)
        if self._global_start is not None:
            start = max(start, min(self._global_start, self.log_start_offset))
        return start

    @property
    def explicit_global_start(self) -> int | None:
        """The start across tiers that DeleteRecords or remote retention set (persisted), if any."""
        return self._global_start

    def set_global_log_start_offset(self, offset: int) -> None:
        """Move the earliest offset across tiers (DeleteRecords, remote retention); persisted.
        Never backwards."""
        if self._global_start is not None and offset <= self._global_start:
            return
        self._global_start = offset
        if not self.deleted:
            self._write_meta()

    def set_remote_offsets(self, start: int, highest: int) -> None:
        """What the remote tier holds now (the remote log manager, from the metadata)."""
        self.remote_start_offset = start
        self.remote_highest_offset = highest
        # producer snapshots at the end of segments not yet copied are kept for the copy
        self.producers.keep_above = (highest + 1 if self.tiered
                                     and not self.config.remote_log_copy_disable else 2**63)

    def _apply_local_retention(self, now_ms: int) -> int:
        """local.retention.ms/bytes over the local segments; with copying on, only segments the
        remote tier holds whole (their copy is COPY_SEGMENT_FINISHED) may go."""
        cfg = self.config
        n = self._breaches(cfg.local_ms, cfg.local_bytes, now_ms)
        if n and not cfg.remote_log_copy_disable:
            k = 0
            while k < n and k + 1 < len(self.segments):
                if self.segments[k + 1].base - 1 > self.remote_highest_offset:
                    break
                k += 1
            n = k
        return self._drop_leading(n) if n else 0

    # ---- retention ---------------------------------------------------------------------
    def _drop_leading(self, count: int) -> int:
        dropped = 0
        for _ in range(count):
            if len(self.segments) == 1:
                self.roll()
                if len(self.segments) == 1:
                    break
            seg = self.segments.pop(0)
            self.bases.pop(0)
            seg.delete()
            dropped += 1
        if dropped:
            self.log_start_offset = max(self.log_start_offset, self.segments[0].base)
            self._write_meta()
            self.producers.truncate_aborted_below(self.log_start_offset)
            self.epochs.truncate_from_start(self.log_start_offset)
        return dropped

    def apply_retention(self, now_ms: int) -> int:
        """Delete whole segments past retention.ms / retention.bytes (local.retention.* when
        tiered). Returns segments deleted."""
        if "delete" not in self.config.cleanup_policy:
            return 0
        if self.tiered:
            return self._apply_local_retention(now_ms)
        n = self._breaches(self.config.retention_ms, self.config.retention_bytes, now_ms)
        return self._drop_leading(n) if n else 0

    def _breaches(self, retention_ms: int, retention_bytes: int, now_ms: int) -> int:
        """How many leading segments are past these limits."""
        n = 0
        if retention_ms >= 0:
            for seg in self.segments:
                if seg is self.active and seg.size == 0:
                    break
                # a closed segment the cleaner emptied holds nothing to keep
                if seg.size > 0 and now_ms - seg.max_timestamp <= retention_ms:
                    break
                n += 1
        if retention_bytes >= 0:
            total = self.size_bytes
            m = 0
            for seg in self.segments[:-1]:
                if total - seg.size < retention_bytes:
                    break
                total -= seg.size
                m += 1
            n = max(n, m)
        return n

    def delete_records(self, offset: int) -> int:
        """Move the log start offset (DeleteRecords); whole segments below it go. Returns the new
        log start offset."""
        if offset == -1:
            offset = self.high_watermark
        if offset < 0 or offset > self.high_watermark:
            raise OffsetOutOfRange(offset)
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            # whole segments whose successor starts at or below the new start offset
            n = sum(1 for nxt in self.bases[1:] if nxt <= offset)
            if n:
                self._drop_leading(n)
            self._write_meta()
            self.epochs.truncate_from_start(self.log_start_offset)
        return self.log_start_offset


def _pin(seg: Segment) -> bool:
    """Keep a segment's descriptors valid while a worker thread fsyncs it; False if closed."""
    try:
        seg.acquire()
        return True
    except ValueError:
        return False


def _unpin(segments: list[Segment], _done: object = None) -> None:
    for seg in segments:
        seg.release()


def _sync(segments: list[Segment], txn_index: Path | None, dirs: set[Path]) -> None:
    """The blocking part of a flush: file data first, then the directory entries naming it."""
    for seg in segments:
        seg.flush()
    if txn_index is not None:
        fsio.fsync_path(txn_index)
    for d in sorted(dirs, key=lambda p: len(p.parts), reverse=True):
        try:
            fsio.fsync_dir(d)
        except FileNotFoundError:  # the topic was deleted meanwhile
            pass


def _step(name: str) -> None:
    if swap_hook is not None:
        swap_hook(name)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
