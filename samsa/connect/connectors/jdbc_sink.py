"""io.confluent.connect.jdbc.JdbcSinkConnector: writes Connect records into PostgreSQL or DuckDB
tables with Confluent's JDBC sink settings (insert/upsert/update, pk.mode, auto.create,
auto.evolve, delete.enabled, table.name.format, batch.size, ...).

Exactly-once: each batch's rows and the next Kafka offsets of its partitions are written in ONE
database transaction (the shared `OffsetTable`). When partitions are assigned the task reads those
offsets back and rewinds the consumer there, so a crash at any point neither loses nor repeats a
row; `pre_commit` hands the same offsets to the consumer group. The hot path is batched: per batch
and table one executemany (pipelined in PostgreSQL, set-based in DuckDB) or COPY."""

from __future__ import annotations

import logging
import time
import zoneinfo
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..api import SinkConnector, SinkTask, Task, TopicPartition
from ..config_def import (
    AbstractConfig,
    ConfigDef,
    ConfigType,
    ConfigValue,
    Importance,
    at_least,
    non_empty_string,
    one_of,
)
from ..data import SinkRecord
from ..errors import ConfigException, ConnectException, RetriableException
from ._util import ConfiguredConnector
from .jdbc_sink_rows import PK_MODES, Layout, RowMapper
from .sql import Column, Database, OffsetTable, open_database

log = logging.getLogger("samsa.connect.connectors.jdbc")

CONNECTION_URL = "connection.url"
CONNECTION_USER = "connection.user"
CONNECTION_PASSWORD = "connection.password"
CONNECTION_ATTEMPTS = "connection.attempts"
CONNECTION_BACKOFF = "connection.backoff.ms"
DIALECT_NAME = "dialect.name"
INSERT_MODE = "insert.mode"
BATCH_SIZE = "batch.size"
DELETE_ENABLED = "delete.enabled"
TABLE_NAME_FORMAT = "table.name.format"
PK_MODE = "pk.mode"
PK_FIELDS = "pk.fields"
FIELDS_WHITELIST = "fields.whitelist"
DB_TIMEZONE = "db.timezone"
AUTO_CREATE = "auto.create"
AUTO_EVOLVE = "auto.evolve"
QUOTE_IDENTIFIERS = "quote.sql.identifiers"
MAX_RETRIES = "max.retries"
RETRY_BACKOFF = "retry.backoff.ms"
OFFSETS_TABLE = "samsa.offsets.table"


def _timezone(name: str, value: Any) -> None:
    try:
        zoneinfo.ZoneInfo(str(value))
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ConfigException(name, value, "Invalid time zone identifier") from None


CONFIG_DEF = (
    ConfigDef()
    .define(CONNECTION_URL, ConfigType.STRING, None, non_empty_string, Importance.HIGH,
            "JDBC-style URL of the target: jdbc:postgresql://host:port/db, postgresql://..., "
            "jdbc:duckdb:<path>, duckdb:///<path> or :memory:")
    .define(CONNECTION_USER, ConfigType.STRING, None, None, Importance.HIGH, "Database user.")
    .define(CONNECTION_PASSWORD, ConfigType.PASSWORD, None, None, Importance.HIGH,
            "Database password.")
    .define(CONNECTION_ATTEMPTS, ConfigType.INT, 3, at_least(1), Importance.LOW,
            "Attempts to connect when the task starts before it fails.")
    .define(CONNECTION_BACKOFF, ConfigType.LONG, 10000, at_least(0), Importance.LOW,
            "Wait between connection attempts, ms.")
    .define(DIALECT_NAME, ConfigType.STRING, "", None, Importance.LOW,
            "Accepted for compatibility; the dialect follows from connection.url.")
    .define(INSERT_MODE, ConfigType.STRING, "insert",
            one_of("insert", "upsert", "update", case_insensitive=True), Importance.HIGH,
            "insert: INSERT; upsert: INSERT .. ON CONFLICT DO UPDATE; update: UPDATE by key.")
    .define(BATCH_SIZE, ConfigType.INT, 3000, at_least(0), Importance.MEDIUM,
            "Most records written in one transaction (0: a whole put).")
    .define(DELETE_ENABLED, ConfigType.BOOLEAN, False, None, Importance.MEDIUM,
            "A tombstone (null value) deletes the row with its key; needs pk.mode=record_key.")
    .define(TABLE_NAME_FORMAT, ConfigType.STRING, "${topic}", None, Importance.MEDIUM,
            "Destination table; ${topic} is replaced by the record's topic.")
    .define(PK_MODE, ConfigType.STRING, "none", one_of(*PK_MODES, case_insensitive=True),
            Importance.HIGH, "Where the primary key comes from: none, kafka, record_key, "
            "record_value.")
    .define(PK_FIELDS, ConfigType.LIST, "", None, Importance.MEDIUM,
            "Primary key column names (see pk.mode).")
    .define(FIELDS_WHITELIST, ConfigType.LIST, "", None, Importance.MEDIUM,
            "Value fields to write (empty: all).")
    .define(DB_TIMEZONE, ConfigType.STRING, "UTC", _timezone, Importance.MEDIUM,
            "Time zone Timestamp values are written in.")
    .define(AUTO_CREATE, ConfigType.BOOLEAN, False, None, Importance.MEDIUM,
            "CREATE TABLE from the record schema when the table is missing.")
    .define(AUTO_EVOLVE, ConfigType.BOOLEAN, False, None, Importance.MEDIUM,
            "ALTER TABLE ADD COLUMN for fields the table lacks (never drops).")
    .define(QUOTE_IDENTIFIERS, ConfigType.STRING, "always",
            one_of("always", "never", case_insensitive=True), Importance.MEDIUM,
            "Quote table and column names in SQL.")
    .define(MAX_RETRIES, ConfigType.INT, 10, at_least(0), Importance.MEDIUM,
            "Retries of a batch after a retriable database error before the task fails.")
    .define(RETRY_BACKOFF, ConfigType.INT, 3000, at_least(0), Importance.MEDIUM,
            "Wait before a retry, ms.")
    .define(OFFSETS_TABLE, ConfigType.STRING, "__samsa_connect_offsets", non_empty_string,
            Importance.LOW, "Samsa: the table holding the consumed offsets (exactly-once).")
)


def cross_check(values: dict[str, Any]) -> list[tuple[str, str]]:
    """The rules between keys Confluent's sink enforces: (key, message) per violation."""
    out = []
    mode = str(values.get(INSERT_MODE) or "insert").lower()
    pk = str(values.get(PK_MODE) or "none").lower()
    if values.get(DELETE_ENABLED) and pk != "record_key":
        out.append((DELETE_ENABLED, "Primary key mode must be 'record_key' when delete support "
                                    "is enabled"))
    if mode in ("upsert", "update") and pk == "none":
        out.append((PK_MODE, f"insert.mode={mode} needs a primary key: pk.mode must not be none"))
    if pk == "none" and [f for f in values.get(PK_FIELDS) or [] if f]:
        out.append((PK_FIELDS, "pk.fields must be empty when pk.mode=none"))
    return out


@dataclass
class Settings:
    url: str
    user: str | None
    password: str | None
    attempts: int
    backoff_s: float
    insert_mode: str
    batch_size: int
    delete_enabled: bool
    table_format: str
    pk_mode: str
    pk_fields: list[str]
    whitelist: list[str]
    timezone: str
    auto_create: bool
    auto_evolve: bool
    quote: bool
    max_retries: int
    retry_backoff_ms: int
    offsets_table: str

    @classmethod
    def parse(cls, props: dict[str, str]) -> Settings:
        c = AbstractConfig(CONFIG_DEF, props)
        if not c.get(CONNECTION_URL):
            raise ConfigException(CONNECTION_URL, None, f'Missing required configuration '
                                                        f'"{CONNECTION_URL}" which has no default value.')
        bad = cross_check(c.values)
        if bad:
            raise ConfigException(bad[0][0], c.get(bad[0][0]), bad[0][1])
        password = c.get(CONNECTION_PASSWORD)
        return cls(str(c.get(CONNECTION_URL)), c.get(CONNECTION_USER) or None,
                   str(password) if password else None, int(c.get(CONNECTION_ATTEMPTS)),
                   int(c.get(CONNECTION_BACKOFF)) / 1000, str(c.get(INSERT_MODE)).lower(),
                   int(c.get(BATCH_SIZE)), bool(c.get(DELETE_ENABLED)),
                   str(c.get(TABLE_NAME_FORMAT)), str(c.get(PK_MODE)).lower(),
                   list(c.get(PK_FIELDS) or []), list(c.get(FIELDS_WHITELIST) or []),
                   str(c.get(DB_TIMEZONE)), bool(c.get(AUTO_CREATE)), bool(c.get(AUTO_EVOLVE)),
                   str(c.get(QUOTE_IDENTIFIERS)).lower() == "always", int(c.get(MAX_RETRIES)),
                   int(c.get(RETRY_BACKOFF)), str(c.get(OFFSETS_TABLE)))


class JdbcSinkConnector(ConfiguredConnector, SinkConnector):
    """Every task gets the connector's settings; the consumer group splits the partitions."""

    CONFIG_DEF = CONFIG_DEF

    def check(self, props: dict[str, str]) -> None:
        Settings.parse(props)

    def task_class(self) -> type[Task]:
        return JdbcSinkTask

    def validate(self, props: dict[str, str]) -> dict[str, ConfigValue]:
        values = CONFIG_DEF.validate(props)
        parsed = {k: v.value for k, v in values.items() if not v.errors}
        for key, message in cross_check(parsed):
            values[key].errors.append(message)
        return values

    def alter_offsets(self, props: dict[str, str], offsets: dict[TopicPartition, int | None]) -> bool:
        """KIP-875: the offsets that count are the database's (they win on the next assignment), so
        an operator's edit is written there, in the sink's offsets table."""
        s = Settings.parse(props)
        db = open_database(s.url, s.user, s.password, quote_identifiers=s.quote)
        try:
            OffsetTable(db, s.offsets_table).alter(
                props.get("name") or "", {(tp.topic, tp.partition): o for tp, o in offsets.items()})
        finally:
            db.close()
        return True


_Copy = tuple[str, tuple[str, ...], tuple[str, ...] | None]
_COPY_UPSERT_MIN = 50  # below this, a pipelined executemany is as fast as staging via COPY


@dataclass
class _Op:
    """One record's effect on its table: a row to write, or a key to delete."""

    record: SinkRecord
    tp: TopicPartition
    table: str
    layout: Layout
    delete: bool
    key: tuple[Any, ...]
    row: tuple[Any, ...]


class JdbcSinkTask(SinkTask):
    def __init__(self) -> None:
        self.settings: Settings | None = None
        self.db: Database | None = None
        self.offsets: OffsetTable | None = None
        self.connector = ""
        self.mapper: RowMapper | None = None
        self._db_next: dict[TopicPartition, int] = {}  # what the database holds, per partition
        self._assigned: set[TopicPartition] = set()
        self._reload = False  # after a retriable error: the database is the truth again
        self._loaded = False  # the offsets of the assigned partitions were read (and sought)
        self._retries = 0
        self._tables: dict[str, dict[str, str]] = {}  # table -> columns, as last read
        self._checked: set[tuple[str, tuple[str, ...]]] = set()

    # ---- life cycle ------------------------------------------------------------------------
    def start(self, props: dict[str, str]) -> None:
        s = self.settings = Settings.parse(props)
        self.connector = props.get("name") or ""
        if not self.connector:
            raise ConnectException("JDBC sink task started without the connector's name")
        self.mapper = RowMapper(s.pk_mode, s.pk_fields, s.whitelist, s.timezone, s.delete_enabled)
        last: Exception | None = None
        for attempt in range(s.attempts):
            try:
                self.db = open_database(s.url, s.user, s.password, quote_identifiers=s.quote)
                self.offsets = OffsetTable(self.db, s.offsets_table)
                return
            except RetriableException as e:
                last = e
                if self.db is not None:
                    self.db.close()
                    self.db = None
                log.warning("JDBC sink %s: connection attempt %d/%d failed: %s", self.connector,
                            attempt + 1, s.attempts, e)
                if attempt + 1 < s.attempts:
                    time.sleep(s.backoff_s)
        raise ConnectException(f"JDBC sink {self.connector}: could not connect after "
                               f"{s.attempts} attempts: {last}") from last

    def stop(self) -> None:
        db, self.db = self.db, None
        if db is not None:
            db.close()

    def open(self, partitions: list[TopicPartition]) -> None:
        self._assigned.update(partitions)
        try:
            self._load(partitions)
        except RetriableException as e:  # the database is down: load before the next write
            log.warning("JDBC sink %s: cannot read stored offsets yet: %s", self.connector, e)
            self._reload = True
            self._loaded = False

    def close(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self._assigned.discard(tp)
            self._db_next.pop(tp, None)

    def _load(self, partitions: list[TopicPartition] | set[TopicPartition],
              rewind: bool = True) -> None:
        """Read the offsets the database holds; on assignment, rewind the consumer to them.
        (After a retriable error only the in-memory copy is refreshed: records below it are
        dropped when they come.)"""
        assert self.offsets is not None
        stored = self.offsets.read(self.connector)
        seek: dict[TopicPartition, int] = {}
        for tp in partitions:
            off = stored.get((tp.topic, tp.partition))
            if off is not None:
                self._db_next[tp] = off
                seek[tp] = off
        self._loaded = True
        if seek and rewind:
            log.info("JDBC sink %s: resuming from the offsets in the database: %s", self.connector,
                     {f"{tp.topic}-{tp.partition}": o for tp, o in sorted(seek.items())})
            self.context.offset(seek)

    # ---- writing --------------------------------------------------------------------------
    def put(self, records: list[SinkRecord]) -> None:
        if not records:
            return
        s = self.settings
        assert s is not None
        try:
            if self._reload:
                self._load(self._assigned, rewind=not self._loaded)
                self._reload = False
            self._put(records)
            self._retries = 0
        except RetriableException as e:
            # Did the last commit land before the connection broke? Only the database knows.
            self._reload = True
            self._retries += 1
            if self._retries > s.max_retries:
                raise ConnectException(f"JDBC sink {self.connector}: giving up after "
                                       f"{s.max_retries} retries: {e}") from e
            log.warning("JDBC sink %s: retriable error (retry %d/%d in %d ms): %s", self.connector,
                        self._retries, s.max_retries, s.retry_backoff_ms, e)
            self.context.timeout(s.retry_backoff_ms)
            raise

    def _put(self, records: list[SinkRecord]) -> None:
        s = self.settings
        assert s is not None
        fresh = []
        for r in records:  # after a rewind the consumer may still hand back what is stored
            tp = _tp(r)
            if (r.original_kafka_offset or 0) >= self._db_next.get(tp, -1):
                fresh.append(r)
        size = s.batch_size if s.batch_size > 0 else len(fresh) or 1
        for i in range(0, len(fresh), size):
            self._write_chunk(fresh[i:i + size])

    def _write_chunk(self, records: list[SinkRecord]) -> None:
        """Plan the records, then write them; a chunk the database refuses is split until the
        refused records are found and reported (errant record reporter), when there is one."""
        ops: list[_Op] = []
        offsets: dict[TopicPartition, int] = {}
        for r in records:
            tp = _tp(r)
            offsets[tp] = max(offsets.get(tp, 0), (r.original_kafka_offset or 0) + 1)
            try:
                ops.append(self._plan(r, tp))
            except ConnectException as e:
                if isinstance(e, RetriableException):
                    raise
                self._report(r, e)
        self._write_or_split(ops, offsets)

    def _write_or_split(self, ops: list[_Op], offsets: dict[TopicPartition, int]) -> None:
        try:
            self._write(ops, offsets)
            return
        except RetriableException:
            raise
        except ConnectException as e:
            self._tables.clear()
            self._checked.clear()
            if self.context.errant_record_reporter() is None or not ops:
                raise
            if len(ops) == 1:
                self._report(ops[0].record, e)
                self._write([], offsets)
                return
        half = len(ops) // 2
        first, second = ops[:half], ops[half:]
        self._write_or_split(first, _offsets_of(first))
        self._write_or_split(second, offsets)  # the whole chunk's offsets once it is done

    def _report(self, record: SinkRecord, error: Exception) -> None:
        reporter = self.context.errant_record_reporter()
        if reporter is None:
            raise error if isinstance(error, ConnectException) else ConnectException(str(error))
        log.warning("JDBC sink %s: record %s-%s@%s not written: %s", self.connector,
                    record.topic, record.kafka_partition, record.kafka_offset, error)
        reporter.report(record, error)

    def _plan(self, record: SinkRecord, tp: TopicPartition) -> _Op:
        s, mapper = self.settings, self.mapper
        assert s is not None and mapper is not None
        layout = mapper.layout(record)
        table = s.table_format.replace("${topic}", record.topic)
        key = layout.key_of(record)
        if record.value is None:
            return _Op(record, tp, table, layout, True, key, ())
        return _Op(record, tp, table, layout, False, key, key + layout.values_of(record))

    def _write(self, ops: list[_Op], offsets: dict[TopicPartition, int]) -> None:
        """DDL first (auto.create / auto.evolve, own statements), then rows and offsets in one
        transaction."""
        db, offsets_table = self.db, self.offsets
        assert db is not None and offsets_table is not None
        live = [op for op in ops if self._ensure_table(op)]
        copy_rows = getattr(db, "copy_rows", None)  # PostgreSQL's COPY: the fastest insert
        copy_upsert = getattr(db, "copy_upsert", None)
        with db.transaction():
            for sql, rows, copy in self._statements(live):
                if copy is not None and copy[2] is None and copy_rows is not None:
                    copy_rows(copy[0], copy[1], rows)
                elif copy is not None and copy[2] is not None and copy_upsert is not None and \
                        len(rows) >= _COPY_UPSERT_MIN:
                    copy_upsert(copy[0], copy[1], copy[2], rows)
                else:
                    db.executemany(sql, rows)
            offsets_table.write(self.connector, {(tp.topic, tp.partition): o
                                                 for tp, o in offsets.items()})
        for tp, o in offsets.items():
            self._db_next[tp] = max(o, self._db_next.get(tp, 0))

    def _statements(self, ops: list[_Op]) -> Iterator[tuple[str, list[tuple[Any, ...]],
                                                           _Copy | None]]:
        """(sql, parameter rows, (table, columns, upsert keys or None) when a COPY may do the
        statement's work)."""
        s, db = self.settings, self.db
        assert s is not None and db is not None
        d = db.dialect
        if s.insert_mode in ("upsert", "update"):
            last: dict[tuple[str, tuple[Any, ...]], _Op] = {}
            for op in ops:  # the batch's final state per key: the databases refuse a key twice
                last.pop((op.table, op.key), None)
                last[(op.table, op.key)] = op
            groups: dict[tuple[str, bool, tuple[str, ...], tuple[str, ...]], list[_Op]] = {}
            for op in last.values():
                groups.setdefault((op.table, op.delete, op.layout.key_columns,
                                   op.layout.value_columns), []).append(op)
            for (table, delete, keys, values), group in groups.items():
                if delete:
                    yield d.delete(table, keys), [op.key for op in group], None
                elif s.insert_mode == "upsert":
                    yield (d.upsert(table, keys + values, keys), [op.row for op in group],
                           (table, keys + values, keys))
                elif values:
                    n = len(keys)
                    yield d.update(table, values, keys), [op.row[n:] + op.key for op in group], None
            return
        run: list[_Op] = []
        for op in ops:  # insert mode: keep the order, one statement per run of alike records
            if run and (op.table, op.delete, op.layout.names) != \
                    (run[0].table, run[0].delete, run[0].layout.names):
                yield self._insert_run(run)
                run = []
            run.append(op)
        if run:
            yield self._insert_run(run)

    def _insert_run(self, run: list[_Op]) -> tuple[str, list[tuple[Any, ...]],
                                                     _Copy | None]:
        assert self.db is not None
        d = self.db.dialect
        first = run[0]
        if first.delete:
            return d.delete(first.table, first.layout.key_columns), [op.key for op in run], None
        names = first.layout.names
        return d.insert(first.table, names), [op.row for op in run], (first.table, names, None)

    # ---- tables ---------------------------------------------------------------------------
    def _ensure_table(self, op: _Op) -> bool:
        """Make the table fit the op's layout (auto.create / auto.evolve); False when the op is
        a delete on a table that does not exist (nothing to delete)."""
        names = op.layout.names
        if (op.table, names) in self._checked:
            return True
        s, db = self.settings, self.db
        assert s is not None and db is not None
        cols = self._tables.get(op.table)
        if cols is None:
            cols = db.table_columns(op.table)
            if cols is None:
                if op.delete:
                    return False
                if not s.auto_create:
                    raise ConnectException(f"Table {op.table!r} is missing and auto-creation is "
                                           f"disabled (auto.create=false)")
                self._create(op)
                cols = db.table_columns(op.table) or {}
            self._tables[op.table] = cols
        missing = [c for c in op.layout.columns if c.name not in cols]
        if missing and op.delete:
            missing = [c for c in missing if c.key]
        if missing:
            if not s.auto_evolve:
                raise ConnectException(f"Table {op.table!r} is missing fields "
                                       f"{[c.name for c in missing]} and auto-evolution is disabled "
                                       f"(auto.evolve=false)")
            self._evolve(op, missing)
            self._tables[op.table] = db.table_columns(op.table) or {}
        self._checked.add((op.table, names))
        return True

    def _column(self, c: Any) -> Column:
        assert self.db is not None
        d = self.db.dialect
        default = c.schema.default
        literal = d.literal(default) if isinstance(default, bool | int | float | str) else None
        return Column(c.name, d.sql_type(c.schema), nullable=not c.key and c.schema.optional,
                      default=literal)

    def _create(self, op: _Op) -> None:
        assert self.db is not None
        columns = [self._column(c) for c in op.layout.columns]
        sql = self.db.dialect.create_table(op.table, columns, op.layout.key_columns)
        log.info("JDBC sink %s: creating table %s: %s", self.connector, op.table, sql)
        try:
            self.db.execute(sql)
        except RetriableException:
            raise
        except ConnectException:  # another task may have created it meanwhile
            if self.db.table_columns(op.table) is None:
                raise

    def _evolve(self, op: _Op, missing: list[Any]) -> None:
        assert self.db is not None
        for c in missing:
            if c.key or (not c.schema.optional and c.schema.default is None):
                raise ConnectException(f"Cannot ALTER TABLE {op.table!r} to add missing field "
                                       f"{c.name!r}, as the field is not optional and does not "
                                       f"have a default value")
            sql = self.db.dialect.add_column(op.table, self._column(c))
            log.info("JDBC sink %s: evolving table %s: %s", self.connector, op.table, sql)
            try:
                self.db.execute(sql)
            except RetriableException:
                raise
            except ConnectException:
                now = self.db.table_columns(op.table) or {}
                if c.name not in now:
                    raise

    # ---- committing -----------------------------------------------------------------------
    def pre_commit(self, current_offsets: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        """The offsets the database holds. Partitions whose position moved past them without a
        row (records skipped by converters, transforms or the DLQ) get the new position stored."""
        ahead = {tp: o for tp, o in current_offsets.items()
                 if tp in self._assigned and o > self._db_next.get(tp, -1)}
        if ahead and not self._reload and self.db is not None and self.offsets is not None:
            try:
                with self.db.transaction():
                    self.offsets.write(self.connector, {(tp.topic, tp.partition): o
                                                        for tp, o in ahead.items()})
                self._db_next.update(ahead)
            except ConnectException as e:
                self._reload = True
                log.warning("JDBC sink %s: could not store offsets: %s", self.connector, e)
        return {tp: self._db_next[tp] for tp in current_offsets if tp in self._db_next}


def _tp(record: SinkRecord) -> TopicPartition:
    return TopicPartition(record.original_topic or record.topic,
                          record.original_kafka_partition or 0)


def _offsets_of(ops: list[_Op]) -> dict[TopicPartition, int]:
    out: dict[TopicPartition, int] = {}
    for op in ops:
        out[op.tp] = max(out.get(op.tp, 0), (op.record.original_kafka_offset or 0) + 1)
    return out
