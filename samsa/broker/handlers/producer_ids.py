"""InitProducerId for idempotent producers: a fresh producer id (allocated in blocks recorded in the
metadata log, so ids are never reused after a restart) at epoch 0."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from samsa.broker import authz
from samsa.protocol.errors import Err
from samsa.security import authorizer as az

from .txn import init_transactional

if TYPE_CHECKING:
    from samsa.broker.broker import Broker
    from samsa.broker.server import RequestContext


async def init_producer_id(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    if req.transactional_id is not None:
        return await init_transactional(broker, ctx, req)
    # ACLs (issue 17): idempotence needs IDEMPOTENT_WRITE on the cluster or WRITE on any topic
    if authz.enabled(ctx) and not (authz.cluster(ctx, az.OP_IDEMPOTENT_WRITE)
                                   or authz.allowed_any(ctx, az.OP_WRITE, az.R_TOPIC)):
        return {"throttle_time": 0, "error_code": Err.CLUSTER_AUTHORIZATION_FAILED,
                "producer_id": -1, "producer_epoch": -1}
    pid = await broker.controller.allocate_producer_id()
    return {"throttle_time": 0, "error_code": 0, "producer_id": pid, "producer_epoch": 0}
