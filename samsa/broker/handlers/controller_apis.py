"""What the CONTROLLER listener serves besides forwarded admin requests: the KRaft RPCs (passed to
the quorum driver as raw frames), broker registration and heartbeats, producer id blocks, and
partition leaders' ISR changes (AlterPartition)."""

from __future__ import annotations

import struct
import uuid
from typing import TYPE_CHECKING, Any

from samsa.cluster.controller import ControllerError
from samsa.cluster.controller.quorum import IsrChange
from samsa.cluster.metadata import records as rec
from samsa.cluster.node import NotControllerError
from samsa.protocol import apis
from samsa.protocol.errors import Err

if TYPE_CHECKING:
    from samsa.broker.broker import Broker
    from samsa.broker.server import RequestContext

_CONTROLLER_KEYS = [{"api_key": k, "min_version": lo, "max_version": hi}
                    for k, (lo, hi) in sorted(apis.CONTROLLER_SUPPORTED.items())]


def api_versions(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    return {"error_code": 0, "api_keys": _CONTROLLER_KEYS, "throttle_time": 0,
            "supported_features": (), "finalized_features_epoch": -1, "finalized_features": ()}


async def quorum_rpc(broker: Broker, ctx: RequestContext, req: Any) -> list[bytes] | None:
    """Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch, FetchSnapshot, DescribeQuorum: the driver
    answers the raw frame; no answer (a superseded request) closes the connection."""
    from samsa.cluster.quorum.wire.errors import WireError

    driver = broker.node.driver
    if driver is None:
        ctx.conn.close()
        return None
    try:
        frame = await driver.handle_request(ctx.frame)
    except WireError:
        ctx.conn.close()
        return None
    if frame is None:
        ctx.conn.close()
        return None
    return [struct.pack(">i", len(frame)), frame]


def _active(broker: Broker) -> Any:
    c = broker.node.controller
    return c if c is not None and broker.node.active else None


async def broker_registration(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    c = _active(broker)
    if c is None:
        return {"throttle_time": 0, "error_code": Err.NOT_CONTROLLER, "broker_epoch": -1}
    try:
        epoch = await c.register_broker(
            req.broker_id, req.incarnation_id, req.cluster_id,
            [rec.BrokerEndpoint(ln.name, ln.host, ln.port, ln.security_protocol)
             for ln in req.listeners],
            req.rack, [rec.BrokerFeature(f.name, f.min_supported_version,
                                         f.max_supported_version) for f in req.features])
    except NotControllerError:
        return {"throttle_time": 0, "error_code": Err.NOT_CONTROLLER, "broker_epoch": -1}
    except ControllerError as e:
        return {"throttle_time": 0, "error_code": e.code, "broker_epoch": -1}
    return {"throttle_time": 0, "error_code": 0, "broker_epoch": epoch}


async def broker_heartbeat(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    none = {"throttle_time": 0, "is_caught_up": False, "is_fenced": True,
            "should_shut_down": False}
    c = _active(broker)
    if c is None:
        return {**none, "error_code": Err.NOT_CONTROLLER}
    try:
        r = await c.heartbeat(req.broker_id, req.broker_epoch, req.current_metadata_offset,
                              req.want_fence, req.want_shut_down)
    except NotControllerError:
        return {**none, "error_code": Err.NOT_CONTROLLER}
    except ControllerError as e:
        return {**none, "error_code": e.code}
    return {"throttle_time": 0, "error_code": r.error, "is_caught_up": r.is_caught_up,
            "is_fenced": r.is_fenced, "should_shut_down": r.should_shut_down}


async def allocate_producer_ids(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    c = _active(broker)
    fail = {"throttle_time": 0, "producer_id_start": -1, "producer_id_len": 0}
    if c is None:
        return {**fail, "error_code": Err.NOT_CONTROLLER}
    try:
        first, length = await c.allocate_producer_ids(req.broker_id, req.broker_epoch)
    except NotControllerError:
        return {**fail, "error_code": Err.NOT_CONTROLLER}
    except ControllerError as e:
        return {**fail, "error_code": e.code}
    return {"throttle_time": 0, "error_code": 0, "producer_id_start": first,
            "producer_id_len": length}


async def alter_partition(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    """A partition leader's ISR changes (v2: broker ids; v3: ids with broker epochs), decided
    by the active controller; a stale broker epoch fails the whole request."""
    fail = {"throttle_time": 0, "topics": []}
    c = _active(broker)
    if c is None:
        return {**fail, "error_code": Err.NOT_CONTROLLER}
    zero = uuid.UUID(int=0)
    changes: list[IsrChange] = []
    for t in req.topics:
        for p in t.partitions:
            if ctx.version >= 3:
                isr = tuple((b.broker_id, b.broker_epoch) for b in p.new_isr_with_epochs)
            else:
                isr = tuple((b, -1) for b in p.new_isr)
            changes.append(IsrChange(t.topic_id or zero, p.partition_index, p.leader_epoch, isr,
                                     p.leader_recovery_state, p.partition_epoch))
    try:
        code, results = await c.alter_partitions(req.broker_id, req.broker_epoch, changes)
    except NotControllerError:
        return {**fail, "error_code": Err.NOT_CONTROLLER}
    if code:
        return {**fail, "error_code": code}
    out = iter(results)
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            err, st = next(out)
            if st is None:
                parts.append({"partition_index": p.partition_index, "error_code": err,
                              "leader_id": -1, "leader_epoch": -1, "isr": (),
                              "leader_recovery_state": 0, "partition_epoch": -1})
            else:
                parts.append({"partition_index": p.partition_index, "error_code": err,
                              "leader_id": st.leader, "leader_epoch": st.leader_epoch,
                              "isr": st.isr, "leader_recovery_state": st.leader_recovery_state,
                              "partition_epoch": st.partition_epoch})
        topics.append({"topic_id": t.topic_id, "partitions": parts})
    return {"throttle_time": 0, "error_code": 0, "topics": topics}
