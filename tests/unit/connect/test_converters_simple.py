"""StringConverter, ByteArrayConverter and the number converters: Kafka's bytes and schemas."""

from __future__ import annotations

import struct

import pytest

from samsa.connect.converters import PLUGINS
from samsa.connect.converters.simple import (
    ByteArrayConverter,
    DoubleConverter,
    FloatConverter,
    IntegerConverter,
    LongConverter,
    ShortConverter,
    StringConverter,
)
from samsa.connect.data import (
    INT32_SCHEMA,
    OPTIONAL_BYTES_SCHEMA,
    OPTIONAL_FLOAT32_SCHEMA,
    OPTIONAL_FLOAT64_SCHEMA,
    OPTIONAL_INT16_SCHEMA,
    OPTIONAL_INT32_SCHEMA,
    OPTIONAL_INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
)
from samsa.connect.errors import ConfigException, DataException
from samsa.connect.plugins import Plugins, PluginType


def test_plugins_table_names_kafka_classes_and_loads() -> None:
    plugins = Plugins()
    for name in PLUGINS:
        desc = plugins.find(name)
        cls = desc.load()
        assert desc.kind in (PluginType.CONVERTER, PluginType.HEADER_CONVERTER), name
        assert cls.__name__ == name.rsplit(".", 1)[-1]
    assert plugins.find("JsonConverter").name == "org.apache.kafka.connect.json.JsonConverter"
    assert plugins.find("org.apache.kafka.connect.storage.SimpleHeaderConverter").kind is \
        PluginType.HEADER_CONVERTER


def test_string_converter_roundtrip_and_nulls() -> None:
    c = StringConverter()
    c.configure({}, False)
    assert c.from_connect_data("t", STRING_SCHEMA, "héllo") == "héllo".encode()
    assert c.to_connect_data("t", "héllo".encode()).schema == OPTIONAL_STRING_SCHEMA
    assert c.to_connect_data("t", "héllo".encode()).value == "héllo"
    assert c.from_connect_data("t", None, None) is None
    sv = c.to_connect_data("t", None)
    assert sv.schema == OPTIONAL_STRING_SCHEMA and sv.value is None
    # non-strings use Java's toString
    assert c.from_connect_data("t", INT32_SCHEMA, 42) == b"42"
    assert c.from_connect_data("t", None, True) == b"true"
    assert c.from_connect_data("t", None, 1e20) == b"1.0E20"
    # invalid UTF-8 decodes with replacement characters, as Java does (no crash)
    assert c.to_connect_data("t", b"\xff").value == "\ufffd"
    assert c.from_connect_header("t", "h", None, "x") == b"x"
    assert c.to_connect_header("t", "h", b"x").value == "x"


def test_string_converter_encoding() -> None:
    c = StringConverter()
    c.configure({"converter.encoding": "UTF-16"}, True)
    assert c.from_connect_data("t", None, "a") == "a".encode("utf-16")
    assert c.to_connect_data("t", "a".encode("utf-16")).value == "a"
    c.configure({"converter.encoding": "ISO-8859-1"}, False)
    assert c.from_connect_data("t", None, "é") == b"\xe9"
    with pytest.raises(DataException):
        c.from_connect_data("t", None, "€")
    with pytest.raises(ConfigException):
        StringConverter().configure({"converter.encoding": "no-such-charset"}, False)
    assert StringConverter().config().keys["converter.encoding"].default == "UTF8"


def test_bytearray_converter() -> None:
    c = ByteArrayConverter()
    c.configure({}, False)
    assert c.from_connect_data("t", OPTIONAL_BYTES_SCHEMA, b"\x00\x01") == b"\x00\x01"
    assert c.from_connect_data("t", None, bytearray(b"ab")) == b"ab"
    assert c.to_connect_data("t", b"ab").schema == OPTIONAL_BYTES_SCHEMA
    assert c.to_connect_data("t", None).value is None
    with pytest.raises(DataException, match="Invalid schema type"):
        c.from_connect_data("t", STRING_SCHEMA, b"x")
    with pytest.raises(DataException, match="not compatible"):
        c.from_connect_data("t", None, "text")


@pytest.mark.parametrize("cls,fmt,schema,value", [
    (ShortConverter, ">h", OPTIONAL_INT16_SCHEMA, -1234),
    (IntegerConverter, ">i", OPTIONAL_INT32_SCHEMA, 2**31 - 1),
    (LongConverter, ">q", OPTIONAL_INT64_SCHEMA, -(2**63)),
    (FloatConverter, ">f", OPTIONAL_FLOAT32_SCHEMA, 1.5),
    (DoubleConverter, ">d", OPTIONAL_FLOAT64_SCHEMA, -0.1),
])
def test_number_converters(cls: type, fmt: str, schema: object, value: float) -> None:
    c = cls()
    c.configure({}, False)
    raw = c.from_connect_data("t", schema, value)
    assert raw == struct.pack(fmt, value)  # Kafka's big-endian serializers
    sv = c.to_connect_data("t", raw)
    assert sv.schema == schema and sv.value == value
    assert c.from_connect_data("t", schema, None) is None
    null = c.to_connect_data("t", None)
    assert null.schema == schema and null.value is None
    with pytest.raises(DataException, match="Size of data"):
        c.to_connect_data("t", raw + b"\x00")
    with pytest.raises(DataException, match="Failed to serialize"):
        c.from_connect_data("t", schema, "nope")


def test_number_converter_range() -> None:
    c = ShortConverter()
    c.configure({}, False)
    with pytest.raises(DataException):
        c.from_connect_data("t", None, 1 << 15)
    with pytest.raises(DataException):
        IntegerConverter().from_connect_data("t", None, True)
