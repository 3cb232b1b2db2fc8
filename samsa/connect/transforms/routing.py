"""Transforms on a record's routing and schema identity: RegexRouter, SetSchemaMetadata, Filter."""

from __future__ import annotations

import re
from typing import Any

from ..api import Transformation
from ..config_def import NO_DEFAULT, ConfigDef, ConfigType, Importance
from ..data import ConnectRecord, Schema, Struct
from ..errors import ConfigException, DataException
from ._util import (
    REPLACE_NULL_WITH_DEFAULT,
    KeyOrValue,
    OnKey,
    OnValue,
    define_replace_null,
    field_value,
    java_expand,
    java_regex,
    parse_config,
    require_schema,
)


def _regex_validator(name: str, value: Any) -> None:
    try:
        java_regex(value)
    except (re.error, TypeError) as e:
        raise ConfigException(name, value, f"Invalid regex: {e}") from None


class RegexRouter(Transformation):
    """Rename the topic when the whole topic name matches `regex`, to `replacement` with Java's
    `$1` / `${name}` group references."""

    def config(self) -> ConfigDef:
        return (ConfigDef()
                .define("regex", ConfigType.STRING, NO_DEFAULT, _regex_validator, Importance.HIGH,
                        "Regular expression to use for matching.")
                .define("replacement", ConfigType.STRING, NO_DEFAULT, None, Importance.HIGH,
                        "Replacement string."))

    def configure(self, props: dict[str, Any]) -> None:
        c = parse_config(self.config(), props)
        self.regex = java_regex(c["regex"])
        self.replacement: str = c["replacement"]

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        m = self.regex.fullmatch(record.topic)
        if m is None:
            return record
        try:
            topic = java_expand(m, self.replacement)
        except ValueError as e:
            raise DataException(f"RegexRouter replacement {self.replacement!r}: {e}") from None
        return record.new_record(topic=topic)  # type: ignore[no-any-return]


class SetSchemaMetadata(KeyOrValue):
    """Set the key/value schema's name and/or version (a Struct value is re-bound to it)."""

    PURPOSE = "updating schema metadata"

    def config(self) -> ConfigDef:
        d = (ConfigDef()
             .define("schema.name", ConfigType.STRING, None, None, Importance.HIGH, "Schema name to set.")
             .define("schema.version", ConfigType.INT, None, None, Importance.HIGH,
                     "Schema version to set."))
        return define_replace_null(d)

    def configure(self, props: dict[str, Any]) -> None:
        c = parse_config(self.config(), props)
        self.schema_name: str | None = c["schema.name"]
        self.schema_version: int | None = c["schema.version"]
        self.replace_null = c[REPLACE_NULL_WITH_DEFAULT]
        if self.schema_name is None and self.schema_version is None:
            raise ConfigException("Neither schema name nor version configured")

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        schema = require_schema(self.operating_schema(record), self.PURPOSE)
        updated: Schema = schema.with_(
            name=self.schema_name if self.schema_name is not None else schema.name,
            version=self.schema_version if self.schema_version is not None else schema.version)
        value = self.operating_value(record)
        if isinstance(value, Struct):
            rebound = Struct(updated)
            for f in updated.fields:
                rebound.put(f.name, field_value(value, f.name, self.replace_null))
            value = rebound
        return self.new_record(record, updated, value)


class SetSchemaMetadataKey(OnKey, SetSchemaMetadata):
    """org.apache.kafka.connect.transforms.SetSchemaMetadata$Key"""


class SetSchemaMetadataValue(OnValue, SetSchemaMetadata):
    """org.apache.kafka.connect.transforms.SetSchemaMetadata$Value"""


class Filter(Transformation):
    """Drop every record; with a predicate, drop the records it selects (KIP-585)."""

    def config(self) -> ConfigDef:
        return ConfigDef()

    def configure(self, props: dict[str, Any]) -> None:
        pass

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        return None
