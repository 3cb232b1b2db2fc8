"""CreateAcls, DescribeAcls and DeleteAcls (KIP-140 filters). Creations and deletions are metadata
changes: a broker that is not the active controller authorizes them (ALTER on the cluster) and
forwards them; DescribeAcls reads the local image (DESCRIBE on the cluster). Without an
authorizer all three answer SECURITY_DISABLED, as Kafka does."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from samsa.broker import authz
from samsa.cluster.limits import ControllerError
from samsa.protocol.errors import Err
from samsa.security import acl_control
from samsa.security import authorizer as az

from .forward import forward, must_forward

if TYPE_CHECKING:
    from samsa.broker.broker import Broker
    from samsa.broker.server import RequestContext

_DISABLED = "No Authorizer is configured."


def _active(broker: Broker, ctx: RequestContext) -> bool:
    """An authorizer runs here (on a controller listener: the node's own config)."""
    return getattr(broker, "authorizer", None) is not None


def _binding(c: Any, version: int) -> az.AclBinding:
    pattern = c.resource_pattern_type if version >= 1 else az.P_LITERAL
    return az.AclBinding(int(c.resource_type), c.resource_name, int(pattern), c.principal,
                         c.host, int(c.operation), int(c.permission_type))


def _filter(f: Any, version: int) -> az.AclFilter:
    pattern = f.pattern_type_filter if version >= 1 else az.P_LITERAL
    return az.AclFilter(int(f.resource_type_filter), f.resource_name_filter, int(pattern),
                        f.principal_filter, f.host_filter, int(f.operation),
                        int(f.permission_type))


def _settled(broker: Broker) -> Any:
    driver = broker.node.driver

    def settled(_resp: Any) -> Any:
        target = driver.high_watermark - 1 if driver is not None else -1
        return lambda: broker.node.image.offset >= target
    return settled


async def _on_controller(broker: Broker, build: Any) -> Any:
    local = broker.controller.local
    if local is None:
        raise ControllerError(Err.NOT_CONTROLLER, "This node is not the active controller.")
    return await local.propose_built(build)


async def create_acls(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    n = len(req.creations)
    if not _active(broker, ctx):
        return {"throttle_time": 0, "results": [
            {"error_code": Err.SECURITY_DISABLED, "error_message": _DISABLED}] * n}
    if not authz.cluster(ctx, az.OP_ALTER):
        return {"throttle_time": 0, "results": [
            {"error_code": Err.CLUSTER_AUTHORIZATION_FAILED,
             "error_message": "Cluster authorization failed."}] * n}
    if must_forward(broker, ctx):
        fwd = await forward(broker, ctx, _settled(broker))
        if fwd is not None:
            return fwd
    bindings = [_binding(c, ctx.version) for c in req.creations]
    try:
        results = await _on_controller(broker, lambda image: acl_control.create_records(
            image.acls, bindings, Err.INVALID_REQUEST))
    except ControllerError as e:
        results = [(e.code, str(e))] * n
    return {"throttle_time": 0,
            "results": [{"error_code": c, "error_message": m} for c, m in results]}


def describe_acls(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"throttle_time": 0, "error_code": 0, "error_message": None, "resources": []}
    if not _active(broker, ctx):
        return {**base, "error_code": Err.SECURITY_DISABLED, "error_message": _DISABLED}
    if not authz.cluster(ctx, az.OP_DESCRIBE):
        return {**base, "error_code": Err.CLUSTER_AUTHORIZATION_FAILED,
                "error_message": "Cluster authorization failed."}
    f = _filter(req, ctx.version)
    try:
        f.validate()
    except az.AclError as e:
        return {**base, "error_code": Err.INVALID_REQUEST, "error_message": str(e)}
    grouped: dict[tuple[int, str, int], list[dict[str, Any]]] = {}
    for b in broker.node.image.acls.values():
        if f.matches(b):
            grouped.setdefault((b.resource_type, b.resource_name, b.pattern_type), []).append(
                {"principal": b.principal, "host": b.host, "operation": b.operation,
                 "permission_type": b.permission})
    return {**base, "resources": [
        {"resource_type": t, "resource_name": name, "pattern_type": p, "acls": acls}
        for (t, name, p), acls in sorted(grouped.items())]}


def _matching(b: az.AclBinding) -> dict[str, Any]:
    return {"error_code": 0, "error_message": None, "resource_type": b.resource_type,
            "resource_name": b.resource_name, "pattern_type": b.pattern_type,
            "principal": b.principal, "host": b.host, "operation": b.operation,
            "permission_type": b.permission}


async def delete_acls(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    n = len(req.filters)
    if not _active(broker, ctx):
        return {"throttle_time": 0, "filter_results": [
            {"error_code": Err.SECURITY_DISABLED, "error_message": _DISABLED,
             "matching_acls": []}] * n}
    if not authz.cluster(ctx, az.OP_ALTER):
        return {"throttle_time": 0, "filter_results": [
            {"error_code": Err.CLUSTER_AUTHORIZATION_FAILED,
             "error_message": "Cluster authorization failed.", "matching_acls": []}] * n}
    if must_forward(broker, ctx):
        fwd = await forward(broker, ctx, _settled(broker))
        if fwd is not None:
            return fwd
    filters = [_filter(f, ctx.version) for f in req.filters]
    try:
        results = await _on_controller(broker, lambda image: acl_control.delete_records(
            image.acls, filters, Err.INVALID_REQUEST))
    except ControllerError as e:
        results = [(e.code, str(e), [])] * n
    return {"throttle_time": 0, "filter_results": [
        {"error_code": c, "error_message": m, "matching_acls": [_matching(b) for b in matched]}
        for c, m, matched in results]}
