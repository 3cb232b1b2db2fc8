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
    """The ConfigKeyInfo list of a plugin. A herder that knows the framework's base definitions
    (ConnectorConfig's `name`, `connector.class`, `tasks.max`, ...) provides
    `connector_plugin_config(name)`, and its answer is used; otherwise the plugin's own keys."""
    custom = getattr(herder, "connector_plugin_config", None)
    if callable(custom):
        return list(custom(name))
    try:
        desc = herder.plugins.find(name)
    except NotFoundException:
        raise NotFoundException(f"Unknown plugin {name}.") from None
    plugin = desc.load()()
    definition = plugin.config()
    return [key.definition() for key in definition.keys.values()]


def normalized(name: str) -> str:
    """Kafka's comparison form of a connector class name: without a trailing "Connector"."""
    suffix = "Connector"
    return name[: -len(suffix)] if name.endswith(suffix) and len(name) > len(suffix) else name
