"""ListOffsets (earliest, latest, by timestamp, max timestamp; v8 earliest-local and v9 latest-tiered
as Kafka answers them without tiered storage; v10's timeout only bounds remote work) and
DeleteRecords."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from samsa.protocol.errors import Err
from samsa.storage.log import OffsetOutOfRange

if TYPE_CHECKING:
    from samsa.broker.broker import Broker
    from samsa.broker.server import RequestContext

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5


def list_offsets(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            lg = broker.partition_log(t.name, p.partition_index)
            r: dict[str, Any] = {"partition_index": p.partition_index, "error_code": 0,
                                 "timestamp": -1, "offset": -1, "leader_epoch": 0}
            if lg is None:
                r["error_code"] = broker.partition_error(t.name, p.partition_index)
                r["leader_epoch"] = -1
            else:
                ts = p.timestamp
                if ts == LATEST:
                    committed = getattr(req, "isolation_level", 0) == 1
                    r["offset"] = lg.last_stable_offset if committed else lg.high_watermark
                elif ts in (EARLIEST, EARLIEST_LOCAL):
                    r["offset"] = lg.log_start_offset
                elif ts == LATEST_TIERED:
                    # KIP-1005 (v9+): without tiered storage Kafka answers offset -1, epoch -1
                    r["leader_epoch"] = -1
                elif ts == MAX_TIMESTAMP:
                    off, mts = lg.max_timestamp_offset()
                    r["offset"], r["timestamp"] = off, mts
                elif ts < 0:
                    r["error_code"] = Err.INVALID_REQUEST if ctx.version > 0 else 0
                else:
                    found = lg.offset_for_timestamp(ts)
                    if found is not None:
                        r["offset"], r["timestamp"] = found
            parts.append(r)
        topics.append({"name": t.name, "partitions": parts})
    return {"throttle_time": 0, "topics": topics}


def delete_records(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            lg = broker.partition_log(t.name, p.partition_index)
            r: dict[str, Any] = {"partition_index": p.partition_index, "low_watermark": -1,
                                 "error_code": 0}
            if lg is None:
                r["error_code"] = broker.partition_error(t.name, p.partition_index)
            elif "delete" not in lg.config.cleanup_policy:
                r["error_code"] = Err.POLICY_VIOLATION  # Kafka: only topics that allow deletion
            else:
                try:
                    r["low_watermark"] = lg.delete_records(p.offset)
                except OffsetOutOfRange:
                    r["error_code"] = Err.OFFSET_OUT_OF_RANGE
            parts.append(r)
        topics.append({"name": t.name, "partitions": parts})
    return {"throttle_time": 0, "topics": topics}
