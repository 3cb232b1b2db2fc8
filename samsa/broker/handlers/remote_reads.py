"""The read side of tiered storage in the request handlers: Fetch of offsets only the remote tier
holds, ListOffsets across tiers (EARLIEST = the remote start, EARLIEST_LOCAL = the local start,
LATEST_TIERED, by timestamp, MAX_TIMESTAMP), DeleteRecords across tiers, remote sizes for
DescribeLogDirs.

Store I/O runs on the remote log reader's threads (samsa.storage.remote.reader); the handlers only
await it, bounded: a Fetch waits at most `remote.fetch.max.wait.ms` (then answers without that
partition's records, as Kafka does, and the consumer fetches again), a ListOffsets at most its v10
timeout or `remote.list.offsets.request.timeout.ms`. A store failure (unreachable, errors, a
corrupt object) is answered with KAFKA_STORAGE_ERROR, retriable: clients retry, nothing hangs.

Kafka reads remote data for one partition per Fetch; Samsa reads up to MAX_REMOTE_PARTITIONS at
once (each sized for the room before the others, trimmed to whole batches to the room actually left).
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from samsa.protocol.batch import HEADER_SIZE, LOG_OVERHEAD
from samsa.protocol.errors import Err
from samsa.security.quotas import Rate
from samsa.storage.remote.reader import (
    ReaderBusy,
    ReaderConfig,
    RemoteLogReader,
    RemoteRead,
    RemoteReadError,
)
from samsa.storage.remote.rsm import RemoteLogSegmentMetadata, TopicIdPartition

if TYPE_CHECKING:
    from samsa.broker.broker import Broker
    from samsa.storage.log import PartitionLog

log = logging.getLogger("samsa.remote.reads")

OFFSET_MOVED_TO_TIERED_STORAGE = 109  # Kafka's error code (KIP-405): a follower below local start
REPLICA_NOT_AVAILABLE = 9  # Kafka's answer while the remote log metadata is not replayed yet
_BATCH_LEN = struct.Struct(">i")
_BATCH_PREFIX = struct.Struct(">q")
FETCH_MAX_WAIT_MS = 500  # Kafka's remote.fetch.max.wait.ms default
LIST_OFFSETS_TIMEOUT_MS = 30000  # Kafka's remote.list.offsets.request.timeout.ms default


@dataclass(frozen=True)
class Tier:
    """A partition with remote storage on this broker: the manager and its remote id."""

    rlm: Any
    tp: TopicIdPartition
    get: Any  # the broker's configuration lookup

    @property
    def rlmm(self) -> Any:
        return self.rlm.rlmm


def tier(broker: Broker, topic: str, partition: int, lg: PartitionLog) -> Tier | None:
    """The tiered-storage handle of a partition; None when the broker or topic has none. A topic
    whose remote storage was turned off keeps what it copied readable (until
    remote.log.delete.on.disable removes it). Per partition, O(1): never a scan of all logs."""
    rlm = getattr(broker, "remote_log_manager", None)
    if rlm is None:
        return None
    if not lg.config.remote_storage_enable and getattr(lg, "remote_start_offset", -1) < 0:
        return None
    try:
        tp = rlm.tp_for(topic, partition)
    except Exception:
        log.exception("tiered storage state of %s-%d", topic, partition)
        return None
    return None if tp is None else Tier(rlm, tp, broker.config.get)


def reader(t: Tier) -> RemoteLogReader:
    """The manager's remote log reader, made on first use from the broker's configuration (the
    manager closes it when it stops)."""
    rlm = t.rlm
    r = getattr(rlm, "reader", None)
    if r is None:
        r = RemoteLogReader(rlm.rsm, ReaderConfig.from_props(t.get))
        rlm.reader = r
    return r  # type: ignore[no-any-return]


def _config_ms(t: Tier, name: str, default: int) -> int:
    v = t.get(name)
    try:
        return int(v) if v not in (None, "") else default
    except ValueError:
        return default


def shown_start(lg: PartitionLog) -> int:
    """The log start offset a Fetch reports: across tiers when the log knows one."""
    g = getattr(lg, "global_log_start_offset", None)
    start = lg.log_start_offset
    return start if g is None or g < 0 else min(int(g), start)


def log_start(t: Tier | None, lg: PartitionLog) -> int:
    """The log start offset across tiers (Kafka's logStartOffset): the local one without tiers."""
    if t is None:
        return lg.log_start_offset
    g = getattr(lg, "global_log_start_offset", None)
    if g is None:
        r = t.rlmm.remote_log_start_offset(t.tp)
        g = r if r >= 0 else lg.log_start_offset
    return min(int(g), lg.log_start_offset)


class FetchQuota:
    """remote.log.manager.fetch.max.bytes.per.second over this broker's remote reads, measured
    as Kafka's RLMQuotaManager does (a windowed rate: remote.log.manager.fetch.quota.window.num
    windows of .window.size.seconds). While it is exceeded, remote-only partitions are answered
    without records and without an error (Kafka: the remote read is skipped). Event loop only."""

    def __init__(self, get: Any) -> None:
        def num(name: str, default: float) -> float:
            v = get(name)
            return float(v) if v not in (None, "") else default
        self.bound = num("remote.log.manager.fetch.max.bytes.per.second", 2.0**63 - 1)
        self.rate = Rate(int(num("remote.log.manager.fetch.quota.window.num", 11)),
                         num("remote.log.manager.fetch.quota.window.size.seconds", 1))
        self.unlimited = self.bound >= 2.0**62

    def exceeded(self) -> bool:
        return not self.unlimited and self.rate.measure(time.monotonic()) > self.bound

    def record(self, n: int) -> None:
        if not self.unlimited:
            self.rate.record(n, time.monotonic())


def fetch_quota(t: Tier) -> FetchQuota:
    q = getattr(t.rlm, "fetch_quota", None)
    if q is None:
        q = FetchQuota(t.get)
        t.rlm.fetch_quota = q
    return q  # type: ignore[no-any-return]


# ---- Fetch -------------------------------------------------------------------------------------
@dataclass
class RemoteWant:
    key: tuple[str, int, int]  # topic, partition, fetch offset
    tier: Tier
    offset: int
    max_bytes: int
    whole_first: bool
    upper: int | None
    committed: bool


@dataclass
class RemoteFetchState:
    """One Fetch's remote part: the partitions to read from the store this time (at most
    MAX_REMOTE_PARTITIONS, read at once) and what came back (RemoteRead, an error code, or None:
    not back within remote.fetch.max.wait.ms)."""

    wants: dict[tuple[str, int, int], RemoteWant] = field(default_factory=dict)
    results: dict[tuple[str, int, int], RemoteRead | int | None] = field(default_factory=dict)
    ran: bool = False  # one round of remote reads per Fetch: later passes add no more

    @property
    def pending(self) -> bool:
        return any(k not in self.results for k in self.wants)


# Kafka reads remote data for one partition per Fetch (a documented limitation): the others wait
# for later Fetches, and a consumer of many tiered partitions starves all but the first in its
# request order. Samsa reads up to this many at once, each on its own reader thread.
MAX_REMOTE_PARTITIONS = 8


def fetch_below_local(broker: Broker, st: RemoteFetchState | None, name: str, idx: int,
                      lg: PartitionLog, offset: int, limit: int, whole_first: bool,
                      upper: int | None, committed: bool, follower: bool
                      ) -> tuple[int, RemoteRead | None, int] | None:
    """A fetch offset below the local log start: None when the remote tier does not hold it
    (the caller answers OFFSET_OUT_OF_RANGE); else (error code, records or None, log start
    offset to report). A follower is told OFFSET_MOVED_TO_TIERED_STORAGE (it rebuilds its
    state from the remote tier, KIP-405). A consumer gets the result of the remote read, or
    nothing yet (the read is started by `run` and the fetch re-read when it is back)."""
    t = tier(broker, name, idx, lg)
    if t is None:
        return None
    start = log_start(t, lg)
    if not getattr(t.rlmm, "ready", True):  # metadata not replayed yet (Kafka: retriable)
        return REPLICA_NOT_AVAILABLE, None, start
    if offset < start or t.rlmm.remote_log_end_offset(t.tp) <= offset:
        return None
    if follower:
        return OFFSET_MOVED_TO_TIERED_STORAGE, None, start
    if st is None:
        return 0, None, start
    key = (name, idx, offset)
    if key in st.results:
        got = st.results[key]
        if isinstance(got, int):
            return got, None, start
        if got is not None:
            got = fit(got, limit, whole_first)
        return 0, got, start
    if limit <= 0 and not whole_first:
        return 0, None, start  # no room left in this response (KIP-74: only the first is whole)
    if key not in st.wants and len(st.wants) < MAX_REMOTE_PARTITIONS and not st.ran \
            and not fetch_quota(t).exceeded():
        st.wants[key] = RemoteWant(key, t, offset, limit, whole_first, upper, committed)
    return 0, None, start


def fit(got: RemoteRead, limit: int, whole_first: bool) -> RemoteRead | None:
    """What of a remote read fits the room left in the response (the reads run at once, each
    sized for the room before the others): whole batches only, the first whole when it is the
    response's first data (KIP-74); None when nothing fits."""
    data = got.records
    if len(data) <= limit:
        return got
    n = 0
    last = -1
    mv = memoryview(data)
    while n + HEADER_SIZE <= len(data):
        size = _BATCH_LEN.unpack_from(mv, n + 8)[0] + LOG_OVERHEAD
        if n + size > limit and not (n == 0 and whole_first):
            break
        last = _BATCH_PREFIX.unpack_from(mv, n)[0] + _BATCH_LEN.unpack_from(mv, n + 23)[0]
        n += size
    if n == 0:
        return None
    return RemoteRead(bytes(mv[:n]), last + 1, got.aborted)


def _read_blocking(r: RemoteLogReader, w: RemoteWant,
                   metas: list[RemoteLogSegmentMetadata]) -> RemoteRead:
    """On a reader thread: read from the segment holding the offset; past its last batch (a gap),
    from the next one."""
    for k, meta in enumerate(metas):
        nxt = metas[k + 1] if k + 1 < len(metas) else None
        got = r.read(meta, max(w.offset, meta.start_offset), w.max_bytes, w.whole_first, w.upper,
                     w.committed, nxt)
        if got.records:
            return got
    return RemoteRead(b"", w.offset, [] if w.committed else None)


def _segments_from(rlmm: Any, tp: TopicIdPartition, offset: int) -> list[RemoteLogSegmentMetadata]:
    first = rlmm.segment_for_offset(tp, offset)
    if first is None:
        return []
    metas = [first]
    while len(metas) < 3:
        nxt = rlmm.segment_for_offset(tp, metas[-1].end_offset + 1)
        if nxt is None or nxt.id == metas[-1].id:
            break
        metas.append(nxt)
    return metas


async def run(broker: Broker, st: RemoteFetchState) -> None:
    """Read the wanted partitions from the store at once, waiting at most
    remote.fetch.max.wait.ms; each gets its records, an error code, or None (not back in time:
    answered without records, the read goes on and warms the cache for the next Fetch)."""
    st.ran = True
    futs: dict[tuple[str, int, int], asyncio.Future[RemoteRead]] = {}
    wait_ms = FETCH_MAX_WAIT_MS
    for key, w in st.wants.items():
        if key in st.results:
            continue
        metas = _segments_from(w.tier.rlmm, w.tier.tp, w.offset)
        if not metas:
            st.results[key] = Err.OFFSET_OUT_OF_RANGE
            continue
        r = reader(w.tier)
        wait_ms = _config_ms(w.tier, "remote.fetch.max.wait.ms", FETCH_MAX_WAIT_MS)
        try:
            futs[key] = asyncio.wrap_future(r.submit(_read_blocking, r, w, metas))
        except ReaderBusy as e:
            # the first one refused is an error (the store is that far behind); the rest wait
            log.warning("remote fetch of %s at %d refused: %s", w.tier.tp, w.offset, e)
            st.results[key] = Err.KAFKA_STORAGE_ERROR if not futs else None
    if futs:
        await asyncio.wait(futs.values(), timeout=wait_ms / 1000)
    for key, fut in futs.items():
        w = st.wants[key]
        if not fut.done():
            fut.cancel()  # a read not started yet is dropped; one under way finishes
            st.results[key] = None
            continue
        exc = fut.exception()
        if exc is None:
            got = fut.result()
            st.results[key] = got
            fetch_quota(w.tier).record(len(got.records))
        else:
            if isinstance(exc, RemoteReadError):
                log.error("remote fetch of %s at offset %d failed: %s", w.tier.tp, w.offset, exc)
            else:
                log.error("remote fetch of %s at offset %d failed", w.tier.tp, w.offset,
                          exc_info=exc)
            st.results[key] = Err.KAFKA_STORAGE_ERROR


# ---- ListOffsets --------------------------------------------------------------------------------
def list_offsets_timeout_ms(t: Tier, req: Any, version: int) -> int:
    given = getattr(req, "timeout", None) if version >= 10 else None
    if given is not None:
        ms = int(given.total_seconds() * 1000) if hasattr(given, "total_seconds") else int(given)
        if ms > 0:
            return ms
    return _config_ms(t, "remote.list.offsets.request.timeout.ms", LIST_OFFSETS_TIMEOUT_MS)


def _find_by_timestamp(r: RemoteLogReader, metas: list[RemoteLogSegmentMetadata], ts: int,
                       start: int) -> tuple[int, int] | None:
    for meta in metas:
        found = r.offset_for_timestamp(meta, ts, start)
        if found is not None:
            return found
    return None


def _find_max(r: RemoteLogReader, metas: list[RemoteLogSegmentMetadata], start: int,
              local_max_ts: int) -> tuple[int, int] | None:
    """The record with the largest timestamp at or after `start` in these segments (by their
    metadata's max timestamp, largest first), if it is at least the local log's largest."""
    best: tuple[int, int] | None = None
    for meta in metas:
        if best is not None and meta.max_timestamp_ms < best[1]:
            break  # no record of it can beat what was found
        found = r.max_timestamp(meta, start)
        if found is not None and (best is None or found[1] > best[1]
                                  or (found[1] == best[1] and found[0] < best[0])):
            best = found
    return None if best is None or best[1] < local_max_ts else best


def remote_timestamp_lookup(t: Tier, lg: PartitionLog, ts: int) -> Any:
    """A blocking callable finding the first offset with timestamp >= ts in the remote tier, or
    None when no remote segment can hold it (then the local log answers)."""
    start = log_start(t, lg)
    metas = [m for m in t.rlmm.segments(t.tp)
             if m.end_offset >= start and m.max_timestamp_ms >= ts]
    if not metas:
        return None
    r = reader(t)
    return lambda: _find_by_timestamp(r, metas, ts, start)


def remote_max_timestamp_lookup(t: Tier, local_max_ts: int,
                                lg: PartitionLog | None = None) -> Any:
    """A blocking callable for MAX_TIMESTAMP when a remote segment may hold a timestamp at least
    as large as every local one (the earliest such record wins; records below the log start
    across tiers do not count: DeleteRecords may cut a remote segment); None otherwise."""
    start = log_start(t, lg) if lg is not None else 0
    metas = sorted((m for m in t.rlmm.segments(t.tp)
                    if m.max_timestamp_ms >= 0 and m.end_offset >= start
                    and m.max_timestamp_ms >= local_max_ts),
                   key=lambda m: (-m.max_timestamp_ms, m.start_offset))
    if not metas:
        return None
    r = reader(t)
    return lambda: _find_max(r, metas, start, local_max_ts)


async def run_lookups(t: Tier, lookups: list[tuple[dict[str, Any], Any, Any]],
                      timeout_ms: int) -> None:
    """Run remote ListOffsets lookups on the reader threads; each (result dict, blocking lookup,
    local fallback) fills its result: found remotely, else the local fallback's answer;
    REQUEST_TIMED_OUT past the timeout, KAFKA_STORAGE_ERROR when the store fails."""
    r = reader(t)
    futs: list[Any] = []
    for res, fn, _fallback in lookups:
        try:
            futs.append(asyncio.wrap_future(r.submit(fn)))
        except ReaderBusy:
            res["error_code"] = Err.KAFKA_STORAGE_ERROR
            futs.append(None)
    live = [f for f in futs if f is not None]
    if live:
        await asyncio.wait(live, timeout=timeout_ms / 1000)
    for (res, _fn, fallback), fut in zip(lookups, futs, strict=True):
        if fut is None:
            continue
        if not fut.done():
            fut.cancel()
            res["error_code"] = Err.REQUEST_TIMED_OUT
            continue
        e = fut.exception()
        if e is not None:
            log.error("remote ListOffsets lookup failed: %s", e)
            res["error_code"] = Err.KAFKA_STORAGE_ERROR
            continue
        found = fut.result()
        if found is None:
            found = fallback()
        if found is not None:
            res["offset"], res["timestamp"] = found


# ---- DescribeLogDirs -----------------------------------------------------------------------------
def remote_size_or_none(broker: Broker, topic: str, partition: int,
                        lg: PartitionLog) -> int | None:
    """Bytes of the partition's readable remote segments; None when it is not tiered."""
    t = tier(broker, topic, partition, lg)
    if t is None:
        return None
    try:
        return int(t.rlmm.remote_log_size(t.tp))
    except Exception:
        log.exception("remote size of %s-%d", topic, partition)
        return 0


# ---- ListOffsets LATEST_TIERED, DeleteRecords ----------------------------------------------------
def latest_tiered(t: Tier | None) -> tuple[int, int]:
    """(highest offset in the remote tier, its leader epoch) for KIP-1005's LATEST_TIERED; (-1, -1)
    when nothing was copied (what Kafka answers without tiered storage too)."""
    if t is None:
        return -1, -1
    segs = t.rlmm.segments(t.tp)
    if not segs:
        return -1, -1
    top = max(segs, key=lambda m: m.end_offset)
    epoch = -1
    for e, start in top.segment_leader_epochs:
        if start <= top.end_offset:
            epoch = e
    return top.end_offset, epoch


def delete_records(lg: PartitionLog, offset: int) -> int:
    """DeleteRecords on a tiered partition: the start across tiers moves to `offset` (persisted;
    the remote log manager deletes the remote segments wholly below it), and the local log's
    start too when `offset` is past it. Returns the new start across tiers (the low watermark)."""
    from samsa.storage.log import OffsetOutOfRange

    hw = lg.high_watermark
    if offset == -1:
        offset = hw
    if offset < 0 or offset > hw:
        raise OffsetOutOfRange(offset)
    if offset > lg.log_start_offset:
        lg.delete_records(offset)
    setter = getattr(lg, "set_global_log_start_offset", None)
    if setter is not None and offset > shown_start(lg):
        setter(offset)
    return shown_start(lg)
