"""What the schema-registry converters (Avro, Protobuf, JSON Schema) share: Confluent's configs,
the subject name strategies, the HTTP client (confluent-kafka's SchemaRegistryClient) and the
Confluent wire format (magic byte 0, 4-byte big-endian schema id, then the payload)."""

from __future__ import annotations

import threading
from abc import abstractmethod
from typing import Any

from ..api import Converter
from ..config_def import NO_DEFAULT, ConfigDef, ConfigType, Importance, one_of
from ..data import Headers, Schema, SchemaAndValue
from ..errors import ConfigException, DataException, RetriableException

URL = "schema.registry.url"
AUTO_REGISTER = "auto.register.schemas"
USE_LATEST = "use.latest.version"
KEY_STRATEGY = "key.subject.name.strategy"
VALUE_STRATEGY = "value.subject.name.strategy"
NORMALIZE = "normalize.schemas"
AUTH_SOURCE = "basic.auth.credentials.source"
AUTH_USER_INFO = "basic.auth.user.info"

_STRATEGY_PKG = "io.confluent.kafka.serializers.subject."
TOPIC_NAME = "TopicNameStrategy"
RECORD_NAME = "RecordNameStrategy"
TOPIC_RECORD_NAME = "TopicRecordNameStrategy"
STRATEGIES = (TOPIC_NAME, RECORD_NAME, TOPIC_RECORD_NAME)
MAGIC = 0
_CACHE_MAX = 1000  # schemas per cache; a flood of distinct schemas must not grow memory


def registry_config() -> ConfigDef:
    strategy = _STRATEGY_PKG + TOPIC_NAME
    return (ConfigDef()
            .define(URL, ConfigType.LIST, NO_DEFAULT, None, Importance.HIGH,
                    "Comma-separated list of URLs for Schema Registry instances that can be used "
                    "to register or look up schemas.")
            .define(AUTO_REGISTER, ConfigType.BOOLEAN, True, None, Importance.MEDIUM,
                    "Specify if the Serializer should attempt to register the Schema with Schema "
                    "Registry")
            .define(USE_LATEST, ConfigType.BOOLEAN, False, None, Importance.LOW,
                    "Specify if the Serializer should use the latest subject version for "
                    "serialization")
            .define(NORMALIZE, ConfigType.BOOLEAN, False, None, Importance.LOW,
                    "Whether to normalize schemas, which generally ignores ordering when it is "
                    "not significant")
            .define(KEY_STRATEGY, ConfigType.CLASS, strategy, None, Importance.MEDIUM,
                    "Determines how to construct the subject name under which the key schema is "
                    "registered with the schema registry.")
            .define(VALUE_STRATEGY, ConfigType.CLASS, strategy, None, Importance.MEDIUM,
                    "Determines how to construct the subject name under which the value schema is "
                    "registered with the schema registry.")
            .define(AUTH_SOURCE, ConfigType.STRING, "URL", one_of("URL", "USER_INFO", "SASL_INHERIT"),
                    Importance.MEDIUM, "Specify how to pick the credentials for the Basic Auth "
                    "header. The supported values are URL, USER_INFO and SASL_INHERIT")
            .define(AUTH_USER_INFO, ConfigType.PASSWORD, "", None, Importance.MEDIUM,
                    "Specify the user info for the Basic Auth in the form of {username}:{password}"))


def strategy_name(value: str) -> str:
    simple = value.rsplit(".", 1)[-1]
    if simple not in STRATEGIES:
        raise ConfigException("subject.name.strategy", value,
                              f"unknown subject name strategy; use one of "
                              f"{', '.join(_STRATEGY_PKG + s for s in STRATEGIES)}")
    return simple


def subject_name(strategy: str, topic: str, is_key: bool, record_name: str | None) -> str:
    """The subject a schema is registered under (Confluent's SubjectNameStrategy classes)."""
    if strategy == TOPIC_NAME:
        return f"{topic}-{'key' if is_key else 'value'}"
    if not record_name:
        raise DataException(f"{strategy} needs a named record schema (struct with a name)")
    if strategy == RECORD_NAME:
        return record_name
    return f"{topic}-{record_name}"


def frame(schema_id: int, payload: bytes) -> bytes:
    return bytes([MAGIC]) + schema_id.to_bytes(4, "big") + payload


def unframe(data: bytes) -> tuple[int, bytes]:
    if len(data) < 5 or data[0] != MAGIC:
        raise DataException("Failed to deserialize data: Unknown magic byte!")
    return int.from_bytes(data[1:5], "big"), bytes(data[5:])


class RegistryConverter(Converter):
    """A converter whose bytes carry a registry schema id. Subclasses map Connect schemas to and
    from their format (`to_format`, `from_format`) and encode/decode values."""

    SCHEMA_TYPE = ""

    def __init__(self, client: Any = None) -> None:
        self.client = client
        self.is_key = False
        self.auto_register = True
        self.use_latest = False
        self.normalize = False
        self.strategy = TOPIC_NAME
        self._lock = threading.Lock()
        self._ids: dict[tuple[str, str], tuple[int, Any]] = {}
        self._by_id: dict[int, Any] = {}
        self._latest: dict[str, tuple[int, Any]] = {}
        self._format_cache: dict[Schema, Any] = {}

    def config(self) -> ConfigDef:
        return registry_config()

    def configure(self, configs: dict[str, Any], is_key: bool = False) -> None:
        parsed = self.config().parse(configs)
        self.is_key = is_key
        self.auto_register = bool(parsed[AUTO_REGISTER])
        self.use_latest = bool(parsed[USE_LATEST])
        self.normalize = bool(parsed[NORMALIZE])
        self.strategy = strategy_name(str(parsed[KEY_STRATEGY if is_key else VALUE_STRATEGY]))
        if self.client is not None:
            return
        urls = [u for u in parsed[URL] if u]
        if not urls:
            raise ConfigException(URL, ",".join(parsed[URL]), "must name at least one URL")
        from samsa.config import ConfigError
        from samsa.registry.client_config import RegistryClientSettings
        try:
            # credentials and TLS the Confluent way: basic.auth.*, schema.registry.ssl.*
            conf = RegistryClientSettings.parse(urls[0], configs).confluent_conf()
        except ConfigError as e:
            raise ConfigException(AUTH_SOURCE, str(parsed[AUTH_SOURCE]), str(e)) from None
        if len(urls) > 1:
            conf["url"] = ",".join([conf["url"], *urls[1:]])
        from confluent_kafka.schema_registry import SchemaRegistryClient
        try:
            self.client = SchemaRegistryClient(conf)
        except Exception as e:
            raise ConfigException(URL, ",".join(urls), str(e)) from None

    # ---- format hooks ---------------------------------------------------------------------------
    @abstractmethod
    def to_format(self, schema: Schema) -> Any:
        """The format's schema for a Connect schema (a parsed form the codec hooks understand)."""

    @abstractmethod
    def format_text(self, fmt: Any) -> str:
        """The schema text registered for a format schema."""

    @abstractmethod
    def record_name(self, fmt: Any) -> str | None:
        """The name RecordNameStrategy uses for a format schema."""

    @abstractmethod
    def parse_registered(self, text: str, references: list[Any]) -> Any:
        """A format schema from a schema the registry returned."""

    @abstractmethod
    def encode(self, fmt: Any, schema: Schema | None, value: Any) -> bytes:
        """The payload (after magic and id) for a Connect value."""

    @abstractmethod
    def decode(self, fmt: Any, payload: bytes) -> SchemaAndValue:
        """The Connect schema and value of a payload written with `fmt`."""

    # ---- converter ------------------------------------------------------------------------------
    def from_connect_data(self, topic: str, schema: Schema | None, value: Any,
                          headers: Headers | None = None) -> bytes | None:
        if value is None:
            return None
        if schema is None:
            raise DataException(f"{type(self).__name__} needs a schema to convert a value")
        fmt = self._format_cache.get(schema)
        if fmt is None:
            fmt = self.to_format(schema)
            if len(self._format_cache) >= _CACHE_MAX:
                self._format_cache.clear()
            self._format_cache[schema] = fmt
        subject = subject_name(self.strategy, topic, self.is_key, self.record_name(fmt))
        schema_id, used = self._schema_id(subject, fmt)
        try:
            payload = self.encode(used, schema, value)
        except DataException:
            raise
        except Exception as e:
            raise DataException(f"Failed to serialize {self.SCHEMA_TYPE} data for topic {topic}: "
                                f"{e}") from None
        return frame(schema_id, payload)

    def to_connect_data(self, topic: str, value: bytes | None,
                        headers: Headers | None = None) -> SchemaAndValue:
        if value is None:
            return SchemaAndValue.NULL
        schema_id, payload = unframe(value)
        fmt = self._schema_by_id(schema_id)
        try:
            return self.decode(fmt, payload)
        except DataException:
            raise
        except Exception as e:
            raise DataException(f"Failed to deserialize {self.SCHEMA_TYPE} data for topic {topic} "
                                f"(schema id {schema_id}): {e}") from None

    # ---- registry calls -------------------------------------------------------------------------
    def _call(self, what: str, fn: Any, *args: Any) -> Any:
        from confluent_kafka.schema_registry.error import SchemaRegistryError
        try:
            return fn(*args)
        except SchemaRegistryError as e:
            if e.http_status_code >= 500:
                raise RetriableException(f"{what}: {e}") from None
            raise DataException(f"{what}: {e}") from None
        except (DataException, RetriableException):
            raise
        except Exception as e:  # connection refused, timeouts: the registry may come back
            raise RetriableException(f"{what}: {e}") from None

    def _schema_id(self, subject: str, fmt: Any) -> tuple[int, Any]:
        from confluent_kafka.schema_registry import Schema as SRSchema
        if self.use_latest:
            hit = self._latest.get(subject)
            if hit is None:
                reg = self._call(f"Error retrieving latest version of {subject}",
                                 self.client.get_latest_version, subject)
                used = self._parse(reg.schema)
                hit = (int(reg.schema_id), used)
                self._latest[subject] = hit
            return hit
        text = self.format_text(fmt)
        key = (subject, text)
        cached = self._ids.get(key)
        if cached is not None:
            return cached
        sr_schema = SRSchema(text, self.SCHEMA_TYPE, self.references(fmt))
        if self.auto_register:
            sid = self._call(f"Error registering {self.SCHEMA_TYPE} schema under {subject}",
                             self.client.register_schema, subject, sr_schema, self.normalize)
        else:
            reg = self._call(f"Error retrieving {self.SCHEMA_TYPE} schema id from {subject}",
                             self.client.lookup_schema, subject, sr_schema, self.normalize)
            sid = reg.schema_id
        out = (int(sid), fmt)
        with self._lock:
            if len(self._ids) >= _CACHE_MAX:
                self._ids.clear()
            self._ids[key] = out
        return out

    def references(self, fmt: Any) -> list[Any]:
        return []

    def _schema_by_id(self, schema_id: int) -> Any:
        fmt = self._by_id.get(schema_id)
        if fmt is None:
            sr_schema = self._call(f"Error retrieving {self.SCHEMA_TYPE} schema for id {schema_id}",
                                   self.client.get_schema, schema_id)
            if (sr_schema.schema_type or "AVRO") != self.SCHEMA_TYPE:
                raise DataException(f"schema id {schema_id} is a {sr_schema.schema_type} schema, "
                                    f"not {self.SCHEMA_TYPE}")
            fmt = self._parse(sr_schema)
            with self._lock:
                if len(self._by_id) >= _CACHE_MAX:
                    self._by_id.clear()
                self._by_id[schema_id] = fmt
        return fmt

    def _parse(self, sr_schema: Any) -> Any:
        try:
            return self.parse_registered(sr_schema.schema_str, list(sr_schema.references or []))
        except (DataException, RetriableException):
            raise
        except Exception as e:
            raise DataException(f"Invalid {self.SCHEMA_TYPE} schema from the registry: {e}") from None

    def resolve_references(self, references: list[Any]) -> list[tuple[str, str, str]]:
        """(name, schema_type, text) of every referenced schema, dependencies first."""
        out: list[tuple[str, str, str]] = []
        seen: set[str] = set()

        def walk(refs: list[Any]) -> None:
            for ref in refs:
                if ref.name in seen:
                    continue
                seen.add(ref.name)
                reg = self._call(f"Error retrieving reference {ref.subject}/{ref.version}",
                                 self.client.get_version, ref.subject, ref.version)
                walk(list(reg.schema.references or []))
                out.append((ref.name, reg.schema.schema_type or "AVRO", reg.schema.schema_str))
        walk(references)
        return out
