"""DescribeClientQuotas (48) and AlterClientQuotas (49): quotas are metadata, changed by the
active controller (brokers forward, as Kafka's do) and described from the local image."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from samsa.protocol.errors import Err
from samsa.security.quotas import QuotaError, describe

from .forward import forward, must_forward

if TYPE_CHECKING:
    from samsa.broker.broker import Broker
    from samsa.broker.server import RequestContext


def describe_client_quotas(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    comps = [(c.entity_type, int(c.match_type), c.match) for c in req.components]
    try:
        found = describe(broker.node.image, comps, bool(req.strict))
    except QuotaError as e:
        return {"throttle_time": 0, "error_code": e.code, "error_message": str(e),
                "entries": None}
    entries = [{"entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
                "values": [{"key": k, "value": v} for k, v in sorted(values.items())]}
               for entity, values in found]
    return {"throttle_time": 0, "error_code": 0, "error_message": None, "entries": entries}


def _settled(broker: Broker) -> Any:
    driver = broker.node.driver

    def settled(_resp: Any) -> Any:
        target = driver.high_watermark - 1 if driver is not None else -1
        return lambda: broker.node.image.offset >= target
    return settled


async def alter_client_quotas(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    if must_forward(broker, ctx):
        fwd = await forward(broker, ctx, _settled(broker))
        if fwd is not None:
            return fwd
    entries = [([(e.entity_type, e.entity_name) for e in ent.entity],
                [(op.key, float(op.value), bool(op.remove)) for op in ent.ops])
               for ent in req.entries]
    if not broker.node.active:
        results: list[tuple[int, str | None]] = [
            (Err.NOT_CONTROLLER, "This node is not the active controller.")] * len(entries)
    else:
        results = await broker.node.controller.alter_client_quotas(entries,
                                                                   bool(req.validate_only))
    out = [{"error_code": code, "error_message": msg,
            "entity": [{"entity_type": e.entity_type, "entity_name": e.entity_name}
                       for e in ent.entity]}
           for ent, (code, msg) in zip(req.entries, results, strict=True)]
    return {"throttle_time": 0, "entries": out}
