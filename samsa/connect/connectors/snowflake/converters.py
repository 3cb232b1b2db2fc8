"""Snowflake's own converter class names, so configs written for Snowflake's connector run:
SnowflakeJsonConverter reads any JSON value schemaless (Kafka's JsonConverter with
schemas.enable=false), SnowflakeAvroConverter reads Confluent wire-format Avro through the schema
registry (Confluent's AvroConverter). Bytes that do not parse raise DataException, so they go to
the dead letter queue with errors.tolerance=all (Snowflake's converters hand the sink a "broken
record" that it sends there)."""

from __future__ import annotations

from typing import Any

from ...converters.avro import AvroConverter
from ...converters.json_converter import JsonConverter


class SnowflakeJsonConverter(JsonConverter):
    def configure(self, configs: dict[str, Any], is_key: bool = False) -> None:
        super().configure({**configs, "schemas.enable": "false"}, is_key)


class SnowflakeAvroConverter(AvroConverter):
    """Needs `schema.registry.url`, as Snowflake's does (value.converter.schema.registry.url)."""
