"""Turning record bytes into something to show, and form input into record bytes.

Values framed in the schema registry's wire format (magic byte 0, a 4-byte schema id, for
Protobuf the message-index path) are decoded with the writer schema the id names: Avro (fastavro),
Protobuf (a descriptor pool built from the registry's serialized FileDescriptorProto and its
references) or JSON Schema. Anything else is shown as JSON when it parses, as text when it is
UTF-8, else as hex. Decoding never raises: a record that cannot be decoded says why and falls back."""

from __future__ import annotations

import base64
import io
import json
import struct
import threading
from dataclasses import dataclass
from typing import Any

from .registry import RegistryClient, RegistryError, q

MAGIC = 0
HEX_LIMIT = 4096  # bytes shown as hex at most (the page says how many more there were)


class EncodeError(ValueError):
    """Form input that does not fit the schema: the message is shown on the form."""


@dataclass
class Shown:
    kind: str  # avro | protobuf | json-schema | json | text | hex | null
    text: str
    schema_id: int | None = None
    note: str | None = None  # why a framed record was not decoded

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "text": self.text, "schemaId": self.schema_id, "note": self.note}


def _zigzag(buf: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    for _ in range(10):
        if pos >= len(buf):
            raise ValueError("truncated varint in the Protobuf message-index header")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
    raise ValueError("varint too long in the Protobuf message-index header")


def _put_zigzag(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def plain(data: bytes | None) -> Shown:
    """A value without a registry framing: JSON, text or hex."""
    if data is None:
        return Shown("null", "null")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        more = len(data) - HEX_LIMIT
        hexed = data[:HEX_LIMIT].hex(" ")
        return Shown("hex", hexed + (f" … ({more} more bytes)" if more > 0 else ""))
    if text[:1] in "{[":
        try:
            return Shown("json", json.dumps(json.loads(text), indent=2, ensure_ascii=False))
        except ValueError:
            pass
    return Shown("text", text)


class Codec:
    """Decoding and encoding through one registry (None: no registry, plain decoding only)."""

    def __init__(self, registry: RegistryClient | None) -> None:
        self.registry = registry
        self._pools: dict[int, Any] = {}
        self._lock = threading.Lock()

    def decode(self, data: bytes | None) -> Shown:
        if data is None or self.registry is None or len(data) < 5 or data[0] != MAGIC:
            return plain(data)
        schema_id = struct.unpack(">I", data[1:5])[0]
        try:
            doc = self.registry.schema_by_id(schema_id)
        except RegistryError as e:
            shown = plain(data)
            shown.note = f"schema id {schema_id}: {e}"
            return shown
        kind = str(doc.get("schemaType") or "AVRO").upper()
        try:
            if kind == "AVRO":
                value = self._avro(doc, data[5:])
                return Shown("avro", json.dumps(value, indent=2, ensure_ascii=False, default=_jsonable),
                             schema_id)
            if kind == "PROTOBUF":
                return Shown("protobuf", json.dumps(self._protobuf(schema_id, data), indent=2,
                                                    ensure_ascii=False), schema_id)
            if kind == "JSON":
                value = json.loads(data[5:])
                return Shown("json-schema", json.dumps(value, indent=2, ensure_ascii=False), schema_id)
        except Exception as e:  # noqa: BLE001 - any decoding failure is shown, never raised
            shown = plain(data)
            shown.note = f"not decodable with schema id {schema_id} ({kind}): {type(e).__name__}: {e}"
            return shown
        shown = plain(data)
        shown.note = f"schema id {schema_id} has an unknown type {kind}"
        return shown

    # -- Avro ------------------------------------------------------------------------------------

    def _avro(self, doc: dict[str, Any], payload: bytes) -> Any:
        import fastavro

        schema = fastavro.parse_schema(json.loads(doc["schema"]))
        buf = io.BytesIO(payload)
        value = fastavro.schemaless_reader(buf, schema, None)
        if buf.tell() != len(payload):
            raise ValueError(f"{len(payload) - buf.tell()} bytes left after the record")
        return value

    # -- Protobuf --------------------------------------------------------------------------------

    def _file(self, schema_id: int) -> Any:
        """The FileDescriptor of a registered .proto (with its references), in a private pool."""
        from google.protobuf import descriptor_pb2, descriptor_pool

        assert self.registry is not None
        with self._lock:
            hit = self._pools.get(schema_id)
        if hit is not None:
            return hit
        pool = descriptor_pool.DescriptorPool()
        registry = self.registry

        def add(sid: int, depth: int = 0) -> Any:
            if depth > 32:
                raise ValueError("schema references nest too deep")
            doc = registry.serialized_protobuf(sid)
            for ref in doc.get("references") or []:
                ver = registry.request("GET", f"/subjects/{q(ref['subject'])}/versions/{ref['version']}")
                add(int(ver["id"]), depth + 1)
            fdp = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(doc["schema"]))
            try:
                return pool.FindFileByName(fdp.name)
            except KeyError:
                pool.Add(fdp)
                return pool.FindFileByName(fdp.name)

        fd = add(schema_id)
        with self._lock:
            if len(self._pools) >= 256:
                self._pools.clear()
            self._pools[schema_id] = fd
        return fd

    def _message_desc(self, schema_id: int, indexes: list[int]) -> Any:
        fd = self._file(schema_id)
        top = list(fd.message_types_by_name.values())
        if not indexes or indexes[0] >= len(top) or indexes[0] < 0:
            raise ValueError(f"message index {indexes} not in the schema")
        desc = top[indexes[0]]
        for i in indexes[1:]:
            if not 0 <= i < len(desc.nested_types):
                raise ValueError(f"message index {indexes} not in the schema")
            desc = desc.nested_types[i]
        return desc

    def _protobuf(self, schema_id: int, data: bytes) -> Any:
        from google.protobuf import json_format, message_factory

        count, pos = _zigzag(data, 5)
        if count < 0 or count > 64:
            raise ValueError(f"bad message-index count {count}")
        indexes = [0] if count == 0 else []
        for _ in range(count):
            i, pos = _zigzag(data, pos)
            indexes.append(i)
        cls = message_factory.GetMessageClass(self._message_desc(schema_id, indexes))
        msg = cls.FromString(data[pos:])
        return json_format.MessageToDict(msg, preserving_proto_field_name=True)

    # -- encoding (the produce form) ---------------------------------------------------------------

    def proto_messages(self, schema_id: int) -> list[str]:
        return list(self._file(schema_id).message_types_by_name)

    def proto_fields(self, schema_id: int, message: str | None = None) -> list[dict[str, Any]]:
        """Top-level fields of a Protobuf message, for the form: name, kind, enum values."""
        from google.protobuf.descriptor import FieldDescriptor as FD

        fd = self._file(schema_id)
        names = list(fd.message_types_by_name)
        desc = fd.message_types_by_name[message if message in names else names[0]]
        ints = {FD.TYPE_INT32, FD.TYPE_INT64, FD.TYPE_UINT32, FD.TYPE_UINT64, FD.TYPE_SINT32,
                FD.TYPE_SINT64, FD.TYPE_FIXED32, FD.TYPE_FIXED64, FD.TYPE_SFIXED32, FD.TYPE_SFIXED64}
        out = []
        for f in desc.fields:
            rep = getattr(f, "is_repeated", None)
            repeated = rep if isinstance(rep, bool) else f.label == FD.LABEL_REPEATED
            if repeated or f.type == FD.TYPE_MESSAGE:
                kind = "json"
            elif f.type in ints:
                kind = "integer"
            elif f.type in (FD.TYPE_FLOAT, FD.TYPE_DOUBLE):
                kind = "number"
            elif f.type == FD.TYPE_BOOL:
                kind = "boolean"
            elif f.type == FD.TYPE_ENUM:
                kind = "enum"
            else:
                kind = "string"
            out.append({"name": f.name, "kind": kind,
                        "enum": [v.name for v in f.enum_type.values] if f.type == FD.TYPE_ENUM else []})
        return out

    def encode(self, doc: dict[str, Any], value: Any, message: str | None = None) -> bytes:
        """Record bytes for `value` (parsed JSON) under the registered schema `doc` (a subject
        version: id, schema, schemaType), in the registry's wire format."""
        schema_id = int(doc["id"])
        head = bytes([MAGIC]) + struct.pack(">I", schema_id)
        kind = str(doc.get("schemaType") or "AVRO").upper()
        try:
            if kind == "AVRO":
                import fastavro

                buf = io.BytesIO()
                fastavro.schemaless_writer(buf, fastavro.parse_schema(json.loads(doc["schema"])), value)
                return head + buf.getvalue()
            if kind == "JSON":
                import jsonschema

                jsonschema.validate(value, json.loads(doc["schema"]))
                return head + json.dumps(value, separators=(",", ":")).encode()
            if kind == "PROTOBUF":
                from google.protobuf import json_format, message_factory

                fd = self._file(schema_id)
                names = list(fd.message_types_by_name)
                index = names.index(message) if message in names else 0
                cls = message_factory.GetMessageClass(fd.message_types_by_name[names[index]])
                msg = json_format.ParseDict(value, cls())
                path = b"\x00" if index == 0 else _put_zigzag(1) + _put_zigzag(index)
                return head + path + msg.SerializeToString()
        except RegistryError:
            raise
        except Exception as e:  # noqa: BLE001 - shown on the form
            raise EncodeError(f"the value does not fit the {kind} schema: {e}") from None
        raise EncodeError(f"unknown schema type {kind}")


def _jsonable(v: Any) -> Any:
    if isinstance(v, bytes):
        return v.hex()
    return str(v)
