"""The Snowflake sink's configuration: Snowflake's own names and defaults, parsed into settings,
with `snowflake.url.name` pointing at a local warehouse (a DuckDB file or PostgreSQL) instead of a
Snowflake account. Cross-key rules follow Snowflake's validator: buffer.flush.time >= 10 s with
SNOWPIPE (>= 1 s with SNOWPIPE_STREAMING), snowflake.role.name required with SNOWPIPE_STREAMING."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ...config_def import AbstractConfig, ConfigDef, ConfigType, Importance, at_least, one_of
from ...errors import ConfigException, ConnectException
from ..sql.url import SUPPORTED, parse_url
from .naming import TOPIC2TABLE_MAP, parse_topic2table
from .records import MetadataFlags

URL = "snowflake.url.name"
USER = "snowflake.user.name"
PRIVATE_KEY = "snowflake.private.key"
PRIVATE_KEY_PASSPHRASE = "snowflake.private.key.passphrase"
DATABASE = "snowflake.database.name"
SCHEMA = "snowflake.schema.name"
ROLE = "snowflake.role.name"
INGESTION = "snowflake.ingestion.method"
BUFFER_COUNT = "buffer.count.records"
BUFFER_FLUSH_TIME = "buffer.flush.time"
BUFFER_SIZE = "buffer.size.bytes"
NULL_VALUES = "behavior.on.null.values"
SCHEMATIZATION = "snowflake.enable.schematization"
META_ALL = "snowflake.metadata.all"
META_TOPIC = "snowflake.metadata.topic"
META_OFFSET = "snowflake.metadata.offset.and.partition"
META_CREATETIME = "snowflake.metadata.createtime"

SNOWPIPE = "SNOWPIPE"
SNOWPIPE_STREAMING = "SNOWPIPE_STREAMING"
FLUSH_TIME_MIN = {SNOWPIPE: 10, SNOWPIPE_STREAMING: 1}
_LOGIN = "Snowflake Login Info"
_CONNECTOR = "Connector Config"

CONFIG_DEF = (
    ConfigDef()
    .define(URL, ConfigType.STRING, None, None, Importance.HIGH,
            "Where the tables go. Snowflake's connector takes an account URL; Samsa takes a local "
            "warehouse: duckdb:///path/file.duckdb (or jdbc:duckdb:, or any path ending .duckdb) "
            "for an embedded DuckDB file, postgresql://host:port/db (or jdbc:postgresql://) for "
            "PostgreSQL.", group=_LOGIN, order_in_group=0)
    .define(USER, ConfigType.STRING, None, None, Importance.HIGH,
            "User name. PostgreSQL: the role to connect as (unless the URL names one); DuckDB: "
            "recorded only.", group=_LOGIN, order_in_group=1)
    .define(PRIVATE_KEY, ConfigType.PASSWORD, None, None, Importance.HIGH,
            "Snowflake key-pair authentication. Ignored for local warehouses (PostgreSQL takes a "
            "password in the URL).", group=_LOGIN, order_in_group=2)
    .define(PRIVATE_KEY_PASSPHRASE, ConfigType.PASSWORD, None, None, Importance.LOW,
            "Passphrase of the private key. Ignored for local warehouses.", group=_LOGIN,
            order_in_group=3)
    .define(DATABASE, ConfigType.STRING, None, None, Importance.HIGH,
            "Database of the tables. PostgreSQL: used when the URL names no database; DuckDB: the "
            "file is the database.", group=_LOGIN, order_in_group=4)
    .define(SCHEMA, ConfigType.STRING, None, None, Importance.HIGH,
            "Schema of the tables; created when missing.", group=_LOGIN, order_in_group=5)
    .define(ROLE, ConfigType.STRING, None, None, Importance.LOW,
            "Role; required with SNOWPIPE_STREAMING as in Snowflake. Recorded only.",
            group=_LOGIN, order_in_group=6)
    .define(TOPIC2TABLE_MAP, ConfigType.STRING, "", None, Importance.MEDIUM,
            "topic1:table1,topic2:table2 - table per topic instead of the name derived from the "
            "topic. REGEX_MATCHER>regex:replacement entries rename by pattern.",
            group=_CONNECTOR, order_in_group=0)
    .define(INGESTION, ConfigType.STRING, SNOWPIPE, one_of(SNOWPIPE, SNOWPIPE_STREAMING,
                                                            case_insensitive=True),
            Importance.LOW, "SNOWPIPE or SNOWPIPE_STREAMING. Both write rows and offsets in one "
            "transaction (exactly-once); only the buffer.flush.time minimum differs.",
            group=_CONNECTOR, order_in_group=1)
    .define(BUFFER_COUNT, ConfigType.LONG, 10000, at_least(1), Importance.LOW,
            "Records buffered per Kafka partition before the buffer is written.",
            group=_CONNECTOR, order_in_group=2)
    .define(BUFFER_FLUSH_TIME, ConfigType.LONG, 120, at_least(1), Importance.LOW,
            "Seconds between writes of the buffer (minimum 10 with SNOWPIPE, 1 with "
            "SNOWPIPE_STREAMING).", group=_CONNECTOR, order_in_group=3)
    .define(BUFFER_SIZE, ConfigType.LONG, 5000000, at_least(1), Importance.LOW,
            "Bytes (of the records' JSON) buffered per Kafka partition before the buffer is "
            "written.", group=_CONNECTOR, order_in_group=4)
    .define(NULL_VALUES, ConfigType.STRING, "DEFAULT", one_of("DEFAULT", "IGNORE",
                                                              case_insensitive=True),
            Importance.LOW, "Tombstones: DEFAULT writes a row with RECORD_CONTENT {}; IGNORE "
            "skips them.", group=_CONNECTOR, order_in_group=5)
    .define(SCHEMATIZATION, ConfigType.BOOLEAN, False, None, Importance.LOW,
            "Schematization (one column per field) is not supported: must be false.",
            group=_CONNECTOR, order_in_group=6)
    .define(META_ALL, ConfigType.BOOLEAN, True, None, Importance.LOW,
            "false: RECORD_METADATA is {}.", group=_CONNECTOR, order_in_group=7)
    .define(META_TOPIC, ConfigType.BOOLEAN, True, None, Importance.LOW,
            "Include topic in RECORD_METADATA.", group=_CONNECTOR, order_in_group=8)
    .define(META_OFFSET, ConfigType.BOOLEAN, True, None, Importance.LOW,
            "Include offset and partition in RECORD_METADATA.", group=_CONNECTOR,
            order_in_group=9)
    .define(META_CREATETIME, ConfigType.BOOLEAN, True, None, Importance.LOW,
            "Include the record timestamp (CreateTime or LogAppendTime) in RECORD_METADATA.",
            group=_CONNECTOR, order_in_group=10)
)
REQUIRED = (URL, USER, DATABASE, SCHEMA)


def warehouse_url(url: str, database: str | None) -> str:
    """snowflake.url.name as a URL the SQL layer opens. A bare path ending .duckdb is a DuckDB
    file; a PostgreSQL URL without a database gets snowflake.database.name (folded to lower case,
    as PostgreSQL folds unquoted names)."""
    text = (url or "").strip()
    lower = text.lower()
    if lower.endswith(".duckdb") and not lower.startswith(("duckdb:", "jdbc:duckdb:")):
        return "duckdb:" + text
    if lower.startswith(("postgresql://", "postgres://", "jdbc:postgresql://")):
        jdbc = lower.startswith("jdbc:")
        parts = urlsplit(text[5:] if jdbc else text)
        if parts.path.strip("/") == "" and database:
            parts = parts._replace(path="/" + database.lower())
        rebuilt = ("jdbc:" if jdbc else "") + urlunsplit(parts)
        parse_url(rebuilt)  # validates
        return rebuilt
    if "snowflakecomputing" in lower:
        raise ConfigException(URL, url, "Samsa's warehouse sink writes to a local warehouse, not a "
                              "Snowflake account: use duckdb:///path/file.duckdb or "
                              "postgresql://host:port/db")
    parse_url(text)  # raises for anything else it does not know
    return text


@dataclass(frozen=True)
class SnowflakeSettings:
    url: str
    user: str | None
    database: str
    schema: str
    role: str | None
    ingestion: str
    topic2table: dict[str, str]
    buffer_count: int
    buffer_flush_s: int
    buffer_bytes: int
    ignore_nulls: bool
    flags: MetadataFlags
    value_converter: str
    key_converter: str

    @property
    def is_duckdb(self) -> bool:
        return self.url.lower().startswith(("duckdb:", "jdbc:duckdb:")) or self.url == ":memory:"


def problems(props: dict[str, Any]) -> dict[str, str]:
    """Cross-key errors by key (empty when the settings are usable)."""
    out: dict[str, str] = {}
    for key in REQUIRED:
        if not str(props.get(key) or "").strip():
            out[key] = f"{key} must be provided"
    try:
        cfg = CONFIG_DEF.parse(props)
    except ConfigException as e:
        out.setdefault(e.name if e.name in CONFIG_DEF.keys else URL, str(e))
        return out
    method = str(cfg[INGESTION]).upper()
    minimum = FLUSH_TIME_MIN[method]
    if int(cfg[BUFFER_FLUSH_TIME]) < minimum:
        out[BUFFER_FLUSH_TIME] = (f"{BUFFER_FLUSH_TIME} is {cfg[BUFFER_FLUSH_TIME]}, it should be "
                                  f"greater than {minimum} with {INGESTION}={method}")
    if method == SNOWPIPE_STREAMING and not str(cfg[ROLE] or "").strip():
        out[ROLE] = f"{ROLE} must be provided with {INGESTION}={SNOWPIPE_STREAMING}"
    if cfg[SCHEMATIZATION]:
        out[SCHEMATIZATION] = (f"{SCHEMATIZATION}=true is not supported by Samsa's warehouse "
                               f"sink: tables have RECORD_METADATA and RECORD_CONTENT only")
    try:
        parse_topic2table(cfg[TOPIC2TABLE_MAP])
    except ConfigException as e:
        out[TOPIC2TABLE_MAP] = str(e)
    if URL not in out:
        try:
            warehouse_url(str(cfg[URL]), cfg[DATABASE])
        except ConnectException as e:  # the SQL layer's "unsupported URL" too
            out[URL] = (f"{e}. Supported: duckdb:///path/file.duckdb, a path ending .duckdb, "
                        + ", ".join(SUPPORTED))
    return out


def parse_settings(props: dict[str, Any]) -> SnowflakeSettings:
    bad = problems(props)
    if bad:
        key, why = next(iter(bad.items()))
        raise ConfigException(key, props.get(key), why)
    cfg = AbstractConfig(CONFIG_DEF, props)
    return SnowflakeSettings(
        url=warehouse_url(str(cfg.get(URL)), cfg.get(DATABASE)),
        user=cfg.get(USER) or None, database=str(cfg.get(DATABASE)), schema=str(cfg.get(SCHEMA)),
        role=cfg.get(ROLE) or None, ingestion=str(cfg.get(INGESTION)).upper(),
        topic2table=parse_topic2table(cfg.get(TOPIC2TABLE_MAP)),
        buffer_count=int(cfg.get(BUFFER_COUNT)), buffer_flush_s=int(cfg.get(BUFFER_FLUSH_TIME)),
        buffer_bytes=int(cfg.get(BUFFER_SIZE)),
        ignore_nulls=str(cfg.get(NULL_VALUES)).upper() == "IGNORE",
        flags=MetadataFlags(all=bool(cfg.get(META_ALL)), topic=bool(cfg.get(META_TOPIC)),
                            offset_and_partition=bool(cfg.get(META_OFFSET)),
                            createtime=bool(cfg.get(META_CREATETIME))),
        value_converter=str(props.get("value.converter") or ""),
        key_converter=str(props.get("key.converter") or ""))
