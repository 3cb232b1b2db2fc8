"""A SinkRecord as the two VARIANT columns of Snowflake's Kafka connector tables:
RECORD_METADATA (topic, partition, offset, CreateTime/LogAppendTime, key, schema_id, key_schema_id,
headers) and RECORD_CONTENT (the value as JSON). Connect values become JSON as Snowflake's
RecordService does it: structs -> objects, maps with string keys -> objects (else [[k, v], ...]),
bytes -> base64, Decimal -> a number (text past 38 digits), Date -> ISO date-time text,
Time -> `HH:mm:ss.SSS+0000`, Timestamp -> epoch milliseconds."""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...data import (
    DATE_NAME,
    DECIMAL_NAME,
    EPOCH,
    TIME_NAME,
    TIMESTAMP_NAME,
    Schema,
    SinkRecord,
    Struct,
    TimestampType,
    Type,
)
from ...errors import DataException

MAX_NUMBER_PRECISION = 38
_DEC_MARK = "\x00samsa-dec:"
_DEC_RE = re.compile(r'"\\u0000samsa-dec:([-+0-9.eE]+)"')


@dataclass(frozen=True)
class MetadataFlags:
    """snowflake.metadata.* : which fields RECORD_METADATA carries (all default true)."""

    all: bool = True
    topic: bool = True
    offset_and_partition: bool = True
    createtime: bool = True


def to_json_value(schema: Schema | None, value: Any) -> Any:
    """A Connect value as a JSON-able Python value (decimals marked for `dumps`)."""
    if value is None:
        if schema is None:
            return None
        if schema.default is not None:
            return to_json_value(schema, schema.default)
        if schema.optional:
            return None
        raise DataException("Conversion error: null value for field that is required and has no "
                            "default value")
    if schema is None:
        return _schemaless(value)
    name = schema.name
    t = schema.type
    if t is Type.STRUCT:
        if not isinstance(value, Struct):
            raise DataException(f"Invalid type for STRUCT: {type(value).__name__}")
        return {f.name: to_json_value(f.schema, value.get(f.name)) for f in schema.fields}
    if t is Type.ARRAY:
        return [to_json_value(schema.value_schema, v) for v in value]
    if t is Type.MAP:
        key_schema = schema.key_schema
        if key_schema is not None and key_schema.type is Type.STRING:
            return {str(k): to_json_value(schema.value_schema, v) for k, v in value.items()}
        return [[to_json_value(key_schema, k), to_json_value(schema.value_schema, v)]
                for k, v in value.items()]
    if name == DECIMAL_NAME:
        return _decimal(value)
    if name == DATE_NAME:
        return _date_text(value)
    if name == TIME_NAME:
        return _time_text(value)
    if name == TIMESTAMP_NAME:
        return _timestamp_ms(value)
    if t is Type.BYTES:
        return base64.b64encode(bytes(value)).decode("ascii")
    if t in (Type.FLOAT32, Type.FLOAT64):
        return float(value)
    return value


def _schemaless(value: Any) -> Any:
    if isinstance(value, Struct):
        return to_json_value(value.schema, value)
    if isinstance(value, Mapping):
        if all(isinstance(k, str) for k in value):
            return {k: _schemaless(v) for k, v in value.items()}
        return [[_schemaless(k), _schemaless(v)] for k, v in value.items()]
    if isinstance(value, list | tuple):
        return [_schemaless(v) for v in value]
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, decimal.Decimal):
        return _decimal(value)
    if isinstance(value, datetime.datetime):
        return _timestamp_ms(value)
    if isinstance(value, datetime.date):
        return _date_text(value)
    if isinstance(value, datetime.time):
        return _time_text(value)
    return value


def _decimal(value: decimal.Decimal) -> Any:
    if not isinstance(value, decimal.Decimal):
        raise DataException(f"Invalid type for Decimal: {type(value).__name__}")
    if not value.is_finite():
        raise DataException(f"Decimal {value} has no JSON number")
    text = format(value, "f")
    if len(value.as_tuple().digits) > MAX_NUMBER_PRECISION:
        return text  # Snowflake keeps such a number as text, to lose no digit
    return _DEC_MARK + text


def _date_text(value: Any) -> str:
    if isinstance(value, datetime.datetime):
        value = value.date()
    if not isinstance(value, datetime.date):
        raise DataException(f"Invalid type for Date: {type(value).__name__}")
    return value.strftime("%Y-%m-%dT00:00:00.000Z")


def _time_text(value: Any) -> str:
    if not isinstance(value, datetime.time):
        raise DataException(f"Invalid type for Time: {type(value).__name__}")
    return f"{value.strftime('%H:%M:%S')}.{value.microsecond // 1000:03d}+0000"


def _timestamp_ms(value: Any) -> int:
    if not isinstance(value, datetime.datetime):
        raise DataException(f"Invalid type for Timestamp: {type(value).__name__}")
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.UTC)
    return (value - EPOCH) // datetime.timedelta(milliseconds=1)


def dumps(value: Any) -> str:
    """Compact JSON text; NaN/Infinity have no JSON form and raise DataException."""
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except ValueError as e:
        raise DataException(f"Conversion error: the record has no JSON form: {e}") from None
    except TypeError as e:
        raise DataException(f"Conversion error: {e}") from None
    if _DEC_MARK in text or "\\u0000samsa-dec:" in text:
        text = _DEC_RE.sub(r"\1", text)
    return text


@dataclass(frozen=True)
class RowParts:
    metadata: str
    content: str


def record_row(record: SinkRecord, flags: MetadataFlags, *, value_schema_id: int | None = None,
               key_schema_id: int | None = None, null_content: str = "{}") -> RowParts:
    """The (RECORD_METADATA, RECORD_CONTENT) JSON texts of one record."""
    if record.value is None:
        content = null_content
    else:
        content = dumps(to_json_value(record.value_schema, record.value))
    if not flags.all:
        return RowParts("{}", content)
    meta: dict[str, Any] = {}
    if flags.offset_and_partition:
        meta["offset"] = record.kafka_offset
        meta["partition"] = record.kafka_partition
    if flags.topic:
        meta["topic"] = record.topic
    if flags.createtime and record.timestamp is not None and \
            record.timestamp_type is not TimestampType.NO_TIMESTAMP_TYPE:
        meta[str(record.timestamp_type)] = record.timestamp
    if value_schema_id is not None:
        meta["schema_id"] = value_schema_id
    if record.key is not None:
        ks = record.key_schema
        if ks is not None and ks.type is Type.STRING and ks.name is None or \
                ks is None and isinstance(record.key, str):
            meta["key"] = str(record.key)
        else:
            meta["key"] = to_json_value(ks, record.key)
        if key_schema_id is not None:
            meta["key_schema_id"] = key_schema_id
    if len(record.headers):
        meta["headers"] = {h.key: to_json_value(h.schema, h.value) for h in record.headers}
    return RowParts(dumps(meta), content)
