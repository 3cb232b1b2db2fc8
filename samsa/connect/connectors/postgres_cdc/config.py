"""The connector's settings under Debezium's PostgreSQL connector names and defaults."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ...config_def import AbstractConfig, ConfigDef, ConfigType, Importance, at_least, non_empty_string
from ...errors import ConfigException

HOSTNAME = "database.hostname"
PORT = "database.port"
USER = "database.user"
PASSWORD = "database.password"
DBNAME = "database.dbname"
TOPIC_PREFIX = "topic.prefix"
PLUGIN_NAME = "plugin.name"
SLOT_NAME = "slot.name"
SLOT_DROP_ON_STOP = "slot.drop.on.stop"
PUBLICATION_NAME = "publication.name"
PUBLICATION_AUTOCREATE = "publication.autocreate.mode"
SCHEMA_INCLUDE = "schema.include.list"
SCHEMA_EXCLUDE = "schema.exclude.list"
TABLE_INCLUDE = "table.include.list"
TABLE_EXCLUDE = "table.exclude.list"
SNAPSHOT_MODE = "snapshot.mode"
HEARTBEAT_INTERVAL = "heartbeat.interval.ms"
HEARTBEAT_PREFIX = "topic.heartbeat.prefix"
TXN_METADATA = "provide.transaction.metadata"
TXN_TOPIC = "topic.transaction"
TOMBSTONES = "tombstones.on.delete"
DECIMAL_MODE = "decimal.handling.mode"
TIME_PRECISION = "time.precision.mode"
BINARY_MODE = "binary.handling.mode"
SKIPPED_OPERATIONS = "skipped.operations"
MAX_BATCH = "max.batch.size"
POLL_INTERVAL = "poll.interval.ms"
STATUS_INTERVAL = "status.update.interval.ms"
RETRY_DELAY = "retriable.restart.connector.wait.ms"

SNAPSHOT_MODES = ("initial", "never", "initial_only", "no_data", "when_needed")
SNAPSHOT_ALIASES = {"exported": "initial", "schema_only": "no_data"}
AUTOCREATE_MODES = ("all_tables", "disabled", "filtered")


def _choice(*allowed: str, aliases: dict[str, str] | None = None) -> Any:
    def check(name: str, value: Any) -> None:
        v = str(value).lower()
        if v not in allowed and v not in (aliases or {}):
            raise ConfigException(name, value, "must be one of " + ", ".join(allowed))
    return check


def _plugin(name: str, value: Any) -> None:
    if str(value).lower() != "pgoutput":
        raise ConfigException(name, value, "only the pgoutput logical decoding plugin is "
                              "supported (PostgreSQL's built-in one; decoderbufs is not)")


def _regex_list(name: str, value: Any) -> None:
    for pattern in value or []:
        try:
            re.compile(pattern)
        except re.error as e:
            raise ConfigException(name, value, f"invalid regular expression {pattern!r}: {e}") from e


def _ops(name: str, value: Any) -> None:
    for op in value or []:
        if op not in ("c", "u", "d", "t", "none"):
            raise ConfigException(name, value, "operations are c, u, d, t or none")


S, INT, L, B, LIST = (ConfigType.STRING, ConfigType.INT, ConfigType.LONG, ConfigType.BOOLEAN,
                    ConfigType.LIST)
H, M, LO = Importance.HIGH, Importance.MEDIUM, Importance.LOW

CONFIG_DEF = (
    ConfigDef()
    .define(HOSTNAME, S, validator=non_empty_string, importance=H,
            documentation="Resolvable hostname or IP address of the PostgreSQL server")
    .define(PORT, INT, 5432, at_least(1), H, "Port of the PostgreSQL database server")
    .define(USER, S, validator=non_empty_string, importance=H,
            documentation="Name of the PostgreSQL user to connect as")
    .define(PASSWORD, ConfigType.PASSWORD, None, None, H, "Password of that user")
    .define(DBNAME, S, validator=non_empty_string, importance=H,
            documentation="The database to stream changes from")
    .define(TOPIC_PREFIX, S, validator=non_empty_string, importance=H,
            documentation="Prefix of every topic name (<prefix>.<schema>.<table>) and the "
            "logical name of the server in the source block and partition")
    .define(PLUGIN_NAME, S, "pgoutput", _plugin, M, "Logical decoding plugin: pgoutput")
    .define(SLOT_NAME, S, "debezium", non_empty_string, M, "The logical replication slot")
    .define(SLOT_DROP_ON_STOP, B, False, None, LO, "Drop the slot when the task stops cleanly")
    .define(PUBLICATION_NAME, S, "dbz_publication", non_empty_string, M,
            "The publication pgoutput streams")
    .define(PUBLICATION_AUTOCREATE, S, "all_tables", _choice(*AUTOCREATE_MODES), M,
            "all_tables: create the publication FOR ALL TABLES when missing; disabled: it must "
            "exist; filtered: create/alter it for the tables the include/exclude lists select")
    .define(SCHEMA_INCLUDE, LIST, None, _regex_list, M, "Regexes of schemas to capture")
    .define(SCHEMA_EXCLUDE, LIST, None, _regex_list, M, "Regexes of schemas not to capture")
    .define(TABLE_INCLUDE, LIST, None, _regex_list, M,
            "Regexes matched against <schema>.<table> of the tables to capture")
    .define(TABLE_EXCLUDE, LIST, None, _regex_list, M,
            "Regexes matched against <schema>.<table> of the tables not to capture")
    .define(SNAPSHOT_MODE, S, "initial", _choice(*SNAPSHOT_MODES, aliases=SNAPSHOT_ALIASES), M,
            "initial | never | initial_only | no_data | when_needed (and the older exported, "
            "schema_only)")
    .define(HEARTBEAT_INTERVAL, INT, 0, at_least(0), M, "Emit a heartbeat record (and confirm "
            "the slot position) this often while idle; 0 disables heartbeats")
    .define(HEARTBEAT_PREFIX, S, "__debezium-heartbeat", None, LO,
            "Heartbeat topic: <prefix>.<topic.prefix>")
    .define(TXN_METADATA, B, False, None, LO, "Emit BEGIN/END records to <topic.prefix>."
            "<topic.transaction> and a transaction block in each change event")
    .define(TXN_TOPIC, S, "transaction", None, LO, "Suffix of the transaction metadata topic")
    .define(TOMBSTONES, B, True, None, M, "A null-valued record after each delete event")
    .define(DECIMAL_MODE, S, "precise", _choice("precise", "double", "string"), M,
            "How numeric/decimal/money columns are represented")
    .define(TIME_PRECISION, S, "adaptive", _choice("adaptive", "adaptive_time_microseconds",
                                                   "connect"), M,
            "How time, date and timestamp columns are represented")
    .define(BINARY_MODE, S, "bytes", _choice("bytes", "base64", "hex"), LO,
            "How bytea columns are represented")
    .define(SKIPPED_OPERATIONS, LIST, "t", _ops, LO,
            "Operations not emitted: c, u, d, t (truncate); none for none")
    .define(MAX_BATCH, INT, 2048, at_least(1), M, "Most records one poll returns")
    .define(POLL_INTERVAL, L, 500, at_least(0), M,
            "How long a poll waits for changes before returning none")
    .define(STATUS_INTERVAL, INT, 10_000, at_least(1), LO,
            "Interval of the standby status updates sent on the replication connection")
    .define(RETRY_DELAY, L, 10_000, at_least(0), LO,
            "Wait before reconnecting after a retriable error (the database is down)")
)


@dataclass(frozen=True)
class CdcConfig:
    host: str
    port: int
    user: str
    password: str | None
    dbname: str
    prefix: str
    slot: str
    drop_slot_on_stop: bool
    publication: str
    autocreate: str
    schema_include: list[re.Pattern[str]]
    schema_exclude: list[re.Pattern[str]]
    table_include: list[re.Pattern[str]]
    table_exclude: list[re.Pattern[str]]
    snapshot_mode: str
    heartbeat_ms: int
    heartbeat_topic: str
    txn_metadata: bool
    txn_topic: str
    tombstones: bool
    decimal_mode: str
    time_precision: str
    binary_mode: str
    skipped: frozenset[str]
    max_batch: int
    poll_interval_ms: int
    status_interval_s: float
    retry_delay_s: float

    def dsn_params(self) -> dict[str, Any]:
        params: dict[str, Any] = {"host": self.host, "port": self.port, "user": self.user,
                                  "dbname": self.dbname, "connect_timeout": 10,
                                  "application_name": f"samsa-cdc-{self.prefix}"}
        if self.password:
            params["password"] = self.password
        return params

    def captured(self, schema: str, table: str) -> bool:
        """Debezium's filters: include lists win; regexes must match the whole name."""
        if schema.startswith("pg_") or schema == "information_schema":
            return False
        if self.schema_include and not any(p.fullmatch(schema) for p in self.schema_include):
            return False
        if any(p.fullmatch(schema) for p in self.schema_exclude):
            return False
        full = f"{schema}.{table}"
        if self.table_include:
            return any(p.fullmatch(full) for p in self.table_include)
        return not any(p.fullmatch(full) for p in self.table_exclude)


def _patterns(values: list[str] | None) -> list[re.Pattern[str]]:
    return [re.compile(v.strip()) for v in values or [] if v.strip()]


def parse_config(props: dict[str, str]) -> CdcConfig:
    c = AbstractConfig(CONFIG_DEF, props)
    mode = str(c.get(SNAPSHOT_MODE)).lower()
    prefix = str(c.get(TOPIC_PREFIX))
    skipped = frozenset(o for o in (c.get(SKIPPED_OPERATIONS) or []) if o != "none")
    password = c.get(PASSWORD)
    return CdcConfig(
        host=str(c.get(HOSTNAME)), port=int(c.get(PORT)), user=str(c.get(USER)),
        password=str(password) if password else None, dbname=str(c.get(DBNAME)), prefix=prefix,
        slot=str(c.get(SLOT_NAME)), drop_slot_on_stop=bool(c.get(SLOT_DROP_ON_STOP)),
        publication=str(c.get(PUBLICATION_NAME)),
        autocreate=str(c.get(PUBLICATION_AUTOCREATE)).lower(),
        schema_include=_patterns(c.get(SCHEMA_INCLUDE)),
        schema_exclude=_patterns(c.get(SCHEMA_EXCLUDE)),
        table_include=_patterns(c.get(TABLE_INCLUDE)),
        table_exclude=_patterns(c.get(TABLE_EXCLUDE)),
        snapshot_mode=SNAPSHOT_ALIASES.get(mode, mode),
        heartbeat_ms=int(c.get(HEARTBEAT_INTERVAL)),
        heartbeat_topic=f"{c.get(HEARTBEAT_PREFIX)}.{prefix}",
        txn_metadata=bool(c.get(TXN_METADATA)), txn_topic=f"{prefix}.{c.get(TXN_TOPIC)}",
        tombstones=bool(c.get(TOMBSTONES)), decimal_mode=str(c.get(DECIMAL_MODE)).lower(),
        time_precision=str(c.get(TIME_PRECISION)).lower(),
        binary_mode=str(c.get(BINARY_MODE)).lower(), skipped=skipped,
        max_batch=int(c.get(MAX_BATCH)), poll_interval_ms=int(c.get(POLL_INTERVAL)),
        status_interval_s=int(c.get(STATUS_INTERVAL)) / 1000,
        retry_delay_s=int(c.get(RETRY_DELAY)) / 1000)
