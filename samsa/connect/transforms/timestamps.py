"""TimestampConverter (between string, unix, Date, Time and Timestamp) and TimestampRouter
(topic names from the record's timestamp), with Java SimpleDateFormat patterns in UTC."""

from __future__ import annotations

import datetime
from typing import Any

from ..api import Transformation
from ..config_def import NO_DEFAULT, ConfigDef, ConfigType, Importance, one_of
from ..data import (
    DATE_NAME,
    EPOCH,
    INT64_SCHEMA,
    OPTIONAL_INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    TIME_NAME,
    TIMESTAMP_NAME,
    ConnectRecord,
    Schema,
    Struct,
    Type,
    date_schema,
    time_schema,
    timestamp_schema,
)
from ..errors import ConfigException, ConnectException, DataException
from ._util import (
    REPLACE_NULL_WITH_DEFAULT,
    KeyOrValue,
    OnKey,
    OnValue,
    SchemaCache,
    define_replace_null,
    field_value,
    parse_config,
    require_map,
    require_struct,
    struct_with_fields,
)
from .java_time import PatternError, SimpleDateFormat

TYPE_STRING, TYPE_UNIX, TYPE_DATE, TYPE_TIME, TYPE_TIMESTAMP = "string", "unix", "Date", "Time", "Timestamp"
_TYPES = (TYPE_STRING, TYPE_UNIX, TYPE_DATE, TYPE_TIME, TYPE_TIMESTAMP)
# unix.precision -> units per millisecond as (multiplier, divisor)
_PRECISION_MS = {"seconds": (1000, 1), "milliseconds": (1, 1), "microseconds": (1, 1000),
                 "nanoseconds": (1, 1_000_000)}


def _div(a: int, b: int) -> int:
    """Java's integer division (toward zero), as TimeUnit conversions truncate."""
    q = abs(a) // b
    return q if a >= 0 else -q
_MS = datetime.timedelta(milliseconds=1)
_DAY_MS = 86_400_000


def _ms(when: datetime.datetime) -> int:
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    return (when - EPOCH) // _MS


def _instant(ms: int) -> datetime.datetime:
    return EPOCH + datetime.timedelta(milliseconds=ms)


class TimestampConverter(KeyOrValue):
    """Convert a timestamp field (or the whole key/value when `field` is empty) between a
    formatted string, unix epoch numbers (`unix.precision`) and Connect's Date/Time/Timestamp."""

    PURPOSE = "converting timestamp formats"

    def config(self) -> ConfigDef:
        d = (ConfigDef()
             .define("field", ConfigType.STRING, "", None, Importance.HIGH,
                     "The field containing the timestamp, or empty if the entire value is a timestamp")
             .define("target.type", ConfigType.STRING, NO_DEFAULT, one_of(*_TYPES), Importance.HIGH,
                     "The desired timestamp representation: string, unix, Date, Time, or Timestamp")
             .define("format", ConfigType.STRING, "", None, Importance.MEDIUM,
                     "A SimpleDateFormat-compatible format for the timestamp. Used to generate the "
                     "output when type=string or used to parse the input if the input is a string.")
             .define("unix.precision", ConfigType.STRING, "milliseconds", one_of(*_PRECISION_MS),
                     Importance.LOW,
                     "The desired Unix precision for the timestamp: seconds, milliseconds, "
                     "microseconds, or nanoseconds. Used to generate the output when type=unix or "
                     "used to parse the input if the input is a Long."))
        return define_replace_null(d)

    def configure(self, props: dict[str, Any]) -> None:
        c = parse_config(self.config(), props)
        self.field: str = c["field"]
        self.target: str = c["target.type"]
        self.precision: str = c["unix.precision"]
        self.replace_null = c[REPLACE_NULL_WITH_DEFAULT]
        pattern: str = c["format"]
        if self.target == TYPE_STRING and not pattern.strip():
            raise ConfigException("TimestampConverter requires format option to be specified when "
                                  "using string timestamps")
        self.format: SimpleDateFormat | None = None
        if pattern.strip():
            try:
                self.format = SimpleDateFormat(pattern)
            except PatternError as e:
                raise ConfigException(f"TimestampConverter requires a SimpleDateFormat-compatible "
                                      f"pattern for string timestamps: {pattern} ({e})") from None
        self._cache = SchemaCache()

    # ---- conversions via an instant in ms ---------------------------------------------------
    def _to_ms(self, kind: str, value: Any) -> int:
        if kind == TYPE_STRING:
            if self.format is None:
                raise DataException("TimestampConverter requires format option to be specified when "
                                    "using string timestamps")
            if not isinstance(value, str):
                raise DataException(f"Expected string timestamp to be a String, but found "
                                    f"{type(value).__name__}")
            try:
                return _ms(self.format.parse(value))
            except ValueError as e:
                raise DataException(f"Could not parse timestamp: value ({value}) does not match "
                                    f"pattern ({self.format.pattern})") from e
        if kind == TYPE_UNIX:
            if isinstance(value, bool) or not isinstance(value, int):
                raise DataException(f"Expected Unix timestamp to be a Long, but found {type(value).__name__}")
            mult, div = _PRECISION_MS[self.precision]
            return _div(value * mult, div)
        if isinstance(value, datetime.datetime):
            return _ms(value)
        if isinstance(value, datetime.date):
            return (value - EPOCH.date()).days * _DAY_MS
        if isinstance(value, datetime.time):
            return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000
        raise DataException(f"Expected {kind} to be a java.util.Date, but found {type(value).__name__}")

    def _from_ms(self, ms: int) -> Any:
        if self.target == TYPE_STRING:
            assert self.format is not None
            return self.format.format(_instant(ms))
        if self.target == TYPE_UNIX:
            mult, div = _PRECISION_MS[self.precision]
            return _div(ms * div, mult)
        if self.target == TYPE_DATE:
            return _instant(ms).date()
        if self.target == TYPE_TIME:
            return (datetime.datetime.min + datetime.timedelta(milliseconds=ms % _DAY_MS)).time()
        return _instant(ms)

    def _target_schema(self, optional: bool) -> Schema:
        if self.target == TYPE_STRING:
            return OPTIONAL_STRING_SCHEMA if optional else STRING_SCHEMA
        if self.target == TYPE_UNIX:
            return OPTIONAL_INT64_SCHEMA if optional else INT64_SCHEMA
        if self.target == TYPE_DATE:
            return date_schema(optional=optional)
        if self.target == TYPE_TIME:
            return time_schema(optional=optional)
        return timestamp_schema(optional=optional)

    @staticmethod
    def _kind_of_schema(schema: Schema) -> str:
        if schema.name == TIMESTAMP_NAME:
            return TYPE_TIMESTAMP
        if schema.name == DATE_NAME:
            return TYPE_DATE
        if schema.name == TIME_NAME:
            return TYPE_TIME
        if schema.type is Type.STRING:
            return TYPE_STRING
        if schema.type is Type.INT64:
            return TYPE_UNIX
        raise ConnectException(f"Schema {schema} does not correspond to a known timestamp type format")

    @staticmethod
    def _kind_of_value(value: Any) -> str:
        if isinstance(value, datetime.datetime | datetime.date | datetime.time):
            return TYPE_TIMESTAMP
        if isinstance(value, int) and not isinstance(value, bool):
            return TYPE_UNIX
        if isinstance(value, str):
            return TYPE_STRING
        raise DataException(f"TimestampConverter does not support {type(value).__name__} objects as "
                            f"timestamps")

    def _convert(self, value: Any, kind: str | None) -> Any:
        if value is None:
            return None
        return self._from_ms(self._to_ms(kind or self._kind_of_value(value), value))

    # ---- apply ------------------------------------------------------------------------------
    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        schema = self.operating_schema(record)
        value = self.operating_value(record)
        if schema is None:
            if value is None:
                return self.new_record(record, None, None)
            if not self.field:
                return self.new_record(record, None, self._convert(value, None))
            updated = dict(require_map(value, self.PURPOSE))
            updated[self.field] = self._convert(updated.get(self.field), None)
            return self.new_record(record, None, updated)
        if not self.field:
            kind = self._kind_of_schema(schema)
            return self.new_record(record, self._target_schema(schema.optional), self._convert(value, kind))
        new_schema = self._cache.get(schema)
        if new_schema is None:
            if schema.type is not Type.STRUCT:
                raise DataException(f"Only Struct objects supported for [{self.PURPOSE}], "
                                    f"found: {schema.type.value}")
            # a field the schema lacks is not an error: nothing is converted (as Kafka)
            new_schema = struct_with_fields(schema, [
                (g.name, self._target_schema(g.schema.optional) if g.name == self.field else g.schema)
                for g in schema.fields]).with_(optional=schema.optional)
            if isinstance(schema.default, Struct):
                new_schema = new_schema.with_(default=self._convert_struct(schema.default, new_schema))
            self._cache.put(schema, new_schema)
        if value is None:
            return self.new_record(record, new_schema, None)
        return self.new_record(record, new_schema,
                               self._convert_struct(require_struct(value, self.PURPOSE), new_schema))

    def _convert_struct(self, struct: Struct, new_schema: Schema) -> Struct:
        out = Struct(new_schema)
        for g in struct.schema.fields:
            v = field_value(struct, g.name, self.replace_null)
            out.put(g.name, self._convert(v, self._kind_of_schema(g.schema)) if g.name == self.field else v)
        return out


class TimestampConverterKey(OnKey, TimestampConverter):
    """org.apache.kafka.connect.transforms.TimestampConverter$Key"""


class TimestampConverterValue(OnValue, TimestampConverter):
    """org.apache.kafka.connect.transforms.TimestampConverter$Value"""


class TimestampRouter(Transformation):
    """Route a record to a topic named from its topic and timestamp (`${topic}-${timestamp}`),
    e.g. for time-partitioned sink tables."""

    def config(self) -> ConfigDef:
        return (ConfigDef()
                .define("topic.format", ConfigType.STRING, "${topic}-${timestamp}", None,
                        Importance.HIGH, "Format string which can contain <code>${topic}</code> and "
                        "<code>${timestamp}</code> as placeholders for the topic and timestamp, "
                        "respectively.")
                .define("timestamp.format", ConfigType.STRING, "yyyyMMdd", None, Importance.HIGH,
                        "Format string for the timestamp that is compatible with "
                        "<code>java.text.SimpleDateFormat</code>."))

    def configure(self, props: dict[str, Any]) -> None:
        c = parse_config(self.config(), props)
        self.topic_format: str = c["topic.format"]
        try:
            self.timestamp_format = SimpleDateFormat(c["timestamp.format"])
        except PatternError as e:
            raise ConfigException("timestamp.format", c["timestamp.format"], str(e)) from None

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        if record.timestamp is None:
            raise DataException(f"Timestamp missing on record: {record}")
        stamp = self.timestamp_format.format(_instant(record.timestamp))
        topic = self.topic_format.replace("${topic}", record.topic).replace("${timestamp}", stamp)
        return record.new_record(topic=topic)  # type: ignore[no-any-return]
