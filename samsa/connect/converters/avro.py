"""Confluent's AvroConverter: Connect data as Avro in the Confluent wire format, schemas in the
schema registry (see avro_data.py for the schema mapping, registry.py for the configs)."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from typing import Any

import fastavro

from ..data import Schema, SchemaAndValue
from ..errors import DataException
from .avro_data import avro_to_connect, collect_named, connect_to_avro, from_avro_datum, to_avro_datum
from .registry import RegistryConverter


@dataclass
class AvroFormat:
    raw: Any  # the schema's JSON form
    text: str
    parsed: Any  # fastavro's parsed schema
    connect: Schema | None = None
    named: dict[str, Any] | None = None


def _parse(raw: Any, named_raw: dict[str, Any], ref_raws: list[Any]) -> Any:
    named: dict[str, Any] = {}
    for r in ref_raws:
        fastavro.parse_schema(r, named_schemas=named)
    return fastavro.parse_schema(raw, named_schemas=named)


class AvroConverter(RegistryConverter):
    SCHEMA_TYPE = "AVRO"

    def to_format(self, schema: Schema) -> AvroFormat:
        raw = connect_to_avro(schema)
        text = json.dumps(raw, separators=(",", ":"))
        try:
            parsed = _parse(raw, {}, [])
        except Exception as e:
            raise DataException(f"Connect schema has no valid Avro form: {e}") from None
        return AvroFormat(raw, text, parsed, schema)

    def format_text(self, fmt: AvroFormat) -> str:
        return fmt.text

    def record_name(self, fmt: AvroFormat) -> str | None:
        raw = fmt.raw
        if isinstance(raw, dict) and raw.get("type") == "record":
            ns = raw.get("namespace")
            return f"{ns}.{raw['name']}" if ns and "." not in raw["name"] else str(raw["name"])
        return None

    def parse_registered(self, text: str, references: list[Any]) -> AvroFormat:
        raw = json.loads(text)
        ref_raws = [json.loads(t) for _, _, t in self.resolve_references(references)]
        named: dict[str, Any] = {}
        for r in ref_raws:
            collect_named(r, "", named)
        parsed = _parse(raw, named, ref_raws)
        return AvroFormat(raw, text, parsed, named=named)

    def encode(self, fmt: AvroFormat, schema: Schema | None, value: Any) -> bytes:
        assert schema is not None
        datum = to_avro_datum(schema, value)
        buf = io.BytesIO()
        try:
            fastavro.schemaless_writer(buf, fmt.parsed, datum)
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError) as e:
            raise DataException(f"value does not fit the Avro schema: {e}") from None
        return buf.getvalue()

    def _connect_of(self, fmt: AvroFormat) -> Schema:
        if fmt.connect is None:
            fmt.connect = avro_to_connect(fmt.raw, fmt.named)
        return fmt.connect

    def decode(self, fmt: AvroFormat, payload: bytes) -> SchemaAndValue:
        schema = self._connect_of(fmt)
        buf = io.BytesIO(payload)
        try:
            datum = fastavro.schemaless_reader(buf, fmt.parsed, None, return_record_name=True,
                                               return_record_name_override=True)
        except (EOFError, ValueError, TypeError, IndexError, KeyError, UnicodeDecodeError,
                OverflowError, StopIteration) as e:
            raise DataException(f"invalid Avro data: {e!r}") from None
        return SchemaAndValue(schema, from_avro_datum(schema, datum))
