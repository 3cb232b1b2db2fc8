"""Cast (whole value and per field, Java narrowing and text forms), TimestampConverter
(string/unix/Date/Time/Timestamp, unix.precision) and TimestampRouter, and the
SimpleDateFormat patterns they take."""

from __future__ import annotations

import datetime
import decimal

import pytest

from samsa.connect.data import (
    BOOLEAN_SCHEMA,
    BYTES_SCHEMA,
    FLOAT32_SCHEMA,
    FLOAT64_SCHEMA,
    INT8_SCHEMA,
    INT32_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_INT64_SCHEMA,
    STRING_SCHEMA,
    SourceRecord,
    Struct,
    Type,
    date_schema,
    decimal_schema,
    map_schema,
    struct_schema,
    time_schema,
    timestamp_schema,
)
from samsa.connect.errors import ConfigException, ConnectException, DataException
from samsa.connect.transforms.cast import CastKey, CastValue, java_double_str, java_string
from samsa.connect.transforms.java_time import SimpleDateFormat
from samsa.connect.transforms.timestamps import (
    TimestampConverterKey,
    TimestampConverterValue,
    TimestampRouter,
)

UTC = datetime.UTC
MOMENT = datetime.datetime(2017, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
MOMENT_MS = 1483326245678


def rec(value, schema=None, key=None, key_schema=None, ts=MOMENT_MS, topic="t"):
    return SourceRecord(topic, 0, key_schema, key, schema, value, ts)


def configured(cls, **props):
    t = cls()
    t.configure({k.replace("_", "."): v for k, v in props.items()})
    return t


# ---- Cast ---------------------------------------------------------------------------------------
def test_cast_config_errors():
    with pytest.raises(ConfigException, match="spec"):
        configured(CastValue)
    with pytest.raises(ConfigException, match="at least one field"):
        configured(CastValue, spec="")
    with pytest.raises(ConfigException, match="Invalid type found in casting spec: nope"):
        configured(CastValue, spec="a:nope")
    with pytest.raises(ConfigException, match="does not support casting to BYTES"):
        configured(CastValue, spec="a:bytes")
    with pytest.raises(ConfigException, match="single cast"):
        configured(CastValue, spec="int8,a:int16")
    with pytest.raises(ConfigException, match="Invalid cast mapping"):
        configured(CastValue, spec="a:b:c")


def test_cast_whole_value_with_schema():
    t = configured(CastKey, spec="int8")
    out = t.apply(rec("v", key=42, key_schema=INT32_SCHEMA))
    assert out.key_schema.type is Type.INT8 and out.key == 42
    assert configured(CastKey, spec="int8").apply(rec("v", key=300, key_schema=INT32_SCHEMA)).key == 44
    out = configured(CastValue, spec="string").apply(rec(b"\x01\x02", BYTES_SCHEMA))
    assert out.value == "AQI=" and out.value_schema == STRING_SCHEMA
    with pytest.raises(DataException, match="does not support casting from MAP"):
        configured(CastValue, spec="string").apply(rec({"a": 1}, map_schema(STRING_SCHEMA, INT32_SCHEMA)))


def test_cast_whole_value_schemaless():
    t = configured(CastValue, spec="int32")
    assert t.apply(rec("42")).value == 42
    assert t.apply(rec(42.9)).value == 42
    assert t.apply(rec(True)).value == 1
    assert t.apply(rec(1 << 40)).value == 0  # Java's intValue keeps the low 32 bits
    assert configured(CastValue, spec="boolean").apply(rec("TRUE")).value is True
    assert configured(CastValue, spec="boolean").apply(rec(0)).value is False
    assert configured(CastValue, spec="float64").apply(rec("1e3")).value == 1000.0
    assert configured(CastValue, spec="string").apply(rec(1.0)).value == "1.0"
    with pytest.raises(DataException, match="out of range"):
        t.apply(rec("99999999999"))
    with pytest.raises(DataException, match="out of range"):
        t.apply(rec("4x"))
    tomb = rec(None)
    assert t.apply(tomb) is tomb


def test_cast_fields_with_schema():
    schema = struct_schema([("i8", INT8_SCHEMA), ("s", STRING_SCHEMA), ("f", FLOAT64_SCHEMA),
                            ("b", BOOLEAN_SCHEMA), ("opt", OPTIONAL_INT64_SCHEMA),
                            ("dflt", INT32_SCHEMA.with_(default=12)), ("same", INT32_SCHEMA)],
                           name="rec", version=2)
    value = Struct(schema, {"i8": 8, "s": "16", "f": 32.5, "b": True, "opt": None, "dflt": 3, "same": 1})
    t = configured(CastValue, spec="i8:int16,s:int32,f:float32,b:string,opt:string,dflt:string")
    out = t.apply(rec(value, schema))
    s = out.value_schema
    assert s.name == "rec" and s.version == 2
    assert s.field("i8").schema.type is Type.INT16
    assert s.field("f").schema.type is Type.FLOAT32
    assert s.field("opt").schema.optional and s.field("opt").schema.type is Type.STRING
    assert s.field("dflt").schema.default == "12"
    assert s.field("same").schema == INT32_SCHEMA
    assert out.value.as_dict() == {"i8": 8, "s": 16, "f": 32.5, "b": "true", "opt": None, "dflt": "3",
                                   "same": 1}
    assert value.get("s") == "16"


def test_cast_schemaless_fields_and_logical_types():
    out = configured(CastValue, spec="a:int64,b:string").apply(rec({"a": "7", "b": 2, "c": 3}))
    assert out.value == {"a": 7, "b": "2", "c": 3}
    schema = struct_schema([("ts", timestamp_schema()), ("d", date_schema()), ("dec", decimal_schema(2))])
    value = Struct(schema, {"ts": MOMENT, "d": datetime.date(1970, 1, 3),
                            "dec": decimal.Decimal("12.34")})
    out = configured(CastValue, spec="ts:int64,d:int32,dec:float64").apply(rec(value, schema))
    assert out.value.as_dict() == {"ts": MOMENT_MS, "d": 2, "dec": 12.34}
    out = configured(CastValue, spec="ts:string,d:string,dec:string").apply(rec(value, schema))
    assert out.value.as_dict() == {"ts": "2017-01-02T03:04:05.678Z", "d": "1970-01-03", "dec": "12.34"}


def test_java_text_forms():
    assert java_double_str(1.0) == "1.0"
    assert java_double_str(1e10) == "1.0E10"
    assert java_double_str(123456.5) == "123456.5"
    assert java_double_str(0.0001) == "1.0E-4"
    assert java_double_str(-2.5e-3) == "-0.0025"
    assert java_string(1.100000023841858, FLOAT32_SCHEMA) == "1.1"
    assert java_string(decimal.Decimal("1E-8")) == "1E-8"
    assert java_string(False) == "false"


# ---- TimestampConverter ---------------------------------------------------------------------
def test_timestamp_converter_config_errors():
    with pytest.raises(ConfigException, match="target.type"):
        configured(TimestampConverterValue)
    with pytest.raises(ConfigException, match="String must be one of"):
        configured(TimestampConverterValue, target_type="nope")
    with pytest.raises(ConfigException, match="requires format option"):
        configured(TimestampConverterValue, target_type="string")
    with pytest.raises(ConfigException, match="SimpleDateFormat-compatible"):
        configured(TimestampConverterValue, target_type="string", format="yyyy-qq")
    with pytest.raises(ConfigException, match="unix.precision"):
        configured(TimestampConverterValue, target_type="unix", unix_precision="days")


@pytest.mark.parametrize("target,expected", [
    ("string", "2017-01-02 03:04:05.678"),
    ("unix", MOMENT_MS),
    ("Date", datetime.date(2017, 1, 2)),
    ("Time", datetime.time(3, 4, 5, 678000)),
    ("Timestamp", MOMENT),
])
def test_timestamp_converter_schemaless_targets(target, expected):
    t = configured(TimestampConverterValue, target_type=target, format="yyyy-MM-dd HH:mm:ss.SSS")
    for source in (MOMENT, MOMENT_MS, "2017-01-02 03:04:05.678"):
        assert t.apply(rec(source)).value == expected


def test_timestamp_converter_with_schema_whole_value():
    t = configured(TimestampConverterValue, target_type="Date")
    out = t.apply(rec(MOMENT, timestamp_schema()))
    assert out.value_schema == date_schema() and out.value == datetime.date(2017, 1, 2)
    t = configured(TimestampConverterValue, target_type="unix", unix_precision="seconds")
    out = t.apply(rec(datetime.time(1, 0), time_schema()))
    assert out.value_schema == INT64_SCHEMA and out.value == 3600
    t = configured(TimestampConverterKey, target_type="Timestamp", unix_precision="microseconds")
    out = t.apply(rec("v", key=MOMENT_MS * 1000 + 999, key_schema=INT64_SCHEMA))
    assert out.key_schema == timestamp_schema() and out.key == MOMENT
    with pytest.raises(ConnectException, match="does not correspond to a known timestamp type"):
        configured(TimestampConverterValue, target_type="unix").apply(rec(1, INT32_SCHEMA))


def test_timestamp_converter_unix_precisions():
    for precision, value in (("seconds", MOMENT_MS // 1000), ("milliseconds", MOMENT_MS),
                             ("microseconds", MOMENT_MS * 1000), ("nanoseconds", MOMENT_MS * 1_000_000)):
        t = configured(TimestampConverterValue, target_type="unix", unix_precision=precision)
        assert t.apply(rec(MOMENT)).value == value
        back = configured(TimestampConverterValue, target_type="Timestamp", unix_precision=precision)
        expected = MOMENT.replace(microsecond=0) if precision == "seconds" else MOMENT
        assert back.apply(rec(value)).value == expected


def test_timestamp_converter_field_with_schema():
    schema = struct_schema([("ts", STRING_SCHEMA), ("other", INT32_SCHEMA)], name="r")
    value = Struct(schema, {"ts": "2017-01-02T03:04:05+0100", "other": 1})
    t = configured(TimestampConverterValue, field="ts", target_type="Timestamp",
                   format="yyyy-MM-dd'T'HH:mm:ssZ")
    out = t.apply(rec(value, schema))
    assert out.value_schema.field("ts").schema == timestamp_schema()
    assert out.value_schema.name == "r"
    assert out.value.get("ts") == datetime.datetime(2017, 1, 2, 2, 4, 5, tzinfo=UTC)
    assert out.value.get("other") == 1
    assert value.get("ts") == "2017-01-02T03:04:05+0100"
    # a field the schema lacks converts nothing (Kafka does not fail)
    same = configured(TimestampConverterValue, field="nope", target_type="unix").apply(rec(value, schema))
    assert same.value == value and same.value_schema == schema
    with pytest.raises(DataException, match="Expected string timestamp to be a String"):
        configured(TimestampConverterValue, target_type="unix", format="yyyy").apply(rec(5, STRING_SCHEMA))
    with pytest.raises(DataException, match="Expected Unix timestamp to be a Long"):
        configured(TimestampConverterValue, target_type="string", format="yyyy").apply(
            rec("5", INT64_SCHEMA))


def test_timestamp_converter_field_schemaless_and_errors():
    t = configured(TimestampConverterValue, field="when", target_type="string", format="yyyyMMdd")
    assert t.apply(rec({"when": MOMENT_MS, "x": 1})).value == {"when": "20170102", "x": 1}
    assert t.apply(rec({"when": None})).value == {"when": None}
    assert t.apply(rec(None)).value is None
    with pytest.raises(DataException, match="does not support"):
        t.apply(rec({"when": 1.5}))
    bad = configured(TimestampConverterValue, target_type="unix", format="yyyy-MM-dd")
    with pytest.raises(DataException, match="Could not parse timestamp"):
        bad.apply(rec("not a date"))


# ---- TimestampRouter --------------------------------------------------------------------------
def test_timestamp_router():
    assert configured(TimestampRouter).apply(rec("v", topic="orders")).topic == "orders-20170102"
    t = configured(TimestampRouter, topic_format="${timestamp}_${topic}_x", timestamp_format="yyyy.MM")
    assert t.apply(rec("v", topic="a")).topic == "2017.01_a_x"
    with pytest.raises(DataException, match="Timestamp missing on record"):
        t.apply(rec("v", ts=None))
    with pytest.raises(ConfigException, match="Illegal pattern character"):
        configured(TimestampRouter, timestamp_format="yyyyqq")


# ---- SimpleDateFormat -------------------------------------------------------------------------
@pytest.mark.parametrize("pattern,text", [
    ("yyyy-MM-dd'T'HH:mm:ss.SSS'Z'", "2017-01-02T03:04:05.678Z"),
    ("yyyyMMddHHmmssSSS", "20170102030405678"),
    ("EEE, d MMM yyyy HH:mm:ss.SSS", "Mon, 2 Jan 2017 03:04:05.678"),
    ("EEEE dd MMMM yy hh:mm:ss.SSS a", "Monday 02 January 17 03:04:05.678 AM"),
    ("yyyy-MM-dd HH:mm:ss.SSSXXX", "2017-01-02 03:04:05.678Z"),
    ("''yyyy'' D HH:mm:ss.SSS z", "'2017' 2 03:04:05.678 UTC"),
])
def test_simple_date_format_round_trip(pattern, text):
    f = SimpleDateFormat(pattern)
    assert f.format(MOMENT) == text
    assert f.parse(text) == MOMENT


def test_simple_date_format_zones_and_errors():
    f = SimpleDateFormat("yyyy-MM-dd HH:mm XXX")
    assert f.parse("2017-01-02 03:04 -05:30") == datetime.datetime(2017, 1, 2, 8, 34, tzinfo=UTC)
    with pytest.raises(ValueError):
        f.parse("2017-13-02 03:04 Z")
    with pytest.raises(ValueError, match="Unterminated quote"):
        SimpleDateFormat("yyyy 'oops")


def test_cast_and_timestamp_converter_keep_optionality():
    schema = struct_schema([("ts", INT64_SCHEMA)], optional=True)
    value = Struct(schema, {"ts": MOMENT_MS})
    assert configured(CastValue, spec="ts:string").apply(rec(value, schema)).value_schema.optional
    out = configured(TimestampConverterValue, field="ts", target_type="Timestamp").apply(rec(value, schema))
    assert out.value_schema.optional and out.value.get("ts") == MOMENT


@pytest.mark.parametrize("pattern", [
    "yyyy-MM-dd'T'HH:mm:ss.SSSZ", "yyyyMMddHHmmssSSS", "dd MMM yyyy hh:mm:ss.SSS a",
    "EEEE, MMMM d, yyyy HH:mm:ss.SSS XXX", "D yyyy kk:mm:ss.SSS",
])
def test_simple_date_format_round_trips_random_instants(pattern):
    import random
    rng = random.Random(pattern)
    f = SimpleDateFormat(pattern)
    for _ in range(300):
        ms = rng.randrange(-2_000_000_000_000, 4_000_000_000_000)
        when = datetime.datetime(1970, 1, 1, tzinfo=UTC) + datetime.timedelta(milliseconds=ms)
        assert f.parse(f.format(when)) == when, (pattern, when, f.format(when))
