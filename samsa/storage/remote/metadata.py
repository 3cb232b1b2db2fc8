"""The remote log metadata manager (RLMM): which segments of which partition are in the remote
store, and in which state, kept in the `__remote_log_metadata` topic (Kafka's topic-based RLMM).

Every event (a segment's COPY_SEGMENT_STARTED metadata, its state updates, a partition's delete
states) is a record in the metadata partition chosen by the user partition's topic id and number,
so one partition's events are totally ordered. The in-memory state is rebuilt at start by
replaying the local replicas of the metadata topic and then follows their tail (records written
by another broker arrive by replication). Applying is idempotent and ignores transitions that are
not valid (a replayed older event): replay after a crash gives the same state.

The query API is synchronous and in-memory (cheap enough for the fetch path): readers see only
COPY_SEGMENT_FINISHED segments, so a segment whose copy a crash interrupted is never half-visible.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import struct
import uuid
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import crc32c

from .rsm import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    TopicIdPartition,
)

TOPIC = "__remote_log_metadata"
log = logging.getLogger("samsa.remote")
S = RemoteLogSegmentState
_PART = struct.Struct(">i")


def metadata_partition(tp: TopicIdPartition, partitions: int) -> int:
    """The metadata topic partition holding `tp`'s events (stable across restarts)."""
    return crc32c.crc32c(tp.topic_id.bytes + _PART.pack(tp.partition)) % max(partitions, 1)


# ---- (de)serialisation: one JSON object per record, key = the partition ---------------------


def _tp_json(tp: TopicIdPartition) -> dict[str, Any]:
    return {"tid": str(tp.topic_id), "topic": tp.topic, "p": tp.partition}


def _tp_of(d: dict[str, Any]) -> TopicIdPartition:
    return TopicIdPartition(uuid.UUID(d["tid"]), d["topic"], int(d["p"]))


def _b64(b: bytes | None) -> str | None:
    return None if b is None else base64.b64encode(b).decode()


def _unb64(s: str | None) -> bytes | None:
    return None if s is None else base64.b64decode(s)


def encode_event(ev: RemoteLogSegmentMetadata | RemoteLogSegmentMetadataUpdate
                 | RemotePartitionDeleteMetadata) -> tuple[bytes, bytes]:
    """(key, value) of the metadata record for an event."""
    if isinstance(ev, RemoteLogSegmentMetadata):
        tp = ev.tp
        d = {"t": "segment", **_tp_json(tp), "id": str(ev.id), "start": ev.start_offset,
             "end": ev.end_offset, "max_ts": ev.max_timestamp_ms, "broker": ev.broker_id,
             "ts": ev.event_timestamp_ms, "size": ev.segment_size_in_bytes,
             "epochs": [list(x) for x in ev.segment_leader_epochs], "state": int(ev.state),
             "txn": ev.has_txn_index, "custom": _b64(ev.custom_metadata)}
    elif isinstance(ev, RemoteLogSegmentMetadataUpdate):
        tp = ev.segment_id.tp
        d = {"t": "update", **_tp_json(tp), "id": str(ev.segment_id.id), "ts":
             ev.event_timestamp_ms, "state": int(ev.state), "broker": ev.broker_id,
             "custom": _b64(ev.custom_metadata)}
    else:
        tp = ev.tp
        d = {"t": "partition_delete", **_tp_json(tp), "state": int(ev.state),
             "ts": ev.event_timestamp_ms, "broker": ev.broker_id}
    return str(tp).encode(), json.dumps(d, separators=(",", ":")).encode()


def decode_event(value: bytes) -> (RemoteLogSegmentMetadata | RemoteLogSegmentMetadataUpdate
                                   | RemotePartitionDeleteMetadata | None):
    """The event a record holds; None for one this version does not know (skipped)."""
    try:
        d = json.loads(value)
        tp = _tp_of(d)
        kind = d.get("t")
        if kind == "segment":
            return RemoteLogSegmentMetadata(
                RemoteLogSegmentId(tp, uuid.UUID(d["id"])), int(d["start"]), int(d["end"]),
                int(d["max_ts"]), int(d["broker"]), int(d["ts"]), int(d["size"]),
                tuple((int(e), int(o)) for e, o in d["epochs"]), S(int(d["state"])),
                _unb64(d.get("custom")), bool(d.get("txn", False)))
        if kind == "update":
            return RemoteLogSegmentMetadataUpdate(
                RemoteLogSegmentId(tp, uuid.UUID(d["id"])), int(d["ts"]), S(int(d["state"])),
                int(d["broker"]), _unb64(d.get("custom")))
        if kind == "partition_delete":
            return RemotePartitionDeleteMetadata(tp, RemotePartitionDeleteState(int(d["state"])),
                                                 int(d["ts"]), int(d["broker"]))
    except (ValueError, KeyError, TypeError) as e:
        log.warning("skipping an unreadable %s record: %s", TOPIC, e)
    return None


# ---- the in-memory state ---------------------------------------------------------------------


@dataclass
class _PartitionState:
    segments: dict[uuid.UUID, RemoteLogSegmentMetadata] = field(default_factory=dict)
    delete_state: RemotePartitionDeleteState | None = None
    # COPY_SEGMENT_FINISHED segments by (start, end): rebuilt lazily after a change
    _finished: list[RemoteLogSegmentMetadata] | None = None
    _starts: list[int] = field(default_factory=list)

    def finished(self) -> list[RemoteLogSegmentMetadata]:
        if self._finished is None:
            self._finished = sorted((m for m in self.segments.values()
                                     if m.state == S.COPY_SEGMENT_FINISHED),
                                    key=lambda m: (m.start_offset, m.end_offset))
            self._starts = [m.start_offset for m in self._finished]
        return self._finished


class RemoteLogMetadataCache:
    """The state the metadata events build, and every query on it. Pure (no I/O): the topic-backed
    manager below feeds it, tests and tools may feed it directly."""

    def __init__(self) -> None:
        self.partitions: dict[TopicIdPartition, _PartitionState] = {}
        # called with the partition after every change applied (caches invalidate on it)
        self.listeners: list[Callable[[TopicIdPartition], None]] = []

    # ---- applying events ----------------------------------------------------------------
    def apply(self, ev: RemoteLogSegmentMetadata | RemoteLogSegmentMetadataUpdate
              | RemotePartitionDeleteMetadata, notify: bool = True) -> bool:
        """Apply one event; False (nothing changed) for a duplicate or an invalid transition.
        `notify=False` (a replay at start) skips the listeners: the owner syncs once after."""
        if isinstance(ev, RemoteLogSegmentMetadata):
            st = self.partitions.setdefault(ev.tp, _PartitionState())
            if ev.id in st.segments:
                return False  # a replayed add: the later updates already apply
            if ev.state != S.COPY_SEGMENT_STARTED:
                log.warning("segment %s added in state %s (expected COPY_SEGMENT_STARTED)",
                            ev.id, ev.state.name)
            st.segments[ev.id] = ev
        elif isinstance(ev, RemoteLogSegmentMetadataUpdate):
            st = self.partitions.get(ev.segment_id.tp) or _PartitionState()
            cur = st.segments.get(ev.segment_id.id)
            if cur is None or not cur.state.can_become(ev.state):
                return False
            if ev.state == S.DELETE_SEGMENT_FINISHED:
                del st.segments[ev.segment_id.id]  # gone for good: nothing more to know
            else:
                st.segments[ev.segment_id.id] = cur.with_update(ev)
        else:
            if (ev.tp not in self.partitions
                    and ev.state == RemotePartitionDeleteState.DELETE_PARTITION_FINISHED):
                return False  # already gone
            st = self.partitions.setdefault(ev.tp, _PartitionState())
            if st.delete_state is not None and ev.state <= st.delete_state:
                return False
            st.delete_state = ev.state
            if ev.state == RemotePartitionDeleteState.DELETE_PARTITION_FINISHED:
                self.partitions.pop(ev.tp, None)
        st._finished = None
        if not notify:
            return True
        tp = ev.tp if not isinstance(ev, RemoteLogSegmentMetadataUpdate) else ev.segment_id.tp
        for cb in self.listeners:
            try:
                cb(tp)
            except Exception:
                log.exception("remote metadata listener failed")
        return True

    # ---- queries ------------------------------------------------------------------------
    def list_remote_log_segments(self, tp: TopicIdPartition,
                                 leader_epoch: int | None = None) -> list[RemoteLogSegmentMetadata]:
        """Every known segment of the partition in any state, by start offset (Kafka's
        listRemoteLogSegments); with `leader_epoch`, those holding records of that epoch."""
        st = self.partitions.get(tp)
        if st is None:
            return []
        out = sorted(st.segments.values(), key=lambda m: (m.start_offset, m.end_offset))
        if leader_epoch is not None:
            out = [m for m in out if leader_epoch in m.epochs_in()]
        return out

    def segments(self, tp: TopicIdPartition) -> list[RemoteLogSegmentMetadata]:
        """The readable (COPY_SEGMENT_FINISHED) segments, in offset order."""
        st = self.partitions.get(tp)
        return [] if st is None else list(st.finished())

    def segment_for_offset(self, tp: TopicIdPartition,
                           offset: int) -> RemoteLogSegmentMetadata | None:
        """The readable segment holding `offset`, else the first one after it (a compacted or
        deleted gap), else None."""
        st = self.partitions.get(tp)
        if st is None:
            return None
        fin = st.finished()
        i = bisect_right(st._starts, offset) - 1
        # overlapping segments (a leader change) : the one reaching furthest that holds it
        best = None
        j = i
        while j >= 0:
            m = fin[j]
            if m.end_offset >= offset and (best is None or m.end_offset > best.end_offset):
                best = m
            j -= 1
            if best is not None and j >= 0 and fin[j].end_offset < offset:
                break
        if best is not None:
            return best
        return fin[i + 1] if i + 1 < len(fin) else None

    def remote_log_segment_metadata(self, tp: TopicIdPartition, leader_epoch: int,
                                    offset: int) -> RemoteLogSegmentMetadata | None:
        """Kafka's remoteLogSegmentMetadata(tp, epoch, offset): the readable segment with records
        of `leader_epoch` that holds `offset`."""
        for m in self.segments(tp):
            if m.start_offset <= offset <= m.end_offset and leader_epoch in m.epochs_in():
                return m
        return None

    def segment_for_timestamp(self, tp: TopicIdPartition, timestamp: int,
                              from_offset: int = 0) -> RemoteLogSegmentMetadata | None:
        """The first readable segment (by offset, ending at or after `from_offset`) whose max
        timestamp is >= `timestamp`: where a ListOffsets by time starts scanning."""
        for m in self.segments(tp):
            if m.end_offset >= from_offset and m.max_timestamp_ms >= timestamp:
                return m
        return None

    def remote_log_start_offset(self, tp: TopicIdPartition) -> int:
        """The first offset in the remote tier; -1 when it holds nothing readable."""
        fin = self.segments(tp)
        return fin[0].start_offset if fin else -1

    def highest_offset(self, tp: TopicIdPartition) -> int:
        """The last offset (inclusive) copied to the remote tier; -1 when none."""
        fin = self.segments(tp)
        return max((m.end_offset for m in fin), default=-1)

    def remote_log_end_offset(self, tp: TopicIdPartition) -> int:
        """One past the last remote offset (exclusive, like a log end offset); -1 when none."""
        h = self.highest_offset(tp)
        return -1 if h < 0 else h + 1

    def highest_offset_for_epoch(self, tp: TopicIdPartition, leader_epoch: int) -> int:
        """Kafka's highestOffsetForEpoch: the last remote offset of records of `leader_epoch`
        (the segment's end when the epoch is its last one, else where the next epoch starts - 1);
        -1 when none."""
        best = -1
        for m in self.segments(tp):
            eps = m.segment_leader_epochs
            for k, (e, _start) in enumerate(eps):
                if e == leader_epoch:
                    end = eps[k + 1][1] - 1 if k + 1 < len(eps) else m.end_offset
                    best = max(best, end)
        return best

    def remote_log_size(self, tp: TopicIdPartition) -> int:
        """Bytes of the readable remote segments."""
        return sum(m.segment_size_in_bytes for m in self.segments(tp))

    def next_segment_with_txn_index(self, tp: TopicIdPartition,
                                    offset: int) -> RemoteLogSegmentMetadata | None:
        """The first readable segment ending at or after `offset` that has a transaction index
        (read_committed's aborted-transaction lookup across segments)."""
        for m in self.segments(tp):
            if m.end_offset >= offset and m.has_txn_index:
                return m
        return None

    def segments_in_state(self, tp: TopicIdPartition,
                          *states: RemoteLogSegmentState) -> list[RemoteLogSegmentMetadata]:
        return [m for m in self.list_remote_log_segments(tp) if m.state in states]

    def known_ids(self) -> set[uuid.UUID]:
        """Ids of every segment not yet DELETE_SEGMENT_FINISHED (orphan cleanup keeps these)."""
        return {i for st in self.partitions.values() for i in st.segments}

    def replays(self, tp: TopicIdPartition) -> bool:
        """Every event of `tp` reaches this cache (a plain cache: whoever feeds it decides)."""
        return True

    def delete_state(self, tp: TopicIdPartition) -> RemotePartitionDeleteState | None:
        st = self.partitions.get(tp)
        return None if st is None else st.delete_state

    def topic_partitions(self) -> list[TopicIdPartition]:
        return list(self.partitions)


# ---- the topic-backed manager -----------------------------------------------------------------

Event = RemoteLogSegmentMetadata | RemoteLogSegmentMetadataUpdate | RemotePartitionDeleteMetadata


class RemoteLogMetadataManager(RemoteLogMetadataCache):
    """The cache above, persisted in `__remote_log_metadata` through an InternalTopic-like
    object (`ensure()`, `append(partition, [(key, value)])`, `count()`) and a LogManager to
    replay and tail its local replicas. Writes wait until the record is replicated to the
    metadata partition's ISR (Kafka's RLMM waits for its consumer to read it back)."""

    def __init__(self, topic: Any, logs: Any, poll_s: float = 0.1) -> None:
        super().__init__()
        self.topic = topic
        self.logs = logs
        self.poll_s = poll_s
        self.applied: dict[int, int] = {}  # metadata partition -> next offset to apply
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._write_lock = asyncio.Lock()

    def partition_for(self, tp: TopicIdPartition) -> int:
        return metadata_partition(tp, self.topic.count())

    def replays(self, tp: TopicIdPartition) -> bool:
        """This broker holds a replica of `tp`'s metadata partition, so it learns the events other
        brokers write (without one it knows only its own writes)."""
        return self.logs.get(TOPIC, self.partition_for(tp)) is not None

    # ---- writes -------------------------------------------------------------------------
    async def publish(self, ev: Event) -> None:
        """Persist an event and apply it. Raises (ReplicationError, OSError) when it could not
        be written: the caller retries (nothing is applied then)."""
        key, value = encode_event(ev)
        tp = ev.tp if not isinstance(ev, RemoteLogSegmentMetadataUpdate) else ev.segment_id.tp
        async with self._write_lock:
            await self.topic.ensure()
            p = self.partition_for(tp)
            base = await self.topic.append(p, [(key, value)])
            lg = self.logs.get(TOPIC, p)
            if lg is not None and lg.end_offset > base:
                # fsynced before it counts: a FINISHED copy lets local retention delete the
                # segment, which must not outlive a power loss that takes the record
                await lg.flush()
            self.catch_up(p)  # everything before it, then it
            if self.applied.get(p, 0) <= base:
                self.apply(ev)

    async def add_remote_log_segment_metadata(self, meta: RemoteLogSegmentMetadata) -> None:
        if meta.state != S.COPY_SEGMENT_STARTED:
            raise ValueError("a new remote segment starts in COPY_SEGMENT_STARTED")
        await self.publish(meta)

    async def update_remote_log_segment_metadata(self,
                                                 u: RemoteLogSegmentMetadataUpdate) -> None:
        if u.state == S.COPY_SEGMENT_STARTED:
            raise ValueError("an update cannot go back to COPY_SEGMENT_STARTED")
        await self.publish(u)

    async def put_remote_partition_delete_metadata(self,
                                                   m: RemotePartitionDeleteMetadata) -> None:
        await self.publish(m)

    # ---- replay and tail ----------------------------------------------------------------
    def catch_up(self, partition: int | None = None, notify: bool = True) -> int:
        """Apply what the local replicas of the metadata topic hold beyond what was applied
        (all partitions, or one). Returns events applied."""
        n = 0
        parts = range(self.topic.count()) if partition is None else (partition,)
        for p in parts:
            lg = self.logs.get(TOPIC, p)
            if lg is None:
                continue
            off = max(self.applied.get(p, 0), lg.log_start_offset)
            upper = lg.high_watermark  # only what is committed
            while off < upper:
                try:
                    data = lg.read(off, 1 << 20, True, upper)
                except Exception:
                    break
                if not data:
                    break
                nxt = off
                for offset, value in _records(data, off):
                    if value is not None:
                        ev = decode_event(value)
                        if ev is not None and self.apply(ev, notify):
                            n += 1
                    nxt = offset + 1
                if nxt == off:
                    break
                off = nxt
            self.applied[p] = off
        return n

    def load(self) -> int:
        """Rebuild the state by replaying every local replica from its start."""
        self.partitions.clear()
        self.applied.clear()
        n = self.catch_up(notify=False)  # the owner syncs every partition once after
        self._ready.set()
        log.info("remote log metadata: %d events replayed, %d partitions with remote data", n,
                 len(self.partitions))
        return n

    def start(self) -> None:
        if not self._ready.is_set():
            self.load()
        if self._task is None:
            self._task = asyncio.create_task(self._tail())

    async def _tail(self) -> None:
        """Follow records other brokers write (they arrive by replication)."""
        while True:
            await asyncio.sleep(self.poll_s)
            try:
                self.catch_up()
            except Exception:
                log.exception("remote log metadata: tailing %s failed", TOPIC)

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    async def wait_ready(self) -> None:
        await self._ready.wait()

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None


def _records(data: bytes, start: int) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every data record at or after `start` in whole batches."""
    from samsa.protocol.batch import read_header
    from samsa.protocol.records import decode_batch, iter_batches

    out: list[tuple[int, bytes | None]] = []
    for pos, _size in iter_batches(data):
        h = read_header(data, pos)
        if h.last_offset < start:
            continue
        if h.is_control:
            out.append((h.last_offset, None))
            continue
        for r in decode_batch(data, pos):
            if r.offset >= start:
                out.append((r.offset, r.value))
        if out and out[-1][0] < h.last_offset:
            out.append((h.last_offset, None))  # compacted away: still past it
    return out
