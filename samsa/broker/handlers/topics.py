"""CreateTopics, DeleteTopics, CreatePartitions: request-level checks (duplicates, Kafka's
per-request partition limit), then the controller, topic by topic."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import TYPE_CHECKING, Any

from samsa.broker import authz
from samsa.cluster.controller import ControllerError
from samsa.cluster.limits import EXCESSIVE, check_topic_assignments, request_total_too_large
from samsa.config import TOPIC_CONFIGS
from samsa.protocol.errors import Err
from samsa.security import authorizer as az
from samsa.security.quotas import MutationQuota, mutation_quota

from .forward import forward, must_forward, ok_names

_ZERO_ID = uuid.UUID(int=0)

if TYPE_CHECKING:
    from samsa.broker.broker import Broker
    from samsa.broker.server import RequestContext


def _refused_whole(r: dict[str, Any], too_large: bool, duplicate: bool) -> bool:
    """Kafka's request-level refusals, checked before anything else for each topic: the request
    adds too many partitions in all (POLICY_VIOLATION), or names this topic twice."""
    if too_large:
        r["error_code"], r["error_message"] = Err.POLICY_VIOLATION, EXCESSIVE
    elif duplicate:
        r["error_code"], r["error_message"] = Err.INVALID_REQUEST, "Duplicate topic name."
    else:
        return False
    return True


_THROTTLED = "The throttling quota has been exceeded."


def _over_quota(r: dict[str, Any], mq: MutationQuota) -> bool:
    """controller_mutation_rate (KIP-599): a strict request's topic fails while in debt."""
    if mq.exceeded():
        r["error_code"], r["error_message"] = Err.THROTTLING_QUOTA_EXCEEDED, _THROTTLED
        return True
    return False


def _throttle(ctx: RequestContext, mq: MutationQuota) -> int:
    ctx.throttle_ms = max(ctx.throttle_ms, mq.throttle_ms())
    return ctx.throttle_ms


def _duplicates(keys: list[Any]) -> set[Any]:
    return {k for k, n in Counter(keys).items() if n > 1}


def _requested_partitions(t: Any, default: int) -> int:
    """What a CreateTopics entry would add, as Kafka's per-request limit counts it."""
    if t.assignments:
        return len(t.assignments)
    return default if t.num_partitions == -1 else t.num_partitions


_DENIED = "Authorization failed."


async def create_topics(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    """ACLs (issue 17): CREATE on the cluster or on the topic."""
    may = authz.cluster(ctx, az.OP_CREATE)
    result = await authz.narrowed(
        _create_topics, broker, ctx, req, "topics",
        lambda t: may or authz.topic(ctx, az.OP_CREATE, t.name),
        lambda t: {"name": t.name, "topic_id": None, "error_code": Err.TOPIC_AUTHORIZATION_FAILED,
                   "error_message": _DENIED, "num_partitions": -1, "replication_factor": -1,
                   "configs": None}, "topics")
    # a created topic's settings only for a principal that may DESCRIBE_CONFIGS it (Kafka)
    if not authz.enabled(ctx) or ctx.version < 5 or all(
            authz.topic(ctx, az.OP_DESCRIBE_CONFIGS, t.name) for t in req.topics or ()):
        return result
    out = authz.as_dict(ctx, result)
    if out is None:
        return []
    topics = [authz.entry(t) for t in out.get("topics") or ()]
    for t in topics:
        if t["error_code"] == 0 and not authz.topic(ctx, az.OP_DESCRIBE_CONFIGS, t["name"]):
            t.update(num_partitions=-1, replication_factor=-1, configs=[],
                     topic_config_error_code=Err.TOPIC_AUTHORIZATION_FAILED)
    out["topics"] = topics
    return out


async def delete_topics(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    """ACLs (issue 17): DELETE on the topic (named, or found by its id)."""
    image = broker.node.image

    def name_of(item: Any) -> str | None:
        if isinstance(item, str):
            return item
        if item.name is not None:
            return str(item.name)
        t = image.by_id.get(item.topic_id)
        return None if t is None else t.name

    def allowed(item: Any) -> bool:
        name = name_of(item)
        return name is None or authz.topic(ctx, az.OP_DELETE, name)

    def denied(item: Any) -> dict[str, Any]:
        return {"name": name_of(item) if isinstance(item, str) or item.name is not None else None,
                "topic_id": None if isinstance(item, str) else item.topic_id,
                "error_code": Err.TOPIC_AUTHORIZATION_FAILED, "error_message": _DENIED}
    field = "topics" if getattr(req, "topics", None) else "topic_names"
    return await authz.narrowed(_delete_topics, broker, ctx, req, field, allowed, denied,
                                "responses")


async def create_partitions(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    """ACLs (issue 17): ALTER on the topic."""
    return await authz.narrowed(
        _create_partitions, broker, ctx, req, "topics",
        lambda t: authz.topic(ctx, az.OP_ALTER, t.name),
        lambda t: {"name": t.name, "error_code": Err.TOPIC_AUTHORIZATION_FAILED,
                   "error_message": _DENIED}, "results")


async def _create_topics(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    """Kafka's order: a request adding over 10,000 partitions fails whole (POLICY_VIOLATION);
    duplicate names fail (INVALID_REQUEST); each other topic is checked and created on its own."""
    if must_forward(broker, ctx):
        image = broker.node.image
        fwd = await forward(broker, ctx, lambda r: lambda: all(
            n in image.topics for n in ok_names(r.topics)) or bool(req.validate_only))
        if fwd is not None:
            return fwd
    topics = list(req.topics or ())
    default_partitions = broker.config.get_int("num.partitions")
    too_large = request_total_too_large(_requested_partitions(t, default_partitions)
                                        for t in topics)
    dups = _duplicates([t.name for t in topics])
    mq = mutation_quota(broker.quotas, ctx, 6)
    results = []
    for t in topics:
        r: dict[str, Any] = {"name": t.name, "topic_id": None, "error_code": 0,
                             "error_message": None, "num_partitions": -1,
                             "replication_factor": -1, "configs": None}
        results.append(r)
        if _refused_whole(r, too_large, t.name in dups) or _over_quota(r, mq):
            continue
        configs = {c.name: c.value for c in (t.configs or ())}
        partitions, replication = t.num_partitions, t.replication_factor
        try:
            if t.assignments:
                if replication != -1:
                    raise ControllerError(Err.INVALID_REQUEST,
                                          "A manual partition assignment was specified, but "
                                          "replication factor was not set to -1.")
                if partitions != -1:
                    raise ControllerError(Err.INVALID_REQUEST,
                                          "A manual partition assignment was specified, but "
                                          "numPartitions was not set to -1.")
                partitions, replication = check_topic_assignments(
                    [(a.partition_index, a.broker_ids) for a in t.assignments],
                    broker.controller.node_ids)
            tid = await broker.controller.create_topic(
                t.name, -1 if t.assignments else partitions,
                -1 if t.assignments else replication, configs, validate_only=req.validate_only,
                assignments=[(a.partition_index, tuple(a.broker_ids)) for a in t.assignments]
                if t.assignments else None)
        except ControllerError as e:
            r["error_code"], r["error_message"] = e.code, str(e)
            continue
        if not req.validate_only:
            mq.record(_requested_partitions(t, default_partitions))
        eff = broker.controller.topic_configs(t.name) if not req.validate_only else {
            **broker.controller.topic_configs(""), **{k: v for k, v in configs.items() if v}}
        r.update(topic_id=tid,
                 num_partitions=partitions if partitions != -1 else default_partitions,
                 replication_factor=_replication(broker, t.name, replication),
                 configs=[{"name": k, "value": eff.get(k), "read_only": False,
                           "config_source": 1 if k in configs else 5, "is_sensitive": False}
                          for k in TOPIC_CONFIGS])
    return {"throttle_time": _throttle(ctx, mq), "topics": results}


async def _delete_topics(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    """Each entry names a topic by name or (v6+) by id, not both; a name or id given twice fails
    (INVALID_REQUEST), as Kafka's controller answers."""
    if must_forward(broker, ctx):
        image = broker.node.image
        fwd = await forward(broker, ctx, lambda r: lambda: not any(
            n in image.topics for n in ok_names(r.responses)))
        if fwd is not None:
            return fwd
    names = getattr(req, "topic_names", None)
    if names is not None and not getattr(req, "topics", None):
        items: list[tuple[str | None, uuid.UUID | None]] = [(n, None) for n in names]
    else:
        items = [(t.name, None if t.topic_id == _ZERO_ID else t.topic_id)
                 for t in (req.topics or ())]
    dup_names = _duplicates([n for n, _ in items if n is not None])
    dup_ids = _duplicates([i for n, i in items if n is None and i is not None])
    mq = mutation_quota(broker.quotas, ctx, 5)
    results = []
    for name, tid in items:
        r: dict[str, Any] = {"name": name, "topic_id": tid, "error_code": 0, "error_message": None}
        results.append(r)
        bad = ("You may not specify both topic name and topic id."
               if name is not None and tid is not None
               else "Duplicate topic name." if name in dup_names
               else "Duplicate topic id." if name is None and tid in dup_ids
               else "Neither topic name nor id were specified." if name is None and tid is None
               else None)
        if bad:
            r["error_code"], r["error_message"] = Err.INVALID_REQUEST, bad
            continue
        image = broker.controller.image
        if name is None:
            t = image.by_id.get(tid) if tid is not None else None
            if t is None:
                r["error_code"] = Err.UNKNOWN_TOPIC_ID
                continue
            name = r["name"] = t.name
        t = image.topics.get(name)
        if t is not None:
            r["topic_id"] = t.topic_id
        if _over_quota(r, mq):
            continue
        try:
            await broker.controller.delete_topic(name)  # offsets go as brokers apply it
        except ControllerError as e:
            r["error_code"], r["error_message"] = e.code, str(e)
            continue
        mq.record(t.count if t is not None else 0)
    return {"throttle_time": _throttle(ctx, mq), "responses": results}


async def _create_partitions(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    """A request adding over 10,000 partitions in all fails whole (POLICY_VIOLATION, as Kafka's
    controller answers); duplicate names fail (INVALID_REQUEST); each other topic on its own."""
    if must_forward(broker, ctx):
        image = broker.node.image
        want = {t.name: t.count for t in req.topics}
        fwd = await forward(broker, ctx, lambda r: lambda: bool(req.validate_only) or all(
            n in image.topics and image.topics[n].count >= want.get(n, 0)
            for n in ok_names(r.results)))
        if fwd is not None:
            return fwd
    topics = list(req.topics or ())
    image = broker.controller.image
    too_large = request_total_too_large(
        t.count - image.topics[t.name].count for t in topics if t.name in image.topics)
    dups = _duplicates([t.name for t in topics])
    mq = mutation_quota(broker.quotas, ctx, 3)
    results = []
    for t in topics:
        r: dict[str, Any] = {"name": t.name, "error_code": 0, "error_message": None}
        results.append(r)
        if _refused_whole(r, too_large, t.name in dups) or _over_quota(r, mq):
            continue
        assignments = None if t.assignments is None else [a.broker_ids for a in t.assignments]
        before = image.topics[t.name].count if t.name in image.topics else 0
        try:
            await broker.controller.create_partitions(t.name, t.count, req.validate_only,
                                                      assignments)
        except ControllerError as e:
            r["error_code"], r["error_message"] = e.code, str(e)
            continue
        if not req.validate_only:
            mq.record(t.count - before)
    return {"throttle_time": _throttle(ctx, mq), "results": results}


def _replication(broker: Broker, name: str, asked: int) -> int:
    t = broker.node.image.topics.get(name)
    if t is not None and t.partitions:
        return len(next(iter(t.partitions.values())).replicas)
    return asked if asked != -1 else broker.config.get_int("default.replication.factor")
