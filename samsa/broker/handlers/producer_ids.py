"""InitProducerId for idempotent producers: a fresh producer id (allocated in blocks recorded in the
metadata log, so ids are never reused after a restart) at epoch 0."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .txn import init_transactional

if TYPE_CHECKING:
    from samsa.broker.broker import Broker
    from samsa.broker.server import RequestContext


async def init_producer_id(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    if req.transactional_id is not None:
        return await init_transactional(broker, ctx, req)
    pid = await broker.controller.allocate_producer_id()
    return {"throttle_time": 0, "error_code": 0, "producer_id": pid, "producer_epoch": 0}
