"""Kafka Connect's single message transforms and predicates, under Kafka's class names.

`PLUGINS` maps each Java class name (`org.apache.kafka.connect.transforms.InsertField$Value`) to
the Python class ("module:Class") that implements it; `samsa.connect.plugins.Plugins` reads it.
`chain.py` builds a connector's transformation chain from its `transforms` / `predicates`
settings."""

from __future__ import annotations

_PKG = "samsa.connect.transforms"
_KAFKA = "org.apache.kafka.connect.transforms"

# name -> module holding <Name>Key / <Name>Value classes (Kafka's $Key / $Value)
_KEY_VALUE = {
    "InsertField": "fields", "ReplaceField": "fields", "MaskField": "fields",
    "ExtractField": "shape", "HoistField": "shape", "Flatten": "shape",
    "Cast": "cast", "TimestampConverter": "timestamps", "SetSchemaMetadata": "routing",
    "HeaderFrom": "headers",
}
_PLAIN = {
    "ValueToKey": "shape", "TimestampRouter": "timestamps", "RegexRouter": "routing",
    "Filter": "routing", "InsertHeader": "headers", "DropHeaders": "headers",
}
_PREDICATES = ("TopicNameMatches", "HasHeaderKey", "RecordIsTombstone")

PLUGINS: dict[str, str] = {}
for _name, _module in _KEY_VALUE.items():
    for _side in ("Key", "Value"):
        PLUGINS[f"{_KAFKA}.{_name}${_side}"] = f"{_PKG}.{_module}:{_name}{_side}"
for _name, _module in _PLAIN.items():
    PLUGINS[f"{_KAFKA}.{_name}"] = f"{_PKG}.{_module}:{_name}"
for _name in _PREDICATES:
    PLUGINS[f"{_KAFKA}.predicates.{_name}"] = f"{_PKG}.predicates:{_name}"

__all__ = ["PLUGINS"]
