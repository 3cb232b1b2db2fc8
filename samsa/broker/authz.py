"""The authorization checks handlers make: `allowed(ctx, operation, resource type, name)` against
the broker's authorizer (none configured: everything is allowed, as Kafka without
authorizer.class.name). Requests on a CONTROLLER listener come from other nodes of the cluster
(forwarded admin requests were authorized by the broker that received them) and are not checked."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from samsa.security import authorizer as az

if TYPE_CHECKING:
    from samsa.broker.server import RequestContext


def _authorizer(ctx: RequestContext) -> az.Authorizer | None:
    conn = ctx.conn
    if conn.spec.controller:
        return None
    a: az.Authorizer | None = getattr(conn.broker, "authorizer", None)
    return a


def enabled(ctx: RequestContext) -> bool:
    return _authorizer(ctx) is not None


def allowed(ctx: RequestContext, operation: int, resource_type: int, name: str) -> bool:
    a = _authorizer(ctx)
    if a is None:
        return True
    return a.authorize(ctx.conn.principal, ctx.conn.peer_ip, operation, resource_type, name)


def cluster(ctx: RequestContext, operation: int) -> bool:
    return allowed(ctx, operation, az.R_CLUSTER, az.CLUSTER_NAME)


def topic(ctx: RequestContext, operation: int, name: str) -> bool:
    return allowed(ctx, operation, az.R_TOPIC, name)


def group(ctx: RequestContext, operation: int, name: str) -> bool:
    return allowed(ctx, operation, az.R_GROUP, name)


def txn_id(ctx: RequestContext, operation: int, name: str) -> bool:
    return allowed(ctx, operation, az.R_TXN, name)


def allowed_any(ctx: RequestContext, operation: int, resource_type: int) -> bool:
    a = _authorizer(ctx)
    if a is None:
        return True
    return a.authorize_any(ctx.conn.principal, ctx.conn.peer_ip, operation, resource_type)


def operations(ctx: RequestContext, resource_type: int, name: str, asked: Any = True) -> int:
    """The authorized-operations bitfield for a response; Kafka's INT_MIN when not asked for.
    Without an authorizer every operation of the type is authorized."""
    if not asked:
        return az.OPS_NOT_REQUESTED
    a = _authorizer(ctx)
    if a is None:
        bits = 0
        for op in az.RESOURCE_OPERATIONS[resource_type]:
            bits |= 1 << op
        return bits
    return a.operations(ctx.conn.principal, ctx.conn.peer_ip, resource_type, name)
