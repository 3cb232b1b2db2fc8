"""Pre-decode bounds check of request frames, so the native decoder only ever sees sane input.

kio's native reader reserves an array's claimed element count before reading it: a 23-byte frame
claiming 2^32 topics aborts the process. It also hands a null array to the handlers where the schema
forbids one, and raises on unknown tagged fields (which KIP-482 says must be ignored). So every
frame is first walked here against the same schema, with these rules (Kafka's generated readers
apply the same ones, and Kafka closes the connection when a request does not parse):

- every length, count and varint must fit in the bytes left in the frame (an array of n elements
  needs at least n bytes; a primitive array n times its element size);
- null only where the schema says nullable (arrays, strings, bytes, structs);
- strings at most 32,767 bytes (Kafka's limit for every string field, compact ones included);
- varints terminate within 5 bytes (they are 32-bit);
- a known tagged field's value fills exactly the size its tag declares (kio reads the value and
  ignores the size, so any other size would desynchronise the walk from the decoder);
- at most MAX_ELEMENTS array elements in the whole request (Samsa's bound on the work and memory a
  valid-looking frame can cost; Kafka has none).

Unknown tagged fields are accepted and removed from the frame handed to kio (their bytes are skipped,
the tag count rewritten). A walker is compiled once per (api key, version) from kio's dataclasses; it
does a handful of struct reads per field, not per record (records are one bytes field).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import fields
from functools import cache
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)

from .varint import uvarint

MAX_STRING = 0x7FFF
# Array elements one request may hold in all. A frame within socket.request.max.bytes can still
# claim ~50 million one-byte elements: walking them would hold the event loop for a minute and
# decoding them would build as many Python objects. No client request comes near this (a Produce
# or OffsetCommit for thousands of partitions holds a few thousand elements).
MAX_ELEMENTS = 200_000

_FIXED_SIZE = {
    "int8": 1, "uint8": 1, "bool": 1,
    "int16": 2, "uint16": 2, "error_code": 2,
    "int32": 4, "uint32": 4, "timedelta_i32": 4,
    "int64": 8, "uint64": 8, "float64": 8, "timedelta_i64": 8, "datetime_i64": 8,
    "uuid": 16,
}

_I16 = struct.Struct(">h").unpack_from
_I32 = struct.Struct(">i").unpack_from


class MalformedRequest(ValueError):
    """The frame does not parse under its schema: Kafka closes the connection."""


class _Walk:
    """State of one frame walk: the buffer and the unknown tagged fields to cut out."""

    __slots__ = ("buf", "end", "cuts", "tag_depth", "elements")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.end = len(buf)
        self.elements = 0  # array elements seen so far (bounded by MAX_ELEMENTS)
        # (start, end, replacement) edits for unknown tagged fields
        self.cuts: list[tuple[int, int, bytes]] = []
        self.tag_depth = 0


Reader = Callable[[_Walk, int, int], int]  # (walk, position, end of region) -> next position


def _uvarint(w: _Walk, pos: int, end: int) -> tuple[int, int]:
    buf = w.buf
    if pos < end and buf[pos] < 0x80:  # the common one-byte case
        return buf[pos], pos + 1
    value = 0
    for shift in (0, 7, 14, 21, 28):
        if pos >= end:
            raise MalformedRequest("varint runs past the end of the frame")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            if value > 0xFFFFFFFF:
                raise MalformedRequest("varint exceeds 32 bits")
            return value, pos
    raise MalformedRequest("varint longer than 5 bytes")


def _need(pos: int, n: int, end: int, what: str) -> int:
    if n > end - pos:
        raise MalformedRequest(f"{what} needs {n} bytes, {max(end - pos, 0)} left")
    return pos + n


def _fixed(size: int, name: str) -> Reader:
    def read(w: _Walk, pos: int, end: int) -> int:
        if size > end - pos:
            raise MalformedRequest(f"field {name} runs past the end of the frame")
        return pos + size
    return read


def _string(name: str, flexible: bool, nullable: bool, is_bytes: bool) -> Reader:
    limit = None if is_bytes else MAX_STRING

    def read(w: _Walk, pos: int, end: int) -> int:
        if flexible:
            n, pos = _uvarint(w, pos, end)
            length = n - 1
        elif is_bytes:
            if 4 > end - pos:
                raise MalformedRequest(f"field {name} runs past the end of the frame")
            length = _I32(w.buf, pos)[0]
            pos += 4
        else:
            if 2 > end - pos:
                raise MalformedRequest(f"field {name} runs past the end of the frame")
            length = _I16(w.buf, pos)[0]
            pos += 2
        if length < 0:
            if length == -1 and nullable:
                return pos
            raise MalformedRequest(f"non-nullable field {name} was serialized as null"
                                   if length == -1 else f"field {name} has length {length}")
        if limit is not None and length > limit:
            raise MalformedRequest(f"string field {name} had invalid length {length}")
        return _need(pos, length, end, f"field {name}")
    return read


def _client_id(w: _Walk, pos: int, end: int) -> int:
    """The header's client id: like Kafka (Java's decoder), invalid UTF-8 is not an error but
    replaced (U+FFFD), so the frame handed to kio gets the repaired bytes."""
    if 2 > end - pos:
        raise MalformedRequest("field client_id runs past the end of the frame")
    length = _I16(w.buf, pos)[0]
    if length < 0:
        if length == -1:
            return pos + 2
        raise MalformedRequest(f"field client_id has length {length}")
    stop = _need(pos + 2, length, end, "field client_id")
    raw = w.buf[pos + 2 : stop]
    try:
        raw.decode()
    except UnicodeDecodeError:
        fixed = raw.decode(errors="replace").encode()[:MAX_STRING]
        w.cuts.append((pos, stop, struct.pack(">h", len(fixed)) + fixed))
    return stop


def _array(name: str, flexible: bool, nullable: bool, element: Reader, element_size: int) -> Reader:
    def read(w: _Walk, pos: int, end: int) -> int:
        if flexible:
            n, pos = _uvarint(w, pos, end)
            count = n - 1
        else:
            if 4 > end - pos:
                raise MalformedRequest(f"array {name} runs past the end of the frame")
            count = _I32(w.buf, pos)[0]
            pos += 4
        if count < 0:
            if count == -1 and nullable:
                return pos
            raise MalformedRequest(f"non-nullable field {name} was serialized as null"
                                   if count == -1 else f"array {name} has count {count}")
        if count * element_size > end - pos:
            raise MalformedRequest(f"array {name} claims {count} elements, "
                                   f"{end - pos} bytes left")
        w.elements += count
        if w.elements > MAX_ELEMENTS:
            raise MalformedRequest(f"request holds more than {MAX_ELEMENTS} array elements")
        if element_size and element is _NOOP:
            return pos + count * element_size
        for _ in range(count):
            pos = element(w, pos, end)
        return pos
    return read


def _NOOP(w: _Walk, pos: int, end: int) -> int:  # noqa: N802 - a sentinel reader
    return pos


def _nullable_struct(name: str, inner: Reader) -> Reader:
    def read(w: _Walk, pos: int, end: int) -> int:
        if pos >= end:
            raise MalformedRequest(f"field {name} runs past the end of the frame")
        marker = w.buf[pos]
        if marker == 0xFF:  # -1: null (KIP-893)
            return pos + 1
        if marker != 1:
            raise MalformedRequest(f"field {name} has null marker {marker}")
        return inner(w, pos + 1, end)
    return read


def _field_reader(f: Any, flexible: bool, is_header: bool, is_tag: bool) -> Reader:
    kind = classify_field(f)
    nullable = False if is_tag else is_optional(f)
    name = f.name
    if is_header and name == "client_id":  # always a legacy nullable string (KIP-482)
        return _client_id
    if isinstance(kind, EntityField):
        inner = _entity(kind.type_)
        return _nullable_struct(name, inner) if nullable else inner
    if isinstance(kind, EntityTupleField):
        return _array(name, flexible, nullable, _entity(kind.type_), 1)
    ktype = f.metadata.get("kafka_type", "")
    if isinstance(kind, PrimitiveTupleField):
        size = _FIXED_SIZE.get(ktype)
        if size is not None:
            return _array(name, flexible, nullable, _NOOP, size)
        return _array(name, flexible, nullable,
                      _string(name, flexible, False, ktype in ("bytes", "records")), 1)
    size = _FIXED_SIZE.get(ktype)
    if size is not None:
        return _fixed(size, name)
    if ktype in ("string", "bytes", "records"):
        return _string(name, flexible, nullable, ktype != "string")
    raise TypeError(f"request_guard: no reader for {name}: {ktype!r}")


def _tagged_section(known: dict[int, Reader]) -> Reader:
    def read(w: _Walk, pos: int, end: int) -> int:
        if pos < end and w.buf[pos] == 0:  # no tagged fields: the common case
            return pos + 1
        count_start = pos
        count, pos = _uvarint(w, pos, end)
        count_end = pos
        if count > end - pos:
            raise MalformedRequest(f"{count} tagged fields claimed, {end - pos} bytes left")
        unknown: list[tuple[int, int]] = []
        for _ in range(count):
            start = pos
            tag, pos = _uvarint(w, pos, end)
            size, pos = _uvarint(w, pos, end)
            stop = _need(pos, size, end, f"tagged field {tag}")
            reader = known.get(tag)
            if reader is None:
                unknown.append((start, stop))
            else:
                w.tag_depth += 1
                try:
                    used = reader(w, pos, stop)
                finally:
                    w.tag_depth -= 1
                # kio reads a known tag's value and ignores the declared size (as Kafka's
                # generated readers do): a size that is not the value's would make it read on
                # from bytes this walk skipped
                if used != stop:
                    raise MalformedRequest(f"tagged field {tag} declares {size} bytes, "
                                           f"its value has {used - pos}")
            pos = stop
        if unknown:
            if w.tag_depth:
                raise MalformedRequest("unknown tagged field inside a tagged field")
            kept = count - len(unknown)
            w.cuts.append((count_start, count_end, uvarint(kept)))
            w.cuts.extend((a, b, b"") for a, b in unknown)
        return pos
    return read


@cache
def _entity(cls: type) -> Reader:
    flexible = bool(getattr(cls, "__flexible__", False))
    is_header = cls.__name__ == "RequestHeader"
    plain: list[Reader] = []
    tagged: dict[int, Reader] = {}
    run = 0  # consecutive fixed-size fields are checked as one span
    run_names: list[str] = []
    for f in fields(cls):
        tag = get_field_tag(f)
        kind = classify_field(f)
        ktype = f.metadata.get("kafka_type", "")
        if tag is not None:
            tagged[int(tag)] = _field_reader(f, flexible, is_header, True)
            continue
        size = _FIXED_SIZE.get(ktype) if not kind.is_array and not isinstance(kind, EntityField) \
            else None
        if size is not None:
            run += size
            run_names.append(f.name)
            continue
        if run:
            plain.append(_fixed(run, "/".join(run_names)))
            run, run_names = 0, []
        plain.append(_field_reader(f, flexible, is_header, False))
    if run:
        plain.append(_fixed(run, "/".join(run_names)))
    if flexible:
        plain.append(_tagged_section(tagged))
    steps = tuple(plain)

    if len(steps) == 1:
        return steps[0]

    def read(w: _Walk, pos: int, end: int) -> int:
        for step in steps:
            pos = step(w, pos, end)
        return pos
    return read


@cache
def frame_checker(key: int, version: int, response: bool = False) -> Reader:
    """The walker for a whole frame (header, then body) of this API version: a request frame, or
    with response=True a response frame (a peer's answer, e.g. between KRaft controllers)."""
    cls = (load_response_schema if response else load_request_schema)(key, version)
    header = _entity(cls.__header_schema__)  # type: ignore[arg-type]
    body = _entity(cls)

    def read(w: _Walk, pos: int, end: int) -> int:
        return body(w, header(w, pos, end), end)
    return read


def check_frame(key: int, version: int, frame: bytes, response: bool = False) -> bytes:
    """Validate a request frame (or with response=True a response frame), without its length
    prefix, against its schema. Returns the frame to decode: the same object, or a copy without
    unknown tagged fields. Raises MalformedRequest."""
    w = _Walk(frame)
    frame_checker(key, version, response)(w, 0, w.end)
    if not w.cuts:
        return frame
    out = bytearray()
    pos = 0
    for start, stop, replacement in sorted(w.cuts):
        out += frame[pos:start]
        out += replacement
        pos = stop
    out += frame[pos:]
    return bytes(out)
