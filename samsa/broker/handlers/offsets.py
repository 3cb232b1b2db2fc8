"""ListOffsets (earliest, latest, by timestamp, max timestamp; v8 earliest-local and v9
latest-tiered; v10's timeout bounds the remote lookups) and DeleteRecords. With tiered storage
(issue 19) earliest is the start across tiers and timestamps are looked up in the remote tier too
(remote_reads: on the reader threads, so such a request is answered asynchronously)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from samsa.broker import authz
from samsa.cluster.metadata.image import INTERNAL_TOPICS
from samsa.protocol.errors import Err
from samsa.security import authorizer as az
from samsa.storage.log import OffsetOutOfRange

from . import remote_reads

if TYPE_CHECKING:
    from samsa.broker.broker import Broker
    from samsa.broker.server import RequestContext

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5


def _leader_epoch_error(current: int, epoch: int) -> int:
    """Kafka's check of a request's current_leader_epoch (-1: not given) against the leader's:
    an older one is fenced, a newer one not known here yet."""
    if current < 0 or current == epoch:
        return 0
    return Err.FENCED_LEADER_EPOCH if current < epoch else Err.UNKNOWN_LEADER_EPOCH


def list_offsets(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    topics = []
    follower = getattr(req, "replica_id", -1) >= 0  # a follower asks for the log end, unbounded
    rlm = getattr(broker, "remote_log_manager", None)
    lookups: list[tuple[dict[str, Any], Any, Any]] = []  # remote lookups (tiered storage)
    some_tier: remote_reads.Tier | None = None
    for t in req.topics:
        parts = []
        if not authz.topic(ctx, az.OP_DESCRIBE, t.name):  # ACLs (issue 17)
            topics.append({"name": t.name, "partitions": [
                {"partition_index": p.partition_index, "error_code": Err.TOPIC_AUTHORIZATION_FAILED,
                 "timestamp": -1, "offset": -1, "leader_epoch": -1} for p in t.partitions]})
            continue
        for p in t.partitions:
            lg = broker.partition_log(t.name, p.partition_index)
            r: dict[str, Any] = {"partition_index": p.partition_index, "error_code": 0,
                                 "timestamp": -1, "offset": -1, "leader_epoch": -1}
            code = 0 if lg is None else _leader_epoch_error(
                getattr(p, "current_leader_epoch", -1), lg.leader_epoch)
            if lg is None:
                r["error_code"] = broker.partition_error(t.name, p.partition_index)
            elif code:
                r["error_code"] = code
            else:
                r["leader_epoch"] = lg.epochs.latest_epoch
                ts = p.timestamp
                tier = remote_reads.tier(broker, t.name, p.partition_index, lg) \
                    if rlm is not None else None
                some_tier = some_tier or tier
                if ts == LATEST:
                    committed = getattr(req, "isolation_level", 0) == 1
                    r["offset"] = (lg.end_offset if follower else
                                   lg.last_stable_offset if committed else lg.high_watermark)
                elif ts == EARLIEST:  # across tiers (Kafka's logStartOffset)
                    r["offset"] = remote_reads.log_start(tier, lg)
                    if tier is not None:  # Kafka: the earliest epoch, if it covers the start
                        first = lg.epochs.earliest
                        r["leader_epoch"] = first[0] if first is not None \
                            and first[1] <= r["offset"] else -1
                elif ts == EARLIEST_LOCAL:  # KIP-405: the local log's start, with its epoch
                    r["offset"] = lg.log_start_offset
                    r["leader_epoch"] = lg.epochs.epoch_for_offset(lg.log_start_offset)
                elif ts == LATEST_TIERED:
                    # KIP-1005 (v9+): the highest offset in the remote tier (-1, epoch -1 when none)
                    r["offset"], r["leader_epoch"] = remote_reads.latest_tiered(tier)
                elif ts == MAX_TIMESTAMP:
                    off, mts = lg.max_timestamp_offset()
                    r["offset"], r["timestamp"] = off, mts
                    fn = remote_reads.remote_max_timestamp_lookup(tier, mts, lg) \
                        if tier is not None else None
                    if fn is not None:
                        local = (off, mts) if off >= 0 else None
                        lookups.append((r, fn, lambda local=local: local))
                elif ts < 0:
                    r["error_code"] = Err.INVALID_REQUEST if ctx.version > 0 else 0
                else:
                    fn = remote_reads.remote_timestamp_lookup(tier, lg, ts) \
                        if tier is not None else None
                    if fn is not None:  # the remote tier first, then the local log
                        lookups.append((r, fn, lambda lg=lg, ts=ts: lg.offset_for_timestamp(ts)))
                    else:
                        found = lg.offset_for_timestamp(ts)
                        if found is not None:
                            r["offset"], r["timestamp"] = found
            parts.append(r)
        topics.append({"name": t.name, "partitions": parts})
    if lookups and some_tier is not None:
        return _remote_list_offsets(some_tier, lookups, remote_reads.list_offsets_timeout_ms(
            some_tier, req, ctx.version), topics)
    return {"throttle_time": 0, "topics": topics}


async def _remote_list_offsets(t: remote_reads.Tier,
                               lookups: list[tuple[dict[str, Any], Any, Any]],
                               timeout_ms: int, topics: list[dict[str, Any]]) -> dict[str, Any]:
    await remote_reads.run_lookups(t, lookups, timeout_ms)
    return {"throttle_time": 0, "topics": topics}


def delete_records(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    topics = []
    for t in req.topics:
        parts = []
        denied = not authz.topic(ctx, az.OP_DELETE, t.name)  # ACLs (issue 17)
        for p in t.partitions:
            lg = broker.partition_log(t.name, p.partition_index)
            r: dict[str, Any] = {"partition_index": p.partition_index, "low_watermark": -1,
                                 "error_code": 0}
            if denied:
                r["error_code"] = Err.TOPIC_AUTHORIZATION_FAILED
            elif lg is None:
                r["error_code"] = broker.partition_error(t.name, p.partition_index)
            elif t.name in INTERNAL_TOPICS:  # Kafka's ReplicaManager refuses these whatever
                r["error_code"] = Err.INVALID_TOPIC_EXCEPTION  # their cleanup policy
            elif "delete" not in lg.config.cleanup_policy:
                r["error_code"] = Err.POLICY_VIOLATION  # Kafka: only topics that allow deletion
            else:
                try:
                    tier = remote_reads.tier(broker, t.name, p.partition_index, lg)
                    r["low_watermark"] = lg.delete_records(p.offset) if tier is None \
                        else remote_reads.delete_records(lg, p.offset)
                except OffsetOutOfRange:
                    r["error_code"] = Err.OFFSET_OUT_OF_RANGE
            parts.append(r)
        topics.append({"name": t.name, "partitions": parts})
    return {"throttle_time": 0, "topics": topics}


def offset_for_leader_epoch(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    """OffsetForLeaderEpoch (KIP-101/KIP-320): the end offset of the largest leader epoch at or
    below the one asked for, in the leader's log. Consumers use it after a leader change to see
    whether the log they read was truncated."""
    topics = []
    # ACLs (issue 17): a replica (replica_id >= 0) needs CLUSTER_ACTION, a consumer DESCRIBE
    follower_ok = getattr(req, "replica_id", -1) >= 0 and authz.cluster(ctx, az.OP_CLUSTER_ACTION)
    for t in req.topics:
        parts = []
        denied = not follower_ok and not authz.topic(ctx, az.OP_DESCRIBE, t.topic)
        for p in t.partitions:
            r: dict[str, Any] = {"partition": p.partition, "error_code": 0, "leader_epoch": -1,
                                 "end_offset": -1}
            lg = broker.partition_log(t.topic, p.partition)
            if denied:
                r["error_code"] = Err.TOPIC_AUTHORIZATION_FAILED
            elif lg is None:
                r["error_code"] = broker.partition_error(t.topic, p.partition)
            elif code := _leader_epoch_error(p.current_leader_epoch, lg.leader_epoch):
                r["error_code"] = code
            else:
                r["leader_epoch"], r["end_offset"] = lg.epochs.end_offset_for(p.leader_epoch,
                                                                              lg.end_offset)
            parts.append(r)
        topics.append({"topic": t.topic, "partitions": parts})
    return {"throttle_time": 0, "topics": topics}
