"""Confluent's ProtobufConverter: Connect structs as Protobuf messages in the Confluent wire
format (magic 0, schema id, message-index varints, message). Schemas are .proto files compiled
with Samsa's registry code (protoc from grpcio-tools); see protobuf_data.py for the mapping."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from google.protobuf.message import DecodeError

from samsa.registry.formats import Dependency, InvalidSchema, protobuf_schema

from ..data import Schema, SchemaAndValue, Struct
from ..errors import DataException
from .protobuf_data import (
    build_pool,
    connect_to_message,
    connect_to_proto,
    index_path,
    message_at,
    message_class,
    message_to_connect,
    proto_to_connect,
    read_indexes,
    write_indexes,
)
from .registry import RegistryConverter


@dataclass
class ProtoFormat:
    text: str
    parsed: Any  # samsa.registry.formats.protobuf_schema.ProtobufSchema
    pool: Any
    message_name: str | None  # the message written (None: the first)
    references: list[Any]


class ProtobufConverter(RegistryConverter):
    SCHEMA_TYPE = "PROTOBUF"

    def to_format(self, schema: Schema) -> ProtoFormat:
        text, full = connect_to_proto(schema)
        try:
            parsed = protobuf_schema.parse(text, [], False)
        except InvalidSchema as e:
            raise DataException(f"Connect schema has no valid Protobuf form: {e}") from None
        return ProtoFormat(text, parsed, build_pool(parsed.fdp, parsed.deps), full, [])

    def format_text(self, fmt: ProtoFormat) -> str:
        return fmt.text

    def record_name(self, fmt: ProtoFormat) -> str | None:
        return fmt.message_name or self._descriptor(fmt, [0]).full_name

    def references(self, fmt: ProtoFormat) -> list[Any]:
        return fmt.references

    def parse_registered(self, text: str, references: list[Any]) -> ProtoFormat:
        deps = [Dependency(name, stype, t) for name, stype, t in self.resolve_references(references)]
        try:
            parsed = protobuf_schema.parse(text, deps, False)
        except InvalidSchema as e:
            raise DataException(str(e)) from None
        return ProtoFormat(text, parsed, build_pool(parsed.fdp, parsed.deps), None, references)

    def _descriptor(self, fmt: ProtoFormat, indexes: list[int] | None) -> Any:
        if indexes is None and fmt.message_name:
            return fmt.pool.FindMessageTypeByName(fmt.message_name)
        return message_at(fmt.pool, fmt.parsed.fdp, indexes or [0])

    def encode(self, fmt: ProtoFormat, schema: Schema | None, value: Any) -> bytes:
        if not isinstance(value, Struct):
            raise DataException(f"ProtobufConverter needs a Struct value, got {type(value).__name__}")
        desc = self._descriptor(fmt, None)
        msg = connect_to_message(value, message_class(desc)())
        return write_indexes(index_path(desc)) + msg.SerializeToString()

    def decode(self, fmt: ProtoFormat, payload: bytes) -> SchemaAndValue:
        indexes, pos = read_indexes(payload)
        desc = self._descriptor(fmt, indexes)
        msg = message_class(desc)()
        try:
            msg.ParseFromString(payload[pos:])
        except (DecodeError, RuntimeError, ValueError) as e:
            raise DataException(f"invalid Protobuf data: {e}") from None
        schema = proto_to_connect(desc)
        return SchemaAndValue(schema, message_to_connect(msg, schema))
