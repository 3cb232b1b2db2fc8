"""Authorization on CONTROLLER listeners, as Kafka's ControllerApis does it:

- the RPCs only nodes send (the KRaft quorum's Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch,
  FetchSnapshot; BrokerRegistration, BrokerHeartbeat, AllocateProducerIds, AlterPartition) need
  CLUSTER_ACTION on the cluster;
- DescribeQuorum and DescribeCluster need DESCRIBE on the cluster;
- admin requests (CreateTopics, ACLs, configs, ...) are authorized as on a broker listener,
  except when they come from a node (a principal allowed CLUSTER_ACTION): those are forwarded
  requests, already authorized by the broker that received them (Kafka checks the forwarding
  broker's CLUSTER_ACTION on the Envelope the same way, see `samsa.broker.authz`).

A refused request is answered CLUSTER_AUTHORIZATION_FAILED in its top-level error code; the
node that sent it logs why (`samsa.cluster.quorum.driver`, `samsa.broker.lifecycle`).
Without an authorizer nothing is checked."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from samsa.protocol import apis
from samsa.protocol.codec import encode_response
from samsa.protocol.errors import Err
from samsa.security import authorizer as az

if TYPE_CHECKING:
    from samsa.broker.broker import Broker
    from samsa.broker.server import RequestContext

log = logging.getLogger("samsa.authorizer")

NODE_APIS = frozenset({apis.VOTE, apis.BEGIN_QUORUM_EPOCH, apis.END_QUORUM_EPOCH, apis.FETCH,
                       apis.FETCH_SNAPSHOT, apis.BROKER_REGISTRATION, apis.BROKER_HEARTBEAT,
                       apis.ALLOCATE_PRODUCER_IDS, apis.ALTER_PARTITION})
DESCRIBE_APIS = frozenset({apis.DESCRIBE_QUORUM, apis.DESCRIBE_CLUSTER})
LOG_EVERY_S = 30.0
_logged: dict[tuple[str, str], float] = {}


def _refuse(ctx: RequestContext, operation: int) -> list[bytes]:
    """The top-level CLUSTER_AUTHORIZATION_FAILED answer (every API here has one), logged once
    per principal and address every LOG_EVERY_S."""
    who = str(ctx.conn.principal)
    key = (who, ctx.conn.peer_ip)
    now = time.monotonic()
    if now - _logged.get(key, -1e9) >= LOG_EVERY_S:
        _logged[key] = now
        if len(_logged) > 1024:
            _logged.clear()
        log.warning("Principal = %s is Denied operation = %s from host = %s on resource = "
                    "Cluster:LITERAL:kafka-cluster (api key %d on listener %s)", who,
                    az.OPERATION_NAMES.get(operation, operation), ctx.conn.peer_ip or "?",
                    ctx.api_key, ctx.conn.listener_name)
    return encode_response(ctx.api_key, ctx.version, ctx.correlation_id,
                           {"throttle_time": 0, "error_code": Err.CLUSTER_AUTHORIZATION_FAILED,
                            "error_message": "Cluster authorization failed."})


def _allowed(broker: Broker, ctx: RequestContext, operation: int) -> bool:
    a = getattr(broker, "authorizer", None)
    return a is None or a.authorize(ctx.conn.principal, ctx.conn.peer_ip, operation,
                                    az.R_CLUSTER, az.CLUSTER_NAME)


def is_node(broker: Broker, ctx: RequestContext) -> bool:
    """The connection's principal may act as a node of the cluster (CLUSTER_ACTION)."""
    return _allowed(broker, ctx, az.OP_CLUSTER_ACTION)


def gate(api: int, handler: Any) -> Any:
    """`handler` on a CONTROLLER listener, with the cluster operation the API needs checked
    first (unchanged for APIs that are not node RPCs or descriptions)."""
    if api in NODE_APIS:
        operation = az.OP_CLUSTER_ACTION
    elif api in DESCRIBE_APIS:
        operation = az.OP_DESCRIBE
    else:
        return handler

    def run(broker: Broker, ctx: RequestContext, req: Any) -> Any:
        if not _allowed(broker, ctx, operation):
            return _refuse(ctx, operation)
        return handler(broker, ctx, req)
    run.__doc__ = handler.__doc__
    return run


def gate_all(handlers: dict[int, Any]) -> dict[int, Any]:
    return {api: gate(api, h) for api, h in handlers.items()}
