"""Connect values as header strings and back, after Kafka's `Values.convertToString` /
`Values.parseString` (what SimpleHeaderConverter uses).

Parsed: `null`, `true`/`false`, numbers (the smallest of INT8/16/32/64 for whole numbers, FLOAT32,
then FLOAT64 for fractions, else a Decimal), ISO-8601 dates (`yyyy-MM-dd`), times
(`HH:mm:ss.SSSZ`) and timestamps (`yyyy-MM-ddTHH:mm:ss.SSSZ`) as the logical types, and
JSON-like arrays `[..]` and maps `{k:v,..}` whose elements are literals, quoted strings or nested
containers. Anything else is the string itself.
Differences from Kafka (documented subset): text after a complete top-level array or map makes
the whole value a string; a container whose elements have no common schema (or only nulls) is
returned with a null schema instead of Kafka's array/map-of-null schema."""

from __future__ import annotations

import base64
import datetime
import decimal
import math
import re
import struct
from typing import Any

from ..data import (
    BOOLEAN_SCHEMA,
    FLOAT32_SCHEMA,
    FLOAT64_SCHEMA,
    INT8_SCHEMA,
    INT16_SCHEMA,
    INT32_SCHEMA,
    INT64_SCHEMA,
    STRING_SCHEMA,
    TIME_NAME,
    TIMESTAMP_NAME,
    Schema,
    SchemaAndValue,
    Struct,
    Type,
    array_schema,
    date_schema,
    decimal_schema,
    map_schema,
    time_schema,
    timestamp_schema,
)
from ..errors import DataException
from .simple import java_to_string

_NUMBER = re.compile(r"[+-]?\d+(\.\d*)?([eE][+-]?\d+)?\Z")
_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})\Z")
_TIME = re.compile(r"(\d{2}):(\d{2}):(\d{2})\.(\d{3})Z\Z")
_TIMESTAMP = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{3})Z\Z")
_NUMERIC_ORDER = [Type.INT8, Type.INT16, Type.INT32, Type.INT64, Type.FLOAT32, Type.FLOAT64]
_MAX_DEPTH = 64


# ---- to string ----------------------------------------------------------------------------------
def convert_to_string(schema: Schema | None, value: Any) -> str | None:
    if value is None:
        return None
    out: list[str] = []
    _append(out, schema, value, embedded=False)
    return "".join(out)


def _escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"')


def _append(out: list[str], schema: Schema | None, value: Any, embedded: bool) -> None:
    name = schema.name if schema is not None else None
    if value is None:
        out.append("null")
    elif isinstance(value, str):
        out.append(f'"{_escape(value)}"' if embedded else value)
    elif isinstance(value, bool | int | float | decimal.Decimal):
        out.append(java_to_string(value))
    elif isinstance(value, bytes | bytearray | memoryview):
        text = base64.b64encode(bytes(value)).decode()
        out.append(f'"{text}"' if embedded else text)
    elif isinstance(value, datetime.datetime) or name == TIMESTAMP_NAME:
        if not isinstance(value, datetime.datetime):
            raise DataException(f"Timestamp expects datetime.datetime, got {type(value).__name__}")
        if value.tzinfo is not None:
            value = value.astimezone(datetime.UTC)
        out.append(value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z")
    elif isinstance(value, datetime.date) and name != TIME_NAME:
        out.append(value.strftime("%Y-%m-%d"))
    elif isinstance(value, datetime.time):
        out.append(value.strftime("%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z")
    elif isinstance(value, list | tuple):
        item = schema.value_schema if schema is not None else None
        out.append("[")
        for i, v in enumerate(value):
            if i:
                out.append(",")
            _append(out, item, v, True)
        out.append("]")
    elif isinstance(value, dict):
        ks = schema.key_schema if schema is not None else None
        vs = schema.value_schema if schema is not None else None
        out.append("{")
        for i, (k, v) in enumerate(value.items()):
            if i:
                out.append(",")
            _append(out, ks, k, True)
            out.append(":")
            _append(out, vs, v, True)
        out.append("}")
    elif isinstance(value, Struct):
        out.append("{")
        for i, f in enumerate(value.schema.fields):
            if i:
                out.append(",")
            _append(out, None, f.name, True)
            out.append(":")
            _append(out, f.schema, value.get(f.name), True)
        out.append("}")
    else:
        raise DataException(f"cannot convert a {type(value).__name__} to a header string")


# ---- from string --------------------------------------------------------------------------------
def parse_string(text: str) -> SchemaAndValue:
    """The Connect value a header string stands for (see the module docstring)."""
    if text == "":
        return SchemaAndValue(STRING_SCHEMA, "")
    stripped = text.strip()
    if stripped == "null":
        return SchemaAndValue.NULL
    if stripped in ("true", "false"):
        return SchemaAndValue(BOOLEAN_SCHEMA, stripped == "true")
    if stripped[:1] in ("[", "{"):
        p = _Parser(stripped)
        try:
            result = p.value(0)
            p.skip_ws()
            if p.pos == len(stripped) and result is not None:
                return result
        except (DataException, RecursionError):
            pass
        return SchemaAndValue(STRING_SCHEMA, text)
    if stripped[:1].isdigit():
        temporal = _temporal(stripped)
        if temporal is not None:
            return temporal
    if stripped[:1].isdigit() or stripped[:1] in ("+", "-"):
        number = _number(stripped)
        if number is not None:
            return number
    return SchemaAndValue(STRING_SCHEMA, text)


def _temporal(token: str) -> SchemaAndValue | None:
    try:
        if m := _DATE.match(token):
            y, mo, d = map(int, m.groups())
            return SchemaAndValue(date_schema(), datetime.date(y, mo, d))
        if m := _TIME.match(token):
            h, mi, s, ms = map(int, m.groups())
            return SchemaAndValue(time_schema(), datetime.time(h, mi, s, ms * 1000))
        if m := _TIMESTAMP.match(token):
            y, mo, d, h, mi, s, ms = map(int, m.groups())
            return SchemaAndValue(timestamp_schema(),
                                  datetime.datetime(y, mo, d, h, mi, s, ms * 1000, tzinfo=datetime.UTC))
    except ValueError:
        return None
    return None


def _number(token: str) -> SchemaAndValue | None:
    if not _NUMBER.match(token) or len(token) > 400:
        return None
    d = decimal.Decimal(token)
    exp = d.as_tuple().exponent
    assert isinstance(exp, int)
    scale = -exp
    magnitude = abs(d)
    if magnitude <= decimal.Decimal("1e19") and not (0 < magnitude < 1) and d == d.to_integral_value():
        n = int(d)
        for bits, schema in ((8, INT8_SCHEMA), (16, INT16_SCHEMA), (32, INT32_SCHEMA), (64, INT64_SCHEMA)):
            if -(1 << (bits - 1)) <= n < (1 << (bits - 1)):
                return SchemaAndValue(schema, n)
    f64 = float(d)
    if scale != 0 and math.isfinite(f64):
        try:
            return SchemaAndValue(FLOAT32_SCHEMA, struct.unpack(">f", struct.pack(">f", f64))[0])
        except OverflowError:  # too big for a float: a double
            return SchemaAndValue(FLOAT64_SCHEMA, f64)
    return SchemaAndValue(decimal_schema(scale), d)


def _merge(a: Schema | None, b: Schema | None) -> tuple[Schema | None, bool]:
    """The common schema of two element schemas; (None, False) when there is none."""
    if a is None:
        return b, True
    if b is None:
        return a, True
    if a == b:
        return a, True
    if a.name is None and b.name is None and a.type in _NUMERIC_ORDER and b.type in _NUMERIC_ORDER:
        wider = max(a.type, b.type, key=_NUMERIC_ORDER.index)
        return Schema(wider), True
    return None, False


def _align(schema: Schema | None, value: Any) -> Any:
    if schema is None or value is None:
        return value
    if schema.type in (Type.FLOAT32, Type.FLOAT64) and isinstance(value, int):
        return float(value)
    return value


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def skip_ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def peek(self) -> str:
        self.skip_ws()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def expect(self, ch: str) -> None:
        if self.peek() != ch:
            raise DataException(f"expected {ch!r} at {self.pos} in {self.text!r}")
        self.pos += 1

    def value(self, depth: int) -> SchemaAndValue | None:
        if depth > _MAX_DEPTH:
            raise DataException("header value nested too deeply")
        ch = self.peek()
        if ch == "[":
            return self.array(depth)
        if ch == "{":
            return self.map(depth)
        if ch == '"':
            return self.quoted()
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos] not in ",:]}[{\"" \
                and not self.text[self.pos].isspace():
            self.pos += 1
        token = self.text[start:self.pos]
        # times contain ':' — take the rest of an ISO time/timestamp literal as one token
        m = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z|\d{2}:\d{2}:\d{2}\.\d{3}Z") \
            .match(self.text, start)
        if m:
            self.pos = m.end()
            token = m.group(0)
        if token == "null":
            return None
        if token in ("true", "false"):
            return SchemaAndValue(BOOLEAN_SCHEMA, token == "true")
        if token[:1].isdigit():
            temporal = _temporal(token)
            if temporal is not None:
                return temporal
        if token[:1].isdigit() or token[:1] in ("+", "-"):
            number = _number(token)
            if number is not None:
                return number
        raise DataException("Failed to parse embedded value")

    def quoted(self) -> SchemaAndValue:
        self.pos += 1
        out: list[str] = []
        while self.pos < len(self.text):
            ch = self.text[self.pos]
            if ch == "\\" and self.pos + 1 < len(self.text):
                out.append(self.text[self.pos + 1])
                self.pos += 2
                continue
            self.pos += 1
            if ch == '"':
                content = "".join(out)
                return _temporal(content) or SchemaAndValue(STRING_SCHEMA, content)
            out.append(ch)
        raise DataException("unterminated quoted string")

    def array(self, depth: int) -> SchemaAndValue:
        self.expect("[")
        items: list[Any] = []
        common: Schema | None = None
        ok, nulls = True, False
        if self.peek() == "]":
            self.pos += 1
            return SchemaAndValue(None, items)
        while True:
            if self.peek() == ",":
                raise DataException("Unable to parse an empty array element")
            elem = self.value(depth + 1)
            if elem is None or elem.value is None:
                nulls = True
            if ok and elem is not None:
                common, ok = _merge(common, elem.schema)
            items.append(None if elem is None else elem.value)
            ch = self.peek()
            self.pos += 1
            if ch == "]":
                break
            if ch != ",":
                raise DataException("Array elements missing ',' delimiter")
        if not ok or common is None:
            return SchemaAndValue(None, items)
        if nulls:
            common = common.with_(optional=True)
        return SchemaAndValue(array_schema(common), [_align(common, v) for v in items])

    def map(self, depth: int) -> SchemaAndValue:
        self.expect("{")
        out: dict[Any, Any] = {}
        ks: Schema | None = None
        vs: Schema | None = None
        k_ok = v_ok = True
        nulls = False
        if self.peek() == "}":
            self.pos += 1
            return SchemaAndValue(None, out)
        while True:
            if self.peek() == ",":
                raise DataException("Unable to parse a map entry with no key or value")
            key = self.value(depth + 1)
            if key is None or key.value is None:
                raise DataException("Map entry may not have a null key")
            self.expect(":")
            val = self.value(depth + 1)
            if val is None or val.value is None:
                nulls = True
            try:
                out[key.value] = None if val is None else val.value
            except TypeError:
                raise DataException("a map key must be a primitive") from None
            if k_ok:
                ks, k_ok = _merge(ks, key.schema)
            if v_ok and val is not None:
                vs, v_ok = _merge(vs, val.schema)
            ch = self.peek()
            self.pos += 1
            if ch == "}":
                break
            if ch != ",":
                raise DataException("Map entry is missing ','")
        if not (k_ok and v_ok) or ks is None or vs is None:
            return SchemaAndValue(None, out)
        if nulls:
            vs = vs.with_(optional=True)
        return SchemaAndValue(map_schema(ks, vs),
                              {_align(ks, k): _align(vs, v) for k, v in out.items()})

