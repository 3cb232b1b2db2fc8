"""ApiVersions, Metadata and DescribeCluster."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from samsa.cluster.controller import ControllerError, validate_topic_name
from samsa.cluster.metadata import TopicImage
from samsa.protocol import apis
from samsa.protocol.errors import Err

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


def _brokers(broker: Broker) -> list[dict[str, Any]]:
    return [{"node_id": broker.node_id, "broker_id": broker.node_id, "host": broker.host,
             "port": broker.port, "rack": None}]


def _topic_entry(broker: Broker, t: TopicImage) -> dict[str, Any]:
    node = broker.node_id
    return {
        "error_code": 0, "name": t.name, "topic_id": t.topic_id, "is_internal": t.internal,
        "partitions": [{"error_code": 0, "partition_index": p, "leader_id": node,
                        "leader_epoch": 0, "replica_nodes": (node,), "isr_nodes": (node,),
                        "offline_replicas": ()} for p in range(t.partitions)],
    }


async def metadata(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    image = broker.controller.image
    topics: list[dict[str, Any]] = []
    if req.topics is None or (ctx.version == 0 and not req.topics):
        topics = [_topic_entry(broker, t) for t in image.topics.values()]
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
                else:
                    topics.append(_topic_entry(broker, t))
                continue
            if name is None:
                continue
            t = image.topics.get(name)
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
    return {"throttle_time": 0, "brokers": _brokers(broker), "cluster_id": image.cluster_id,
            "controller_id": broker.node_id, "topics": topics}


def describe_cluster(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": 0, "error_message": None, "endpoint_type": 1,
            "cluster_id": broker.controller.image.cluster_id, "controller_id": broker.node_id,
            "brokers": _brokers(broker)}
