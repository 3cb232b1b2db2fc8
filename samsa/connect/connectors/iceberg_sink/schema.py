"""Connect schemas (or schemaless values) -> Iceberg schemas, Connect values -> Python rows that
pyarrow turns into columns, and the partition-by syntax of Iceberg's Kafka Connect sink. The type
mapping is the Iceberg sink's: INT8/16/32 -> int, INT64 -> long, Decimal -> decimal(38, scale),
Timestamp -> timestamptz, STRUCT/ARRAY/MAP -> struct/list/map."""

from __future__ import annotations

import datetime
import decimal
import itertools
import re
from collections.abc import Callable, Mapping
from typing import Any

from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema as IcebergSchema
from pyiceberg.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    Transform,
    TruncateTransform,
    YearTransform,
)
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestamptzType,
    TimeType,
)

from ...data import (
    DATE_NAME,
    DECIMAL_NAME,
    DECIMAL_SCALE,
    TIME_NAME,
    TIMESTAMP_NAME,
    Schema,
    Struct,
    Type,
)
from ...errors import DataException

DECIMAL_PRECISION = 38  # Connect's Decimal has no precision: Iceberg's sink uses the maximum

_PRIMITIVES: dict[Type, Callable[[], IcebergType]] = {
    Type.INT8: IntegerType, Type.INT16: IntegerType, Type.INT32: IntegerType,
    Type.INT64: LongType, Type.FLOAT32: FloatType, Type.FLOAT64: DoubleType,
    Type.BOOLEAN: BooleanType, Type.STRING: StringType, Type.BYTES: BinaryType,
}


class _Ids:
    """Field ids for a schema under construction; pyiceberg renumbers them on create/union."""

    def __init__(self) -> None:
        self._next = itertools.count(1)

    def __call__(self) -> int:
        return next(self._next)


def iceberg_type(schema: Schema, ids: _Ids, force_optional: bool = False) -> IcebergType:
    """The Iceberg type of a Connect schema."""
    if schema.name == DECIMAL_NAME:
        return DecimalType(DECIMAL_PRECISION, int(schema.params.get(DECIMAL_SCALE, "0")))
    if schema.name == DATE_NAME:
        return DateType()
    if schema.name == TIME_NAME:
        return TimeType()
    if schema.name == TIMESTAMP_NAME:
        return TimestamptzType()
    if schema.type in _PRIMITIVES:
        return _PRIMITIVES[schema.type]()
    if schema.type is Type.ARRAY:
        assert schema.value_schema is not None
        elem_id = ids()
        elem = iceberg_type(schema.value_schema, ids, force_optional)
        return ListType(elem_id, elem, element_required=not (force_optional or schema.value_schema.optional))
    if schema.type is Type.MAP:
        assert schema.key_schema is not None and schema.value_schema is not None
        key_id, value_id = ids(), ids()
        return MapType(key_id, iceberg_type(schema.key_schema, ids, force_optional), value_id,
                       iceberg_type(schema.value_schema, ids, force_optional),
                       value_required=not (force_optional or schema.value_schema.optional))
    return StructType(*_fields(schema, ids, force_optional))


def _fields(schema: Schema, ids: _Ids, force_optional: bool) -> list[NestedField]:
    out = []
    for f in schema.fields:
        fid = ids()
        out.append(NestedField(fid, f.name, iceberg_type(f.schema, ids, force_optional),
                               required=not (force_optional or f.schema.optional)))
    return out


def iceberg_schema(schema: Schema, force_optional: bool = False) -> IcebergSchema:
    """The table schema for a record value's STRUCT schema."""
    if schema.type is not Type.STRUCT:
        raise DataException(f"Iceberg rows need a STRUCT value schema, got {schema.type.value}")
    return IcebergSchema(*_fields(schema, _Ids(), force_optional))


# ---- schemaless values (JsonConverter with schemas.enable=false, maps) -------------------------
def _infer(value: Any, ids: _Ids) -> IcebergType | None:
    if isinstance(value, bool):
        return BooleanType()
    if isinstance(value, int):
        return LongType()
    if isinstance(value, float):
        return DoubleType()
    if isinstance(value, str):
        return StringType()
    if isinstance(value, bytes | bytearray):
        return BinaryType()
    if isinstance(value, decimal.Decimal):
        return DecimalType(DECIMAL_PRECISION, max(0, -int(value.as_tuple().exponent)))
    if isinstance(value, datetime.datetime):
        return TimestamptzType()
    if isinstance(value, datetime.date):
        return DateType()
    if isinstance(value, Mapping):
        fields = _infer_fields(value, ids)
        return StructType(*fields) if fields else None
    if isinstance(value, list | tuple):
        for v in value:
            if v is not None:
                elem_id = ids()
                elem = _infer(v, ids)
                return ListType(elem_id, elem, element_required=False) if elem else None
        return None
    return None


def _infer_fields(value: Mapping[str, Any], ids: _Ids) -> list[NestedField]:
    out = []
    for k, v in value.items():
        fid = ids()
        t = _infer(v, ids)
        if t is not None:  # a null (or empty) value says nothing about the column's type
            out.append(NestedField(fid, str(k), t, required=False))
    return out


def infer_schema(values: list[Mapping[str, Any]]) -> IcebergSchema:
    """An all-optional schema covering the keys of schemaless rows (first non-null type wins)."""
    ids = _Ids()
    seen: dict[str, NestedField] = {}
    for v in values:
        for f in _infer_fields(v, ids):
            seen.setdefault(f.name, f)
    return IcebergSchema(*seen.values())


# ---- values -> rows ----------------------------------------------------------------------------
Converter = Callable[[Any], Any]


def _identity(value: Any) -> Any:
    return value


def value_converter(schema: Schema) -> Converter:
    """A function from a Connect value of `schema` to what pyarrow builds the column from."""
    if schema.name in (DECIMAL_NAME, DATE_NAME, TIME_NAME, TIMESTAMP_NAME) or schema.type.primitive:
        return _identity
    if schema.type is Type.ARRAY:
        assert schema.value_schema is not None
        elem = value_converter(schema.value_schema)
        if elem is _identity:
            return _identity
        return lambda v: None if v is None else [elem(x) for x in v]
    if schema.type is Type.MAP:
        assert schema.key_schema is not None and schema.value_schema is not None
        kc, vc = value_converter(schema.key_schema), value_converter(schema.value_schema)
        if kc is _identity and vc is _identity:
            return _identity
        return lambda v: None if v is None else {kc(k): vc(x) for k, x in v.items()}
    return struct_converter(schema)


def struct_converter(schema: Schema) -> Converter:
    """Struct -> dict; nested values converted only where a field needs it."""
    convs = [(f.name, value_converter(f.schema)) for f in schema.fields]
    if all(c is _identity for _, c in convs):
        # the hot path: a flat struct's row is its defaults overlaid with the values it holds
        # (Struct.put validated them), one C-level dict merge instead of a get() per field
        defaults = {f.name: f.schema.default for f in schema.fields}
        return lambda v: {**defaults, **v._values} if isinstance(v, Struct) else v

    def convert(v: Any) -> Any:
        if not isinstance(v, Struct):
            return v
        return {name: c(v.get(name)) for name, c in convs}
    return convert


def route_value(value: Any, path: list[str]) -> Any:
    """A (dotted) field of a Struct or map value; None when absent."""
    for part in path:
        if isinstance(value, Struct):
            if value.schema.field(part) is None:
                return None
            value = value.get(part)
        elif isinstance(value, Mapping):
            value = value.get(part)
        else:
            return None
    return value


# ---- partition-by ------------------------------------------------------------------------------
_TRANSFORM = re.compile(r"^\s*(\w+)\s*\((.*)\)\s*$")
_TIME_TRANSFORMS: dict[str, tuple[Callable[[], Transform[Any, Any]], str]] = {
    "year": (YearTransform, "year"), "years": (YearTransform, "year"),
    "month": (MonthTransform, "month"), "months": (MonthTransform, "month"),
    "day": (DayTransform, "day"), "days": (DayTransform, "day"),
    "hour": (HourTransform, "hour"), "hours": (HourTransform, "hour"),
}


def parse_partition_field(text: str) -> tuple[str, Transform[Any, Any], str]:
    """`col`, `hour(col)` / `hours(col)` (also year, month, day), `bucket(col, N)`,
    `truncate(col, N)` -> (source column, transform, partition field name)."""
    m = _TRANSFORM.match(text)
    if m is None:
        name = text.strip()
        if not name:
            raise DataException("empty partition field")
        return name, IdentityTransform(), name
    fn, args = m.group(1).lower(), [a.strip() for a in m.group(2).split(",")]
    if fn in _TIME_TRANSFORMS and len(args) == 1:
        cls, suffix = _TIME_TRANSFORMS[fn]
        return args[0], cls(), f"{args[0]}_{suffix}"
    if fn in ("bucket", "truncate") and len(args) == 2:
        col, n = (args[0], args[1]) if not args[0].isdigit() else (args[1], args[0])
        if fn == "bucket":
            return col, BucketTransform(int(n)), f"{col}_bucket"
        return col, TruncateTransform(int(n)), f"{col}_trunc"
    raise DataException(f"unsupported partition transform: {text!r}")


def partition_spec(schema: IcebergSchema, fields: list[str]) -> PartitionSpec:
    """The spec for `fields` over `schema` (whose ids pyiceberg maps to the new table's)."""
    parts = []
    for i, text in enumerate(fields):
        col, transform, name = parse_partition_field(text)
        source = schema.find_field(col)  # raises ValueError for an unknown column
        parts.append(PartitionField(source_id=source.field_id, field_id=1000 + i,
                                    transform=transform, name=name))
    return PartitionSpec(*parts)
