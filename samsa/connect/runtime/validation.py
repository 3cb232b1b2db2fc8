"""Validating a connector config the way Kafka's AbstractHerder does: the runtime's own keys
(with transforms and predicates enriched), the connector's keys (its `validate`), the sink's
topics rules, the client override policy and exactly-once requirements — one ConfigInfos answer
with every error by key."""

from __future__ import annotations

import logging
from typing import Any

from ..api import ExactlyOnceSupport, SinkConnector, SourceConnector
from ..config_def import ConfigDef, ConfigKey, ConfigValue
from ..errors import BadRequestException, NotFoundException
from ..plugins import Plugins, PluginType
from .connector_config import sink_def, sink_topics_errors, source_def
from .worker import policy_errors

log = logging.getLogger("samsa.connect.validation")


def _enrich(base: ConfigDef, props: dict[str, str], plugins: Plugins) -> ConfigDef:
    try:
        from ..transforms.chain import enrich_config_def
    except ImportError:
        return base
    return enrich_config_def(base, props, plugins)


def validate_connector_config(plugins: Plugins, props: dict[str, str], *, override_policy: str,
                              exactly_once_source: bool) -> dict[str, Any]:
    cls_name = (props.get("connector.class") or "").strip()
    if not cls_name:
        raise BadRequestException(f"Connector config {props} contains no connector type")
    try:
        desc = plugins.find(cls_name, PluginType.SOURCE, PluginType.SINK)
    except NotFoundException as e:
        raise BadRequestException(str(e)) from None
    connector = desc.load()()
    is_sink = isinstance(connector, SinkConnector)
    base = sink_def() if is_sink else source_def()
    enriched = _enrich(base, props, plugins)
    values: dict[str, ConfigValue] = enriched.validate(props)
    keys: dict[str, ConfigKey] = dict(enriched.keys)
    groups = enriched.groups()

    if is_sink:
        for msg in sink_topics_errors(props):
            target = "topics.regex" if "regex" in msg and "DLQ" not in msg else "topics"
            values["topics"].errors.append(msg)
            if target == "topics.regex" or "mutually exclusive" in msg:
                values["topics.regex"].errors.append(msg)
    for key, msg in policy_errors(override_policy, props):
        values.setdefault(key, ConfigValue(key, props[key])).errors.append(msg)
    if isinstance(connector, SourceConnector) and exactly_once_source and \
            props.get("exactly.once.support", "requested").lower() == "required":
        try:
            support = connector.exactly_once_support(props)
        except Exception as e:
            support = None
            values["exactly.once.support"].errors.append(f"the connector failed to answer: {e}")
        if support is not ExactlyOnceSupport.SUPPORTED:
            values["exactly.once.support"].errors.append(
                "The connector does not implement the API required for preflight validation of "
                "exactly-once source support" if support is None else
                "The connector does not support exactly-once semantics with the provided "
                "configuration.")

    try:
        own_def = connector.config()
        own_values = connector.validate(dict(props))
    except Exception as e:  # a connector whose validate fails: report it on connector.class
        log.warning("connector %s failed to validate: %s", cls_name, e)
        own_def, own_values = ConfigDef(), {}
        values["connector.class"].errors.append(f"validation by the connector failed: {e}")
    for name, key in own_def.keys.items():
        if name not in keys:
            keys[name] = key
            if key.group and key.group not in groups:
                groups.append(key.group)
    for name, cv in own_values.items():
        if name in values and name in base.keys:
            values[name].errors.extend(e for e in cv.errors if e not in values[name].errors)
        else:
            values[name] = cv

    configs = []
    error_count = 0
    for name, cv in values.items():
        ckey = keys.get(name)
        error_count += len(cv.errors)
        configs.append({"definition": ckey.definition() if ckey is not None else None,
                        "value": cv.info(ckey.type if ckey is not None else None)})
    return {"name": desc.name, "error_count": error_count, "groups": groups, "configs": configs}


def errors_of(result: dict[str, Any]) -> list[str]:
    out = []
    for c in result["configs"]:
        for e in c["value"]["errors"]:
            out.append(f"{c['value']['name']}: {e}" if not e.startswith(c["value"]["name"]) else e)
    return out


def raise_if_invalid(result: dict[str, Any]) -> None:
    """Kafka's answer to creating an invalid connector: 400 with the count and the messages."""
    if result["error_count"]:
        msgs = errors_of(result)
        raise BadRequestException(
            f"Connector configuration is invalid and contains the following {result['error_count']} "
            f"error(s):\n" + "\n".join(msgs) +
            "\nYou can also find the above list of errors at the endpoint "
            "`/connector-plugins/{connectorType}/config/validate`")
