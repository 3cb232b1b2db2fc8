"""PostgreSQL column types as Debezium maps them to Connect schemas, and the conversion of a
value's text form (what pgoutput sends and what `col::text` returns in the snapshot) to the
Connect value.

Debezium's defaults: decimal.handling.mode=precise (Connect Decimal with `scale` and
`connect.decimal.precision`; numeric without a declared scale -> io.debezium.data.
VariableScaleDecimal), time.precision.mode=adaptive (timestamp -> io.debezium.time.MicroTimestamp
etc.), timestamptz -> io.debezium.time.ZonedTimestamp (ISO-8601 text in UTC), json/jsonb ->
io.debezium.data.Json, uuid -> io.debezium.data.Uuid, enums -> io.debezium.data.Enum with the
`allowed` labels, arrays -> ARRAY of the element's schema, bytea -> BYTES."""

from __future__ import annotations

import datetime
import decimal
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...data import DECIMAL_NAME, DECIMAL_SCALE, Schema, Struct, Type, array_schema, struct_schema

Converter = Callable[[str], Any]

UNAVAILABLE_VALUE = "__debezium_unavailable_value"
EPOCH_NAIVE = datetime.datetime(1970, 1, 1)
EPOCH_DATE = datetime.date(1970, 1, 1)
US = datetime.timedelta(microseconds=1)
DAYS_PER_MONTH_AVG = 365.25 / 12.0


@dataclass(frozen=True)
class PgType:
    """One row of pg_type with what the mapping needs."""

    oid: int
    name: str
    namespace: str
    typtype: str  # b(ase), e(num), d(omain), c(omposite), r(ange), m(ultirange), p(seudo)
    category: str  # A for arrays
    elem: int  # element type of an array
    base: int  # base type of a domain
    labels: tuple[str, ...] = ()  # enum labels in sort order


CATALOG_SQL = """
SELECT t.oid::int8, t.typname, n.nspname, t.typtype, t.typcategory, t.typelem::int8,
       t.typbasetype::int8,
       COALESCE((SELECT array_agg(e.enumlabel ORDER BY e.enumsortorder) FROM pg_enum e
                 WHERE e.enumtypid = t.oid), '{}')
FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
"""


def catalog_from_rows(rows: list[tuple[Any, ...]]) -> dict[int, PgType]:
    return {int(r[0]): PgType(int(r[0]), r[1], r[2], r[3], r[4], int(r[5]), int(r[6]),
                              tuple(r[7] or ())) for r in rows}


@dataclass(frozen=True)
class Modes:
    decimal: str = "precise"  # precise | double | string
    time_precision: str = "adaptive"  # adaptive | adaptive_time_microseconds | connect
    binary: str = "bytes"  # bytes | base64 | hex


def _named(t: Type, name: str, optional: bool, params: dict[str, str] | None = None) -> Schema:
    return Schema(t, optional=optional, name=name, version=1,
                  parameters=tuple(sorted((params or {}).items())))


VARIABLE_SCALE_DECIMAL = "io.debezium.data.VariableScaleDecimal"


def _vsd_schema(optional: bool) -> Schema:
    return struct_schema([("scale", Schema(Type.INT32)), ("value", Schema(Type.BYTES))],
                         name=VARIABLE_SCALE_DECIMAL, optional=optional, version=1,
                         doc="Variable scaled decimal")


def _unscaled_bytes(unscaled: int) -> bytes:
    bits = (~unscaled if unscaled < 0 else unscaled).bit_length()
    return unscaled.to_bytes(bits // 8 + 1, "big", signed=True)


# ---- text parsers -------------------------------------------------------------------------------
def _bool(s: str) -> bool:
    return s in ("t", "true")


def _bytea(s: str) -> bytes:
    if s.startswith("\\x"):
        return bytes.fromhex(s[2:])
    # bytea_output=escape: octal escapes and doubled backslashes
    out = bytearray()
    i = 0
    while i < len(s):
        c = s[i]
        if c == "\\" and s[i + 1:i + 2] == "\\":
            out.append(0x5C)
            i += 2
        elif c == "\\":
            out.append(int(s[i + 1:i + 4], 8))
            i += 4
        else:
            out += c.encode()
            i += 1
    return bytes(out)


def _bc(s: str) -> tuple[str, bool]:
    if s.endswith(" BC"):
        return s[:-3], True
    return s, False


def _parse_ts(s: str) -> datetime.datetime:
    if s == "infinity":
        return datetime.datetime.max
    if s == "-infinity":
        return datetime.datetime.min
    body, _ = _bc(s)
    return datetime.datetime.fromisoformat(body)


def micro_timestamp(s: str) -> int:
    dt = _parse_ts(s)
    return (dt.replace(tzinfo=None) - EPOCH_NAIVE) // US


def milli_timestamp(s: str) -> int:
    return micro_timestamp(s) // 1000


def zoned_timestamp(s: str) -> str:
    """ISO-8601 in UTC with the fraction's trailing zeros dropped (Java's ISO_OFFSET_DATE_TIME)."""
    dt = _parse_ts(s)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=datetime.UTC)
    dt = dt.astimezone(datetime.UTC)
    text = dt.strftime("%Y-%m-%dT%H:%M:%S")
    if dt.microsecond:
        text += "." + f"{dt.microsecond:06d}".rstrip("0")
    return text + "Z"


def date_days(s: str) -> int:
    if s == "infinity":
        return (datetime.date.max - EPOCH_DATE).days
    if s == "-infinity":
        return (datetime.date.min - EPOCH_DATE).days
    body, _ = _bc(s)
    return (datetime.date.fromisoformat(body) - EPOCH_DATE).days


def time_micros(s: str) -> int:
    s = re.split(r"[+-]", s, maxsplit=1)[0]
    hh, mm, rest = s.split(":")
    sec, _, frac = rest.partition(".")
    return ((int(hh) * 60 + int(mm)) * 60 + int(sec)) * 1_000_000 + int((frac + "000000")[:6])


def zoned_time(s: str) -> str:
    """timetz text (HH:MM:SS[.f]+HH[:MM]) in UTC, as Debezium's ZonedTime."""
    m = re.match(r"^(\d+):(\d+):(\d+)(?:\.(\d+))?([+-]\d+(?::\d+)?(?::\d+)?)$", s)
    if m is None:
        return s
    hh, mm, ss, frac, off = m.groups()
    sign = -1 if off[0] == "-" else 1
    parts = [int(p) for p in off[1:].split(":")] + [0, 0]
    offset = sign * (parts[0] * 3600 + parts[1] * 60 + parts[2])
    total = (int(hh) * 3600 + int(mm) * 60 + int(ss) - offset) % 86400
    text = f"{total // 3600:02d}:{total // 60 % 60:02d}:{total % 60:02d}"
    if frac and int(frac):
        text += "." + frac.rstrip("0")
    return text + "Z"


_ISO_INTERVAL = re.compile(r"^(-)?P(?:(-?\d+)Y)?(?:(-?\d+)M)?(?:(-?\d+)D)?"
                           r"(?:T(?:(-?\d+)H)?(?:(-?\d+)M)?(?:(-?[\d.]+)S)?)?$")


def interval_micros(s: str) -> int:
    """IntervalStyle=iso_8601 text as Debezium's MicroDuration (a month = 365.25/12 days)."""
    m = _ISO_INTERVAL.match(s)
    if m is None:
        raise ValueError(f"unexpected interval text {s!r}")
    neg, y, mo, d, h, mi, sec = m.groups()
    months = int(y or 0) * 12 + int(mo or 0)
    total = (months * DAYS_PER_MONTH_AVG + int(d or 0)) * 86_400_000_000
    total += (int(h or 0) * 3600 + int(mi or 0) * 60) * 1_000_000
    total += int(decimal.Decimal(sec or "0") * 1_000_000)
    value = round(total)
    return -value if neg else value


def _money(s: str) -> decimal.Decimal:
    neg = s.startswith("-") or (s.startswith("(") and s.endswith(")"))
    digits = re.sub(r"[^0-9.]", "", s)
    value = decimal.Decimal(digits or "0")
    return -value if neg else value


def parse_array(text: str, elem: Converter) -> list[Any]:
    """PostgreSQL's array text ({a,"b c",NULL}); nested arrays become nested lists."""
    pos = 0
    if text.startswith("["):  # explicit bounds: [1:3]={...}
        pos = text.index("=") + 1

    def parse(i: int) -> tuple[list[Any], int]:
        assert text[i] == "{"
        i += 1
        items: list[Any] = []
        if text[i] == "}":
            return items, i + 1
        while True:
            c = text[i]
            if c == "{":
                sub, i = parse(i)
                items.append(sub)
            elif c == '"':
                i += 1
                buf = []
                while text[i] != '"':
                    if text[i] == "\\":
                        i += 1
                    buf.append(text[i])
                    i += 1
                i += 1
                items.append(elem("".join(buf)))
            else:
                j = i
                while text[j] not in ",}":
                    j += 1
                raw = text[i:j].strip()
                items.append(None if raw == "NULL" else elem(raw))
                i = j
            if text[i] == ",":
                i += 1
                continue
            return items, i + 1

    return parse(pos)[0]


# ---- the mapping ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Mapped:
    schema: Schema
    convert: Converter


def _decimal_precise(scale: int | None) -> Converter:
    def conv(s: str) -> Any:
        d = decimal.Decimal(s)
        if not d.is_finite():
            return None
        if scale is None:
            return d
        return d.quantize(decimal.Decimal(1).scaleb(-scale))
    return conv


def _vsd(schema: Schema) -> Converter:
    def conv(s: str) -> Any:
        d = decimal.Decimal(s)
        if not d.is_finite():
            return None
        scale = max(0, -int(d.as_tuple().exponent))
        return Struct(schema, {"scale": scale, "value": _unscaled_bytes(int(d.scaleb(scale)))})
    return conv


def _float_or_nan(s: str) -> float:
    return float(s)


class TypeMapper:
    """Connect schema + text converter for a column, from the pg_type catalog and the modes."""

    def __init__(self, catalog: dict[int, PgType], modes: Modes) -> None:
        self.catalog = catalog
        self.modes = modes

    def map(self, type_oid: int, typmod: int, optional: bool) -> Mapped:
        t = self.catalog.get(type_oid)
        if t is None:
            return Mapped(Schema(Type.STRING, optional=optional), str)
        if t.typtype == "d" and t.base:
            base = self.map(t.base, typmod, optional)
            return base
        if t.category == "A" and t.elem:
            inner = self.map(t.elem, -1, True)
            if inner.schema.name == VARIABLE_SCALE_DECIMAL:
                inner = Mapped(Schema(Type.STRING, optional=True), str)
            elem = inner.convert
            return Mapped(array_schema(inner.schema, optional=optional),
                          lambda s, e=elem: parse_array(s, e))  # type: ignore[misc]
        if t.typtype == "e":
            return Mapped(_named(Type.STRING, "io.debezium.data.Enum", optional,
                                 {"allowed": ",".join(t.labels)}), str)
        return self._base(t.name, typmod, optional)

    def _base(self, name: str, typmod: int, optional: bool) -> Mapped:
        m = self.modes
        if name == "bool":
            return Mapped(Schema(Type.BOOLEAN, optional=optional), _bool)
        if name == "int2":
            return Mapped(Schema(Type.INT16, optional=optional), int)
        if name == "int4":
            return Mapped(Schema(Type.INT32, optional=optional), int)
        if name in ("int8", "oid"):
            return Mapped(Schema(Type.INT64, optional=optional), int)
        if name == "float4":
            return Mapped(Schema(Type.FLOAT32, optional=optional), _float_or_nan)
        if name == "float8":
            return Mapped(Schema(Type.FLOAT64, optional=optional), _float_or_nan)
        if name in ("numeric", "money"):
            if name == "money":
                precision, scale = None, 2
            elif typmod >= 4:
                precision, scale = (typmod - 4) >> 16, (typmod - 4) & 0xFFFF
            else:
                precision, scale = None, None
            parse: Converter = _money if name == "money" else decimal.Decimal
            if m.decimal == "double":
                return Mapped(Schema(Type.FLOAT64, optional=optional),
                              lambda s, p=parse: float(p(s)))  # type: ignore[misc]
            if m.decimal == "string":
                return Mapped(Schema(Type.STRING, optional=optional),
                              lambda s, p=parse: str(p(s)))  # type: ignore[misc]
            if scale is None:
                vsd = _vsd_schema(optional)
                return Mapped(vsd, _vsd(vsd))
            params = {DECIMAL_SCALE: str(scale)}
            if precision is not None:
                params["connect.decimal.precision"] = str(precision)
            conv = _decimal_precise(scale)
            if name == "money":
                conv = lambda s, q=conv: q(str(_money(s)))  # type: ignore[misc]  # noqa: E731
            return Mapped(Schema(Type.BYTES, optional=optional, name=DECIMAL_NAME, version=1,
                                 parameters=tuple(sorted(params.items()))), conv)
        if name in ("text", "varchar", "bpchar", "char", "name", "inet", "cidr", "macaddr",
                    "macaddr8", "citext", "tsvector", "int4range", "int8range", "numrange",
                    "tsrange", "tstzrange", "daterange"):
            return Mapped(Schema(Type.STRING, optional=optional), str)
        if name in ("json", "jsonb"):
            return Mapped(_named(Type.STRING, "io.debezium.data.Json", optional), str)
        if name == "xml":
            return Mapped(_named(Type.STRING, "io.debezium.data.Xml", optional), str)
        if name == "uuid":
            return Mapped(_named(Type.STRING, "io.debezium.data.Uuid", optional), str)
        if name == "bytea":
            if m.binary == "base64":
                import base64
                return Mapped(Schema(Type.STRING, optional=optional),
                              lambda s: base64.b64encode(_bytea(s)).decode())
            if m.binary == "hex":
                return Mapped(Schema(Type.STRING, optional=optional), lambda s: _bytea(s).hex())
            return Mapped(Schema(Type.BYTES, optional=optional), _bytea)
        if name == "date":
            if m.time_precision == "connect":
                return Mapped(Schema(Type.INT32, optional=optional,
                                     name="org.apache.kafka.connect.data.Date", version=1),
                              lambda s: EPOCH_DATE + datetime.timedelta(days=date_days(s)))
            return Mapped(_named(Type.INT32, "io.debezium.time.Date", optional), date_days)
        precision = typmod if typmod >= 0 else 6
        if name == "timestamp":
            if m.time_precision == "connect":
                return Mapped(Schema(Type.INT64, optional=optional,
                                     name="org.apache.kafka.connect.data.Timestamp", version=1),
                              lambda s: _parse_ts(s).replace(tzinfo=datetime.UTC))
            if precision <= 3:
                return Mapped(_named(Type.INT64, "io.debezium.time.Timestamp", optional),
                              milli_timestamp)
            return Mapped(_named(Type.INT64, "io.debezium.time.MicroTimestamp", optional),
                          micro_timestamp)
        if name == "timestamptz":
            return Mapped(_named(Type.STRING, "io.debezium.time.ZonedTimestamp", optional),
                          zoned_timestamp)
        if name == "time":
            if m.time_precision == "connect":
                return Mapped(Schema(Type.INT32, optional=optional,
                                     name="org.apache.kafka.connect.data.Time", version=1),
                              lambda s: (datetime.datetime.min
                                         + datetime.timedelta(microseconds=time_micros(s) // 1000 * 1000)
                                         ).time())
            if precision <= 3 and m.time_precision == "adaptive":
                return Mapped(_named(Type.INT32, "io.debezium.time.Time", optional),
                              lambda s: time_micros(s) // 1000)
            return Mapped(_named(Type.INT64, "io.debezium.time.MicroTime", optional), time_micros)
        if name == "timetz":
            return Mapped(_named(Type.STRING, "io.debezium.time.ZonedTime", optional), zoned_time)
        if name == "interval":
            return Mapped(_named(Type.INT64, "io.debezium.time.MicroDuration", optional),
                          interval_micros)
        if name == "bit" and typmod == 1:
            return Mapped(Schema(Type.BOOLEAN, optional=optional), lambda s: s == "1")
        if name in ("bit", "varbit"):
            length = typmod if typmod > 0 else 1
            return Mapped(_named(Type.BYTES, "io.debezium.data.Bits", optional,
                                 {"length": str(length)}), _bits)
        return Mapped(Schema(Type.STRING, optional=optional), str)


def _bits(s: str) -> bytes:
    """Debezium's Bits: the bit string as a little-endian byte array."""
    n = int(s, 2) if s else 0
    return n.to_bytes(max(1, (len(s) + 7) // 8), "little")


def fallback(schema: Schema) -> Any:
    """What a required column gets when its value is unknown (not in a key-only old tuple):
    Debezium's converters' fallback values."""
    if schema.name == DECIMAL_NAME:
        return decimal.Decimal(0).scaleb(-int(schema.params.get(DECIMAL_SCALE, "0")))
    if schema.name == "org.apache.kafka.connect.data.Timestamp":
        return datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
    if schema.name == "org.apache.kafka.connect.data.Date":
        return EPOCH_DATE
    if schema.name == "org.apache.kafka.connect.data.Time":
        return datetime.time(0)
    if schema.name == VARIABLE_SCALE_DECIMAL:
        return Struct(schema, {"scale": 0, "value": b"\x00"})
    if schema.name in ("io.debezium.time.ZonedTimestamp",):
        return "1970-01-01T00:00:00Z"
    return {Type.INT8: 0, Type.INT16: 0, Type.INT32: 0, Type.INT64: 0, Type.FLOAT32: 0.0,
            Type.FLOAT64: 0.0, Type.BOOLEAN: False, Type.STRING: "", Type.BYTES: b"",
            Type.ARRAY: [], Type.MAP: {}}.get(schema.type)


def unavailable(schema: Schema) -> Any:
    """An unchanged TOASTed value pgoutput did not send: Debezium's placeholder."""
    if schema.type is Type.STRING:
        return UNAVAILABLE_VALUE
    if schema.type is Type.BYTES and schema.name is None:
        return UNAVAILABLE_VALUE.encode()
    if schema.type is Type.ARRAY and schema.value_schema is not None and \
            schema.value_schema.type is Type.STRING:
        return [UNAVAILABLE_VALUE]
    return None if schema.optional else fallback(schema)
