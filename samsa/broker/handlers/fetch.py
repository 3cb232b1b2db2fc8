"""Fetch: byte ranges of segment files up to the high watermark, long-polling until min_bytes are
available or max_wait passes. Waits are woken by appends (PartitionLog.waiters), never by sleeps.

Record data travels as file slices (storage.file_slice) through the hand-written encoder
(protocol.fetch_response); the server sends large slices with sendfile. A partition already at its
bound (high watermark, or last stable offset for read_committed) is answered without touching its
files, so a long-poll's wake-ups cost little per idle partition.

Incremental fetch sessions (KIP-227) are kept in broker.fetch_sessions (see fetch_sessions.py).
"""

from __future__ import annotations

import asyncio
import functools
import time
from typing import TYPE_CHECKING, Any

from samsa.broker import authz
from samsa.broker.fetch_sessions import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    FetchSession,
    PartitionState,
)
from samsa.cluster.replication.truncation import divergence, end_offset_for
from samsa.protocol.errors import Err
from samsa.protocol.fetch_response import FetchChunks, FetchPartition, encode_fetch_response
from samsa.security import authorizer as az
from samsa.security.quotas import fetch_sensor
from samsa.storage.file_slice import FileSlice
from samsa.storage.log import OffsetOutOfRange, PartitionLog

from . import remote_reads
from .leader_hints import LeaderHints

if TYPE_CHECKING:
    from samsa.broker.broker import Broker
    from samsa.broker.server import RequestContext

_Topic = tuple[Any, list[FetchPartition]]  # (topic name, or topic id from v13; its partitions)


def _resolve(broker: Broker, ctx: RequestContext, ft: Any) -> tuple[str | None, Any]:
    """(topic name, response topic key) for a request topic (by id from v13)."""
    if ctx.version >= 13:
        t = broker.controller.image.by_id.get(ft.topic_id)
        return (t.name if t else None), ft.topic_id
    return ft.topic, ft.topic


def _replica_of(ctx: RequestContext, req: Any) -> tuple[int, int]:
    """(replica id, broker epoch) of a follower's Fetch; (-1, -1) for a consumer's."""
    if ctx.version >= 15:
        return req.replica_state.replica_id, req.replica_state.replica_epoch
    return getattr(req, "replica_id", -1), -1


def _epoch_error(fp: Any, epoch: int) -> int:
    """Kafka's check of a request's current_leader_epoch (-1: not given) against the leader's."""
    current = getattr(fp, "current_leader_epoch", -1)
    if current < 0 or current == epoch:
        return 0
    return Err.FENCED_LEADER_EPOCH if current < epoch else Err.UNKNOWN_LEADER_EPOCH


def _read_all(broker: Broker, ctx: RequestContext, req: Any,
              plan: list[tuple[Any, str | None, list[Any]]],
              hints: LeaderHints, quota_cap: float | None = None,
              denied: frozenset[str] = frozenset(),
              remote: remote_reads.RemoteFetchState | None = None
              ) -> tuple[list[_Topic], int, bool, list[PartitionLog]]:
    """One pass over the plan: file slices (not bytes) for the record data. A follower (replica
    id >= 0) reads up to the log end offset and its fetch offset moves the leader's view of it;
    a consumer reads up to the high watermark. Offsets below the local log start of a tiered
    partition go to `remote` (tiered storage: remote_reads)."""
    replica, replica_epoch = _replica_of(ctx, req)
    replicas = broker.replicas
    # the consumer's rack (KIP-392, v11+): None for older clients, which read leaders only
    rack: str | None = getattr(req, "rack_id", None) if ctx.version >= 11 else None
    remaining = req.max_bytes if req.max_bytes > 0 else 2**31 - 1
    if quota_cap is not None:  # Kafka: no more than the consumer quota allows in its window
        remaining = max(min(remaining, int(quota_cap)), 1)
    total = 0
    errors = False
    read_committed = req.isolation_level == 1
    unknown = Err.UNKNOWN_TOPIC_ID if ctx.version >= 13 else Err.UNKNOWN_TOPIC_OR_PARTITION
    logs: list[PartitionLog] = []
    responses: list[_Topic] = []
    tiered = getattr(broker, "remote_log_manager", None) is not None
    for key, name, parts in plan:
        out = []
        if name in denied:  # ACLs (issue 17)
            responses.append((key, [FetchPartition(fp.partition, Err.TOPIC_AUTHORIZATION_FAILED,
                                                   -1, -1, -1, None, b"") for fp in parts]))
            errors = True
            continue
        for fp in parts:
            idx = fp.partition
            lg = broker.partition_log(name, idx) if name is not None else None
            epoch_here = -1 if lg is None else lg.leader_epoch
            if lg is None and name is not None and replica < 0 and rack is not None:
                f = replicas.following.get((name, idx))
                if f is not None:  # KIP-392: a consumer may read a follower, up to its HW
                    lg, epoch_here = f.log, f.leader_epoch
            if lg is None:
                code = unknown if name is None else broker.partition_error(name, idx)
                if code == Err.UNKNOWN_TOPIC_OR_PARTITION:
                    code = unknown
                leader = hints.current_leader(name, idx) \
                    if name is not None and code == Err.NOT_LEADER_OR_FOLLOWER \
                    and ctx.version >= 16 else None
                out.append(FetchPartition(idx, code, -1, -1, -1, None, b"",
                                          current_leader=leader))
                errors = True
                continue
            lead = replicas.leadership(name, idx)  # type: ignore[arg-type]
            code = _epoch_error(fp, epoch_here)
            if replica >= 0 and (lead is None or replica not in lead.state.replicas):
                code = Err.NOT_LEADER_OR_FOLLOWER  # Kafka: not one of the assigned replicas
            if code:
                out.append(FetchPartition(idx, code, -1, -1, -1, None, b""))
                errors = True
                continue
            if lead is not None and rack and replica < 0:
                preferred = replicas.preferred_read_replica(lead, rack, fp.fetch_offset)
                if preferred >= 0:  # KIP-392: read there instead (no records from here)
                    out.append(FetchPartition(idx, 0, lg.high_watermark, lg.last_stable_offset,
                                              lg.log_start_offset, None, b"",
                                              preferred_read_replica=preferred))
                    errors = True  # answered at once
                    continue
            logs.append(lg)
            hw = lg.high_watermark
            lso = lg.last_stable_offset
            start = lg.log_start_offset
            # tiered storage: clients are told the start across tiers (Kafka's logStartOffset);
            # followers only what this leader knows for sure, which they keep (a failover must
            # not undo DeleteRecords or remote retention inside the remote tier)
            shown = start if not tiered else (remote_reads.replica_start(lg) if replica >= 0
                                               else remote_reads.shown_start(lg))
            offset = fp.fetch_offset
            upper: int | None = lso if read_committed else hw
            throttled = False
            if replica >= 0 and lead is not None:
                upper = lg.end_offset  # a follower reads to the log end
                div = divergence(functools.partial(end_offset_for, lg),
                                 getattr(fp, "last_fetched_epoch", -1), offset)
                if div is not None:
                    out.append(FetchPartition(idx, 0, hw, lso, shown, None, b"", diverging=div))
                    errors = True  # answered at once: the follower truncates first
                    continue
                if start <= offset <= lg.end_offset:
                    replicas.on_follower_fetch(lead, replica, offset, replica_epoch)
                    hw, lso = lg.high_watermark, lg.last_stable_offset
                throttled = replicas.leader_throttled(lead, replica)
                if offset == lg.end_offset or (throttled and replicas.leader_quota.exceeded()):
                    out.append(FetchPartition(idx, 0, hw, lso, shown, None, b""))
                    continue
            elif offset == upper and offset >= start:
                # caught up (the usual long-poll wake-up): nothing to read, no file access
                out.append(FetchPartition(idx, 0, hw, lso, shown, [] if read_committed else None,
                                          b""))
                continue
            elif hw < offset <= lg.end_offset:
                # between the high watermark and the log end: valid, nothing to give yet
                out.append(FetchPartition(idx, 0, hw, lso, shown, [] if read_committed else None,
                                          b""))
                continue
            limit = min(fp.partition_max_bytes, remaining)
            if offset < start and tiered and name is not None:  # tiered storage (issue 19)
                below = remote_reads.fetch_below_local(
                    broker, remote, name, idx, lg, offset, limit if limit > 0 or total == 0
                    else 0, total == 0, upper, read_committed, replica >= 0 and lead is not None)
                if below is not None:
                    code, got, shown = below
                    data = got.records if got is not None else b""
                    total += len(data)
                    remaining -= len(data)
                    errors = errors or code != 0
                    out.append(FetchPartition(
                        idx, code, hw, lso, shown,
                        (got.aborted if got is not None and got.aborted is not None else [])
                        if read_committed else None, data))
                    continue
            aborted = None
            if read_committed:
                aborted = [(a.producer_id, a.first_offset)
                           for a in lg.producers.aborted_between(offset, lso)]
            error = 0
            records: FileSlice | bytes = b""
            if limit > 0 or total == 0:
                try:
                    found = lg.read_slice(offset, limit, whole_first=(total == 0),
                                          upper=upper)
                except OffsetOutOfRange:
                    error = Err.OFFSET_OUT_OF_RANGE
                    errors = True
                    found = None
                if found is not None:
                    records = found
                    total += found.length
                    remaining -= found.length
                    if throttled:
                        replicas.leader_quota.record(found.length)
            out.append(FetchPartition(idx, error, hw, lso, shown, aborted, records))
        responses.append((key, out))
    return responses, total, errors, logs


def _release(responses: list[_Topic]) -> None:
    """Unpin the file slices of a response that will not be sent."""
    for _key, parts in responses:
        for p in parts:
            if isinstance(p.records, FileSlice):
                p.records.release()


async def fetch(broker: Broker, ctx: RequestContext, req: Any) -> FetchChunks:
    session_id = getattr(req, "session_id", 0)
    epoch = getattr(req, "session_epoch", FINAL_EPOCH)
    cache = broker.fetch_sessions
    session: FetchSession | None = None
    if ctx.version >= 7 and getattr(req.replica_state if ctx.version >= 15 else req, "replica_id",
                                    -1) < 0:
        if session_id == INVALID_SESSION_ID:
            if epoch == INITIAL_EPOCH:
                session = cache.create()
        elif epoch == FINAL_EPOCH:
            cache.remove(session_id)
        else:
            session = cache.get(session_id)
            if session is None:
                return encode_fetch_response(ctx.version, ctx.correlation_id, [],
                                             error_code=Err.FETCH_SESSION_ID_NOT_FOUND)
            if epoch != session.epoch:
                return encode_fetch_response(ctx.version, ctx.correlation_id, [],
                                             error_code=Err.INVALID_FETCH_SESSION_EPOCH)
    incremental = session is not None and session_id != INVALID_SESSION_ID
    plan = _plan(broker, ctx, req, session)
    if session is not None and incremental:  # a new session already expects epoch 1
        session.epoch = session.epoch + 1 if session.epoch < 2**31 - 1 else 1
    max_wait_ms = req.max_wait.total_seconds() * 1000
    deadline = time.monotonic() + max_wait_ms / 1000
    loop = asyncio.get_running_loop()
    hints = LeaderHints(broker, ctx)
    denied = _denied(ctx, req, plan) if authz.enabled(ctx) else frozenset()
    quota = fetch_sensor(broker.quotas, ctx) if _replica_of(ctx, req)[0] < 0 else None
    cap = broker.quotas.max_in_window(quota) if quota is not None else None
    # tiered storage (issue 19): a consumer's offsets below a local log start are read from the
    # remote tier on reader threads, then the pass is made again with what came back
    remote = remote_reads.RemoteFetchState() if getattr(
        broker, "remote_log_manager", None) is not None and _replica_of(ctx, req)[0] < 0 else None
    while True:
        responses, total, errors, logs = _read_all(broker, ctx, req, plan, hints, cap, denied,
                                                   remote)
        if remote is not None and remote.pending:
            _release(responses)
            await remote_reads.run(broker, remote)
            continue
        left = deadline - time.monotonic()
        if (total >= req.min_bytes or errors or left <= 0 or not logs or ctx.conn.closed
                or (remote is not None and remote.results)):
            if (quota is not None or ctx.throttle_ms) and _throttled(broker, ctx, quota, total):
                # Kafka: a throttled fetch is answered empty, its bytes not charged
                _release(responses)
                sid = session.id if session is not None else 0
                if session is not None and not incremental:
                    cache.remove(session.id)
                    sid = 0
                return encode_fetch_response(ctx.version, ctx.correlation_id, [],
                                             session_id=sid, throttle_time_ms=ctx.throttle_ms)
            if session is not None:
                responses = _session_filter(session, responses, incremental)
            # ops-metrics: BytesOut / fetch counts per topic, once per response
            image_topics = broker.node.image.topics
            broker.metrics.fetched({key: name for key, name, _ in plan if name in image_topics},
                                   responses, _replica_of(ctx, req)[0] >= 0)
            return encode_fetch_response(ctx.version, ctx.correlation_id, responses,
                                         session_id=session.id if session is not None else 0,
                                         node_endpoints=hints.node_endpoints())
        _release(responses)  # re-read after the wait: the data may have grown
        # one future for all partitions (an append to any of them, or the deadline, resolves it)
        wake: asyncio.Future[None] = loop.create_future()
        for lg in logs:
            lg.waiters.append(wake)
        timer = loop.call_later(left, _resolve_wake, wake)
        try:
            await wake
        finally:
            timer.cancel()
            for lg in logs:
                if wake in lg.waiters:
                    lg.waiters = [w for w in lg.waiters if not w.done()]


def _denied(ctx: RequestContext, req: Any,
            plan: list[tuple[Any, str | None, list[Any]]]) -> frozenset[str]:
    """Topics this fetch may not read: a follower needs CLUSTER_ACTION on the cluster (else every
    topic is denied, as Kafka), a consumer READ on each topic."""
    names = {name for _, name, _ in plan if name is not None}
    if _replica_of(ctx, req)[0] >= 0:
        return frozenset() if authz.cluster(ctx, az.OP_CLUSTER_ACTION) else frozenset(names)
    return frozenset(n for n in names if not authz.topic(ctx, az.OP_READ, n))
def _throttled(broker: Broker, ctx: RequestContext, quota: Any, size: int) -> bool:
    """Charge a consumer's response bytes (Kafka's fetch quota); True, with ctx.throttle_ms set,
    when the consumer or request quota throttles it (the bytes then uncharged)."""
    q = broker.quotas
    ms = q.record(quota, size) if quota is not None else 0
    if ms <= 0 and ctx.throttle_ms <= 0:
        return False
    if quota is not None:
        q.unrecord(quota, size)
    ctx.throttle_ms = max(ctx.throttle_ms, ms)
    return True


def _resolve_wake(wake: asyncio.Future[None]) -> None:
    if not wake.done():
        wake.set_result(None)


def _plan(broker: Broker, ctx: RequestContext, req: Any,
          session: FetchSession | None) -> list[tuple[Any, str | None, list[Any]]]:
    """(response topic key, topic name, partition requests) to read; with a session, the request's
    partitions update the session's and the whole session is read."""
    if session is None:
        return [(key, name, list(ft.partitions))
                for ft in req.topics for name, key in [_resolve(broker, ctx, ft)]]
    for ft in req.topics:
        key = ft.topic_id if ctx.version >= 13 else ft.topic
        for fp in ft.partitions:
            st = session.partitions.get((key, fp.partition))
            if st is None:
                session.partitions[(key, fp.partition)] = PartitionState(fp)
            else:
                st.request = fp
    for forgotten in getattr(req, "forgotten_topics_data", ()) or ():
        key = forgotten.topic_id if ctx.version >= 13 else forgotten.topic
        for p in forgotten.partitions:
            session.partitions.pop((key, p), None)
    grouped: dict[Any, list[Any]] = {}
    for (key, _p), st in session.partitions.items():
        grouped.setdefault(key, []).append(st.request)
    image = broker.controller.image
    plan = []
    for key, parts in grouped.items():
        if ctx.version >= 13:
            t = image.by_id.get(key)
            plan.append((key, t.name if t else None, parts))
        else:
            plan.append((key, key, parts))
    return plan


def _session_filter(session: FetchSession, responses: list[_Topic],
                    incremental: bool) -> list[_Topic]:
    out = []
    for key, parts in responses:
        keep = []
        for p in parts:
            st = session.partitions.get((key, p.index))
            news = (not incremental or p.records_size > 0 or p.error_code != 0 or st is None
                    or st.last_hw != p.high_watermark
                    or st.last_log_start != p.log_start_offset)
            if st is not None:
                st.last_hw, st.last_log_start = p.high_watermark, p.log_start_offset
            if news:
                keep.append(p)
            elif isinstance(p.records, FileSlice):
                p.records.release()
        if keep:
            out.append((key, keep))
    return out
