"""Consumer-group APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
OffsetFetch, OffsetDelete, ListGroups, DescribeGroups, DeleteGroups. Version differences are
handled here; the state machine lives in samsa.coordinator.group."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from samsa.broker import authz
from samsa.cluster.controller import ControllerError
from samsa.coordinator.group.consumer_group import HeartbeatError
from samsa.coordinator.group.model import GroupState
from samsa.coordinator.routing import owner_error
from samsa.protocol.errors import Err
from samsa.security import authorizer as az

if TYPE_CHECKING:
    from samsa.broker.broker import Broker
    from samsa.broker.server import RequestContext

GROUP_KEY, TXN_KEY = 0, 1
_GROUP_DENIED = Err.GROUP_AUTHORIZATION_FAILED


def _ms(td: Any) -> int:
    return int(td.total_seconds() * 1000) if hasattr(td, "total_seconds") else int(td)


async def _locate(broker: Broker, ctx: RequestContext, key_type: int,
                  key: str) -> dict[str, Any]:
    """The coordinator of `key`: the leader of its internal-topic partition, with that broker's
    endpoint on the listener the request came in on (the internal topic is created on first
    use, through the active controller, from whichever broker is asked)."""
    coord = broker.groups if key_type == GROUP_KEY else broker.txn
    none = {"key": key, "node_id": -1, "host": "", "port": -1}
    try:
        await coord.topic.ensure()
    except ControllerError as e:
        return {**none, "error_code": Err.COORDINATOR_NOT_AVAILABLE,
                "error_message": f"The coordinator topic cannot be created: {e}"}
    leader = coord.topic.leader_of(key)
    reg = broker.node.image.brokers.get(leader)
    name = getattr(ctx.conn, "listener_name", None) or broker.inter_broker_listener
    ep = None if reg is None or reg.fenced else reg.endpoints.get(name)
    if ep is None:
        return {**none, "error_code": Err.COORDINATOR_NOT_AVAILABLE,
                "error_message": "The coordinator is not available."}
    return {"key": key, "node_id": leader, "host": ep[0], "port": ep[1], "error_code": 0,
            "error_message": None}


async def find_coordinator(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    keys = list(req.coordinator_keys) if ctx.version >= 4 else [req.key]
    key_type = getattr(req, "key_type", GROUP_KEY)
    results = []
    for key in keys:
        if key_type == GROUP_KEY and not authz.group(ctx, az.OP_DESCRIBE, key):
            results.append({"key": key, "node_id": -1, "host": "", "port": -1,
                            "error_code": _GROUP_DENIED, "error_message": None})
        elif key_type == TXN_KEY and not authz.txn_id(ctx, az.OP_DESCRIBE, key):
            results.append({"key": key, "node_id": -1, "host": "", "port": -1,
                            "error_code": Err.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                            "error_message": None})
        elif key_type in (GROUP_KEY, TXN_KEY):
            results.append(await _locate(broker, ctx, key_type, key))
        else:
            results.append({"key": key, "node_id": -1, "host": "", "port": -1,
                            "error_code": Err.INVALID_REQUEST,
                            "error_message": f"Unknown coordinator key type {key_type}"})
    if ctx.version >= 4:
        return {"throttle_time": 0, "coordinators": results}
    r = results[0]
    return {"throttle_time": 0, "error_code": r["error_code"], "error_message": r["error_message"],
            "node_id": r["node_id"], "host": r["host"], "port": r["port"]}


async def _owner(broker: Broker, group_id: str) -> int:
    """0 if this broker coordinates the group, else NOT_COORDINATOR (or
    COORDINATOR_NOT_AVAILABLE)."""
    return await owner_error(broker.groups, group_id)


def _client_host(ctx: RequestContext) -> str:
    peer = ctx.conn.transport.get_extra_info("peername") if ctx.conn.transport else None
    return f"/{peer[0]}" if peer else ""


async def join_group(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    if code := _read_denied(ctx, req.group_id) or await _owner(broker, req.group_id):
        return {"throttle_time": 0, "error_code": code, "generation_id": -1,
                "protocol_name": None if ctx.version >= 7 else "", "leader": "",
                "member_id": req.member_id, "members": []}
    session = _ms(req.session_timeout)
    rebalance = _ms(req.rebalance_timeout) if ctx.version >= 1 else session
    resp = await broker.groups.join(
        group_id=req.group_id, member_id=req.member_id,
        instance_id=getattr(req, "group_instance_id", None), client_id=ctx.client_id or "",
        client_host=_client_host(ctx), session_ms=session, rebalance_ms=rebalance,
        protocol_type=req.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in req.protocols],
        require_known_member_id=ctx.version >= 4, version=ctx.version)
    return {"throttle_time": 0, **resp}


async def sync_group(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    if code := _read_denied(ctx, req.group_id) or await _owner(broker, req.group_id):
        return {"throttle_time": 0, "error_code": code, "protocol_type": None,
                "protocol_name": None, "assignment": b""}
    resp = await broker.groups.sync(
        group_id=req.group_id, member_id=req.member_id,
        instance_id=getattr(req, "group_instance_id", None), generation=req.generation_id,
        protocol_type=getattr(req, "protocol_type", None),
        protocol_name=getattr(req, "protocol_name", None),
        assignments={a.member_id: bytes(a.assignment) for a in req.assignments})
    return {"throttle_time": 0, "error_code": resp["error_code"],
            "protocol_type": resp.get("protocol_type"), "protocol_name": resp.get("protocol_name"),
            "assignment": resp.get("assignment", b"")}


async def heartbeat(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    if code := _read_denied(ctx, req.group_id) or await _owner(broker, req.group_id):
        return {"throttle_time": 0, "error_code": code}
    code = broker.groups.heartbeat(group_id=req.group_id, member_id=req.member_id,
                                   instance_id=getattr(req, "group_instance_id", None),
                                   generation=req.generation_id)
    return {"throttle_time": 0, "error_code": code}


async def leave_group(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    if code := _read_denied(ctx, req.group_id) or await _owner(broker, req.group_id):
        return {"throttle_time": 0, "error_code": code, "members": []}
    if ctx.version >= 3:
        members = [(m.member_id, m.group_instance_id) for m in req.members]
    else:
        members = [(req.member_id, None)]
    top, codes = broker.groups.leave(req.group_id, members)
    if ctx.version < 3:
        return {"throttle_time": 0, "error_code": codes[0] if codes else top}
    return {"throttle_time": 0, "error_code": top,
            "members": [{"member_id": mid, "group_instance_id": iid, "error_code": c}
                        for (mid, iid), c in zip(members, codes, strict=True)]}


def _read_denied(ctx: RequestContext, group_id: str) -> int:
    """ACLs (issue 17): joining, syncing, heartbeats, leaving and commits need READ on the
    group."""
    return 0 if authz.group(ctx, az.OP_READ, group_id) else _GROUP_DENIED


async def offset_commit(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    if code := _read_denied(ctx, req.group_id) or await _owner(broker, req.group_id):
        return {"throttle_time": 0, "topics": [
            {"name": t.name, "partitions": [{"partition_index": p.partition_index,
                                             "error_code": code} for p in t.partitions]}
            for t in req.topics]}
    denied = {t.name for t in req.topics if not authz.topic(ctx, az.OP_READ, t.name)}
    offsets = [(t.name, p.partition_index, p.committed_offset,
                getattr(p, "committed_leader_epoch", -1), p.committed_metadata)
               for t in req.topics if t.name not in denied for p in t.partitions]
    retention = -1
    if 2 <= ctx.version <= 4:
        retention = _ms(req.retention_time)
    result = await broker.groups.commit(
        group_id=req.group_id, member_id=req.member_id,
        instance_id=getattr(req, "group_instance_id", None),
        generation=req.generation_id_or_member_epoch, offsets=offsets, retention_ms=retention)
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            code = Err.TOPIC_AUTHORIZATION_FAILED if t.name in denied else \
                result if isinstance(result, int) else result[(t.name, p.partition_index)]
            parts.append({"partition_index": p.partition_index, "error_code": code})
        topics.append({"name": t.name, "partitions": parts})
    return {"throttle_time": 0, "topics": topics}


def _fetch_group(broker: Broker, group_id: str, topics: Any, require_stable: bool = False,
                 ctx: RequestContext | None = None) -> tuple[list[dict[str, Any]], int]:
    wanted = None if topics is None else \
        [(t.name, p) for t in topics for p in t.partition_indexes]
    found = broker.groups.fetch_offsets(group_id, wanted)
    by_topic: dict[str, list[dict[str, Any]]] = {}
    # ACLs (issue 17): a named topic the principal may not DESCRIBE gets
    # TOPIC_AUTHORIZATION_FAILED; asked for all topics, such topics are left out
    denied = set() if ctx is None or not authz.enabled(ctx) else \
        {t for t, _ in found if not authz.topic(ctx, az.OP_DESCRIBE, t)}
    for (topic, p), e in sorted(found.items()):
        if topic in denied:
            if wanted is not None:
                by_topic.setdefault(topic, []).append({
                    "partition_index": p, "committed_offset": -1, "committed_leader_epoch": -1,
                    "metadata": "", "error_code": Err.TOPIC_AUTHORIZATION_FAILED})
            continue
        unstable = require_stable and broker.groups.has_pending_txn_offsets(group_id, topic, p)
        by_topic.setdefault(topic, []).append({
            "partition_index": p, "committed_offset": -1 if unstable or not e else e.offset,
            "committed_leader_epoch": e.leader_epoch if e else -1,
            "metadata": e.metadata if e else "",
            "error_code": Err.UNSTABLE_OFFSET_COMMIT if unstable else 0})
    return [{"name": t, "partitions": ps} for t, ps in by_topic.items()], 0


def _error_topics(topics: Any, code: int) -> list[dict[str, Any]]:
    """A group-level error in OffsetFetch v0-1, which have no top-level error code: on every
    requested partition."""
    return [{"name": t.name, "partitions": [
        {"partition_index": p, "committed_offset": -1, "committed_leader_epoch": -1,
         "metadata": "", "error_code": code} for p in t.partition_indexes]}
        for t in topics or ()]


async def offset_fetch(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    if ctx.version >= 8:
        groups = []
        for g in req.groups:
            if code := _describe_denied(ctx, g.group_id) or await _owner(broker, g.group_id):
                groups.append({"group_id": g.group_id, "topics": [], "error_code": code})
                continue
            topics, code = _fetch_group(broker, g.group_id, g.topics, req.require_stable, ctx)
            groups.append({"group_id": g.group_id, "topics": topics, "error_code": code})
        return {"throttle_time": 0, "groups": groups}
    if code := _describe_denied(ctx, req.group_id) or await _owner(broker, req.group_id):
        topics = [] if ctx.version >= 2 else _error_topics(req.topics, code)
        return {"throttle_time": 0, "topics": topics, "error_code": code}
    topics, code = _fetch_group(broker, req.group_id, req.topics,
                                getattr(req, "require_stable", False), ctx)
    return {"throttle_time": 0, "topics": topics, "error_code": code}


def _describe_denied(ctx: RequestContext, group_id: str) -> int:
    return 0 if authz.group(ctx, az.OP_DESCRIBE, group_id) else _GROUP_DENIED


async def offset_delete(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    denied_group = 0 if authz.group(ctx, az.OP_DELETE, req.group_id) else _GROUP_DENIED
    if code := denied_group or await _owner(broker, req.group_id):
        return {"error_code": code, "throttle_time": 0, "topics": []}
    denied = {t.name for t in req.topics if not authz.topic(ctx, az.OP_READ, t.name)}
    tps = [(t.name, p.partition_index) for t in req.topics if t.name not in denied
           for p in t.partitions]
    result = await broker.groups.delete_offsets(req.group_id, tps)
    if isinstance(result, int):
        return {"error_code": result, "throttle_time": 0, "topics": []}
    return {"error_code": 0, "throttle_time": 0, "topics": [
        {"name": t.name, "partitions": [{"partition_index": p.partition_index,
                                         "error_code": Err.TOPIC_AUTHORIZATION_FAILED
                                         if t.name in denied
                                         else result[(t.name, p.partition_index)]}
                                        for p in t.partitions]} for t in req.topics]}


def list_groups(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    states = {s.lower() for s in getattr(req, "states_filter", ()) or ()}
    types = {s.lower() for s in getattr(req, "types_filter", ()) or ()}
    out = []
    for cg in broker.groups.consumer_groups.values():
        if (states and cg.state.lower() not in states) or (types and "consumer" not in types):
            continue
        out.append({"group_id": cg.group_id, "protocol_type": "consumer",
                    "group_state": cg.state, "group_type": "consumer"})
    for g in broker.groups.groups.values():
        if g.state == GroupState.DEAD or g.group_id in broker.groups.consumer_groups:
            continue
        if states and g.state.value.lower() not in states:
            continue
        if types and "classic" not in types:
            continue
        out.append({"group_id": g.group_id, "protocol_type": g.protocol_type or "",
                    "group_state": g.state.value, "group_type": "classic"})
    if authz.enabled(ctx) and not authz.cluster(ctx, az.OP_DESCRIBE):
        out = [g for g in out if authz.group(ctx, az.OP_DESCRIBE, g["group_id"])]
    return {"throttle_time": 0, "error_code": 0, "groups": out}


async def describe_groups(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    out = []
    want_ops = getattr(req, "include_authorized_operations", False)
    for gid in req.groups:
        if code := _describe_denied(ctx, gid) or await _owner(broker, gid):
            out.append({"error_code": code, "error_message": None, "group_id": gid,
                        "group_state": "", "protocol_type": "", "protocol_data": "",
                        "members": [], "authorized_operations": -2**31})
            continue
        g = broker.groups.groups.get(gid)
        if g is None or g.state == GroupState.DEAD:
            out.append({"error_code": Err.GROUP_ID_NOT_FOUND if ctx.version >= 6 else 0,
                        "error_message": f"Group {gid} not found." if ctx.version >= 6 else None,
                        "group_id": gid, "group_state": "Dead", "protocol_type": "",
                        "protocol_data": "", "members": [], "authorized_operations": -2**31})
            continue
        stable = g.state == GroupState.STABLE
        members = [{"member_id": m.member_id, "group_instance_id": m.instance_id,
                    "client_id": m.client_id, "client_host": m.client_host,
                    "member_metadata": m.metadata_for(g.protocol) if stable else b"",
                    "member_assignment": m.assignment if stable else b""}
                   for m in g.members.values()]
        out.append({"error_code": 0, "error_message": None, "group_id": gid,
                    "group_state": g.state.value, "protocol_type": g.protocol_type or "",
                    "protocol_data": (g.protocol or "") if stable else "", "members": members,
                    "authorized_operations": authz.operations(ctx, az.R_GROUP, gid, want_ops)})
    return {"throttle_time": 0, "groups": out}


async def delete_groups(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    results = [{"group_id": gid,
                "error_code": (0 if authz.group(ctx, az.OP_DELETE, gid) else _GROUP_DENIED)
                or await _owner(broker, gid) or await broker.groups.delete_group(gid)}
               for gid in req.groups_names]
    return {"throttle_time": 0, "results": results}


async def consumer_group_heartbeat(broker: Broker, ctx: RequestContext,
                                   req: Any) -> dict[str, Any]:
    if code := _read_denied(ctx, req.group_id) or _subscription_denied(ctx, req) \
            or await _owner(broker, req.group_id):
        return {"throttle_time": 0, "error_code": code, "error_message": None,
                "member_id": req.member_id or None, "member_epoch": -1,
                "heartbeat_interval": 0, "assignment": None}
    owned = None if req.topic_partitions is None else \
        [(tp.topic_id, list(tp.partitions)) for tp in req.topic_partitions]
    subscribed = None if req.subscribed_topic_names is None else list(req.subscribed_topic_names)
    try:
        resp = broker.groups.consumer_heartbeat(
            group_id=req.group_id, member_id=req.member_id, member_epoch=req.member_epoch,
            instance_id=req.instance_id, rack_id=req.rack_id,
            rebalance_ms=_ms(req.rebalance_timeout), subscribed=subscribed,
            assignor=req.server_assignor, owned=owned, client_id=ctx.client_id or "",
            client_host=_client_host(ctx), version=ctx.version)
    except HeartbeatError as e:
        return {"throttle_time": 0, "error_code": e.code, "error_message": str(e),
                "member_id": req.member_id or None, "member_epoch": -1,
                "heartbeat_interval": 0, "assignment": None}
    return {"throttle_time": 0, "error_message": None, **resp}


def _subscription_denied(ctx: RequestContext, req: Any) -> int:
    """KIP-848 heartbeats need DESCRIBE on every subscribed topic name."""
    names = getattr(req, "subscribed_topic_names", None) or ()
    if any(not authz.topic(ctx, az.OP_DESCRIBE, n) for n in names):
        return Err.TOPIC_AUTHORIZATION_FAILED
    return 0


async def consumer_group_describe(broker: Broker, ctx: RequestContext,
                                  req: Any) -> dict[str, Any]:
    groups = []
    want_ops = getattr(req, "include_authorized_operations", False)
    for gid in req.group_ids:
        if code := _describe_denied(ctx, gid) or await _owner(broker, gid):
            groups.append({"error_code": code, "error_message": None, "group_id": gid,
                           "group_state": "", "group_epoch": -1, "assignment_epoch": -1,
                           "assignor_name": "", "members": [], "authorized_operations": -2**31})
            continue
        d = broker.groups.describe_consumer_group(gid)
        if authz.enabled(ctx) and _assigned_topics_denied(ctx, d):
            # as Kafka: a group whose (target) assignments name a topic the principal may not
            # DESCRIBE is answered TOPIC_AUTHORIZATION_FAILED, without its members
            groups.append({"error_code": Err.TOPIC_AUTHORIZATION_FAILED,
                           "error_message": "The group has described topic(s) that the client is "
                                            "not authorized to describe.",
                           "group_id": gid, "group_state": "", "group_epoch": -1,
                           "assignment_epoch": -1, "assignor_name": "", "members": [],
                           "authorized_operations": -2**31})
            continue
        d["authorized_operations"] = authz.operations(ctx, az.R_GROUP, gid, want_ops)
        groups.append(d)
    return {"throttle_time": 0, "groups": groups}


def _assigned_topics_denied(ctx: RequestContext, described: dict[str, Any]) -> bool:
    names = {tp["topic_name"] for m in described.get("members") or ()
             for key in ("assignment", "target_assignment")
             for tp in (m.get(key) or {}).get("topic_partitions") or ()}
    return any(not authz.topic(ctx, az.OP_DESCRIBE, n) for n in names)
