"""Valid requests for any API version, encoded with the byte positions of every length field, and
the mutations the fuzz suite applies to them.

The encoder walks kio's request dataclasses (the same ones the broker decodes with) and writes what
kio's own entity_writer writes, noting where each array count and string/bytes length starts; the
result is checked byte for byte against kio's writer. Mutations then know where counts and lengths
are: set them to 0xFFFFFFFF / 0x7FFFFFFF / -1, lengthen strings to 40,000 bytes, truncate there.
"""

from __future__ import annotations

import datetime
import random
import struct
import time
import uuid
from dataclasses import dataclass, field, fields
from typing import Any

from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)
from kio.serial._serialize import get_writer

from samsa.protocol.codec import Chunks, build
from samsa.protocol.records import _uvarint_at as read_uvarint
from samsa.protocol.varint import uvarint


@dataclass
class Mark:
    pos: int  # where the length/count starts
    kind: str  # a32 (legacy array), auv (compact array), s16, s32 (legacy string/bytes), suv
    end: int = 0  # strings: where their content ends


@dataclass
class Encoded:
    body: bytearray = field(default_factory=bytearray)
    marks: list[Mark] = field(default_factory=list)


_LEN_TYPES = ("string", "bytes", "records")


def _scalar(v: Any) -> Any:
    return v


class MarkingEncoder:
    def __init__(self) -> None:
        self.enc = Encoded()

    def _w(self, b: bytes) -> None:
        self.enc.body += b

    def _len_field(self, ktype: str, value: Any, flexible: bool, optional: bool) -> None:
        data = value.encode() if isinstance(value, str) else value
        pos = len(self.enc.body)
        if flexible:
            self._w(uvarint(0 if data is None else len(data) + 1))
            kind = "suv"
        elif ktype == "string":
            self._w(struct.pack(">h", -1 if data is None else len(data)))
            kind = "s16"
        else:
            self._w(struct.pack(">i", -1 if data is None else len(data)))
            kind = "s32"
        if data is not None:
            self._w(bytes(data))
        self.enc.marks.append(Mark(pos, kind, len(self.enc.body)))

    def _array_len(self, items: Any, flexible: bool) -> None:
        pos = len(self.enc.body)
        if flexible:
            self._w(uvarint(0 if items is None else len(items) + 1))
            self.enc.marks.append(Mark(pos, "auv"))
        else:
            self._w(struct.pack(">i", -1 if items is None else len(items)))
            self.enc.marks.append(Mark(pos, "a32"))

    def entity(self, obj: Any) -> None:
        cls = type(obj)
        flexible = cls.__flexible__
        for f in fields(cls):
            if get_field_tag(f) is not None:
                continue  # tagged fields stay at their defaults: an empty tag section
            value = getattr(obj, f.name)
            kind = classify_field(f)
            ktype = f.metadata.get("kafka_type", "")
            if isinstance(kind, EntityTupleField):
                self._array_len(value, flexible)
                for item in value or ():
                    self.entity(item)
            elif isinstance(kind, EntityField):
                if is_optional(f):
                    self._w(b"\xff" if value is None else b"\x01")
                if value is not None:
                    self.entity(value)
            elif isinstance(kind, PrimitiveTupleField):
                self._array_len(value, flexible)
                for item in value or ():
                    if ktype in _LEN_TYPES:
                        self._len_field(ktype, item, flexible, False)
                    else:
                        self._primitive(ktype, item, flexible, False)
            elif ktype in _LEN_TYPES:
                self._len_field(ktype, value, flexible, is_optional(f))
            else:
                self._primitive(ktype, value, flexible, is_optional(f))
        if flexible:
            self._w(b"\x00")

    def _primitive(self, ktype: str, value: Any, flexible: bool, optional: bool) -> None:
        out = Chunks()
        get_writer(ktype, flexible, optional)(out, value)
        self._w(b"".join(out))


# ---- sample requests -------------------------------------------------------------------------

def _sample_value(ktype: str, fname: str, topic: str, records: bytes) -> Any:
    if ktype == "string":
        return topic if fname in ("name", "topic", "topic_name") else "fz"
    if ktype == "records":
        return records
    if ktype == "bytes":
        return b"fz"
    if ktype == "uuid":
        return uuid.UUID(int=0x5A45A)
    if ktype == "bool":
        return False
    if ktype == "error_code":
        return ErrorCode.none
    if ktype in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(0)
    if ktype == "datetime_i64":
        return datetime.datetime.fromtimestamp(time.time(), datetime.UTC)
    if ktype == "float64":
        return 0.0
    if fname == "acks":
        return -1
    return 0


def sample(cls: type, topic: str, records: bytes) -> dict[str, Any]:
    """A request body with one element in every array and a value in every field."""
    out: dict[str, Any] = {}
    for f in fields(cls):
        if get_field_tag(f) is not None:
            continue
        kind = classify_field(f)
        ktype = f.metadata.get("kafka_type", "")
        if isinstance(kind, EntityTupleField):
            out[f.name] = [sample(kind.type_, topic, records)]
        elif isinstance(kind, EntityField):
            out[f.name] = sample(kind.type_, topic, records)
        elif isinstance(kind, PrimitiveTupleField):
            out[f.name] = (_sample_value(ktype, f.name, topic, records),)
        else:
            out[f.name] = _sample_value(ktype, f.name, topic, records)
    return out


@dataclass
class Request:
    key: int
    version: int
    header: bytes  # header bytes (after the length prefix)
    body: Encoded
    marks_verified: bool  # the marking encoder matched kio's writer byte for byte

    def frame(self, body: bytes | bytearray | None = None) -> bytes:
        payload = self.header + bytes(self.body.body if body is None else body)
        return struct.pack(">i", len(payload)) + payload


def build_request(key: int, version: int, topic: str, records: bytes,
                  correlation_id: int = 1) -> Request:
    req_cls = load_request_schema(key, version)
    hdr_cls = req_cls.__header_schema__
    hdr = Chunks()
    entity_writer(hdr_cls)(hdr, build(hdr_cls, {
        "request_api_key": key, "request_api_version": version,
        "correlation_id": correlation_id, "client_id": "fuzz"}))
    obj = build(req_cls, sample(req_cls, topic, records))
    m = MarkingEncoder()
    m.entity(obj)
    ref = Chunks()
    entity_writer(req_cls)(ref, obj)
    ref_bytes = b"".join(ref)
    ok = bytes(m.enc.body) == ref_bytes
    body = m.enc if ok else Encoded(bytearray(ref_bytes), [])
    return Request(key, version, b"".join(hdr), body, ok)


# ---- mutations -------------------------------------------------------------------------------

def _replace_len(body: bytearray, mark: Mark, new: bytes) -> bytearray:
    if mark.kind in ("a32", "s32"):
        old = 4
    elif mark.kind == "s16":
        old = 2
    else:
        old = read_uvarint(bytes(body), mark.pos)[1] - mark.pos
    return body[: mark.pos] + new + body[mark.pos + old :]


COUNTS_A32 = {"count 0xFFFFFFFF": struct.pack(">I", 0xFFFFFFFF),
              "count 0x7FFFFFFF": struct.pack(">i", 0x7FFFFFFF),
              "count 0x80000000": struct.pack(">I", 0x80000000),
              "count -2": struct.pack(">i", -2)}
COUNTS_AUV = {"count null (0)": uvarint(0),
              "count 0xFFFFFFFF": uvarint(0xFFFFFFFF),
              "count 0x7FFFFFFF": uvarint(0x7FFFFFFF),
              "count 2^63": uvarint(2**63),
              "count unterminated varint": b"\xff" * 6}
BIG = 40000


def mutations(req: Request, rng: random.Random, n_flips: int = 12,
              n_cuts: int = 6) -> list[tuple[str, bytes]]:
    """(label, frame) pairs: bit flips, count and length abuse, lengthened strings, truncation."""
    body = req.body.body
    out: list[tuple[str, bytes]] = []
    for i in range(n_flips):
        b = bytearray(body)
        for _ in range(rng.randint(1, 8)):
            if b:
                p = rng.randrange(len(b))
                b[p] ^= 1 << rng.randrange(8)
        out.append((f"bit flips #{i}", req.frame(b)))
    for mk in req.body.marks:
        if mk.kind == "a32":
            for label, new in COUNTS_A32.items():
                out.append((f"{label} @{mk.pos}", req.frame(_replace_len(body, mk, new))))
        elif mk.kind == "auv":
            for label, new in COUNTS_AUV.items():
                out.append((f"{label} @{mk.pos}", req.frame(_replace_len(body, mk, new))))
        else:
            content = rng.choice([b"A" * BIG, bytes(rng.getrandbits(8) for _ in range(64)) * 625,
                                  b"\xff\xfe" * (BIG // 2)])
            if mk.kind == "s16":
                new_len = struct.pack(">h", 32767)  # as long as int16 goes; the rest trails
            elif mk.kind == "s32":
                new_len = struct.pack(">i", BIG)
            else:
                new_len = uvarint(BIG + 1)
            b = _replace_len(body, mk, new_len)
            shift = len(b) - len(body)
            start = mk.pos + len(new_len)
            old_content = mk.end + shift - start
            b = b[:start] + content + b[start + old_content :]
            out.append((f"string 40000 @{mk.pos}", req.frame(b)))
            # a length that runs past the end of the frame
            past = {"s16": struct.pack(">h", 32000), "s32": struct.pack(">i", 2**31 - 1),
                    "suv": uvarint(2**31)}[mk.kind]
            out.append((f"length past end @{mk.pos}", req.frame(_replace_len(body, mk, past))))
            if mk.kind in ("s16", "s32"):
                neg = struct.pack(">h", -2) if mk.kind == "s16" else struct.pack(">i", -2)
                out.append((f"length -2 @{mk.pos}", req.frame(_replace_len(body, mk, neg))))
    cut_points = sorted({mk.pos for mk in req.body.marks} |
                        {rng.randrange(len(body) + 1) for _ in range(n_cuts)})
    for p in cut_points:
        out.append((f"truncated at {p}", req.frame(body[:p])))
    return out


# ---- out-of-range values, validly encoded ------------------------------------------------------

_INT_BOUNDS = {
    "int8": (-(2**7), 2**7 - 1), "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1),
    "timedelta_i32": (-(2**31), 2**31 - 1), "timedelta_i64": (-(2**63), 2**63 - 1),
}


def int_paths(cls: type, prefix: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], str]]:
    """Paths (field names and list indexes into a sample() dict) of every integer field."""
    out: list[tuple[tuple[Any, ...], str]] = []
    for f in fields(cls):
        if get_field_tag(f) is not None:
            continue
        kind = classify_field(f)
        ktype = f.metadata.get("kafka_type", "")
        if isinstance(kind, EntityTupleField):
            out += int_paths(kind.type_, prefix + (f.name, 0))
        elif isinstance(kind, EntityField):
            out += int_paths(kind.type_, prefix + (f.name,))
        elif isinstance(kind, PrimitiveTupleField):
            if ktype in _INT_BOUNDS:
                out.append((prefix + (f.name, 0), ktype))
        elif ktype in _INT_BOUNDS:
            out.append((prefix + (f.name,), ktype))
    return out


def boundary_values(ktype: str) -> list[int]:
    lo, hi = _INT_BOUNDS[ktype]
    return sorted({lo, -2, -1, 0, 1, hi})


def with_value(data: Any, path: tuple[Any, ...], value: Any) -> Any:
    """A copy of a sample() dict with the field at path replaced."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(data, dict):
        return {**data, head: with_value(data[head], rest, value)}
    items = list(data)
    items[head] = with_value(items[head], rest, value)
    return items


def encode_with(key: int, version: int, data: dict[str, Any], correlation_id: int) -> bytes:
    req_cls = load_request_schema(key, version)
    hdr_cls = req_cls.__header_schema__
    out = Chunks()
    entity_writer(hdr_cls)(out, build(hdr_cls, {
        "request_api_key": key, "request_api_version": version,
        "correlation_id": correlation_id, "client_id": "fuzz"}))
    entity_writer(req_cls)(out, build(req_cls, data))
    payload = b"".join(out)
    return struct.pack(">i", len(payload)) + payload
