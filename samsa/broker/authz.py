"""The authorization checks handlers make: `allowed(ctx, operation, resource type, name)` against
the broker's authorizer (none configured: everything is allowed, as Kafka without
authorizer.class.name). On a CONTROLLER listener a node of the cluster (a principal allowed
CLUSTER_ACTION on the cluster: its admin requests are forwarded ones, authorized by the broker that
received them, as Kafka trusts the Envelope of a broker with CLUSTER_ACTION) is not checked again;
any other principal there is checked as on a broker listener (handlers/controller_authz.py gates
the node-only RPCs)."""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from samsa.security import authorizer as az

if TYPE_CHECKING:
    from samsa.broker.server import RequestContext


def _authorizer(ctx: RequestContext) -> az.Authorizer | None:
    conn = ctx.conn
    a: az.Authorizer | None = getattr(conn.broker, "authorizer", None)
    if a is not None and conn.spec.controller and a.authorize(
            conn.principal, conn.peer_ip, az.OP_CLUSTER_ACTION, az.R_CLUSTER, az.CLUSTER_NAME):
        return None  # a node forwarding what a broker authorized already
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


def reframe(ctx: RequestContext, req: Any) -> bytes:
    """The request frame with its header as received and `req` as the body (what a broker
    forwards after leaving out the items the principal may not touch)."""
    from kio.index import load_request_schema
    from kio.serial import entity_reader, entity_writer

    schema = load_request_schema(ctx.api_key, ctx.version)
    _, n = entity_reader(schema.__header_schema__)(ctx.frame, 0)
    out = io.BytesIO()
    out.write(ctx.frame[:n])
    entity_writer(schema)(out, req)
    return out.getvalue()


async def narrowed(handler: Callable[[Any, RequestContext, Any], Awaitable[Any]], broker: Any,
                   ctx: RequestContext, req: Any, field: str, is_allowed: Callable[[Any], bool],
                   denied: Callable[[Any], dict[str, Any]], result_field: str) -> Any:
    """Run `handler` on the items of `req.<field>` the principal may act on, and answer the
    others with `denied(item)` in `<result_field>` (Kafka answers each item on its own). The
    narrowed request is also what a broker forwards to the controller."""
    items = getattr(req, field, None) or ()
    if not enabled(ctx):
        return await handler(broker, ctx, req)
    ok = [i for i in items if is_allowed(i)]
    if len(ok) == len(items):
        return await handler(broker, ctx, req)
    narrow = dataclasses.replace(req, **{field: tuple(ok)})
    ctx.frame = reframe(ctx, narrow)
    result = as_dict(ctx, await handler(broker, ctx, narrow))
    if result is None:
        return []
    result[result_field] = tuple(result.get(result_field) or ()) + tuple(
        denied(i) for i in items if not is_allowed(i))
    return result


def as_dict(ctx: RequestContext, result: Any) -> dict[str, Any] | None:
    """A handler's answer as a response dict: a forwarded answer (the controller's frame) is
    decoded, its top-level fields kept as they are; None for no answer (connection closing)."""
    if not isinstance(result, list):
        return dict(result)
    if not result:
        return None
    from .handlers.forward import decode_response

    resp = decode_response(ctx.api_key, ctx.version, b"".join(result[1:]))
    return {f.name: getattr(resp, f.name) for f in dataclasses.fields(resp)}


def entry(item: Any) -> dict[str, Any]:
    """A response item (dict, or a decoded dataclass of a forwarded answer) as a dict."""
    if isinstance(item, dict):
        return item
    return {f.name: getattr(item, f.name) for f in dataclasses.fields(item)}
