"""The sink task: routes records to tables (static list, route-field regexes, or dynamic table
names), buffers them per table, and commits every `iceberg.control.commit.interval-ms` — one
snapshot per table carrying the Kafka offsets. On open() it reads those offsets back and rewinds
the consumer; pre_commit returns only offsets whose records are committed, so the group's offsets
never run ahead of the tables and a crash at any point neither loses nor duplicates rows."""

from __future__ import annotations

import logging
import re
import time

from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.exceptions import NoSuchTableError, TableAlreadyExistsError
from pyiceberg.table import Table

from ...api import SinkTask, TopicPartition
from ...data import SinkRecord, Type
from ...errors import ConnectException, DataException, RetriableException
from . import schema as conv
from .config import IcebergSinkConfig, parse
from .writer import Fenced, TableWriter

log = logging.getLogger("samsa.connect.iceberg")

TASK_ID = "iceberg.samsa.task-id"
MISSING_RECHECK_S = 10.0


def _tp(record: SinkRecord) -> TopicPartition:
    return TopicPartition(record.original_topic or record.topic,
                          record.original_kafka_partition or 0)


def _offset(record: SinkRecord) -> int:
    return record.original_kafka_offset if record.original_kafka_offset is not None \
        else record.kafka_offset


def identifier(name: str) -> tuple[str, ...]:
    """`ns.table` (or `a.b.table`); a bare name lives in the `default` namespace."""
    parts = tuple(p for p in name.split(".") if p)
    return parts if len(parts) > 1 else ("default", *parts)


class IcebergSinkTask(SinkTask):
    def __init__(self) -> None:
        self.cfg: IcebergSinkConfig | None = None
        self.catalog: Catalog | None = None
        self.group = ""
        self.task_id = "0"
        self.writers: dict[str, TableWriter] = {}
        self._missing: dict[str, float] = {}
        self._regexes: list[tuple[str, re.Pattern[str]]] = []
        self._route_path: list[str] = []
        self._seen: dict[TopicPartition, int] = {}  # next offset expected per partition
        self._start: dict[TopicPartition, int] = {}  # where uncommitted data begins
        self._durable: dict[TopicPartition, int] = {}  # offsets safe for the group
        self._last_commit = time.monotonic()
        self._force = False

    # ---- life cycle ----------------------------------------------------------------------------
    def start(self, props: dict[str, str]) -> None:
        cfg = self.cfg = parse(props)
        self.group = props.get("consumer.override.group.id") or f"connect-{props.get('name', '')}"
        self.task_id = f"{props.get('name', '')}-{props.get(TASK_ID, '0')}"
        self._route_path = cfg.route_field.split(".") if cfg.route_field else []
        self._regexes = [(t, re.compile(tc.route_regex)) for t in cfg.tables
                         if (tc := cfg.table(t)).route_regex is not None]
        for attempt in range(5):
            try:  # SqlCatalog creates its tables on first use: racing tasks may collide once
                self.catalog = load_catalog(cfg.catalog_name, **cfg.catalog_props)
                break
            except Exception as e:
                if attempt == 4:
                    raise ConnectException(f"cannot load Iceberg catalog {cfg.catalog_name!r} "
                                           f"({cfg.catalog_props.get('type', '?')}): {e}") from e
                time.sleep(0.2 * (attempt + 1))
        self._last_commit = time.monotonic()
        if not cfg.dynamic:
            for name in cfg.tables:
                self._writer(name, None)

    def stop(self) -> None:
        for w in self.writers.values():
            w.discard()
        self.writers.clear()
        engine = getattr(self.catalog, "engine", None)
        if engine is not None:
            engine.dispose()

    def open(self, partitions: list[TopicPartition]) -> None:
        """Read the tables' offsets and rewind the new partitions to where the tables end (the
        lowest, when tables differ: each table skips what it already has)."""
        for w in list(self.writers.values()):
            w.refresh()
        rewind: dict[TopicPartition, int] = {}
        for tp in partitions:
            self._start.pop(tp, None)
            self._seen.pop(tp, None)
            self._durable.pop(tp, None)
            known = [w.offsets.get(tp) for w in self.writers.values()]
            if known and all(o is not None for o in known):
                rewind[tp] = min(o for o in known if o is not None)
        if rewind:
            log.info("%s: resuming from the tables' offsets %s", self.task_id, rewind)
            self.context.offset(rewind)
            self._start.update(rewind)
            self._seen.update(rewind)

    def close(self, partitions: list[TopicPartition]) -> None:
        """Revoked partitions: drop everything uncommitted (the next owner starts from the
        tables' offsets) and rewind the partitions this task keeps to where it committed."""
        closed = set(partitions)
        if any(w.has_data() for w in self.writers.values()):
            self._discard(exclude=closed)
        for tp in closed:
            self._start.pop(tp, None)
            self._seen.pop(tp, None)
            self._durable.pop(tp, None)

    def _discard(self, exclude: set[TopicPartition] = frozenset()) -> None:  # type: ignore[assignment]
        for w in self.writers.values():
            w.discard()
        rewind = {tp: off for tp, off in self._start.items() if tp not in exclude}
        for tp, off in rewind.items():
            self._seen[tp] = off
        for tp in list(self._seen):
            if tp not in rewind and tp not in exclude:
                self._seen.pop(tp)  # nothing known to rewind to: nothing was buffered
        if rewind:
            self.context.offset(rewind)

    # ---- routing -------------------------------------------------------------------------------
    def _routes(self, record: SinkRecord) -> list[str]:
        cfg = self.cfg
        assert cfg is not None
        if not self._route_path:
            return cfg.tables
        value = conv.route_value(record.value, self._route_path)
        if value is None:
            return []
        text = str(value)
        if cfg.dynamic:
            return [text.lower()]
        return [t for t, rx in self._regexes if rx.fullmatch(text)]

    def _writer(self, name: str, sample: list[SinkRecord] | None) -> TableWriter | None:
        w = self.writers.get(name)
        if w is not None:
            return w
        cfg, catalog = self.cfg, self.catalog
        assert cfg is not None and catalog is not None
        missing_since = self._missing.get(name)
        if missing_since is not None and time.monotonic() - missing_since < MISSING_RECHECK_S:
            return None
        ident = identifier(name)
        try:
            table = catalog.load_table(ident)
        except NoSuchTableError:
            if not sample:
                return None  # created (or reported) when the first record arrives
            if not cfg.auto_create:
                if not cfg.dynamic:
                    raise ConnectException(
                        f"Iceberg table {name} does not exist and "
                        f"iceberg.tables.auto-create-enabled is false") from None
                self._missing[name] = time.monotonic()  # dynamic: skip its records a while
                return None
            table = self._create(name, ident, sample)
        except Exception as e:
            raise RetriableException(f"cannot load Iceberg table {name}: {e}") from e
        self._missing.pop(name, None)
        reporter = self.context.errant_record_reporter()
        w = TableWriter(catalog, name, table, group=self.group, task_id=self.task_id,
                        evolve=cfg.evolve, force_optional=cfg.force_optional,
                        file_rows=cfg.file_rows, commit_timeout_s=cfg.commit_timeout_ms / 1000,
                        report=reporter.report if reporter is not None else None)
        self.writers[name] = w
        return w

    def _create(self, name: str, ident: tuple[str, ...], sample: list[SinkRecord]) -> Table:
        cfg, catalog = self.cfg, self.catalog
        assert cfg is not None and catalog is not None
        first = sample[0]
        if first.value_schema is not None and first.value_schema.type is Type.STRUCT:
            schema = conv.iceberg_schema(first.value_schema, cfg.force_optional)
        else:
            schema = conv.infer_schema([r.value for r in sample[:100] if isinstance(r.value, dict)])
        if not schema.fields:
            raise DataException(f"cannot create Iceberg table {name}: no columns in the record")
        try:
            spec = conv.partition_spec(schema, cfg.table(name).partition_by)
        except (ValueError, DataException) as e:
            raise ConnectException(f"bad partition-by for Iceberg table {name}: {e}") from e
        try:
            catalog.create_namespace_if_not_exists(ident[:-1])
            table = catalog.create_table(ident, schema, partition_spec=spec,
                                         properties=dict(cfg.auto_create_props))
            log.info("created Iceberg table %s: %s %s", name, table.schema(), table.spec())
            return table
        except TableAlreadyExistsError:
            return catalog.load_table(ident)
        except Exception as e:
            raise RetriableException(f"cannot create Iceberg table {name}: {e}") from e

    # ---- put / commit --------------------------------------------------------------------------
    def put(self, records: list[SinkRecord]) -> None:
        cfg = self.cfg
        assert cfg is not None
        seen = dict(self._seen)
        routed: dict[str, list[SinkRecord]] = {}
        for r in records:
            tp, off = _tp(r), _offset(r)
            expected = seen.get(tp)
            if expected is not None and off < expected:
                continue  # already buffered (redelivered after a seek)
            seen[tp] = off + 1
            self._start.setdefault(tp, off)
            if r.value is None:
                continue  # tombstones carry no row (append-only sink)
            for name in self._routes(r):
                routed.setdefault(name, []).append(r)
        marks: dict[str, int] = {}
        try:
            for name, recs in routed.items():
                w = self._writer(name, recs)
                if w is None:
                    continue
                todo = [r for r in recs if not w.skip(r)]
                if todo:
                    marks[name] = w.mark()
                    w.add(todo)
        except Exception:
            for name, mark in marks.items():
                self.writers[name].rollback(mark)
            raise
        self._seen = seen
        for w in self.writers.values():
            try:
                w.maybe_write_files()
            except RetriableException as e:
                log.warning("%s: %s (retried at commit)", self.task_id, e)
        if self._due():
            self.context.request_commit()

    def _due(self) -> bool:
        assert self.cfg is not None
        return self._force or \
            (time.monotonic() - self._last_commit) * 1000 >= self.cfg.commit_interval_ms

    def flush(self, current_offsets: dict[TopicPartition, int]) -> None:
        self._force = True
        self.pre_commit(current_offsets)

    def pre_commit(self, current_offsets: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        pending = [w for w in self.writers.values() if w.has_data()]
        if not pending:  # everything put so far is committed, skipped or reported
            self._durable.update(current_offsets)
            self._start.update(current_offsets)
            return dict(current_offsets)
        if not self._due():
            return {tp: off for tp, off in self._durable.items() if tp in current_offsets}
        positions = dict(self._seen)
        for tp, off in current_offsets.items():
            positions[tp] = max(off, positions.get(tp, off))
        assigned = self.context.assignment()
        positions = {tp: off for tp, off in positions.items() if tp in assigned}
        try:
            for w in pending:
                table_positions = {tp: max(off, w.offsets.get(tp, off))
                                   for tp, off in positions.items()}
                w.commit(table_positions)
        except Fenced as e:
            log.warning("%s: %s; dropping uncommitted data and rewinding", self.task_id, e)
            for w in self.writers.values():
                w.refresh()
            self._discard()
            return {tp: off for tp, off in self._durable.items() if tp in current_offsets}
        self._settled(positions)
        log.debug("%s: committed %d table(s) at %s", self.task_id, len(pending), positions)
        return {tp: off for tp, off in self._durable.items() if tp in current_offsets}

    def _settled(self, positions: dict[TopicPartition, int]) -> None:
        self._durable.update(positions)
        self._start.update(positions)
        self._last_commit = time.monotonic()
        self._force = False


