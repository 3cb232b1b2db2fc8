"""DescribeConfigs, AlterConfigs, IncrementalAlterConfigs and DescribeLogDirs."""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING, Any

from samsa.broker import authz
from samsa.cluster.controller import ControllerError
from samsa.config import (
    BROKER_CONFIGS,
    CONFIG_TYPE,
    STATIC_DEFAULTS,
    TOPIC_CONFIGS,
    ConfigDef,
    broker_synonyms,
    is_read_only,
)
from samsa.protocol import log_dirs_remote
from samsa.protocol.errors import Err
from samsa.security import authorizer as az

from . import remote_reads
from .forward import forward, must_forward

if TYPE_CHECKING:
    from samsa.broker.broker import Broker
    from samsa.broker.server import RequestContext

TOPIC, BROKER = 2, 4
# DescribeConfigs sources (TOPIC_CONFIG is the client's DYNAMIC_TOPIC_CONFIG)
DYNAMIC_TOPIC, DYNAMIC_BROKER, DYNAMIC_DEFAULT_BROKER, STATIC_BROKER, DEFAULT = 1, 2, 3, 4, 5
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

Layers = list[tuple[dict[str, str], int]]


def _layers(broker: Broker) -> Layers:
    """Where a broker setting can come from, highest precedence first."""
    image = broker.controller.image
    own = image.node_configs.get(broker.node_id, {})
    return [(own, DYNAMIC_BROKER), (image.cluster_configs, DYNAMIC_DEFAULT_BROKER),
            (broker.config.values, STATIC_BROKER), (STATIC_DEFAULTS, DEFAULT)]


def _synonyms(layers: Layers, name: str, sensitive: bool) -> list[dict[str, Any]]:
    """Kafka's synonym list for broker setting `name`: every layer in precedence order, each with
    all the names the setting has (log.retention.ms, .minutes, .hours), then everything before
    the first entry for `name` itself dropped, as Kafka does (so log.retention.ms has no synonyms
    while only log.retention.hours is set)."""
    names = broker_synonyms(name)
    out = [{"name": n, "value": None if sensitive else values[n], "source": source}
           for values, source in layers for n in names if n in values]
    first = next((i for i, s in enumerate(out) if s["name"] == name), len(out))
    return out[first:]


def _entry(name: str, value: str | None, synonyms: list[dict[str, Any]], syn: bool,
           d: ConfigDef, read_only: bool, doc: bool) -> dict[str, Any]:
    sensitive = d.type == "password"
    source = synonyms[0]["source"] if synonyms else DEFAULT
    return {"name": name, "value": None if sensitive else value, "read_only": read_only,
            "config_source": source, "is_default": source == DEFAULT, "is_sensitive": sensitive,
            "synonyms": synonyms if syn else [], "config_type": CONFIG_TYPE.get(d.type, 0),
            "documentation": d.doc if doc else None}


def _describe_topic(broker: Broker, name: str, keys: set[str] | None, syn: bool,
                    doc: bool) -> list[dict[str, Any]]:
    """Kafka's createTopicConfigEntry: the topic's own value (TOPIC_CONFIG), then the synonyms
    of the broker setting that provides its default; never read-only."""
    own = broker.controller.image.topics[name].configs
    effective = broker.controller.topic_configs(name)
    layers = _layers(broker)
    out = []
    for k, d in TOPIC_CONFIGS.items():
        if keys and k not in keys:
            continue
        chain: list[dict[str, Any]] = []
        if k in own:
            chain.append({"name": k, "value": own[k], "source": DYNAMIC_TOPIC})
        if d.broker_synonym:
            chain += _synonyms(layers, d.broker_synonym, d.type == "password")
        out.append(_entry(k, effective.get(k, d.default), chain, syn, d, False, doc))
    return out


def _describe_broker(broker: Broker, per_broker: bool, keys: set[str] | None, syn: bool,
                     doc: bool) -> list[dict[str, Any]]:
    """Kafka's createBrokerConfigEntry. The broker's id describes every setting it knows; the
    cluster-default resource ("") only the dynamic defaults that are set."""
    layers = _layers(broker)
    if per_broker:
        names = sorted(BROKER_CONFIGS)
    else:
        names = sorted(k for k in broker.controller.image.cluster_configs if k in BROKER_CONFIGS)
        layers = [(values, src) for values, src in layers if src == DYNAMIC_DEFAULT_BROKER]
    out = []
    for k in names:
        if keys and k not in keys:
            continue
        d = BROKER_CONFIGS[k]
        value = next((values[k] for values, _ in layers if k in values), None)
        chain = _synonyms(layers, k, d.type == "password")
        out.append(_entry(k, value, chain, syn, d, is_read_only(k), doc))
    return out


def _config_denied(ctx: RequestContext, res: Any, operation: int) -> int:
    """ACLs (issue 17): DESCRIBE_CONFIGS / ALTER_CONFIGS on the topic, or on the cluster for a
    broker resource."""
    if res.resource_type == TOPIC:
        return 0 if authz.topic(ctx, operation, res.resource_name) \
            else Err.TOPIC_AUTHORIZATION_FAILED
    if res.resource_type == BROKER:
        return 0 if authz.cluster(ctx, operation) else Err.CLUSTER_AUTHORIZATION_FAILED
    return 0


def _alter_denied(res: Any, code: int) -> dict[str, Any]:
    return {"error_code": code, "error_message": None, "resource_type": res.resource_type,
            "resource_name": res.resource_name}


async def alter_configs(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    return await authz.narrowed(
        _alter_configs, broker, ctx, req, "resources",
        lambda r: not _config_denied(ctx, r, az.OP_ALTER_CONFIGS),
        lambda r: _alter_denied(r, _config_denied(ctx, r, az.OP_ALTER_CONFIGS)), "responses")


async def incremental_alter_configs(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    return await authz.narrowed(
        _incremental_alter_configs, broker, ctx, req, "resources",
        lambda r: not _config_denied(ctx, r, az.OP_ALTER_CONFIGS),
        lambda r: _alter_denied(r, _config_denied(ctx, r, az.OP_ALTER_CONFIGS)), "responses")


def describe_configs(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    results = []
    for res in req.resources:
        if code := _config_denied(ctx, res, az.OP_DESCRIBE_CONFIGS):
            results.append({"error_code": code, "error_message": None,
                            "resource_type": res.resource_type,
                            "resource_name": res.resource_name, "configs": []})
            continue
        keys = set(res.configuration_keys) if res.configuration_keys else None
        syn = getattr(req, "include_synonyms", False)
        doc = getattr(req, "include_documentation", False)
        r: dict[str, Any] = {"error_code": 0, "error_message": None,
                             "resource_type": res.resource_type,
                             "resource_name": res.resource_name, "configs": []}
        if res.resource_type == TOPIC:
            if res.resource_name not in broker.controller.image.topics:
                r["error_code"] = Err.UNKNOWN_TOPIC_OR_PARTITION
                r["error_message"] = f"Topic {res.resource_name} does not exist"
            else:
                r["configs"] = _describe_topic(broker, res.resource_name, keys, syn, doc)
        elif res.resource_type == BROKER:
            if res.resource_name not in ("", str(broker.node_id)):
                r["error_code"] = Err.INVALID_REQUEST
                r["error_message"] = (f"Unexpected broker id, expected {broker.node_id} or empty "
                                      f"string, but received {res.resource_name}")
            else:
                r["configs"] = _describe_broker(broker, res.resource_name != "", keys, syn, doc)
        else:
            r["error_code"] = Err.INVALID_REQUEST
            r["error_message"] = f"Unsupported resource type {res.resource_type}"
        results.append(r)
    return {"throttle_time": 0, "results": results}


def _broker_layer(broker: Broker, res: Any) -> dict[str, str]:
    """The dynamic settings a broker resource holds: its own ("1") or the cluster defaults ("")."""
    image = broker.controller.image
    if not res.resource_name:
        return image.cluster_configs
    try:
        return image.node_configs.get(int(res.resource_name), {})
    except ValueError:
        return {}


async def _apply(broker: Broker, res: Any, changes: dict[str, str | None],
                 validate_only: bool) -> dict[str, Any]:
    r: dict[str, Any] = {"error_code": 0, "error_message": None,
                         "resource_type": res.resource_type, "resource_name": res.resource_name}
    try:
        if res.resource_type == TOPIC:
            await broker.controller.alter_topic_configs(res.resource_name, changes, validate_only)
        elif res.resource_type == BROKER:
            known = {str(b) for b in broker.controller.image.brokers} | {str(broker.node_id)}
            if res.resource_name not in known | {""}:
                raise ControllerError(Err.INVALID_REQUEST,
                                      f"Unexpected broker id {res.resource_name}")
            fixed = sorted(k for k in changes if k in BROKER_CONFIGS and is_read_only(k))
            if fixed:
                raise ControllerError(Err.INVALID_REQUEST, "Cannot update these configs "
                                      f"dynamically: Set({', '.join(fixed)})")
            check_tls = getattr(broker, "check_tls_changes", None)  # new key stores must load
            if check_tls is not None and res.resource_name in ("", str(broker.node_id)):
                check_tls(changes, res.resource_name)
            try:
                await broker.controller.alter_broker_configs(changes, validate_only,
                                                             res.resource_name)
            except ControllerError as e:
                # Kafka answers INVALID_REQUEST for any broker config it cannot apply (KAFKA-13609)
                raise ControllerError(Err.INVALID_REQUEST, str(e)) from None
        else:
            raise ControllerError(Err.INVALID_REQUEST,
                                  f"Unsupported resource type {res.resource_type}")
    except ControllerError as e:
        r["error_code"], r["error_message"] = e.code, str(e)
    return r


async def _alter_configs(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    """Legacy AlterConfigs: the given set replaces every dynamic config of the resource."""
    if must_forward(broker, ctx):
        fwd = await forward(broker, ctx, _configs_settled(broker))
        if fwd is not None:
            return fwd
    out = []
    for res in req.resources:
        changes: dict[str, str | None] = {c.name: c.value for c in res.configs}
        held: dict[str, str] = {}
        if res.resource_type == TOPIC and res.resource_name in broker.controller.image.topics:
            held = broker.controller.image.topics[res.resource_name].configs
        elif res.resource_type == BROKER:
            held = _broker_layer(broker, res)
        for k in held:
            changes.setdefault(k, None)
        out.append(await _apply(broker, res, changes, req.validate_only))
    return {"throttle_time": 0, "responses": out}


def _list_base(broker: Broker, res: Any, name: str) -> tuple[ConfigDef | None, str]:
    """What APPEND/SUBTRACT start from, as Kafka: the resource's own value, else the built-in
    default (not a broker-level default)."""
    if res.resource_type == TOPIC:
        d = TOPIC_CONFIGS.get(name)
        t = broker.controller.image.topics.get(res.resource_name)
        own = t.configs if t is not None else {}
    elif res.resource_type == BROKER:
        d = BROKER_CONFIGS.get(name)
        own = _broker_layer(broker, res)
    else:
        return None, ""
    if d is None:
        return None, ""
    return d, own.get(name, d.default or "")


async def _incremental_alter_configs(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    if must_forward(broker, ctx):
        fwd = await forward(broker, ctx, _configs_settled(broker))
        if fwd is not None:
            return fwd
    out = []
    for res in req.resources:
        changes: dict[str, str | None] = {}
        bad = None
        for c in res.configs:
            op = c.config_operation
            if op == SET:
                changes[c.name] = c.value
            elif op == DELETE:
                changes[c.name] = None
            elif op in (APPEND, SUBTRACT):
                d, base = _list_base(broker, res, c.name)
                if d is None or d.type != "list":
                    bad = f"Config {c.name} is not a list: cannot APPEND or SUBTRACT"
                    break
                current = changes.get(c.name)
                items = [x for x in (base if current is None else current).split(",") if x]
                vals = [x for x in (c.value or "").split(",") if x]
                if op == APPEND:
                    items += [v for v in vals if v not in items]
                else:
                    # may leave an empty list: valid (cleanup.policy= keeps everything)
                    items = [x for x in items if x not in vals]
                changes[c.name] = ",".join(items)
            else:
                bad = f"Unknown config operation {op}"
                break
        if bad is not None:
            out.append({"error_code": Err.INVALID_CONFIG, "error_message": bad,
                        "resource_type": res.resource_type, "resource_name": res.resource_name})
            continue
        out.append(await _apply(broker, res, changes, req.validate_only))
    return {"throttle_time": 0, "responses": out}


def describe_log_dirs(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    """Every replica this broker holds (leader or follower), per log dir. The offset lag is
    Kafka's for a current (not future) replica: how far its log end is behind its own high
    watermark, never negative. With tiered storage a tiered partition also carries its remote
    size (a tagged field, samsa.protocol.log_dirs_remote)."""
    wanted: dict[str, set[int]] | None = None
    if not authz.cluster(ctx, az.OP_DESCRIBE):  # ACLs (issue 17)
        return {"throttle_time": 0, "error_code": Err.CLUSTER_AUTHORIZATION_FAILED,
                "results": []}
    if req.topics is not None:
        wanted = {t.topic: set(t.partitions) for t in req.topics}
    results = []
    tiered = getattr(broker, "remote_log_manager", None) is not None
    for d in broker.logs.log_dirs:
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, p), lg in sorted(broker.logs.logs.items()):
            if lg.dir.parent != d or (wanted is not None and p not in wanted.get(topic, ())):
                continue
            entry = {
                "partition_index": p, "partition_size": lg.size_bytes,
                "offset_lag": max(lg.high_watermark - lg.end_offset, 0), "is_future_key": False}
            if tiered:  # tiered storage: partition_size stays the local size, as in Kafka
                remote = remote_reads.remote_size_or_none(broker, topic, p, lg)
                if remote is not None:
                    entry["remote_size"] = remote
            by_topic.setdefault(topic, []).append(entry)
        usage = shutil.disk_usage(d)
        results.append({"error_code": 0, "log_dir": str(d.resolve()),
                        "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
                        "total_bytes": usage.total, "usable_bytes": usage.free})
    out = {"throttle_time": 0, "error_code": 0, "results": results}
    if tiered and ctx.version >= log_dirs_remote.FIRST_VERSION:
        return log_dirs_remote.encode(ctx.version, ctx.correlation_id, out)
    return out


def _configs_settled(broker: Broker) -> Any:
    """After a forwarded config change: wait until the local image has caught up with the
    controller's log end at the time of the answer (the high watermark it learned)."""
    driver = broker.node.driver

    def settled(_resp: Any) -> Any:
        target = driver.high_watermark - 1 if driver is not None else -1
        return lambda: broker.node.image.offset >= target
    return settled
