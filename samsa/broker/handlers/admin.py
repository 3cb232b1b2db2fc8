"""Replica and quorum admin APIs: DescribeTopicPartitions, DescribeQuorum, ElectLeaders,
AlterPartitionReassignments, ListPartitionReassignments and AlterReplicaLogDirs.

Elections and reassignments are decided by the active controller (QuorumController): a broker
forwards them to it as Kafka's brokers do. AlterReplicaLogDirs is answered as a one-log-dir Kafka
4.0 broker answers it. The error codes follow Kafka's controller and ReplicaManager.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from samsa.broker import authz
from samsa.cluster.controller import ControllerError, validate_topic_name
from samsa.cluster.metadata import METADATA_TOPIC
from samsa.cluster.node import NotControllerError
from samsa.protocol.errors import Err
from samsa.security import authorizer as az

from .forward import forward, must_forward
from .meta import partition_entry

if TYPE_CHECKING:
    from samsa.broker.broker import Broker
    from samsa.broker.server import RequestContext

PREFERRED, UNCLEAN = 0, 1
# Kafka's max.request.partition.size.limit default: the most partitions DescribeTopicPartitions
# answers in one response, whatever the request's response_partition_limit.
PARTITION_SIZE_LIMIT = 2000
# Without an authorizer Kafka reports every operation a topic supports: READ, WRITE, CREATE,
# DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS (ACL operation codes 3-8, 10, 11).
TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
# A single-voter quorum never holds an election after its first: Samsa reports that epoch.
QUORUM_LEADER_EPOCH = 1


# ---- DescribeTopicPartitions (75) ---------------------------------------------------------------
def describe_topic_partitions(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    image = broker.controller.image
    cursor = req.cursor
    cursor_topic = cursor.topic_name if cursor is not None else ""
    fetch_all = not req.topics
    if fetch_all:
        names = {n for n in image.topics if n >= cursor_topic}
    else:
        names = {t.name for t in req.topics if t.name >= cursor_topic}
        if cursor is not None and cursor.topic_name not in names:
            # Kafka: "topic list should contain the cursor topic" -> INVALID_REQUEST on every topic
            return {"throttle_time": 0, "next_cursor": None, "topics": [
                {"error_code": Err.INVALID_REQUEST, "name": t.name, "topic_id": uuid.UUID(int=0),
                 "is_internal": False, "partitions": [],
                 "topic_authorized_operations": -2147483648} for t in req.topics]}
    limit = int(broker.config.get("max.request.partition.size.limit") or PARTITION_SIZE_LIMIT)
    remaining = min(limit, req.response_partition_limit)
    topics: list[dict[str, Any]] = []
    next_cursor: dict[str, Any] | None = None
    for name in sorted(names):
        if remaining <= 0:
            if remaining == 0:  # the next page starts at this topic's first partition
                next_cursor = {"topic_name": name, "partition_index": 0}
            break
        if not authz.topic(ctx, az.OP_DESCRIBE, name):  # ACLs (issue 17)
            if not fetch_all:
                topics.append({**_unknown_topic(name),
                               "error_code": Err.TOPIC_AUTHORIZATION_FAILED})
            continue
        t = image.topics.get(name)
        if t is None:
            if not fetch_all:
                topics.append(_unknown_topic(name))
            continue
        start = cursor.partition_index if cursor is not None and name == cursor_topic else 0
        upper = min(t.count, start + remaining)
        parts = [_partition(broker, p, t.partitions.get(p)) for p in range(max(start, 0), upper)]
        topics.append({"error_code": 0, "name": name, "topic_id": t.topic_id,
                       "is_internal": t.internal, "partitions": parts,
                       "topic_authorized_operations": authz.operations(ctx, az.R_TOPIC, name)
                       if authz.enabled(ctx) else TOPIC_OPERATIONS})
        if upper < t.count:
            next_cursor = {"topic_name": name, "partition_index": upper}
            break
        remaining -= len(parts)
    return {"throttle_time": 0, "topics": topics, "next_cursor": next_cursor}


def _unknown_topic(name: str) -> dict[str, Any]:
    try:
        validate_topic_name(name)
        error = Err.UNKNOWN_TOPIC_OR_PARTITION
    except ControllerError:
        error = Err.INVALID_TOPIC_EXCEPTION
    return {"error_code": error, "name": name, "topic_id": uuid.UUID(int=0),
            "is_internal": name in ("__consumer_offsets", "__transaction_state"),
            "partitions": [], "topic_authorized_operations": TOPIC_OPERATIONS}


def _partition(broker: Broker, index: int, st: Any) -> dict[str, Any]:
    return {**partition_entry(broker, index, st), "eligible_leader_replicas": (),
            "last_known_elr": ()}


# ---- DescribeQuorum (55) ------------------------------------------------------------------------
async def describe_quorum(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    """The metadata quorum as its leader sees it; a node that is not the leader asks the leader
    (Kafka brokers forward DescribeQuorum to the active controller)."""
    topics = req.topics
    valid = (len(topics) == 1 and topics[0].topic_name == METADATA_TOPIC
             and len(topics[0].partitions) == 1 and topics[0].partitions[0].partition_index == 0)
    if not valid:  # Kafka answers each requested partition with UNKNOWN_TOPIC_OR_PARTITION
        return {"error_code": 0, "error_message": None, "nodes": [], "topics": [
            {"topic_name": t.topic_name, "partitions": [
                {"partition_index": p.partition_index,
                 "error_code": Err.UNKNOWN_TOPIC_OR_PARTITION} for p in t.partitions]}
            for t in topics]}
    node = broker.node
    driver = node.driver
    if driver is None or (not driver.is_leader and not ctx.conn.spec.controller):
        fwd = await forward(broker, ctx)
        if fwd is not None:
            return fwd
        driver = node.driver
        assert driver is not None
    d = driver.describe()
    if d.error_code:
        return {"error_code": 0, "error_message": None, "nodes": [], "topics": [
            {"topic_name": METADATA_TOPIC, "partitions": [
                {"partition_index": 0, "error_code": d.error_code, "error_message": None,
                 "leader_id": d.leader_id, "leader_epoch": d.leader_epoch,
                 "high_watermark": -1, "current_voters": [], "observers": []}]}]}

    def state(r: Any) -> dict[str, Any]:
        return {"replica_id": r.replica_id, "replica_directory_id": uuid.UUID(int=0),
                "log_end_offset": r.log_end_offset, "last_fetch_timestamp": r.last_fetch_timestamp,
                "last_caught_up_timestamp": r.last_caught_up_timestamp}
    nodes = []
    ctrl_name = broker.controller_listeners[0].name if broker.controller_listeners else \
        "CONTROLLER"
    for v in node.voters.values():
        name, host, port = ctrl_name, v.host, v.port
        if not broker.controller_listeners and v.node_id == broker.node_id:
            # the embedded node has no CONTROLLER listener: its client listener reaches it
            name, host, port = broker.inter_broker_listener, broker.host, broker.port
        nodes.append({"node_id": v.node_id, "listeners": [
            {"name": name, "host": host, "port": port}]})
    return {"error_code": 0, "error_message": None,
            "topics": [{"topic_name": METADATA_TOPIC, "partitions": [
                {"partition_index": 0, "error_code": 0, "error_message": None,
                 "leader_id": d.leader_id, "leader_epoch": d.leader_epoch,
                 "high_watermark": d.high_watermark,
                 "current_voters": [state(r) for r in d.current_voters],
                 "observers": [state(r) for r in d.observers]}]}],
            "nodes": nodes}


# ---- ElectLeaders (43) --------------------------------------------------------------------------
def _controller(broker: Broker) -> Any:
    """The QuorumController when this node is the active controller, else None."""
    node = broker.node
    return node.controller if node.active else None


async def elect_leaders(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    """Decided by the active controller (a broker forwards the request, then waits, bounded,
    until its own image shows the new leaders)."""
    election = getattr(req, "election_type", PREFERRED)
    if must_forward(broker, ctx):
        fwd = await forward(broker, ctx, lambda r: _elected(broker, election, r))
        if fwd is not None:
            return fwd
    wanted = None if req.topic_partitions is None else \
        [(t.topic, list(t.partitions)) for t in req.topic_partitions]
    c = _controller(broker)
    try:
        if c is None:
            raise ControllerError(Err.NOT_CONTROLLER, "This node is not the active controller.")
        results = await c.elect_leaders(election, wanted)
    except (ControllerError, NotControllerError) as e:
        code = e.code if isinstance(e, ControllerError) else Err.NOT_CONTROLLER
        msg = str(e) or None
        return {"throttle_time": 0, "error_code": code, "replica_election_results": [
            {"topic": name, "partition_result": [
                {"partition_id": p, "error_code": code, "error_message": msg} for p in ps]}
            for name, ps in wanted or ()]}
    return {"throttle_time": 0, "error_code": 0, "replica_election_results": [
        {"topic": name, "partition_result": [
            {"partition_id": p, "error_code": code, "error_message": msg}
            for p, code, msg in parts]} for name, parts in results]}


def _elected(broker: Broker, election: int, resp: Any) -> Callable[[], bool]:
    """The local image shows every election the controller made."""
    done = [(r.topic, p.partition_id) for r in resp.replica_election_results
            for p in r.partition_result if p.error_code == Err.NONE]
    image = broker.node.image

    def settled() -> bool:
        for name, p in done:
            t = image.topics.get(name)
            ps = t.partitions.get(p) if t is not None else None
            if ps is None:
                continue
            if election == PREFERRED and (not ps.replicas or ps.leader != ps.replicas[0]):
                return False
            if ps.leader == -1:
                return False
        return True
    return settled


# ---- AlterPartitionReassignments (45) / ListPartitionReassignments (46) -------------------------
async def alter_partition_reassignments(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    """KIP-455, decided by the active controller: the new replicas are added (adding_replicas),
    and once all are in the ISR the old ones go (removing_replicas); None cancels."""
    asked = [(t.name, p.partition_index, None if p.replicas is None else tuple(p.replicas))
             for t in req.topics for p in t.partitions]
    if must_forward(broker, ctx):
        fwd = await forward(broker, ctx, lambda r: _reassigned(broker, asked, r))
        if fwd is not None:
            return fwd
    c = _controller(broker)
    try:
        if c is None:
            raise ControllerError(Err.NOT_CONTROLLER, "This node is not the active controller.")
        results = iter(await c.alter_reassignments(asked))
    except (ControllerError, NotControllerError) as e:
        code = e.code if isinstance(e, ControllerError) else Err.NOT_CONTROLLER
        return {"throttle_time": 0, "error_code": code, "error_message": str(e) or None,
                "responses": []}
    responses = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            code, msg = next(results)
            parts.append({"partition_index": p.partition_index, "error_code": code,
                          "error_message": msg})
        responses.append({"name": t.name, "partitions": parts})
    return {"throttle_time": 0, "error_code": 0, "error_message": None, "responses": responses}


def _reassigned(broker: Broker, asked: list[tuple[str, int, tuple[int, ...] | None]],
                resp: Any) -> Callable[[], bool]:
    """The local image shows every accepted change: a reassignment begun (or done), or none in
    progress after a cancel."""
    ok = {(r.name, p.partition_index) for r in resp.responses for p in r.partitions
          if p.error_code == Err.NONE}
    todo = [(name, p, target) for name, p, target in asked if (name, p) in ok]
    image = broker.node.image

    def settled() -> bool:
        for name, p, target in todo:
            t = image.topics.get(name)
            ps = t.partitions.get(p) if t is not None else None
            if ps is None:
                continue
            moving = bool(ps.adding_replicas or ps.removing_replicas)
            if target is None:
                if moving:
                    return False
            elif ps.replicas != target and not (moving and set(target) <= set(ps.replicas)):
                return False
        return True
    return settled


async def list_partition_reassignments(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    """The reassigning partitions, as the active controller knows them (unknown topics are
    skipped silently, as Kafka does)."""
    if must_forward(broker, ctx):
        fwd = await forward(broker, ctx)
        if fwd is not None:
            return fwd
    c = _controller(broker)
    if c is None:
        return {"throttle_time": 0, "error_code": Err.NOT_CONTROLLER,
                "error_message": "This node is not the active controller.", "topics": []}
    wanted = None if req.topics is None else \
        [(t.name, list(t.partition_indexes)) for t in req.topics]
    return {"throttle_time": 0, "error_code": 0, "error_message": None, "topics": [
        {"name": name, "partitions": [
            {"partition_index": r.partition, "replicas": r.replicas,
             "adding_replicas": r.adding, "removing_replicas": r.removing} for r in found]}
        for name, found in c.list_reassignments(wanted)]}


# ---- AlterReplicaLogDirs (34) -------------------------------------------------------------------
def alter_replica_log_dirs(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    log_dirs = {os.path.abspath(d): d for d in broker.config.log_dirs}
    # Kafka builds a partition -> destination map: a partition named twice keeps the last path
    target: dict[tuple[str, int], str] = {}
    for d in req.dirs:
        for t in d.topics:
            for p in t.partitions:
                target[(t.name, p)] = d.path
    results: dict[str, list[dict[str, Any]]] = {}
    for (name, p), path in target.items():
        results.setdefault(name, []).append(
            {"partition_index": p, "error_code": _move(broker, log_dirs, name, p, path)})
    return {"throttle_time": 0, "results": [
        {"topic_name": name, "partitions": parts} for name, parts in results.items()]}


def _move(broker: Broker, log_dirs: dict[str, Any], name: str, p: int, path: str) -> int:
    if len(f"{name}-{p}.{'0' * 32}-future") > 255:  # Kafka: the future log's dir name is too long
        return Err.INVALID_TOPIC_EXCEPTION
    if path not in log_dirs:  # Kafka compares with each log dir's absolute path
        return Err.LOG_DIR_NOT_FOUND
    lg = broker.partition_log(name, p)
    if lg is None:
        return Err.UNKNOWN_TOPIC_OR_PARTITION
    if os.path.abspath(lg.dir.parent) == path:
        return 0  # already there: Kafka skips creating a future replica
    # another configured log dir: Samsa does not move replicas between log dirs
    return Err.KAFKA_STORAGE_ERROR
