"""CreateTopics, DeleteTopics, CreatePartitions: thin wrappers over the controller."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from samsa.cluster.controller import ControllerError
from samsa.config import TOPIC_CONFIGS
from samsa.protocol.errors import Err

if TYPE_CHECKING:
    from samsa.broker.broker import Broker
    from samsa.broker.server import RequestContext


async def create_topics(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    results = []
    seen: dict[str, int] = {}
    for t in req.topics:
        seen[t.name] = seen.get(t.name, 0) + 1
    for t in req.topics:
        r: dict[str, Any] = {"name": t.name, "topic_id": None, "error_code": 0,
                             "error_message": None, "num_partitions": -1,
                             "replication_factor": -1, "configs": None}
        if seen[t.name] > 1:
            r["error_code"] = Err.INVALID_REQUEST
            r["error_message"] = f"Create topics request from client contains duplicate topic {t.name}"
            results.append(r)
            continue
        configs = {c.name: c.value for c in t.configs}
        partitions, replication = t.num_partitions, t.replication_factor
        if t.assignments:
            if partitions != -1 or replication != -1:
                r["error_code"] = Err.INVALID_REQUEST
                r["error_message"] = ("Both numPartitions or replicationFactor and "
                                      "replicasAssignments were set.")
                results.append(r)
                continue
            partitions = len(t.assignments)
            replication = len(t.assignments[0].broker_ids)
            if any(list(a.broker_ids) != [broker.node_id] for a in t.assignments):
                r["error_code"] = Err.INVALID_REPLICA_ASSIGNMENT
                r["error_message"] = f"Unknown broker in replica assignment; only {broker.node_id}"
                results.append(r)
                continue
        try:
            tid = await broker.controller.create_topic(t.name, partitions, replication, configs,
                                                       validate_only=req.validate_only)
        except ControllerError as e:
            r["error_code"], r["error_message"] = e.code, str(e)
            results.append(r)
            continue
        eff = broker.controller.topic_configs(t.name) if not req.validate_only else {
            **broker.controller.topic_configs(""), **{k: v for k, v in configs.items() if v}}
        r.update(topic_id=tid,
                 num_partitions=partitions if partitions != -1 else broker.config.get_int("num.partitions"),
                 replication_factor=1,
                 configs=[{"name": k, "value": eff.get(k), "read_only": False,
                           "config_source": 1 if k in configs else 5, "is_sensitive": False}
                          for k in TOPIC_CONFIGS])
        results.append(r)
    return {"throttle_time": 0, "topics": results}


async def delete_topics(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    results = []
    names = getattr(req, "topic_names", None)
    if names is not None and not getattr(req, "topics", None):
        items = [(n, None) for n in names]
    else:
        items = [(t.name, t.topic_id) for t in req.topics]
    image = broker.controller.image
    for name, tid in items:
        r: dict[str, Any] = {"name": name, "topic_id": tid, "error_code": 0, "error_message": None}
        if name is None and tid is not None:
            t = image.by_id.get(tid)
            if t is None:
                r["error_code"] = Err.UNKNOWN_TOPIC_ID
                results.append(r)
                continue
            name = r["name"] = t.name
        t = image.topics.get(name or "")
        if t is not None:
            r["topic_id"] = t.topic_id
        try:
            await broker.controller.delete_topic(name or "")
            await broker.groups.forget_topic(name or "")
        except ControllerError as e:
            r["error_code"], r["error_message"] = e.code, str(e)
        results.append(r)
    return {"throttle_time": 0, "responses": results}


async def create_partitions(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    results = []
    for t in req.topics:
        r: dict[str, Any] = {"name": t.name, "error_code": 0, "error_message": None}
        try:
            await broker.controller.create_partitions(t.name, t.count, req.validate_only)
        except ControllerError as e:
            r["error_code"], r["error_message"] = e.code, str(e)
        results.append(r)
    return {"throttle_time": 0, "results": results}
