"""DescribeConfigs, AlterConfigs, IncrementalAlterConfigs and DescribeLogDirs."""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING, Any

from samsa.cluster.controller import ControllerError
from samsa.config import BROKER_CONFIGS, CONFIG_TYPE, TOPIC_CONFIGS
from samsa.protocol.errors import Err

if TYPE_CHECKING:
    from samsa.broker.broker import Broker
    from samsa.broker.server import RequestContext

TOPIC, BROKER = 2, 4
# DescribeConfigs sources
DYNAMIC_TOPIC, DYNAMIC_BROKER, DYNAMIC_DEFAULT_BROKER, STATIC_BROKER, DEFAULT = 1, 2, 3, 4, 5
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _entry(name: str, value: str | None, source: int, synonyms: list[dict[str, Any]],
           ctype: str, doc: str, include_doc: bool) -> dict[str, Any]:
    return {"name": name, "value": value, "read_only": False, "config_source": source,
            "is_default": source == DEFAULT, "is_sensitive": ctype == "password",
            "synonyms": synonyms, "config_type": CONFIG_TYPE.get(ctype, 0),
            "documentation": doc if include_doc else None}


def _describe_topic(broker: Broker, name: str, keys: set[str] | None, syn: bool,
                    doc: bool) -> list[dict[str, Any]]:
    t = broker.controller.image.topics[name]
    dyn_broker = broker.controller.image.broker_configs
    out = []
    for k, d in TOPIC_CONFIGS.items():
        if keys is not None and k not in keys:
            continue
        chain: list[dict[str, Any]] = []
        if k in t.configs:
            chain.append({"name": k, "value": t.configs[k], "source": DYNAMIC_TOPIC})
        if d.broker_synonym and d.broker_synonym in dyn_broker:
            chain.append({"name": d.broker_synonym, "value": dyn_broker[d.broker_synonym],
                          "source": DYNAMIC_DEFAULT_BROKER})
        static, src = broker.config.topic_default(k)
        if src == STATIC_BROKER:
            chain.append({"name": d.broker_synonym or k, "value": static, "source": STATIC_BROKER})
        if d.default is not None:
            chain.append({"name": d.broker_synonym or k, "value": d.default, "source": DEFAULT})
        value, source = (chain[0]["value"], chain[0]["source"]) if chain else (None, DEFAULT)
        out.append(_entry(k, value, source, chain if syn else [], d.type, d.doc, doc))
    return out


def _describe_broker(broker: Broker, keys: set[str] | None, syn: bool,
                     doc: bool) -> list[dict[str, Any]]:
    dyn = broker.controller.image.broker_configs
    out = []
    for k, d in sorted(BROKER_CONFIGS.items()):
        if keys is not None and k not in keys:
            continue
        chain: list[dict[str, Any]] = []
        if k in dyn:
            chain.append({"name": k, "value": dyn[k], "source": DYNAMIC_DEFAULT_BROKER})
        if k in broker.config.values:
            chain.append({"name": k, "value": broker.config.values[k], "source": STATIC_BROKER})
        if d.default is not None:
            chain.append({"name": k, "value": d.default, "source": DEFAULT})
        value, source = (chain[0]["value"], chain[0]["source"]) if chain else (None, DEFAULT)
        out.append(_entry(k, value, source, chain if syn else [], d.type, d.doc, doc))
    return out


def describe_configs(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    results = []
    for res in req.resources:
        keys = set(res.configuration_keys) if res.configuration_keys is not None else None
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
                r["error_message"] = f"Unexpected broker id {res.resource_name}"
            else:
                r["configs"] = _describe_broker(broker, keys, syn, doc)
        else:
            r["error_code"] = Err.INVALID_REQUEST
            r["error_message"] = f"Unsupported resource type {res.resource_type}"
        results.append(r)
    return {"throttle_time": 0, "results": results}


async def _apply(broker: Broker, res: Any, changes: dict[str, str | None],
                 validate_only: bool) -> dict[str, Any]:
    r: dict[str, Any] = {"error_code": 0, "error_message": None,
                         "resource_type": res.resource_type, "resource_name": res.resource_name}
    try:
        if res.resource_type == TOPIC:
            await broker.controller.alter_topic_configs(res.resource_name, changes, validate_only)
        elif res.resource_type == BROKER:
            await broker.controller.alter_broker_configs(changes, validate_only)
        else:
            raise ControllerError(Err.INVALID_REQUEST,
                                  f"Unsupported resource type {res.resource_type}")
    except ControllerError as e:
        r["error_code"], r["error_message"] = e.code, str(e)
    return r


async def alter_configs(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    """Legacy AlterConfigs: the given set replaces every dynamic config of the resource."""
    out = []
    for res in req.resources:
        changes: dict[str, str | None] = {c.name: c.value for c in res.configs}
        if res.resource_type == TOPIC and res.resource_name in broker.controller.image.topics:
            for k in broker.controller.image.topics[res.resource_name].configs:
                changes.setdefault(k, None)
        out.append(await _apply(broker, res, changes, req.validate_only))
    return {"throttle_time": 0, "responses": out}


async def incremental_alter_configs(broker: Broker, ctx: RequestContext,
                                    req: Any) -> dict[str, Any]:
    out = []
    for res in req.resources:
        current: dict[str, str] = {}
        if res.resource_type == TOPIC:
            current = broker.controller.topic_configs(res.resource_name)
        changes: dict[str, str | None] = {}
        bad = None
        for c in res.configs:
            op = c.config_operation
            if op == SET:
                changes[c.name] = c.value
            elif op == DELETE:
                changes[c.name] = None
            elif op in (APPEND, SUBTRACT):
                d = TOPIC_CONFIGS.get(c.name)
                if d is None or d.type != "list":
                    bad = f"Config {c.name} is not a list: cannot APPEND or SUBTRACT"
                    break
                items = [x for x in (current.get(c.name) or "").split(",") if x]
                vals = [x for x in (c.value or "").split(",") if x]
                if op == APPEND:
                    items += [v for v in vals if v not in items]
                else:
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


def describe_log_dirs(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    wanted: dict[str, set[int]] | None = None
    if req.topics is not None:
        wanted = {t.topic: set(t.partitions) for t in req.topics}
    results = []
    for d in broker.logs.log_dirs:
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, p), lg in sorted(broker.logs.logs.items()):
            if lg.dir.parent != d or (wanted is not None and p not in wanted.get(topic, ())):
                continue
            by_topic.setdefault(topic, []).append({"partition_index": p,
                                                   "partition_size": lg.size_bytes,
                                                   "offset_lag": 0, "is_future_key": False})
        usage = shutil.disk_usage(d)
        results.append({"error_code": 0, "log_dir": str(d.resolve()),
                        "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
                        "total_bytes": usage.total, "usable_bytes": usage.free})
    return {"throttle_time": 0, "error_code": 0, "results": results}
