"""Decode schema-registry framed payloads (Confluent wire format: magic byte 0, 4-byte big-endian
schema id, for Protobuf the message-index path, then the encoded message) into typed Spark struct
columns, like Spark's from_avro/from_protobuf but looking schemas up by id in a Confluent-compatible
registry (Samsa's or Confluent's):

    from samsa.spark.registry_decode import from_avro, from_json_schema, from_protobuf
    df.select(from_avro("value", "http://127.0.0.1:8081", subject="orders-value").alias("order"))

The result type comes from the reader schema (a subject's latest version or a schema id), fixed when
the query is planned; each record is decoded with the writer schema its header names. The UDFs are
Arrow-optimised Python UDFs (Arrow batches in and out, per-record decoding in Python). mode
"FAILFAST" (default) fails on a malformed record, "PERMISSIVE" yields null."""

from __future__ import annotations

import base64
import io
import json
import struct
import urllib.parse
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

MAGIC = 0


class FramingError(ValueError):
    pass


# -- wire format ---------------------------------------------------------------------------------

def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if pos >= len(buf):
            raise FramingError("truncated varint in the message-index header")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos  # zigzag
        shift += 7


def split_frame(data: bytes, protobuf: bool = False) -> tuple[int, list[int], bytes]:
    """(schema id, Protobuf message indexes, payload) of a framed record."""
    if len(data) < 5 or data[0] != MAGIC:
        raise FramingError("not in the schema-registry wire format (magic byte 0 + schema id)")
    schema_id = struct.unpack(">I", data[1:5])[0]
    if not protobuf:
        return schema_id, [], data[5:]
    count, pos = _varint(data, 5)
    if count == 0:
        return schema_id, [0], data[pos:]
    indexes = []
    for _ in range(count):
        i, pos = _varint(data, pos)
        indexes.append(i)
    return schema_id, indexes, data[pos:]


# -- registry lookups (cached per Python worker) ---------------------------------------------------

# A registry: its URL and its client options (Confluent's names: basic.auth.credentials.source,
# basic.auth.user.info, schema.registry.ssl.*), hashable and picklable for the Python workers.
Registry = tuple[str, tuple[tuple[str, str], ...]]


def registry_key(url: str | Registry, options: Mapping[str, Any] | None = None) -> Registry:
    if isinstance(url, tuple):
        return url
    return url, tuple(sorted((str(k), str(v)) for k, v in (options or {}).items()))


@lru_cache(maxsize=16)
def _settings(registry: Registry) -> Any:
    from samsa.registry.client_config import RegistryClientSettings
    return RegistryClientSettings.parse(registry[0], dict(registry[1]))


def _get(registry: Registry, path: str) -> dict[str, Any]:
    with _settings(registry).open("GET", path) as r:
        doc: dict[str, Any] = json.loads(r.read())
        return doc


@lru_cache(maxsize=1024)
def _schema_by_id(registry: Registry, schema_id: int, serialized: bool = False) -> dict[str, Any]:
    suffix = "?format=serialized" if serialized else ""
    return _get(registry, f"/schemas/ids/{schema_id}{suffix}")


def schema_by_id(registry: str | Registry, schema_id: int, serialized: bool = False,
                 options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    return _schema_by_id(registry_key(registry, options), schema_id, serialized)


def latest_id(registry: str | Registry, subject: str, options: Mapping[str, Any] | None = None) -> int:
    quoted = urllib.parse.quote(subject, safe="")
    return int(_get(registry_key(registry, options), f"/subjects/{quoted}/versions/latest")["id"])


# -- Avro ------------------------------------------------------------------------------------------

_AVRO_PRIMITIVE: dict[str, DataType] = {
    "boolean": BooleanType(), "int": IntegerType(), "long": LongType(), "float": FloatType(),
    "double": DoubleType(), "bytes": BinaryType(), "string": StringType(), "enum": StringType(),
    "fixed": BinaryType(), "null": StringType(),
}


def avro_type(s: Any, named: dict[str, DataType] | None = None) -> DataType:
    named = {} if named is None else named
    if isinstance(s, str):
        return named.get(s, _AVRO_PRIMITIVE.get(s, StringType()))
    if isinstance(s, list):
        members = [m for m in s if m != "null"]
        return avro_type(members[0], named) if len(members) == 1 else StringType()
    t = s["type"]
    if t == "record":
        st = StructType([StructField(f["name"], avro_type(f["type"], named)) for f in s["fields"]])
        named[s["name"]] = st
        return st
    if t == "array":
        return ArrayType(avro_type(s["items"], named))
    if t == "map":
        return MapType(StringType(), avro_type(s["values"], named))
    return _AVRO_PRIMITIVE.get(t, StringType()) if isinstance(t, str) else avro_type(t, named)


@lru_cache(maxsize=256)
def _parsed_avro(registry: Registry, schema_id: int) -> Any:
    import fastavro
    return fastavro.parse_schema(json.loads(schema_by_id(registry, schema_id)["schema"]))


def _avro_decoder(registry: Registry, reader_id: int) -> Callable[[bytes], Any]:
    import fastavro

    def decode(data: bytes) -> Any:
        sid, _, payload = split_frame(data)
        return fastavro.schemaless_reader(io.BytesIO(payload), _parsed_avro(registry, sid),
                                          _parsed_avro(registry, reader_id))
    return decode


# -- JSON Schema ---------------------------------------------------------------------------------

def json_schema_type(s: Any) -> DataType:
    if not isinstance(s, dict):
        return StringType()
    t = s.get("type")
    if isinstance(t, list):
        members = [x for x in t if x != "null"]
        t = members[0] if len(members) == 1 else None
    if t == "object" and "properties" in s:
        return StructType([StructField(k, json_schema_type(v)) for k, v in s["properties"].items()])
    if t == "array":
        return ArrayType(json_schema_type(s.get("items", {})))
    return {"integer": LongType(), "number": DoubleType(), "boolean": BooleanType()}.get(
        t or "", StringType())


def _json_decoder(_registry: Registry, _reader_id: int) -> Callable[[bytes], Any]:
    def decode(data: bytes) -> Any:
        _, _, payload = split_frame(data)
        return json.loads(payload)
    return decode


# -- Protobuf --------------------------------------------------------------------------------------

@lru_cache(maxsize=256)
def _proto_file(registry: Registry, schema_id: int) -> Any:
    """The FileDescriptor of a registered .proto (with its references) in a private pool."""
    from google.protobuf import descriptor_pb2, descriptor_pool

    pool = descriptor_pool.DescriptorPool()

    def add(sid: int) -> Any:
        doc = schema_by_id(registry, sid, serialized=True)
        for ref in doc.get("references", []):
            quoted = urllib.parse.quote(ref["subject"], safe="")
            ver = _get(registry, f"/subjects/{quoted}/versions/{ref['version']}")
            add(int(ver["id"]))
        fdp = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(doc["schema"]))
        try:
            return pool.FindFileByName(fdp.name)
        except KeyError:
            pool.Add(fdp)
            return pool.FindFileByName(fdp.name)
    return add(schema_id)


def _proto_message(registry: Registry, schema_id: int, indexes: tuple[int, ...]) -> Any:
    fd = _proto_file(registry, schema_id)
    desc = fd.message_types_by_name[list(fd.message_types_by_name)[indexes[0]]]
    for i in indexes[1:]:
        desc = desc.nested_types[i]
    return desc


def proto_type(desc: Any, depth: int = 0) -> DataType:
    from google.protobuf.descriptor import FieldDescriptor as FD
    scalar: dict[int, DataType] = {
        FD.TYPE_INT32: IntegerType(), FD.TYPE_SINT32: IntegerType(), FD.TYPE_SFIXED32: IntegerType(),
        FD.TYPE_UINT32: LongType(), FD.TYPE_FIXED32: LongType(), FD.TYPE_INT64: LongType(),
        FD.TYPE_SINT64: LongType(), FD.TYPE_SFIXED64: LongType(), FD.TYPE_UINT64: LongType(),
        FD.TYPE_FIXED64: LongType(), FD.TYPE_FLOAT: FloatType(), FD.TYPE_DOUBLE: DoubleType(),
        FD.TYPE_BOOL: BooleanType(), FD.TYPE_STRING: StringType(), FD.TYPE_BYTES: BinaryType(),
        FD.TYPE_ENUM: StringType(),
    }
    fields = []
    for f in desc.fields:
        if f.type == FD.TYPE_MESSAGE and f.message_type.GetOptions().map_entry:
            k, v = f.message_type.fields_by_name["key"], f.message_type.fields_by_name["value"]
            vt = proto_type(v.message_type, depth + 1) if v.type == FD.TYPE_MESSAGE else scalar[v.type]
            fields.append(StructField(f.name, MapType(scalar[k.type], vt)))
            continue
        if f.type == FD.TYPE_MESSAGE:
            t: DataType = proto_type(f.message_type, depth + 1) if depth < 16 else StringType()
        else:
            t = scalar[f.type]
        repeated = getattr(f, "is_repeated", None)
        is_rep = repeated if isinstance(repeated, bool) else f.label == FD.LABEL_REPEATED
        fields.append(StructField(f.name, ArrayType(t) if is_rep else t))
    return StructType(fields)


def proto_to_dict(msg: Any) -> dict[str, Any]:
    from google.protobuf.descriptor import FieldDescriptor as FD

    def value(f: Any, v: Any) -> Any:
        if f.type == FD.TYPE_MESSAGE:
            return proto_to_dict(v)
        if f.type == FD.TYPE_ENUM:
            ev = f.enum_type.values_by_number.get(v)
            return ev.name if ev else str(v)
        return v

    out: dict[str, Any] = {}
    for f in msg.DESCRIPTOR.fields:
        v = getattr(msg, f.name)
        if f.type == FD.TYPE_MESSAGE and f.message_type.GetOptions().map_entry:
            vf = f.message_type.fields_by_name["value"]
            out[f.name] = {k: value(vf, x) for k, x in v.items()}
        elif f.type == FD.TYPE_MESSAGE and not _is_repeated(f) and not msg.HasField(f.name):
            out[f.name] = None
        elif _is_repeated(f):
            out[f.name] = [value(f, x) for x in v]
        else:
            out[f.name] = value(f, v)
    return out


def _is_repeated(f: Any) -> bool:
    from google.protobuf.descriptor import FieldDescriptor as FD
    r = getattr(f, "is_repeated", None)
    return r if isinstance(r, bool) else bool(f.label == FD.LABEL_REPEATED)


def _proto_decoder(registry: Registry, _reader_id: int) -> Callable[[bytes], Any]:
    from google.protobuf import message_factory

    def decode(data: bytes) -> Any:
        sid, indexes, payload = split_frame(data, protobuf=True)
        cls = message_factory.GetMessageClass(_proto_message(registry, sid, tuple(indexes)))
        return proto_to_dict(cls.FromString(payload))
    return decode


# -- column functions --------------------------------------------------------------------------------

def _column(col: Column | str, out_type: DataType,
            decoder_factory: Callable[[Registry, int], Callable[[bytes], Any]],
            registry: Registry, reader_id: int, mode: str) -> Column:
    if mode.upper() not in ("FAILFAST", "PERMISSIVE"):
        raise ValueError("mode must be FAILFAST or PERMISSIVE")
    permissive = mode.upper() == "PERMISSIVE"

    def decode(data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            return decoder_factory(registry, reader_id)(bytes(data))
        except Exception:
            if permissive:
                return None
            raise
    fn = F.udf(decode, returnType=out_type, useArrow=True)
    return fn(F.col(col) if isinstance(col, str) else col)


def _reader_id(registry: Registry, subject: str | None, schema_id: int | None) -> int:
    if (subject is None) == (schema_id is None):
        raise ValueError("give exactly one of subject= or schema_id= for the reader schema")
    return schema_id if schema_id is not None else latest_id(registry, subject or "")


def from_avro(col: Column | str, registry: str, subject: str | None = None, schema_id: int | None = None,
              mode: str = "FAILFAST", options: Mapping[str, Any] | None = None) -> Column:
    """options: registry client settings (credentials, TLS) by Confluent's names."""
    reg = registry_key(registry, options)
    rid = _reader_id(reg, subject, schema_id)
    out = avro_type(json.loads(schema_by_id(reg, rid)["schema"]))
    return _column(col, out, _avro_decoder, reg, rid, mode)


def from_json_schema(col: Column | str, registry: str, subject: str | None = None,
                     schema_id: int | None = None, mode: str = "FAILFAST",
                     options: Mapping[str, Any] | None = None) -> Column:
    reg = registry_key(registry, options)
    rid = _reader_id(reg, subject, schema_id)
    out = json_schema_type(json.loads(schema_by_id(reg, rid)["schema"]))
    return _column(col, out, _json_decoder, reg, rid, mode)


def from_protobuf(col: Column | str, registry: str, subject: str | None = None,
                  schema_id: int | None = None, message: str | None = None, mode: str = "FAILFAST",
                  options: Mapping[str, Any] | None = None) -> Column:
    """message: the message name in the .proto (default: its first message)."""
    reg = registry_key(registry, options)
    rid = _reader_id(reg, subject, schema_id)
    fd = _proto_file(reg, rid)
    desc = fd.message_types_by_name[message] if message else list(fd.message_types_by_name.values())[0]
    return _column(col, proto_type(desc), _proto_decoder, reg, rid, mode)
