"""Kafka's SimpleHeaderConverter: header values as their plain string form (UTF-8), read back by
inferring the schema from the text (see values.py for what is recognised)."""

from __future__ import annotations

from typing import Any

from ..api import HeaderConverter
from ..config_def import ConfigDef
from ..data import STRING_SCHEMA, Schema, SchemaAndValue
from ..errors import DataException
from .values import convert_to_string, parse_string


class SimpleHeaderConverter(HeaderConverter):
    def config(self) -> ConfigDef:
        return ConfigDef()

    def configure(self, configs: dict[str, Any]) -> None:
        """Nothing to configure."""

    def from_connect_header(self, topic: str, header_key: str, schema: Schema | None,
                            value: Any) -> bytes | None:
        text = convert_to_string(schema, value)
        return None if text is None else text.encode("utf-8", "surrogatepass")

    def to_connect_header(self, topic: str, header_key: str, value: bytes | None) -> SchemaAndValue:
        if value is None:
            return SchemaAndValue.NULL
        text = bytes(value).decode("utf-8", "replace")
        if not text:
            return SchemaAndValue(STRING_SCHEMA, text)
        try:
            return parse_string(text)
        except DataException:
            raise
        except Exception:  # as Kafka: a value that does not parse is still its string
            return SchemaAndValue(STRING_SCHEMA, text)
