"""Fetch: byte ranges of segment files up to the high watermark, long-polling until min_bytes are
available or max_wait passes. Waits are woken by appends (PartitionLog.waiters), never by sleeps.

Fetch sessions (KIP-227) are answered sessionless (session id 0), which Kafka clients treat as
"full fetch every time": this is the documented behaviour of a broker whose session cache is empty.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

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
            entry = {"partition_index": idx, "error_code": 0, "high_watermark": hw,
                     "last_stable_offset": hw, "log_start_offset": lg.log_start_offset,
                     "aborted_transactions": () if read_committed else None,
                     "preferred_read_replica": -1, "records": b""}
            try:
                limit = min(fp.partition_max_bytes, remaining)
                data = lg.read(fp.fetch_offset, limit, whole_first=(total == 0)) \
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
    session_epoch = getattr(req, "session_epoch", -1)
    base = {"throttle_time": 0, "error_code": 0, "session_id": 0}
    if session_epoch > 0 or (session_id != 0 and session_epoch != -1):
        return {**base, "error_code": Err.FETCH_SESSION_ID_NOT_FOUND, "responses": []}
    plan = []
    for ft in req.topics:
        name, key = _resolve(broker, ctx, ft)
        plan.append((key, name, list(ft.partitions)))
    max_wait_ms = req.max_wait.total_seconds() * 1000
    deadline = time.monotonic() + max_wait_ms / 1000
    loop = asyncio.get_running_loop()
    while True:
        responses, total, errors, logs = _read_all(broker, ctx, req, plan)
        left = deadline - time.monotonic()
        if total >= req.min_bytes or errors or left <= 0 or not logs or ctx.conn.closed:
            return {**base, "responses": responses}
        waiters = [lg.wait_for_data(loop) for lg in logs]
        done, pending = await asyncio.wait(waiters, timeout=left,
                                           return_when=asyncio.FIRST_COMPLETED)
        for w in pending:
            w.cancel()
        for lg in logs:
            lg.waiters = [w for w in lg.waiters if not w.done()]
