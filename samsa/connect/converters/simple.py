"""The converters with no schema in the bytes: StringConverter, ByteArrayConverter and the number
converters (Kafka's big-endian Short/Integer/Long/Float/Double serializers). Each is also usable
as a header converter (from_connect_header / to_connect_header), as in Kafka."""

from __future__ import annotations

import codecs
import struct
from typing import Any

from ..api import Converter
from ..config_def import ConfigDef, ConfigType, Importance, one_of
from ..data import (
    OPTIONAL_BYTES_SCHEMA,
    OPTIONAL_FLOAT32_SCHEMA,
    OPTIONAL_FLOAT64_SCHEMA,
    OPTIONAL_INT16_SCHEMA,
    OPTIONAL_INT32_SCHEMA,
    OPTIONAL_INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    Headers,
    Schema,
    SchemaAndValue,
    Type,
)
from ..errors import ConfigException, DataException
from ._java import java_double

TYPE_CONFIG = "converter.type"
ENCODING_CONFIG = "converter.encoding"


def _type_key(cdef: ConfigDef) -> ConfigDef:
    return cdef.define(TYPE_CONFIG, ConfigType.STRING, "key", one_of("key", "value", "header"),
                       Importance.LOW, "How this converter will be used.")


def java_to_string(value: Any) -> str:
    """What Java's Object.toString gives for the common Connect values."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_double(value)
    return str(value)


class HeaderMixin:
    """Header conversion is the data conversion, as Kafka's simple converters do."""

    def from_connect_header(self, topic: str, header_key: str, schema: Schema | None,
                            value: Any) -> bytes | None:
        return self.from_connect_data(topic, schema, value)  # type: ignore[attr-defined,no-any-return]

    def to_connect_header(self, topic: str, header_key: str, value: bytes | None) -> SchemaAndValue:
        return self.to_connect_data(topic, value)  # type: ignore[attr-defined,no-any-return]


class StringConverter(HeaderMixin, Converter):
    """Any value as its string form in `converter.encoding` (UTF-8 by default); reads back as an
    optional string. Undecodable bytes become U+FFFD, as Java's String constructor does."""

    def __init__(self) -> None:
        self.encoding = "utf-8"

    def config(self) -> ConfigDef:
        cdef = ConfigDef().define(ENCODING_CONFIG, ConfigType.STRING, "UTF8", None, Importance.HIGH,
                                  "The name of the Java character set to use for encoding strings "
                                  "as byte arrays.")
        return _type_key(cdef)

    def configure(self, configs: dict[str, Any], is_key: bool = False) -> None:
        conf = {k: v for k, v in configs.items() if k in (ENCODING_CONFIG, TYPE_CONFIG)}
        parsed = self.config().parse(conf)
        enc = str(parsed[ENCODING_CONFIG])
        # Kafka's StringSerializer/Deserializer also accept their own encoding keys
        for k in ("serializer.encoding", "deserializer.encoding"):
            if k in configs and ENCODING_CONFIG not in configs:
                enc = str(configs[k])
        try:
            self.encoding = codecs.lookup(enc).name
        except LookupError:
            raise ConfigException(ENCODING_CONFIG, enc, "Unknown character set") from None

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any,
                          headers: Headers | None = None) -> bytes | None:
        if value is None:
            return None
        try:
            return java_to_string(value).encode(self.encoding)
        except UnicodeEncodeError as e:
            raise DataException(f"cannot encode the string in {self.encoding}: {e}") from None

    def to_connect_data(self, topic: str, value: bytes | None,
                        headers: Headers | None = None) -> SchemaAndValue:
        if value is None:
            return SchemaAndValue(OPTIONAL_STRING_SCHEMA, None)
        return SchemaAndValue(OPTIONAL_STRING_SCHEMA, bytes(value).decode(self.encoding, "replace"))


class ByteArrayConverter(HeaderMixin, Converter):
    """Bytes through unchanged; the schema, when given, must be BYTES."""

    def config(self) -> ConfigDef:
        return _type_key(ConfigDef())

    def configure(self, configs: dict[str, Any], is_key: bool = False) -> None:
        self.config().parse({k: v for k, v in configs.items() if k == TYPE_CONFIG})

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any,
                          headers: Headers | None = None) -> bytes | None:
        if schema is not None and schema.type is not Type.BYTES:
            raise DataException(f"Invalid schema type for ByteArrayConverter: {schema.type.name}")
        if value is not None and not isinstance(value, bytes | bytearray | memoryview):
            raise DataException(f"ByteArrayConverter is not compatible with objects of type "
                                f"{type(value).__name__}")
        return None if value is None else bytes(value)

    def to_connect_data(self, topic: str, value: bytes | None,
                        headers: Headers | None = None) -> SchemaAndValue:
        return SchemaAndValue(OPTIONAL_BYTES_SCHEMA, None if value is None else bytes(value))


class NumberConverter(HeaderMixin, Converter):
    """A number as Kafka's serializer for its Java type writes it (big-endian, fixed size)."""

    TYPE_NAME = ""
    FORMAT = ""
    SCHEMA: Schema = OPTIONAL_INT32_SCHEMA

    def config(self) -> ConfigDef:
        return _type_key(ConfigDef())

    def configure(self, configs: dict[str, Any], is_key: bool = False) -> None:
        self.config().parse({k: v for k, v in configs.items() if k == TYPE_CONFIG})

    def _check(self, value: Any) -> Any:
        if self.FORMAT in "fd":
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TypeError
            return float(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError
        return value

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any,
                          headers: Headers | None = None) -> bytes | None:
        if value is None:
            return None
        try:
            return struct.pack(">" + self.FORMAT, self._check(value))
        except (TypeError, struct.error):
            raise DataException(f"Failed to serialize to {self.TYPE_NAME} (was "
                                f"{type(value).__name__}): {value!r}") from None

    def to_connect_data(self, topic: str, value: bytes | None,
                        headers: Headers | None = None) -> SchemaAndValue:
        if value is None:
            return SchemaAndValue(self.SCHEMA, None)
        size = struct.calcsize(">" + self.FORMAT)
        if len(value) != size:
            raise DataException(f"Failed to deserialize {self.TYPE_NAME}: Size of data received by "
                                f"{self.TYPE_NAME.capitalize()}Deserializer is not {size}")
        return SchemaAndValue(self.SCHEMA, struct.unpack(">" + self.FORMAT, value)[0])


class ShortConverter(NumberConverter):
    TYPE_NAME, FORMAT, SCHEMA = "short", "h", OPTIONAL_INT16_SCHEMA


class IntegerConverter(NumberConverter):
    TYPE_NAME, FORMAT, SCHEMA = "integer", "i", OPTIONAL_INT32_SCHEMA


class LongConverter(NumberConverter):
    TYPE_NAME, FORMAT, SCHEMA = "long", "q", OPTIONAL_INT64_SCHEMA


class FloatConverter(NumberConverter):
    TYPE_NAME, FORMAT, SCHEMA = "float", "f", OPTIONAL_FLOAT32_SCHEMA


class DoubleConverter(NumberConverter):
    TYPE_NAME, FORMAT, SCHEMA = "double", "d", OPTIONAL_FLOAT64_SCHEMA
