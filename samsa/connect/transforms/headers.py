"""Header transforms: HeaderFrom (copy/move fields into headers), InsertHeader (a literal
header) and DropHeaders."""

from __future__ import annotations

import datetime
import decimal
import math
import re
from typing import Any

from ..api import Transformation
from ..config_def import NO_DEFAULT, ConfigDef, ConfigType, Importance, non_null, one_of
from ..data import (
    BOOLEAN_SCHEMA,
    FLOAT32_SCHEMA,
    FLOAT64_SCHEMA,
    INT8_SCHEMA,
    INT16_SCHEMA,
    INT32_SCHEMA,
    INT64_SCHEMA,
    STRING_SCHEMA,
    ConnectRecord,
    Header,
    Headers,
    SchemaAndValue,
    Struct,
    Type,
    date_schema,
    decimal_schema,
    time_schema,
    timestamp_schema,
)
from ..errors import ConfigException, DataException
from ._util import (
    REPLACE_NULL_WITH_DEFAULT,
    KeyOrValue,
    OnKey,
    OnValue,
    SchemaCache,
    define_replace_null,
    field_value,
    non_empty_list,
    parse_config,
    require_map,
    require_struct,
    struct_with_fields,
)


class HeaderFrom(KeyOrValue):
    """Copy or move fields of the key/value into headers named by `headers` (pairwise with
    `fields`)."""


    def config(self) -> ConfigDef:
        d = (ConfigDef()
             .define("fields", ConfigType.LIST, NO_DEFAULT, non_empty_list, Importance.HIGH,
                     "Field names in the record whose values are to be copied or moved to headers.")
             .define("headers", ConfigType.LIST, NO_DEFAULT, non_empty_list, Importance.HIGH,
                     "Header names, in the same order as the field names listed in the fields "
                     "configuration property.")
             .define("operation", ConfigType.STRING, NO_DEFAULT, one_of("move", "copy"),
                     Importance.HIGH, "Either <code>move</code> if the fields are to be moved to "
                     "the headers (removed from the key/value), or <code>copy</code> if the fields "
                     "are to be copied to the headers (retained in the key/value)."))
        return define_replace_null(d)

    def configure(self, props: dict[str, Any]) -> None:
        c = parse_config(self.config(), props)
        self.fields: list[str] = list(c["fields"])
        self.headers: list[str] = list(c["headers"])
        if len(self.fields) != len(self.headers):
            raise ConfigException("'fields' config must have the same number of elements as "
                                  "'headers' config.")
        self.move = c["operation"] == "move"
        self.purpose = f"header {c['operation']}"
        self.replace_null = c[REPLACE_NULL_WITH_DEFAULT]
        self._cache = SchemaCache()

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        value = self.operating_value(record)
        schema = self.operating_schema(record)
        items = list(record.headers)
        if schema is None:
            src = require_map(value, self.purpose)
            for field, header in zip(self.fields, self.headers, strict=True):
                items.append(Header(header, None, src.get(field)))
            updated = {k: v for k, v in src.items() if k not in self.fields} if self.move else src
            return self.new_record(record, None, updated).new_record(headers=Headers(items))
        struct = require_struct(value, self.purpose)
        for field, header in zip(self.fields, self.headers, strict=True):
            f = schema.field(field)
            if f is None:
                raise DataException(f"Field {field} not found in schema {schema}")
            items.append(Header(header, f.schema, field_value(struct, field, self.replace_null)))
        if not self.move:
            return record.new_record(headers=Headers(items))  # type: ignore[no-any-return]
        new_schema = self._cache.get(schema) or self._cache.put(schema, struct_with_fields(
            schema, [(f.name, f.schema) for f in schema.fields if f.name not in self.fields]))
        out = Struct(new_schema)
        for f in new_schema.fields:
            out.put(f.name, field_value(struct, f.name, self.replace_null))
        return self.new_record(record, new_schema, out).new_record(headers=Headers(items))


class HeaderFromKey(OnKey, HeaderFrom):
    """org.apache.kafka.connect.transforms.HeaderFrom$Key"""


class HeaderFromValue(OnValue, HeaderFrom):
    """org.apache.kafka.connect.transforms.HeaderFrom$Value"""


# ---- InsertHeader -------------------------------------------------------------------------------
_NUMBER = re.compile(r"[+-]?([0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)([eE][+-]?[0-9]+)?")
_FLOAT32_MAX = 3.4028234663852886e38
_INT_TYPES = (Type.INT8, Type.INT16, Type.INT32, Type.INT64)
_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
_TIME = re.compile(r"(\d{2}):(\d{2}):(\d{2})\.(\d{3})Z")
_TIMESTAMP = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{3})Z")


def parse_literal(text: str) -> SchemaAndValue:
    """A literal's schema and value the way Connect's Values.parseString infers them for
    primitives: `null`; booleans; integral numbers (`1.0` too) as the smallest integer type that fits;
    other numbers as float32 when in its range, else float64, else Decimal; ISO dates, times and
    timestamps. Anything else (arrays and maps included) stays a string."""
    stripped = text.strip()
    if stripped == "null":
        return SchemaAndValue(None, None)
    if stripped.lower() in ("true", "false"):
        return SchemaAndValue(BOOLEAN_SCHEMA, stripped.lower() == "true")
    if _NUMBER.fullmatch(stripped):
        number = decimal.Decimal(stripped)
        if number == number.to_integral_value():
            n = int(number)
            for schema, bits in ((INT8_SCHEMA, 8), (INT16_SCHEMA, 16), (INT32_SCHEMA, 32),
                                 (INT64_SCHEMA, 64)):
                if -(1 << (bits - 1)) <= n < (1 << (bits - 1)):
                    return SchemaAndValue(schema, n)
        exponent = number.as_tuple().exponent
        if isinstance(exponent, int) and exponent != 0:  # Java: decimal.scale() != 0
            x = float(number)
            if abs(x) <= _FLOAT32_MAX:
                return SchemaAndValue(FLOAT32_SCHEMA, x)
            if not math.isinf(x):
                return SchemaAndValue(FLOAT64_SCHEMA, x)
        return SchemaAndValue(decimal_schema(-exponent if isinstance(exponent, int) else 0), number)
    try:
        if m := _TIMESTAMP.fullmatch(stripped):
            y, mo, d, h, mi, s, ms = map(int, m.groups())
            return SchemaAndValue(timestamp_schema(), datetime.datetime(
                y, mo, d, h, mi, s, ms * 1000, tzinfo=datetime.UTC))
        if m := _DATE.fullmatch(stripped):
            return SchemaAndValue(date_schema(), datetime.date(*map(int, m.groups())))
        if m := _TIME.fullmatch(stripped):
            h, mi, s, ms = map(int, m.groups())
            return SchemaAndValue(time_schema(), datetime.time(h, mi, s, ms * 1000))
    except ValueError:
        pass
    return SchemaAndValue(STRING_SCHEMA, text)


def values_parse(text: str) -> SchemaAndValue:
    """Connect's Values.parseString: the converters' implementation when it is installed (the
    one SimpleHeaderConverter uses, arrays and maps included), else `parse_literal`."""
    try:
        from ..converters.values import parse_string
    except ImportError:
        return parse_literal(text)
    try:
        return parse_string(text)  # type: ignore[no-any-return]
    except DataException:
        return SchemaAndValue(STRING_SCHEMA, text)


def insert_header_literal(raw: str) -> SchemaAndValue:
    """InsertHeader's value: Values' parse, except that a whole number written with a decimal
    point (`1.0`) stays a float (float32 when in range, else float64, else Decimal), as Kafka's
    InsertHeader does."""
    parsed = values_parse(raw)
    if parsed.schema is None or parsed.schema.type not in _INT_TYPES or "." not in raw \
            or not _NUMBER.fullmatch(raw):
        return parsed
    number = decimal.Decimal(raw)
    x = float(number)
    if abs(x) <= _FLOAT32_MAX:
        return SchemaAndValue(FLOAT32_SCHEMA, x)
    if not math.isinf(x):
        return SchemaAndValue(FLOAT64_SCHEMA, x)
    exponent = number.as_tuple().exponent
    return SchemaAndValue(decimal_schema(-exponent if isinstance(exponent, int) else 0), number)


class InsertHeader(Transformation):
    """Add a header with a literal value (its schema inferred like Connect's Values)."""

    def config(self) -> ConfigDef:
        return (ConfigDef()
                .define("header", ConfigType.STRING, NO_DEFAULT, non_null, Importance.HIGH,
                        "The name of the header.")
                .define("value.literal", ConfigType.STRING, NO_DEFAULT, non_null, Importance.HIGH,
                        "The literal value that is to be set as the header value on all records."))

    def configure(self, props: dict[str, Any]) -> None:
        c = parse_config(self.config(), props)
        self.header: str = c["header"]
        self.literal = insert_header_literal(c["value.literal"])

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        headers = record.headers.copy().add(self.header, self.literal.value, self.literal.schema)
        return record.new_record(headers=headers)  # type: ignore[no-any-return]


class DropHeaders(Transformation):
    """Remove every header with one of the given names."""

    def config(self) -> ConfigDef:
        return ConfigDef().define("headers", ConfigType.LIST, NO_DEFAULT, non_empty_list, Importance.HIGH,
                                  "The name of the headers to be removed.")

    def configure(self, props: dict[str, Any]) -> None:
        self.headers = set(parse_config(self.config(), props)["headers"])

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        kept = Headers([h for h in record.headers if h.key not in self.headers])
        return record.new_record(headers=kept)  # type: ignore[no-any-return]
