"""com.snowflake.kafka.connector.SnowflakeSinkConnector, shaped after Snowflake's Kafka connector
but writing to a local warehouse (a DuckDB file, or PostgreSQL): one table per topic with
Snowflake's two columns, RECORD_METADATA and RECORD_CONTENT (JSON), configured with Snowflake's
names (snowflake.*, buffer.*).

Exactly-once like Snowpipe Streaming's offset tokens: records are buffered per partition and a
flush (when buffer.count.records, buffer.size.bytes or buffer.flush.time is reached) writes every
buffered row and every partition's next offset in one transaction. On open() the task reads the
stored offsets and rewinds the consumer there; records below them are skipped; pre_commit hands
the runtime only offsets the warehouse already holds."""

from __future__ import annotations

import logging
import time
from typing import Any

from ..api import SinkConnector, SinkTask, Task, TopicPartition
from ..config_def import ConfigValue
from ..data import SinkRecord
from ..errors import ConnectException, DataException, RetriableException
from ._util import ConfiguredConnector
from .snowflake.config import CONFIG_DEF, SnowflakeSettings, parse_settings, problems
from .snowflake.naming import table_name
from .snowflake.records import record_row
from .snowflake.warehouse import Fenced, Warehouse

log = logging.getLogger("samsa.connect.snowflake")

REGISTRY_CONVERTERS = frozenset({
    "io.confluent.connect.avro.AvroConverter",
    "io.confluent.connect.protobuf.ProtobufConverter",
    "io.confluent.connect.json.JsonSchemaConverter",
    "com.snowflake.kafka.connector.records.SnowflakeAvroConverter",
})
RETRY_BACKOFF_MS = 1000


class SnowflakeSinkConnector(ConfiguredConnector, SinkConnector):
    """Validates the settings; `tasks.max` identical tasks share the partitions (consumer group)."""

    CONFIG_DEF = CONFIG_DEF

    def check(self, props: dict[str, str]) -> None:
        parse_settings(props)  # a ConfigException fails the connector with the reason

    def task_class(self) -> type[Task]:
        return SnowflakeSinkTask

    def alter_offsets(self, props: dict[str, str], offsets: dict[TopicPartition, int | None]) -> bool:
        """KIP-875: the warehouse's offsets win on the next assignment, so an operator's edit is
        written there (like resetting a Snowpipe Streaming channel's offset token)."""
        warehouse = Warehouse(parse_settings(props))
        try:
            warehouse.alter_offsets(props.get("name") or "",
                                    {(tp.topic, tp.partition): o for tp, o in offsets.items()})
        finally:
            warehouse.close()
        return True

    def validate(self, props: dict[str, str]) -> dict[str, ConfigValue]:
        values = CONFIG_DEF.validate(props)
        for key, why in problems(props).items():
            cv = values.setdefault(key, ConfigValue(key, props.get(key)))
            if why not in cv.errors and not any(why in e or e in why for e in cv.errors):
                cv.errors.append(why)
        return values


class _Buffer:
    """One partition's rows waiting for a flush: (table, metadata JSON, content JSON)."""

    __slots__ = ("rows", "bytes")

    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str]] = []
        self.bytes = 0

    def add(self, table: str, metadata: str, content: str) -> None:
        self.rows.append((table, metadata, content))
        self.bytes += len(metadata) + len(content)


class SnowflakeSinkTask(SinkTask):
    def __init__(self) -> None:
        self.settings: SnowflakeSettings | None = None
        self.warehouse: Warehouse | None = None
        self.connector = "snowflake-sink"
        self.buffers: dict[TopicPartition, _Buffer] = {}
        self.committed: dict[TopicPartition, int] = {}  # next offset the warehouse holds
        self.expected: dict[TopicPartition, int] = {}  # next offset to accept from put
        self.need_offsets: set[TopicPartition] = set()
        self.tables: dict[str, str] = {}  # topic -> schema.table
        self.last_flush = time.monotonic()
        self._value_ids = False
        self._key_ids = False
        self._pg = False

    # ---- life cycle ---------------------------------------------------------------------------
    def start(self, props: dict[str, str]) -> None:
        s = self.settings = parse_settings(props)
        self.connector = props.get("name") or self.connector
        self.warehouse = Warehouse(s)
        self._value_ids = s.value_converter in REGISTRY_CONVERTERS
        self._key_ids = s.key_converter in REGISTRY_CONVERTERS
        self._pg = not s.is_duckdb
        try:
            self.warehouse.check()  # wrong credentials / missing database: the task FAILS here
        except RetriableException as e:
            log.warning("%s: warehouse not reachable yet, retrying on first write: %s",
                        self.connector, e)
        self.last_flush = time.monotonic()

    def stop(self) -> None:
        self.buffers.clear()
        if self.warehouse is not None:
            self.warehouse.close()

    def open(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self.buffers.pop(tp, None)
            self.committed.pop(tp, None)
            self.expected.pop(tp, None)
            self.need_offsets.add(tp)
        try:
            self._load_offsets()
        except RetriableException as e:
            log.warning("%s: cannot read stored offsets yet (retried on put): %s", self.connector, e)

    def close(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self.buffers.pop(tp, None)
            self.committed.pop(tp, None)
            self.expected.pop(tp, None)
            self.need_offsets.discard(tp)

    def _load_offsets(self) -> None:
        """Stored offsets of newly assigned partitions: skip below them, rewind to them."""
        if not self.need_offsets:
            return
        assert self.warehouse is not None
        stored = self.warehouse.read_offsets(self.connector)
        rewind: dict[TopicPartition, int] = {}
        for tp in self.need_offsets:
            off = stored.get((tp.topic, tp.partition))
            if off is not None:
                self.committed[tp] = self.expected[tp] = rewind[tp] = off
        self.need_offsets.clear()
        if rewind:
            log.info("%s: resuming from the warehouse's offsets %s", self.connector,
                     {f"{tp.topic}-{tp.partition}": o for tp, o in sorted(rewind.items())})
            self.context.offset(rewind)

    # ---- records -----------------------------------------------------------------------------
    def put(self, records: list[SinkRecord]) -> None:
        s = self.settings
        assert s is not None
        try:
            self._load_offsets()
        except RetriableException:
            self.context.timeout(RETRY_BACKOFF_MS)
            raise
        reporter = None
        for r in records:
            tp = TopicPartition(r.original_topic or r.topic, int(r.original_kafka_partition or 0))
            off = int(r.original_kafka_offset if r.original_kafka_offset is not None
                      else r.kafka_offset)
            exp = self.expected.get(tp)
            if exp is not None and off < exp:
                # In the warehouse or in the buffer already: the consumer started below the stored
                # offset (the group's offsets trail the warehouse's: pre_commit never returns more)
                # or the runtime redelivers a batch after a RetriableException.
                continue
            self.expected[tp] = off + 1
            if r.value is None and s.ignore_nulls:
                continue
            try:
                value_id, key_id = self._schema_ids(r)
                parts = record_row(r, s.flags, value_schema_id=value_id, key_schema_id=key_id)
                if self._pg and ("\\u0000" in parts.content or "\\u0000" in parts.metadata):
                    raise DataException("PostgreSQL jsonb cannot hold the NUL character (\\u0000) "
                                        "this record has")
            except DataException as e:
                reporter = reporter or self.context.errant_record_reporter()
                if reporter is None:
                    raise
                reporter.report(r, e)
                continue
            buf = self.buffers.get(tp)
            if buf is None:
                buf = self.buffers[tp] = _Buffer()
            buf.add(self._table(r.topic), parts.metadata, parts.content)
        if self._due():
            self._flush_or_retry()

    def _schema_ids(self, r: SinkRecord) -> tuple[int | None, int | None]:
        """schema_id / key_schema_id: the registry id in the record's Confluent wire-format bytes
        (what Snowflake's metadata carries when a registry converter is used)."""
        if not (self._value_ids or self._key_ids):
            return None, None
        raw = getattr(self.context, "raw", None)
        consumed = raw.get((r.original_topic, r.original_kafka_partition,
                            r.original_kafka_offset)) if isinstance(raw, dict) else None
        if consumed is None:
            return None, None
        return (_wire_id(consumed.value) if self._value_ids else None,
                _wire_id(consumed.key) if self._key_ids else None)

    def _table(self, topic: str) -> str:
        table = self.tables.get(topic)
        if table is None:
            assert self.settings is not None and self.warehouse is not None
            table = self.warehouse.qualified(table_name(topic, self.settings.topic2table))
            self.tables[topic] = table
        return table

    # ---- flushing ----------------------------------------------------------------------------
    def _due(self) -> bool:
        s = self.settings
        assert s is not None
        for buf in self.buffers.values():
            if len(buf.rows) >= s.buffer_count or buf.bytes >= s.buffer_bytes:
                return True
        return self._time_due()

    def _time_due(self) -> bool:
        assert self.settings is not None
        return time.monotonic() - self.last_flush >= self.settings.buffer_flush_s

    def _flush_or_retry(self) -> None:
        try:
            self.flush_buffers()
        except RetriableException:
            # The batch stays buffered (its offsets are below `expected`, so the runtime's retry
            # of this put adds nothing) and the next put flushes again.
            self.context.timeout(RETRY_BACKOFF_MS)
            raise

    def flush_buffers(self) -> None:
        """Write every buffered row and every partition's next offset in one transaction."""
        assert self.warehouse is not None
        offsets = {(tp.topic, tp.partition): exp for tp, exp in self.expected.items()
                   if self.committed.get(tp) != exp}
        if not offsets:
            self.last_flush = time.monotonic()
            return
        rows: dict[str, list[tuple[str, str]]] = {}
        for buf in self.buffers.values():
            for table, meta, content in buf.rows:
                rows.setdefault(table, []).append((meta, content))
        believed = {(tp.topic, tp.partition): self.committed.get(tp) for tp in self.expected}
        started = time.monotonic()
        try:
            self.warehouse.write(self.connector, rows, offsets, believed)
        except Fenced as e:
            self._fenced(e.stored)
            return
        for (topic, partition), off in offsets.items():
            self.committed[TopicPartition(topic, partition)] = off
        count = sum(len(r) for r in rows.values())
        self.buffers.clear()
        self.last_flush = time.monotonic()
        log.debug("%s: flushed %d rows (%d partitions) in %.3f s", self.connector, count,
                  len(offsets), self.last_flush - started)

    def _fenced(self, stored: dict[tuple[str, int], int | None]) -> None:
        """Another writer owns these partitions now: drop ours and restart from its offsets."""
        log.warning("%s: partitions written by another task meanwhile, rewinding: %s",
                    self.connector, stored)
        rewind: dict[TopicPartition, int] = {}
        for (topic, partition), off in stored.items():
            tp = TopicPartition(topic, partition)
            self.buffers.pop(tp, None)
            if off is None:
                self.committed.pop(tp, None)
                self.expected.pop(tp, None)
                self.need_offsets.add(tp)
            else:
                self.committed[tp] = self.expected[tp] = rewind[tp] = off
        if rewind:
            self.context.offset(rewind)

    def flush(self, current_offsets: dict[TopicPartition, int]) -> None:
        """Kafka's explicit flush: write the buffers now."""
        self.flush_buffers()

    def pre_commit(self, current_offsets: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        """The offsets the warehouse holds (never more); the buffer is written first when
        buffer.flush.time has passed (the runtime calls this every offset.flush.interval.ms)."""
        if self._time_due():
            try:
                self.flush_buffers()
            except ConnectException as e:
                log.warning("%s: timed flush failed (retried): %s", self.connector, e)
        return {tp: off for tp, off in self.committed.items() if tp in current_offsets}


def _wire_id(data: Any) -> int | None:
    """The schema id of Confluent's wire format (magic 0, 4-byte big-endian id)."""
    if isinstance(data, bytes | bytearray) and len(data) >= 5 and data[0] == 0:
        return int.from_bytes(data[1:5], "big")
    return None
