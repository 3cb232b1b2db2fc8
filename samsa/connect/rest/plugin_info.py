"""What `/connector-plugins` answers: PluginInfo entries ({"class", "type", "version"}) in Kafka's
order (sink and source connectors, then transformations, predicates, converters and header
converters, each sorted by class name), and a plugin's own config definition (KIP-769)."""

from __future__ import annotations

from typing import Any

from ..errors import NotFoundException
from ..plugins import PluginDesc, Plugins, PluginType
from ..runtime.herder import Herder

ORDER = (PluginType.SINK, PluginType.SOURCE, PluginType.TRANSFORMATION, PluginType.PREDICATE,
         PluginType.CONVERTER, PluginType.HEADER_CONVERTER)
CONNECTORS = (PluginType.SINK, PluginType.SOURCE)


def plugin_info(desc: PluginDesc) -> dict[str, Any]:
    return {"class": desc.name, "type": desc.kind.value, "version": desc.version()}


def listing(plugins: Plugins, connectors_only: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for kind in (CONNECTORS if connectors_only else ORDER):
        out.extend(plugin_info(d) for d in plugins.listing((kind,)))
    return out


def plugin_config(herder: Herder, name: str) -> list[dict[str, Any]]:
    """The ConfigKeyInfo list of a plugin, as Kafka's connectorPluginConfig answers it: the
    plugin's own keys, then (connectors) the framework's source/sink connector keys it does not
    define itself. A herder may answer instead through `connector_plugin_config(name)`."""
    custom = getattr(herder, "connector_plugin_config", None)
    if callable(custom):
        return list(custom(name))
    try:
        desc = herder.plugins.find(name)
    except NotFoundException:
        raise NotFoundException(f"Unknown plugin {name}.") from None
    keys = dict(desc.load()().config().keys)
    if desc.kind in CONNECTORS:
        from ..runtime.connector_config import sink_def, source_def
        base = source_def() if desc.kind is PluginType.SOURCE else sink_def()
        for key_name, key in base.keys.items():
            keys.setdefault(key_name, key)
    return [key.definition() for key in keys.values()]


def normalized(name: str) -> str:
    """Kafka's comparison form of a connector class name: without a trailing "Connector"."""
    suffix = "Connector"
    return name[: -len(suffix)] if name.endswith(suffix) and len(name) > len(suffix) else name
