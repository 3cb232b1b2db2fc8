"""ApiVersions, Metadata and DescribeCluster."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from samsa.broker import authz
from samsa.cluster.controller import ControllerError, validate_topic_name
from samsa.cluster.metadata.image import PartitionState, TopicImage
from samsa.protocol import apis
from samsa.protocol.errors import Err
from samsa.security import authorizer as az

if TYPE_CHECKING:
    from samsa.broker.broker import Broker
    from samsa.broker.server import RequestContext

_API_KEYS = [{"api_key": k, "min_version": lo, "max_version": hi}
             for k, (lo, hi) in sorted(apis.ADVERTISED.items())]


# Feature flags (ApiVersions v3+, KIP-584) as Samsa implements them: the KIP-848 consumer group
# protocol (group.version 1) is served; transactions v2 (transaction.version 2, KIP-890 part 2) is
# not, so clients keep to the v1 transaction flow. metadata.version and kraft.version are not
# reported: Samsa's metadata log is not KRaft's (docs/compatibility.md).
_SUPPORTED_FEATURES = ({"name": "group.version", "min_version": 0, "max_version": 1},
                       {"name": "transaction.version", "min_version": 0, "max_version": 0})
_FINALIZED_FEATURES = ({"name": "group.version", "min_version_level": 1, "max_version_level": 1},
                       {"name": "transaction.version", "min_version_level": 0,
                        "max_version_level": 0})


def api_versions(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    return {"error_code": 0, "api_keys": _API_KEYS, "throttle_time": 0,
            "supported_features": _SUPPORTED_FEATURES, "finalized_features_epoch": 0,
            "finalized_features": _FINALIZED_FEATURES}


def _brokers(broker: Broker, ctx: RequestContext | None = None) -> list[dict[str, Any]]:
    """Live brokers with their endpoint on the listener the request came in on (Kafka answers
    with the same listener name; the inter-broker listener for a controller-listener request)."""
    name = getattr(getattr(ctx, "conn", None), "listener_name", None) \
        or broker.inter_broker_listener
    out = []
    for b in broker.node.image.live_brokers():
        ep = b.endpoints.get(name) or next(iter(b.endpoints.values()), None)
        if ep is None:
            continue
        out.append({"node_id": b.broker_id, "broker_id": b.broker_id, "host": ep[0],
                    "port": ep[1], "rack": b.rack})
    return out


def partition_entry(broker: Broker, index: int, st: PartitionState | None) -> dict[str, Any]:
    """A partition as Metadata and DescribeTopicPartitions describe it (from the image)."""
    if st is None:
        return {"error_code": Err.UNKNOWN_TOPIC_OR_PARTITION, "partition_index": index,
                "leader_id": -1, "leader_epoch": -1, "replica_nodes": (), "isr_nodes": (),
                "offline_replicas": ()}
    brokers = broker.node.image.brokers
    offline = tuple(r for r in st.replicas if r not in brokers or brokers[r].fenced)
    return {"error_code": Err.LEADER_NOT_AVAILABLE if st.leader < 0 else 0,
            "partition_index": index, "leader_id": st.leader, "leader_epoch": st.leader_epoch,
            "replica_nodes": st.replicas, "isr_nodes": st.isr, "offline_replicas": offline}


def _topic_entry(broker: Broker, t: TopicImage) -> dict[str, Any]:
    return {
        "error_code": 0, "name": t.name, "topic_id": t.topic_id, "is_internal": t.internal,
        "partitions": [partition_entry(broker, p, st) for p, st in sorted(t.partitions.items())],
    }


def controller_id(broker: Broker) -> int:
    """Kafka's KRaft brokers name a random live broker as the controller (clients cannot reach
    the controllers); the active controller when it is also a live broker."""
    leader = broker.node.leader_id
    if leader is not None and leader in broker.node.image.brokers \
            and not broker.node.image.brokers[leader].fenced:
        return leader
    return broker.node.random_broker()


def _denied_entry(name: str | None, tid: Any) -> dict[str, Any]:
    return {"error_code": Err.TOPIC_AUTHORIZATION_FAILED, "name": name, "topic_id": tid,
            "partitions": []}


async def metadata(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    image = broker.controller.image
    topics: list[dict[str, Any]] = []
    checked = authz.enabled(ctx)
    if req.topics is None or (ctx.version == 0 and not req.topics):
        # ACLs (issue 17): a principal sees only the topics it may DESCRIBE
        topics = [_topic_entry(broker, t) for t in image.topics.values()
                  if not checked or authz.topic(ctx, az.OP_DESCRIBE, t.name)]
    else:
        allow_auto = getattr(req, "allow_auto_topic_creation", True)
        for rt in req.topics:
            name = rt.name
            tid = getattr(rt, "topic_id", None)
            if name is None and tid is not None and tid.int != 0:
                t = image.by_id.get(tid)
                if t is None:
                    topics.append({"error_code": Err.UNKNOWN_TOPIC_ID, "name": None,
                                   "topic_id": tid, "partitions": []})
                elif checked and not authz.topic(ctx, az.OP_DESCRIBE, t.name):
                    topics.append(_denied_entry(None, tid))
                else:
                    topics.append(_topic_entry(broker, t))
                continue
            if name is None:
                continue
            if checked and not authz.topic(ctx, az.OP_DESCRIBE, name):
                topics.append(_denied_entry(name, None))
                continue
            t = image.topics.get(name)
            if t is None and allow_auto and checked and broker.config.get_bool(
                    "auto.create.topics.enable") and not (
                    authz.cluster(ctx, az.OP_CREATE) or authz.topic(ctx, az.OP_CREATE, name)):
                topics.append(_denied_entry(name, None))  # auto-creation needs CREATE
                continue
            if t is None:
                try:
                    validate_topic_name(name)
                except ControllerError:
                    topics.append({"error_code": Err.INVALID_TOPIC_EXCEPTION, "name": name,
                                   "topic_id": None, "partitions": []})
                    continue
                if allow_auto and await broker.auto_create(name):
                    t = image.topics.get(name)
            if t is None:
                topics.append({"error_code": Err.UNKNOWN_TOPIC_OR_PARTITION, "name": name,
                               "topic_id": None, "partitions": []})
            else:
                topics.append(_topic_entry(broker, t))
    if ctx.version >= 8:  # authorized-operations bitfields (KIP-430)
        want = getattr(req, "include_topic_authorized_operations", False)
        for e in topics:
            e["topic_authorized_operations"] = authz.operations(
                ctx, az.R_TOPIC, e["name"], want) if e.get("name") and not e["error_code"] \
                else az.OPS_NOT_REQUESTED
    cluster_ops = authz.operations(ctx, az.R_CLUSTER, az.CLUSTER_NAME, getattr(
        req, "include_cluster_authorized_operations", False))
    return {"throttle_time": 0, "brokers": _brokers(broker, ctx), "cluster_id": image.cluster_id,
            "controller_id": controller_id(broker), "topics": topics,
            "cluster_authorized_operations": cluster_ops}


def describe_cluster(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    """Brokers (endpoint type 1), or, asked on a CONTROLLER listener, the controllers (type 2,
    KIP-919); v2 can include fenced brokers (IncludeFencedBrokers) and flags them."""
    endpoint_type = getattr(req, "endpoint_type", 1)
    base = {"throttle_time": 0, "error_code": 0, "error_message": None,
            "endpoint_type": endpoint_type, "cluster_id": broker.controller.image.cluster_id,
            "cluster_authorized_operations": authz.operations(
                ctx, az.R_CLUSTER, az.CLUSTER_NAME,
                getattr(req, "include_cluster_authorized_operations", False))}

    on_controller = ctx.conn.spec.controller
    if endpoint_type == 2:
        if not on_controller:
            return {**base, "error_code": Err.MISMATCHED_ENDPOINT_TYPE,
                    "error_message": "The request was sent to an endpoint of the wrong type: "
                                     "endpoint type CONTROLLER", "controller_id": -1,
                    "brokers": []}
        return {**base, "controller_id": broker.node.leader_id
                if broker.node.leader_id is not None else -1,
                "brokers": [{"broker_id": v.node_id, "host": v.host, "port": v.port,
                             "rack": None, "is_fenced": False}
                            for v in broker.node.voters.values()]}
    if on_controller and endpoint_type == 1 and ctx.version >= 1:
        return {**base, "error_code": Err.MISMATCHED_ENDPOINT_TYPE,
                "error_message": "The request was sent to an endpoint of the wrong type: "
                                 "endpoint type BROKER", "controller_id": -1, "brokers": []}
    brokers = _brokers(broker, ctx)
    if getattr(req, "include_fenced_brokers", False):
        name = ctx.conn.listener_name or broker.inter_broker_listener
        live = {b["broker_id"] for b in brokers}
        for b in broker.node.image.brokers.values():
            ep = b.endpoints.get(name) or next(iter(b.endpoints.values()), None)
            if b.broker_id not in live and ep is not None:
                brokers.append({"broker_id": b.broker_id, "host": ep[0], "port": ep[1],
                                "rack": b.rack, "is_fenced": True})
    return {**base, "controller_id": controller_id(broker),
            "brokers": [{**b, "is_fenced": b.get("is_fenced", False)} for b in brokers]}
