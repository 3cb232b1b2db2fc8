"""Connect schemas and values <-> Protobuf (proto3), in the spirit of Confluent's ProtobufData.

Writing: a struct becomes a message (its name's last part; the rest is the package; unnamed:
`ConnectDefault1`), nested structs nested messages, arrays `repeated`, maps `map<K,V>` (scalar
keys), int8/int16/int32 `int32`, Timestamp `google.protobuf.Timestamp`. Date, Time and Decimal are
written as their Connect physical types (int32 days, int32 ms, bytes), not Confluent's
google.type.Date / TimeOfDay / confluent.type.Decimal (those imports need registry references).
Reading: every message field is an optional Connect field (proto3 has no required fields);
unsigned 32-bit and 64-bit types are int64, enums strings, google.protobuf wrapper types optional
primitives, oneof members plain optional fields (Confluent groups them in a struct)."""

from __future__ import annotations

import datetime
import re
from typing import Any

from google.protobuf import descriptor_pool, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from ..data import (
    TIMESTAMP_NAME,
    Field,
    Schema,
    Struct,
    Type,
    from_logical,
    timestamp_schema,
)
from ..errors import DataException

DEFAULT_MESSAGE = "ConnectDefault1"
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_SCALAR = {Type.INT8: "int32", Type.INT16: "int32", Type.INT32: "int32", Type.INT64: "int64",
           Type.FLOAT32: "float", Type.FLOAT64: "double", Type.BOOLEAN: "bool",
           Type.STRING: "string", Type.BYTES: "bytes"}
_KEY_TYPES = (Type.INT8, Type.INT16, Type.INT32, Type.INT64, Type.BOOLEAN, Type.STRING)
TIMESTAMP_PROTO = "google/protobuf/timestamp.proto"
WRAPPERS_PROTO = "google/protobuf/wrappers.proto"


def _ident(name: str) -> str:
    out = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return out if _IDENT.match(out) else "_" + out


def _camel(name: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in re.split(r"[^A-Za-z0-9]", name) if p) or "Message"


class _ToProto:
    def __init__(self) -> None:
        self.imports: set[str] = set()

    def message(self, s: Schema, name: str, indent: str) -> list[str]:
        lines = [f"{indent}message {name} {{"]
        nested: list[str] = []
        used: set[str] = set()
        for i, f in enumerate(s.fields, start=1):
            ftype, extra = self.field_type(f, used, indent + "  ")
            nested += extra
            lines.append(f"{indent}  {ftype} {_ident(f.name)} = {i};")
        lines += nested
        lines.append(f"{indent}}}")
        return lines

    def element(self, fs: Schema, hint: str, used: set[str], indent: str) -> tuple[str, list[str]]:
        if fs.name == TIMESTAMP_NAME:
            self.imports.add(TIMESTAMP_PROTO)
            return "google.protobuf.Timestamp", []
        if fs.type in _SCALAR:
            return _SCALAR[fs.type], []
        if fs.type is Type.STRUCT:
            name = _ident(fs.name.rpartition(".")[2]) if fs.name else _camel(hint)
            while name in used:
                name += "_"
            used.add(name)
            return name, self.message(fs, name, indent)
        raise DataException(f"Protobuf cannot hold a {fs.type.value} inside a repeated field or map "
                            f"value ({hint})")

    def field_type(self, f: Field, used: set[str], indent: str) -> tuple[str, list[str]]:
        fs = f.schema
        if fs.type is Type.ARRAY:
            assert fs.value_schema is not None
            t, extra = self.element(fs.value_schema, f.name, used, indent)
            return f"repeated {t}", extra
        if fs.type is Type.MAP:
            assert fs.key_schema is not None and fs.value_schema is not None
            if fs.key_schema.type not in _KEY_TYPES or fs.key_schema.name:
                raise DataException(f"Protobuf map keys must be integers, booleans or strings "
                                    f"(field {f.name})")
            vt, extra = self.element(fs.value_schema, f.name + "Value", used, indent)
            return f"map<{_SCALAR[fs.key_schema.type]}, {vt}>", extra
        return self.element(fs, f.name, used, indent)


def connect_to_proto(schema: Schema) -> tuple[str, str]:
    """(.proto text, full message name) for a Connect struct schema."""
    if schema.type is not Type.STRUCT:
        raise DataException(f"ProtobufConverter needs a struct schema, not {schema.type.value}")
    package, _, simple = (schema.name or DEFAULT_MESSAGE).rpartition(".")
    package = ".".join(_ident(p) for p in package.split(".")) if package else ""
    simple = _ident(simple)
    conv = _ToProto()
    body = conv.message(schema, simple, "")
    head = ['syntax = "proto3";']
    if package:
        head.append(f"package {package};")
    head += [f'import "{i}";' for i in sorted(conv.imports)]
    full = f"{package}.{simple}" if package else simple
    return "\n".join(head + body) + "\n", full


# ---- descriptors ------------------------------------------------------------------------------
def build_pool(fdp: Any, deps: list[Any]) -> descriptor_pool.DescriptorPool:
    from samsa.registry.formats.protobuf_schema import well_known
    pool = descriptor_pool.DescriptorPool()
    have: set[str] = set()

    def add(f: Any) -> None:
        if f.name in have:
            return
        for d in f.dependency:
            if d not in have:
                wk = well_known(d)
                if wk is not None:
                    add(wk)
        pool.Add(f)
        have.add(f.name)

    for d in deps:
        add(d)
    add(fdp)
    return pool


def message_at(pool: descriptor_pool.DescriptorPool, fdp: Any, indexes: list[int]) -> Descriptor:
    """The message descriptor a Confluent message-index path names."""
    fd = pool.FindFileByName(fdp.name)
    msgs = list(fd.message_types_by_name.values())
    desc: Descriptor | None = None
    for i in indexes or [0]:
        if not 0 <= i < len(msgs):
            raise DataException(f"message index {i} out of range")
        desc = msgs[i]
        msgs = list(desc.nested_types)
    assert desc is not None
    return desc


def message_class(desc: Descriptor) -> Any:
    return message_factory.GetMessageClass(desc)


def read_indexes(data: bytes) -> tuple[list[int], int]:
    """Confluent's message indexes (zigzag varints: count, then each; a lone 0 means [0])."""
    pos = 0

    def varint() -> int:
        nonlocal pos
        shift = result = 0
        while True:
            if pos >= len(data) or shift > 63:
                raise DataException("invalid Protobuf message indexes")
            b = data[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        return (result >> 1) ^ -(result & 1)

    count = varint()
    if count == 0:
        return [0], pos
    if not 0 < count <= 64:
        raise DataException(f"invalid Protobuf message index count {count}")
    return [varint() for _ in range(count)], pos


def write_indexes(indexes: list[int]) -> bytes:
    if indexes == [0]:
        return b"\x00"
    out = bytearray()
    for n in [len(indexes), *indexes]:
        z = (n << 1) ^ (n >> 63)
        while True:
            b = z & 0x7F
            z >>= 7
            out.append(b | (0x80 if z else 0))
            if not z:
                break
    return bytes(out)


def index_path(desc: Descriptor) -> list[int]:
    path: list[int] = []
    d: Any = desc
    while d.containing_type is not None:
        path.append(list(d.containing_type.nested_types).index(d))
        d = d.containing_type
    path.append(list(d.file.message_types_by_name.values()).index(d))
    return list(reversed(path))


# ---- Protobuf -> Connect schema -----------------------------------------------------------------
_WRAPPERS = {"google.protobuf.DoubleValue": Type.FLOAT64, "google.protobuf.FloatValue": Type.FLOAT32,
             "google.protobuf.Int64Value": Type.INT64, "google.protobuf.UInt64Value": Type.INT64,
             "google.protobuf.Int32Value": Type.INT32, "google.protobuf.UInt32Value": Type.INT64,
             "google.protobuf.BoolValue": Type.BOOLEAN, "google.protobuf.StringValue": Type.STRING,
             "google.protobuf.BytesValue": Type.BYTES}
_FT = FieldDescriptor
_SCALARS_IN = {
    _FT.TYPE_INT32: Type.INT32, _FT.TYPE_SINT32: Type.INT32, _FT.TYPE_SFIXED32: Type.INT32,
    _FT.TYPE_UINT32: Type.INT64, _FT.TYPE_FIXED32: Type.INT64, _FT.TYPE_INT64: Type.INT64,
    _FT.TYPE_SINT64: Type.INT64, _FT.TYPE_SFIXED64: Type.INT64, _FT.TYPE_UINT64: Type.INT64,
    _FT.TYPE_FIXED64: Type.INT64, _FT.TYPE_FLOAT: Type.FLOAT32, _FT.TYPE_DOUBLE: Type.FLOAT64,
    _FT.TYPE_BOOL: Type.BOOLEAN, _FT.TYPE_STRING: Type.STRING, _FT.TYPE_BYTES: Type.BYTES,
    _FT.TYPE_ENUM: Type.STRING,
}


def _is_repeated(f: FieldDescriptor) -> bool:
    return bool(f.is_repeated)


def proto_to_connect(desc: Descriptor, optional: bool = False, seen: tuple[str, ...] = ()) -> Schema:
    if desc.full_name in seen:
        raise DataException(f"recursive Protobuf message {desc.full_name} has no Connect schema")
    seen = (*seen, desc.full_name)
    fields = []
    for i, f in enumerate(desc.fields):
        fields.append(Field(f.name, i, _field_schema(f, seen)))
    return Schema(Type.STRUCT, optional=optional, name=desc.full_name, fields=tuple(fields))


def _single(f: FieldDescriptor, seen: tuple[str, ...], optional: bool) -> Schema:
    if f.type == _FT.TYPE_MESSAGE:
        name = f.message_type.full_name
        if name == "google.protobuf.Timestamp":
            return timestamp_schema(optional=optional)
        if name in _WRAPPERS:
            return Schema(_WRAPPERS[name], optional=True)
        return proto_to_connect(f.message_type, optional, seen)
    return Schema(_SCALARS_IN[f.type], optional=optional)


def _field_schema(f: FieldDescriptor, seen: tuple[str, ...]) -> Schema:
    if _is_repeated(f):
        mt = f.message_type
        if mt is not None and mt.GetOptions().map_entry:
            k, v = mt.fields_by_name["key"], mt.fields_by_name["value"]
            return Schema(Type.MAP, optional=True, key_schema=_single(k, seen, False),
                          value_schema=_single(v, seen, v.type == _FT.TYPE_MESSAGE))
        return Schema(Type.ARRAY, optional=True, value_schema=_single(f, seen, False))
    return _single(f, seen, True)


# ---- values -------------------------------------------------------------------------------------
def _scalar_in(f: FieldDescriptor, schema: Schema, v: Any) -> Any:
    if f.type == _FT.TYPE_ENUM:
        ev = f.enum_type.values_by_number.get(v)
        return ev.name if ev is not None else str(v)
    if f.type == _FT.TYPE_MESSAGE:
        name = f.message_type.full_name
        if name == "google.protobuf.Timestamp":
            return datetime.datetime.fromtimestamp(v.seconds, datetime.UTC) + \
                datetime.timedelta(milliseconds=v.nanos // 1_000_000)
        if name in _WRAPPERS:
            return v.value
        return message_to_connect(v, schema)
    return v


def message_to_connect(msg: Any, schema: Schema) -> Struct:
    out = Struct(schema)
    desc = msg.DESCRIPTOR
    for field in schema.fields:
        f = desc.fields_by_name[field.name]
        fs = field.schema
        if fs.type is Type.MAP:
            assert fs.key_schema is not None and fs.value_schema is not None
            vf = f.message_type.fields_by_name["value"]
            vs = fs.value_schema
            out.put(field.name, {k: _scalar_in(vf, vs, v) for k, v in getattr(msg, f.name).items()})
        elif fs.type is Type.ARRAY:
            assert fs.value_schema is not None
            es = fs.value_schema
            out.put(field.name, [_scalar_in(f, es, v) for v in getattr(msg, f.name)])
        elif f.type == _FT.TYPE_MESSAGE:
            out.put(field.name, _scalar_in(f, fs, getattr(msg, f.name)) if msg.HasField(f.name) else None)
        else:
            out.put(field.name, _scalar_in(f, fs, getattr(msg, f.name)))
    return out


def _set_message(target: Any, f: FieldDescriptor, schema: Schema, value: Any) -> None:
    """Fill a sub-message (target) from a Connect value."""
    name = f.message_type.full_name
    if name == "google.protobuf.Timestamp":
        if not isinstance(value, datetime.datetime):
            raise DataException(f"Timestamp expects datetime.datetime, got {type(value).__name__}")
        ms = from_logical(timestamp_schema(), value)
        target.seconds, rem = divmod(ms, 1000)
        target.nanos = rem * 1_000_000
    elif name in _WRAPPERS:
        target.value = value
    else:
        if not isinstance(value, Struct):
            raise DataException(f"field {f.name} expects a Struct, got {type(value).__name__}")
        connect_to_message(value, target)


def _scalar_out(f: FieldDescriptor, schema: Schema, value: Any) -> Any:
    raw = from_logical(schema, value)
    if f.type == _FT.TYPE_ENUM and isinstance(raw, str):
        ev = f.enum_type.values_by_name.get(raw)
        if ev is None:
            raise DataException(f"{raw!r} is not a value of enum {f.enum_type.full_name}")
        return ev.number
    if isinstance(raw, bytearray | memoryview):
        return bytes(raw)
    return raw


def connect_to_message(value: Struct, msg: Any) -> Any:
    """Set msg's fields from a Struct (fields matched by name; unknown names are an error)."""
    desc = msg.DESCRIPTOR
    for field in value.schema.fields:
        v = value.get(field.name)
        if v is None:
            continue
        f = desc.fields_by_name.get(_ident(field.name))
        if f is None:
            raise DataException(f"the Protobuf message {desc.full_name} has no field {field.name}")
        fs = field.schema
        try:
            if fs.type is Type.MAP and _is_repeated(f):
                assert fs.key_schema is not None and fs.value_schema is not None
                vf = f.message_type.fields_by_name["value"]
                target = getattr(msg, f.name)
                for k, item in v.items():
                    if vf.type == _FT.TYPE_MESSAGE:
                        _set_message(target[k], vf, fs.value_schema, item)
                    else:
                        target[k] = _scalar_out(vf, fs.value_schema, item)
            elif fs.type is Type.ARRAY and _is_repeated(f):
                assert fs.value_schema is not None
                target = getattr(msg, f.name)
                for item in v:
                    if f.type == _FT.TYPE_MESSAGE:
                        _set_message(target.add(), f, fs.value_schema, item)
                    else:
                        target.append(_scalar_out(f, fs.value_schema, item))
            elif f.type == _FT.TYPE_MESSAGE:
                _set_message(getattr(msg, f.name), f, fs, v)
            else:
                setattr(msg, f.name, _scalar_out(f, fs, v))
        except (TypeError, ValueError) as e:
            raise DataException(f"field {field.name}: {e}") from None
    return msg
