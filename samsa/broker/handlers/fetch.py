"""Fetch: byte ranges of segment files up to the high watermark, long-polling until min_bytes are
available or max_wait passes. Waits are woken by appends (PartitionLog.waiters), never by sleeps.

Incremental fetch sessions (KIP-227) are kept in broker.fetch_sessions (see fetch_sessions.py).
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from samsa.broker.fetch_sessions import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    FetchSession,
    PartitionState,
)
from samsa.protocol.errors import Err
from samsa.storage.log import OffsetOutOfRange, PartitionLog

if TYPE_CHECKING:
    from samsa.broker.broker import Broker
    from samsa.broker.server import RequestContext


def _resolve(broker: Broker, ctx: RequestContext, ft: Any) -> tuple[str | None, Any]:
    """(topic name, response topic key) for a request topic (by id from v13)."""
    if ctx.version >= 13:
        t = broker.controller.image.by_id.get(ft.topic_id)
        return (t.name if t else None), ft.topic_id
    return ft.topic, ft.topic


def _read_all(broker: Broker, ctx: RequestContext, req: Any,
              plan: list[tuple[Any, str | None, list[Any]]]) -> tuple[list[dict[str, Any]], int, bool,
                                                                     list[PartitionLog]]:
    remaining = req.max_bytes if req.max_bytes > 0 else 2**31 - 1
    total = 0
    errors = False
    read_committed = req.isolation_level == 1
    logs: list[PartitionLog] = []
    responses = []
    for key, name, parts in plan:
        out = []
        for fp in parts:
            idx = fp.partition
            lg = broker.partition_log(name, idx) if name is not None else None
            if lg is None:
                code = Err.UNKNOWN_TOPIC_ID if ctx.version >= 13 else Err.UNKNOWN_TOPIC_OR_PARTITION
                out.append({"partition_index": idx, "error_code": code, "high_watermark": -1,
                            "last_stable_offset": -1, "log_start_offset": -1, "records": b""})
                errors = True
                continue
            logs.append(lg)
            hw = lg.high_watermark
            lso = lg.last_stable_offset
            entry = {"partition_index": idx, "error_code": 0, "high_watermark": hw,
                     "last_stable_offset": lso, "log_start_offset": lg.log_start_offset,
                     "aborted_transactions": None, "preferred_read_replica": -1,
                     "records": b""}
            if read_committed:
                entry["aborted_transactions"] = [
                    {"producer_id": a.producer_id, "first_offset": a.first_offset}
                    for a in lg.producers.aborted_between(fp.fetch_offset, lso)]
            try:
                limit = min(fp.partition_max_bytes, remaining)
                data = lg.read(fp.fetch_offset, limit, whole_first=(total == 0),
                               upper=lso if read_committed else None) \
                    if limit > 0 or total == 0 else b""
            except OffsetOutOfRange:
                entry["error_code"] = Err.OFFSET_OUT_OF_RANGE
                errors = True
                data = b""
            entry["records"] = data
            total += len(data)
            remaining -= len(data)
            out.append(entry)
        responses.append({"topic": key, "topic_id": key, "partitions": out})
    return responses, total, errors, logs


async def fetch(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    session_id = getattr(req, "session_id", 0)
    epoch = getattr(req, "session_epoch", FINAL_EPOCH)
    base: dict[str, Any] = {"throttle_time": 0, "error_code": 0, "session_id": 0}
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
                return {**base, "error_code": Err.FETCH_SESSION_ID_NOT_FOUND, "responses": []}
            if epoch != session.epoch:
                return {**base, "error_code": Err.INVALID_FETCH_SESSION_EPOCH, "responses": []}
    incremental = session is not None and session_id != INVALID_SESSION_ID
    plan = _plan(broker, ctx, req, session)
    if session is not None:
        if incremental:  # a new session already expects epoch 1
            session.epoch = session.epoch + 1 if session.epoch < 2**31 - 1 else 1
        base["session_id"] = session.id
    max_wait_ms = req.max_wait.total_seconds() * 1000
    deadline = time.monotonic() + max_wait_ms / 1000
    loop = asyncio.get_running_loop()
    while True:
        responses, total, errors, logs = _read_all(broker, ctx, req, plan)
        left = deadline - time.monotonic()
        if total >= req.min_bytes or errors or left <= 0 or not logs or ctx.conn.closed:
            if session is not None:
                responses = _session_filter(session, responses, incremental)
            return {**base, "responses": responses}
        waiters = [lg.wait_for_data(loop) for lg in logs]
        done, pending = await asyncio.wait(waiters, timeout=left,
                                           return_when=asyncio.FIRST_COMPLETED)
        for w in pending:
            w.cancel()
        for lg in logs:
            lg.waiters = [w for w in lg.waiters if not w.done()]


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


def _session_filter(session: FetchSession, responses: list[dict[str, Any]],
                    incremental: bool) -> list[dict[str, Any]]:
    out = []
    for topic in responses:
        key = topic["topic_id"]
        keep = []
        for p in topic["partitions"]:
            st = session.partitions.get((key, p["partition_index"]))
            news = (not incremental or p["records"] or p["error_code"] != 0 or st is None
                    or st.last_hw != p["high_watermark"]
                    or st.last_log_start != p["log_start_offset"])
            if st is not None:
                st.last_hw, st.last_log_start = p["high_watermark"], p["log_start_offset"]
            if news:
                keep.append(p)
        if keep:
            out.append({**topic, "partitions": keep})
    return out
