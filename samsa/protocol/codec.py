"""Request decoding and response encoding through kio, plus a version-agnostic response builder.

Handlers describe responses as plain dicts with Kafka's field names (snake_case, as kio names them);
`build` turns a dict into the kio dataclass of the negotiated version, dropping fields that version
lacks and filling required fields the handler left out with their zero value.
"""

from __future__ import annotations

import datetime
import struct
import uuid
from dataclasses import MISSING, fields, is_dataclass
from functools import cache
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.serial._introspect import EntityField, EntityTupleField, classify_field, is_optional

from .request_guard import check_frame, frame_checker
from .varint import uvarint as uvarint  # re-exported for the hand-written encoders

_I32 = struct.Struct(">i")


class Chunks(list[bytes]):
    """Collects a kio writer's output as a list of chunks (records bytes pass through uncopied)."""

    write = list.append  # type: ignore[assignment]


@cache
def request_reader(key: int, version: int) -> tuple[Any, Any]:
    req = load_request_schema(key, version)
    return entity_reader(req.__header_schema__), entity_reader(req)


@cache
def response_schema(key: int, version: int) -> tuple[type, Any, Any, Any]:
    resp = load_response_schema(key, version)
    hdr = resp.__header_schema__
    return resp, entity_writer(resp), hdr, entity_writer(hdr)


def decode_request(key: int, version: int, frame: bytes) -> tuple[Any, Any]:
    """(header, body) of a request frame (without its length prefix). Trailing bytes are ignored.
    Raises request_guard.MalformedRequest for a frame that does not parse under its schema (checked
    before kio's native reader sees it: see request_guard)."""
    frame = check_frame(key, version, frame)
    read_header, read_body = request_reader(key, version)
    header, n = read_header(frame, 0)
    body, _ = read_body(frame, n)
    return header, body


@cache
def _field_plan(cls: type) -> tuple[tuple[str, str, Any, bool, Any, bool], ...]:
    plan = []
    for f in fields(cls):
        kind = classify_field(f)
        nested = kind.type_ if isinstance(kind, EntityField | EntityTupleField) else None
        has_default = f.default is not MISSING or f.default_factory is not MISSING
        plan.append((f.name, f.metadata.get("kafka_type", ""), nested, has_default,
                     isinstance(kind, EntityTupleField) or kind.is_array, is_optional(f)))
    return tuple(plan)


def _zero(kafka_type: str, is_array: bool) -> Any:
    if is_array:
        return ()
    if kafka_type == "string":
        return ""
    if kafka_type == "bool":
        return False
    if kafka_type == "uuid":
        return None
    if kafka_type in ("bytes", "records"):
        return None
    if kafka_type == "error_code":
        return ErrorCode.none
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(0)
    return 0


def _convert(kafka_type: str, value: Any) -> Any:
    if kafka_type == "error_code" and not isinstance(value, ErrorCode):
        return ErrorCode(int(value))
    if kafka_type in ("timedelta_i32", "timedelta_i64") and not isinstance(value, datetime.timedelta):
        return datetime.timedelta(milliseconds=int(value))
    if kafka_type.startswith("datetime") and isinstance(value, int):
        # -1 ("none") is written back as -1 for nullable and non-nullable fields alike
        return datetime.datetime.fromtimestamp(value / 1000, datetime.UTC)
    if kafka_type == "uuid" and isinstance(value, bytes):
        return uuid.UUID(bytes=value)
    return value


def build(cls: type, data: dict[str, Any]) -> Any:
    kwargs: dict[str, Any] = {}
    for name, ktype, nested, has_default, is_array, optional in _field_plan(cls):
        if name in data:
            value = data[name]
            if value is None and not optional:
                value = _zero(ktype, is_array)  # e.g. a null string in a version without nulls
            if nested is not None and value is not None:
                if is_array:
                    value = tuple(v if is_dataclass(v) else build(nested, v) for v in value)
                elif not is_dataclass(value):
                    value = build(nested, value)
            elif is_array and value is not None and not isinstance(value, tuple):
                value = tuple(_convert(ktype, v) for v in value)
            else:
                value = _convert(ktype, value)
            kwargs[name] = value
        elif not has_default:
            kwargs[name] = build(nested, {}) if nested is not None and not is_array \
                else _zero(ktype, is_array)
    return cls(**kwargs)


def encode_response(key: int, version: int, correlation_id: int, data: dict[str, Any]) -> list[bytes]:
    """Length-prefixed response frame as chunks."""
    resp_cls, write_body, hdr_cls, write_hdr = response_schema(key, version)
    out = Chunks()
    out.append(b"")  # placeholder for the size prefix
    write_hdr(out, hdr_cls(correlation_id=correlation_id))
    write_body(out, build(resp_cls, data))
    size = sum(len(c) for c in out)
    out[0] = _I32.pack(size)
    return out


def warm_up(supported: dict[int, tuple[int, int]]) -> None:
    """Import and compile the readers, guards and writers of every served API version now: kio
    imports each version's schema module lazily, and an import that needs a file descriptor must
    not happen when the broker is out of them (a request would be refused as undecodable)."""
    for key, (lo, hi) in supported.items():
        for version in range(lo, hi + 1):
            request_reader(key, version)
            frame_checker(key, version)
            response_schema(key, version)
