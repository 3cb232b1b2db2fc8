"""Cast: change the type of fields (or of the whole key/value) to another primitive type, with
Java's narrowing rules (ints wrap, floats truncate) and Java's text forms for strings."""

from __future__ import annotations

import base64
import datetime
import decimal
import math
import re
import struct
from typing import Any

from ..config_def import NO_DEFAULT, ConfigDef, ConfigType, Importance
from ..data import (
    DATE_NAME,
    DECIMAL_NAME,
    TIME_NAME,
    TIMESTAMP_NAME,
    ConnectRecord,
    Schema,
    Struct,
    Type,
    from_logical,
)
from ..errors import ConfigException, DataException
from ._util import (
    REPLACE_NULL_WITH_DEFAULT,
    KeyOrValue,
    OnKey,
    OnValue,
    SchemaCache,
    copy_basics,
    define_replace_null,
    field_value,
    parse_config,
    require_map,
    require_struct,
    struct_with_fields,
)

# Kafka's spec names are Schema.Type names: float32/float64 (not Connect's JSON float/double).
_SPEC_TYPES = {"int8": Type.INT8, "int16": Type.INT16, "int32": Type.INT32, "int64": Type.INT64,
               "float32": Type.FLOAT32, "float64": Type.FLOAT64, "boolean": Type.BOOLEAN,
               "string": Type.STRING, "bytes": Type.BYTES, "array": Type.ARRAY, "map": Type.MAP,
               "struct": Type.STRUCT}
_OUTPUT = (Type.INT8, Type.INT16, Type.INT32, Type.INT64, Type.FLOAT32, Type.FLOAT64, Type.BOOLEAN,
           Type.STRING)
_INPUT = (*_OUTPUT, Type.BYTES)
_BITS = {Type.INT8: 8, Type.INT16: 16, Type.INT32: 32, Type.INT64: 64}
_JAVA_NAMES = {t: n.upper() for n, t in _SPEC_TYPES.items()}
WHOLE_VALUE = ""


def parse_spec(mappings: list[str]) -> dict[str, Type]:
    """`field:type,...` or a single `type` for the whole value; ConfigException otherwise."""
    out: dict[str, Type] = {}
    whole = False
    for mapping in mappings:
        parts = mapping.split(":")
        if len(parts) > 2:
            raise ConfigException("spec", mappings, f"Invalid cast mapping: {mapping}")
        type_text = parts[-1].strip()
        t = _SPEC_TYPES.get(type_text.lower())
        if t is None:
            raise ConfigException(f"Invalid type found in casting spec: {type_text}")
        if t not in _OUTPUT:
            raise ConfigException(f"Cast transformation does not support casting to {_JAVA_NAMES[t]}; "
                                  f"supported types are {_names(_OUTPUT)}")
        if len(parts) == 1:
            whole = True
            out[WHOLE_VALUE] = t
        else:
            out[parts[0].strip()] = t
    if whole and len(mappings) > 1:
        raise ConfigException("Cast transformations that specify a type to cast the entire value to "
                              "may ony specify a single cast in their spec")
    return out


def _names(types: tuple[Type, ...]) -> str:
    """As Java prints an EnumSet: `[INT8, INT16, ...]`."""
    return "[" + ", ".join(_JAVA_NAMES[t] for t in types) + "]"


def _spec_validator(name: str, value: Any) -> None:
    if not value:
        raise ConfigException("Must specify at least one field to cast.")
    parse_spec(value)


# ---- Java's number and text conversions ---------------------------------------------------------
def _wrap(n: int, bits: int) -> int:
    n &= (1 << bits) - 1
    return n - (1 << bits) if n >> (bits - 1) else n


def _java_float_to_int(x: float, bits: int) -> int:
    """Java's (long)/(int) narrowing of a double: NaN -> 0, saturating, toward zero; to byte and
    short through int."""
    if math.isnan(x):
        return 0
    wide = 64 if bits == 64 else 32
    lo, hi = -(1 << (wide - 1)), (1 << (wide - 1)) - 1
    n = hi if x >= hi else lo if x <= lo else int(x)
    return _wrap(n, bits)


def to_float32(x: float) -> float:
    try:
        return float(struct.unpack("<f", struct.pack("<f", x))[0])
    except OverflowError:
        return math.copysign(math.inf, x)


def java_double_str(x: float, float32: bool = False) -> str:
    """Double.toString / Float.toString: shortest round-trip digits, `1.0E10` outside [1e-3, 1e7)."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if math.copysign(1, x) < 0 else "0.0"
    if float32:
        digits = next(f"{x:.{p}e}" for p in range(0, 10) if to_float32(float(f"{x:.{p}e}")) == x)
    else:
        digits = next(f"{x:.{p}e}" for p in range(0, 18) if float(f"{x:.{p}e}") == x)
    mantissa, exp_text = digits.split("e")
    exp = int(exp_text)
    sign = "-" if mantissa.startswith("-") else ""
    mant = mantissa.lstrip("-").replace(".", "")
    mant = mant.rstrip("0") or "0"
    if -3 <= exp < 7:
        if exp >= 0:
            whole = mant[: exp + 1].ljust(exp + 1, "0")
            frac = mant[exp + 1:] or "0"
        else:
            whole, frac = "0", "0" * (-exp - 1) + mant
        return f"{sign}{whole}.{frac}"
    return f"{sign}{mant[0]}.{mant[1:] or '0'}E{exp}"


def java_string(value: Any, schema: Schema | None = None) -> str:
    """Cast's text of a value: Java's toString, base64 for bytes, ISO forms for dates."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_double_str(value, schema is not None and schema.type is Type.FLOAT32)
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, datetime.datetime):
        value = value.astimezone(datetime.UTC)
        return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, datetime.time):
        return value.strftime("%H:%M:%S.") + f"{value.microsecond // 1000:03d}"
    if isinstance(value, decimal.Decimal):
        return _java_big_decimal(value)
    return str(value)


def _java_big_decimal(d: decimal.Decimal) -> str:
    """BigDecimal.toString: plain unless the adjusted exponent is below -6 (then E notation)."""
    sign, digits, exp = d.as_tuple()
    if not isinstance(exp, int):
        return str(d)
    unscaled = "".join(map(str, digits)) or "0"
    adjusted = exp + len(unscaled) - 1
    if exp <= 0 and adjusted >= -6:
        return format(d, "f")
    text = unscaled[0] + ("." + unscaled[1:] if len(unscaled) > 1 else "")
    return ("-" if sign else "") + f"{text}E{'+' if adjusted > 0 else ''}{adjusted}"


_JAVA_INT = re.compile(r"[+-]?[0-9]+")


def _parse_int(text: str, bits: int) -> int:
    if not _JAVA_INT.fullmatch(text):
        raise ValueError(text)
    n = int(text)
    if not -(1 << (bits - 1)) <= n < (1 << (bits - 1)):
        raise ValueError(text)
    return n


def _parse_float(text: str) -> float:
    t = text.strip()
    if t.endswith(("f", "F", "d", "D")):
        t = t[:-1]
    if t in ("NaN", "+NaN", "-NaN"):
        return math.nan
    if t.lstrip("+-") == "Infinity":
        return -math.inf if t.startswith("-") else math.inf
    if not re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", t):
        raise ValueError(text)
    return float(t)


def _infer(value: Any) -> Type | None:
    if isinstance(value, bool):
        return Type.BOOLEAN
    if isinstance(value, int):
        return Type.INT64
    if isinstance(value, float):
        return Type.FLOAT64
    if isinstance(value, str):
        return Type.STRING
    if isinstance(value, bytes | bytearray | memoryview):
        return Type.BYTES
    if isinstance(value, list | tuple):
        return Type.ARRAY
    if isinstance(value, dict):
        return Type.MAP
    if isinstance(value, Struct):
        return Type.STRUCT
    if isinstance(value, decimal.Decimal):
        return Type.BYTES
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return Type.INT64
    return None


def cast_value(schema: Schema | None, value: Any, target: Type) -> Any:
    """One value cast to `target`, as Kafka's Cast.castValueToType."""
    if value is None:
        return None
    source = schema.type if schema is not None else _infer(value)
    if source is None:
        raise DataException(f"Cast transformation was passed a value of type {type(value).__name__} "
                            f"which is not supported by Connect's data API")
    is_decimal = isinstance(value, decimal.Decimal)
    if source not in _INPUT and not is_decimal:
        raise DataException(f"Cast transformation does not support casting from {_JAVA_NAMES[source]}; "
                            f"supported types are {_names(_INPUT)}")
    if target is Type.STRING:
        return java_string(value, schema)
    if schema is not None and schema.name in (DATE_NAME, TIME_NAME, TIMESTAMP_NAME):
        value = from_logical(schema, value)
    elif isinstance(value, datetime.datetime | datetime.date | datetime.time):
        value = from_logical(Schema(Type.INT64, name=TIMESTAMP_NAME) if isinstance(value, datetime.datetime)
                             else Schema(Type.INT32, name=DATE_NAME if isinstance(value, datetime.date)
                                         else TIME_NAME), value)
    elif schema is not None and schema.name == DECIMAL_NAME and not is_decimal:
        raise DataException(f"Unexpected type in Cast transformation: {type(value).__name__}")
    try:
        return _cast(value, target)
    except (ValueError, OverflowError):
        raise DataException(f"Value ({value}) was out of range for requested data type") from None


def _cast(value: Any, target: Type) -> Any:
    if isinstance(value, bytes | bytearray | memoryview):
        raise DataException(f"Unexpected type in Cast transformation: {type(value).__name__}")
    if target in _BITS:
        bits = _BITS[target]
        if isinstance(value, bool):
            return 1 if value else 0
        if isinstance(value, int):
            return _wrap(value, bits)
        if isinstance(value, float):
            return _java_float_to_int(value, bits)
        if isinstance(value, decimal.Decimal):
            return _wrap(int(value), bits)  # BigDecimal.longValue/intValue keep the low bits
        if isinstance(value, str):
            return _parse_int(value, bits)
    elif target in (Type.FLOAT32, Type.FLOAT64):
        if isinstance(value, bool):
            x = 1.0 if value else 0.0
        elif isinstance(value, int | float | decimal.Decimal):
            x = float(value)
        elif isinstance(value, str):
            x = _parse_float(value)
        else:
            raise DataException(f"Unexpected type in Cast transformation: {type(value).__name__}")
        return to_float32(x) if target is Type.FLOAT32 else x
    elif target is Type.BOOLEAN:
        if isinstance(value, bool):
            return value
        if isinstance(value, int | decimal.Decimal):
            return int(value) != 0
        if isinstance(value, float):
            return _java_float_to_int(value, 64) != 0
        if isinstance(value, str):
            return value.lower() == "true"
    raise DataException(f"Unexpected type in Cast transformation: {type(value).__name__}")


def _target_schema(target: Type) -> Schema:
    return Schema(target)


class Cast(KeyOrValue):
    """Cast fields (`spec` field:type,...) or the whole key/value (`spec` type) to int8, int16,
    int32, int64, float32, float64, boolean or string; bytes only to string (base64)."""

    PURPOSE = "cast types"

    def config(self) -> ConfigDef:
        d = ConfigDef().define(
            "spec", ConfigType.LIST, NO_DEFAULT, _spec_validator, Importance.HIGH,
            "List of fields and the type to cast them to of the form field1:type,field2:type to cast "
            "fields of Maps or Structs. A single type to cast the entire value. Valid types are int8, "
            "int16, int32, int64, float32, float64, boolean, and string. Note that binary fields can "
            "only be cast to string.")
        return define_replace_null(d)

    def configure(self, props: dict[str, Any]) -> None:
        c = parse_config(self.config(), props)
        self.casts = parse_spec(c["spec"])
        self.whole = self.casts.get(WHOLE_VALUE)
        self.replace_null = c[REPLACE_NULL_WITH_DEFAULT]
        self._cache = SchemaCache()

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        value = self.operating_value(record)
        if value is None:
            return record
        schema = self.operating_schema(record)
        if schema is None:
            if self.whole is not None:
                return self.new_record(record, None, cast_value(None, value, self.whole))
            src = require_map(value, self.PURPOSE)
            updated = dict(src)
            for name, target in self.casts.items():
                updated[name] = cast_value(None, src.get(name), target)
            return self.new_record(record, None, updated)
        new_schema = self._cache.get(schema) or self._cache.put(schema, self._schema(schema))
        if self.whole is not None:
            return self.new_record(record, new_schema, cast_value(schema, value, self.whole))
        struct = require_struct(value, self.PURPOSE)
        out = Struct(new_schema)
        for f in schema.fields:
            v = field_value(struct, f.name, self.replace_null)
            cast_to = self.casts.get(f.name)
            out.put(f.name, cast_value(f.schema, v, cast_to) if cast_to is not None else v)
        return self.new_record(record, new_schema, out)

    def _schema(self, schema: Schema) -> Schema:
        if self.whole is not None:
            if schema.type not in _INPUT:
                raise DataException(f"Cast transformation does not support casting from "
                                    f"{_JAVA_NAMES[schema.type]}; supported types are {_names(_INPUT)}")
            out = copy_basics(schema, _target_schema(self.whole))
            # a logical type's name must not survive its physical type changing
            if schema.name in (DECIMAL_NAME, DATE_NAME, TIME_NAME, TIMESTAMP_NAME):
                out = out.with_(name=None, version=None, parameters=())
        else:
            if schema.type is not Type.STRUCT:
                raise DataException(f"Only Struct objects supported for [{self.PURPOSE}], "
                                    f"found: {schema.type.value}")
            fields = []
            for f in schema.fields:
                target = self.casts.get(f.name)
                if target is None:
                    fields.append((f.name, f.schema))
                    continue
                fs = Schema(target, optional=f.schema.optional,
                            default=cast_value(f.schema, f.schema.default, target))
                fields.append((f.name, fs))
            out = struct_with_fields(schema, fields)
        return out.with_(optional=schema.optional,
                         default=cast_value(schema, schema.default, out.type)
                         if schema.default is not None and out.type is not Type.STRUCT else out.default)


class CastKey(OnKey, Cast):
    """org.apache.kafka.connect.transforms.Cast$Key"""


class CastValue(OnValue, Cast):
    """org.apache.kafka.connect.transforms.Cast$Value"""
