"""ACLs (issue 17) for the APIs that act on the cluster as a whole: the request needs one
operation on the CLUSTER resource, else it is answered CLUSTER_AUTHORIZATION_FAILED without
running (top-level error code, or on every item for the APIs that have none)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from samsa.broker import authz
from samsa.protocol import apis
from samsa.protocol.errors import Err
from samsa.security import authorizer as az

if TYPE_CHECKING:
    from samsa.broker.broker import Broker
    from samsa.broker.server import RequestContext

_DENIED = Err.CLUSTER_AUTHORIZATION_FAILED
_MESSAGE = "Cluster authorization failed."


def _top_level(ctx: RequestContext, req: Any) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": _DENIED, "error_message": _MESSAGE}


def _replica_dirs(ctx: RequestContext, req: Any) -> dict[str, Any]:
    parts: dict[str, set[int]] = {}
    for d in req.dirs:
        for t in d.topics:
            parts.setdefault(t.name, set()).update(t.partitions)
    return {"throttle_time": 0, "results": [
        {"topic_name": n, "partitions": [{"partition_index": p, "error_code": _DENIED}
                                         for p in sorted(ps)]} for n, ps in parts.items()]}


def _markers(ctx: RequestContext, req: Any) -> dict[str, Any]:
    return {"markers": [{"producer_id": m.producer_id, "topics": [
        {"name": t.name, "partitions": [{"partition_index": p, "error_code": _DENIED}
                                        for p in t.partition_indexes]} for t in m.topics]}
        for m in req.markers]}


def _quota_entries(ctx: RequestContext, req: Any) -> dict[str, Any]:
    return {"throttle_time": 0, "entries": [
        {"error_code": _DENIED, "error_message": _MESSAGE,
         "entity": [{"entity_type": e.entity_type, "entity_name": e.entity_name}
                    for e in entry.entity]} for entry in req.entries]}


def _scram_users(ctx: RequestContext, req: Any) -> dict[str, Any]:
    users = dict.fromkeys([d.name for d in req.deletions] + [u.name for u in req.upsertions])
    return {"throttle_time": 0, "results": [
        {"user": u, "error_code": _DENIED, "error_message": _MESSAGE} for u in users]}


# api -> (operation on the cluster, the denied answer)
GATES: dict[int, tuple[int, Callable[[RequestContext, Any], dict[str, Any]]]] = {
    apis.ELECT_LEADERS: (az.OP_ALTER, _top_level),
    apis.ALTER_PARTITION_REASSIGNMENTS: (az.OP_ALTER, _top_level),
    apis.LIST_PARTITION_REASSIGNMENTS: (az.OP_DESCRIBE, _top_level),
    apis.DESCRIBE_QUORUM: (az.OP_DESCRIBE, _top_level),
    apis.ALTER_REPLICA_LOG_DIRS: (az.OP_ALTER, _replica_dirs),
    apis.WRITE_TXN_MARKERS: (az.OP_CLUSTER_ACTION, _markers),
    # client quotas (Kafka: DESCRIBE_CONFIGS / ALTER_CONFIGS on the cluster)
    apis.DESCRIBE_CLIENT_QUOTAS: (az.OP_DESCRIBE_CONFIGS, _top_level),
    apis.ALTER_CLIENT_QUOTAS: (az.OP_ALTER_CONFIGS, _quota_entries),
    # SCRAM credentials (KIP-554: DESCRIBE / ALTER on the cluster)
    apis.DESCRIBE_USER_SCRAM_CREDENTIALS: (az.OP_DESCRIBE, _top_level),
    apis.ALTER_USER_SCRAM_CREDENTIALS: (az.OP_ALTER, _scram_users),
}


def gated(api: int, handler: Any) -> Any:
    """`handler`, checking the cluster operation `api` needs first."""
    operation, denied = GATES[api]

    def run(broker: Broker, ctx: RequestContext, req: Any) -> Any:
        if not authz.cluster(ctx, operation):
            return denied(ctx, req)
        return handler(broker, ctx, req)
    run.__doc__ = handler.__doc__
    return run
