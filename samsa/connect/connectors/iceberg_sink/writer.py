"""One destination table of a sink task: records become Arrow chunks (schema evolved first when
allowed), chunks become Parquet data files once enough rows are buffered, and `commit` appends
all of them in one snapshot whose summary records the Kafka offsets — after checking that no
other writer moved this task's partitions since it last looked (a fenced zombie never commits)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import CommitFailedException, ResolveError, ValidationError
from pyiceberg.io.pyarrow import _dataframe_to_data_files
from pyiceberg.manifest import DataFile
from pyiceberg.schema import Schema as IcebergSchema
from pyiceberg.table import Table
from pyiceberg.types import ListType, NestedField, StructType

from ...api import TopicPartition
from ...data import Schema, SinkRecord, Type
from ...errors import ConnectException, DataException, RetriableException
from . import schema as conv
from .offsets import Offsets, summary_properties, table_offsets

log = logging.getLogger("samsa.connect.iceberg")

Report = Callable[[SinkRecord, Exception], object]  # ErrantRecordReporter.report (a Future)


class Fenced(ConnectException):
    """Another writer recorded offsets for one of this task's partitions: this task's view is
    stale (it is a zombie, or the partition moved), so its buffered data must not be committed."""


def relax_new_fields(new: StructType, existing: StructType | None) -> StructType:
    """`new` with every field absent from `existing` made optional, recursively: Iceberg only
    adds optional columns (old data files have no value for them)."""
    out = []
    for f in new.fields:
        old = existing.field_by_name(f.name) if existing is not None else None
        ftype = f.field_type
        if isinstance(ftype, StructType):
            ftype = relax_new_fields(ftype, old.field_type if old is not None and
                                     isinstance(old.field_type, StructType) else None)
        elif isinstance(ftype, ListType) and isinstance(ftype.element_type, StructType):
            prev = old.field_type.element_type if old is not None and \
                isinstance(old.field_type, ListType) else None
            ftype = ListType(ftype.element_id, relax_new_fields(
                ftype.element_type, prev if isinstance(prev, StructType) else None),
                element_required=ftype.element_required)
        out.append(NestedField(f.field_id, f.name, ftype,
                               required=f.required and old is not None))
    return StructType(*out)


class TableWriter:
    def __init__(self, catalog: Catalog, name: str, table: Table, *, group: str, task_id: str,
                 evolve: bool, force_optional: bool, file_rows: int, commit_timeout_s: float,
                 report: Report | None) -> None:
        self.catalog = catalog
        self.name = name
        self.table = table
        self.group = group
        self.task_id = task_id
        self.evolve = evolve
        self.force_optional = force_optional
        self.file_rows = file_rows
        self.commit_timeout_s = commit_timeout_s
        self.report = report
        self.offsets: Offsets = table_offsets(table.metadata, group)
        self.chunks: list[pa.Table] = []
        self.chunk_rows = 0
        self.files: list[DataFile] = []
        self._arrow: pa.Schema = table.schema().as_arrow()
        self._schema_id = table.schema().schema_id
        self._fits: dict[Schema, int] = {}  # Connect schema -> table schema id it was checked on
        self._converters: dict[Schema, conv.Converter] = {}

    # ---- state ---------------------------------------------------------------------------------
    def has_data(self) -> bool:
        return bool(self.chunks or self.files)

    def discard(self) -> None:
        self.chunks, self.chunk_rows, self.files = [], 0, []

    def mark(self) -> int:
        return len(self.chunks)

    def rollback(self, mark: int) -> None:
        del self.chunks[mark:]
        self.chunk_rows = sum(c.num_rows for c in self.chunks)

    def refresh(self) -> None:
        """Re-read the table (schema, offsets), e.g. after a rebalance."""
        try:
            self.table = self.catalog.load_table(self.table.name())
        except Exception as e:
            raise RetriableException(f"cannot load Iceberg table {self.name}: {e}") from e
        self.offsets = table_offsets(self.table.metadata, self.group)
        self._schema_changed()

    def _schema_changed(self) -> None:
        if self.table.schema().schema_id != self._schema_id:
            self.write_files()  # chunks were built against the old schema
            self._schema_id = self.table.schema().schema_id
            self._arrow = self.table.schema().as_arrow()

    def skip(self, record: SinkRecord) -> bool:
        """The table already has this record (its offset is below the table's for the partition)."""
        tp = TopicPartition(record.original_topic or record.topic,
                            record.original_kafka_partition or 0)
        done = self.offsets.get(tp)
        return done is not None and (record.original_kafka_offset or 0) < done

    # ---- adding records ------------------------------------------------------------------------
    def add(self, records: list[SinkRecord]) -> None:
        """Buffer records (all routed here, none skipped), in runs of one value schema."""
        run: list[SinkRecord] = []
        run_schema: Schema | None = None
        for r in records:
            if run and r.value_schema is not run_schema and r.value_schema != run_schema:
                self._add_run(run_schema, run)
                run = []
            run_schema = r.value_schema
            run.append(r)
        if run:
            self._add_run(run_schema, run)

    def _add_run(self, schema: Schema | None, records: list[SinkRecord]) -> None:
        if schema is None:
            values = [r.value for r in records]
            if not all(isinstance(v, dict) for v in values):
                self._bad(records, DataException("schemaless values must be maps to be written "
                                                 "to an Iceberg table"))
                return
            if self.evolve:  # only new columns: a value of another type is that row's problem
                existing = self.table.schema().as_struct()
                new = [f for f in conv.infer_schema(values).fields
                       if existing.field_by_name(f.name) is None]
                if new:
                    self._evolve(IcebergSchema(*new), records, report=False)
            self._append(values, records)
            return
        if self._fits.get(schema) != self.table.schema().schema_id:
            if self.evolve:
                try:
                    wanted = conv.iceberg_schema(schema, self.force_optional)
                except DataException as e:
                    self._bad(records, e)
                    return
                if not self._evolve(wanted, records):
                    return
            self._fits[schema] = self.table.schema().schema_id
        convert = self._converters.get(schema)
        if convert is None:
            convert = self._converters[schema] = conv.struct_converter(schema) \
                if schema.type is Type.STRUCT else (lambda v: v)
        self._append([convert(r.value) for r in records], records)

    def _evolve(self, wanted: IcebergSchema, records: list[SinkRecord], report: bool = True) -> bool:
        """Add missing columns / widen types; False (records reported) if the table cannot take
        them (an incompatible type change)."""
        current = self.table.schema()
        relaxed = relax_new_fields(wanted.as_struct(), current.as_struct())
        for _ in range(5):
            update = self.table.update_schema()
            try:
                update.union_by_name(IcebergSchema(*relaxed.fields))
                if update._apply() == current:
                    return True
                self.write_files()  # files of the old schema first
                update.commit()
            except CommitFailedException:
                self.refresh()
                current = self.table.schema()
                continue
            except (ValidationError, ResolveError, ValueError, TypeError) as e:  # refused change
                if not report:
                    log.warning("cannot evolve %s: %s", self.name, e)
                    return False
                self._bad(records, DataException(
                    f"record schema does not fit Iceberg table {self.name}: {e}"))
                return False
            except Exception as e:
                raise RetriableException(f"evolving {self.name}'s schema failed: {e}") from e
            log.info("evolved schema of %s to %s", self.name, self.table.schema())
            self._schema_changed()
            return True
        raise RetriableException(f"evolving {self.name}'s schema kept conflicting")

    def _append(self, rows: list[Any], records: list[SinkRecord]) -> None:
        try:
            chunk = self._to_arrow(rows)
        except (pa.ArrowException, TypeError, ValueError, OverflowError, DataException):
            chunk = self._to_arrow_one_by_one(rows, records)
        if chunk is not None and chunk.num_rows:
            self.chunks.append(chunk)
            self.chunk_rows += chunk.num_rows

    def _to_arrow(self, rows: list[Any]) -> pa.Table:
        chunk = pa.Table.from_pylist(rows, schema=self._arrow)
        for i, f in enumerate(self._arrow):
            if not f.nullable and chunk.column(i).null_count:
                raise DataException(f"required column {f.name} of {self.name} got null")
        return chunk

    def _to_arrow_one_by_one(self, rows: list[Any], records: list[SinkRecord]) -> pa.Table | None:
        """The slow path after a batch failed: find the rows that do not fit, report them."""
        good = []
        for row, record in zip(rows, records, strict=True):
            try:
                self._to_arrow([row])
                good.append(row)
            except (pa.ArrowException, TypeError, ValueError, OverflowError, DataException) as e:
                self._bad([record], DataException(
                    f"record does not fit Iceberg table {self.name}: {e}"))
        return self._to_arrow(good) if good else None

    def _bad(self, records: list[SinkRecord], error: DataException) -> None:
        if self.report is None:
            raise error
        for r in records:
            self.report(r, error)

    # ---- files and commits ---------------------------------------------------------------------
    def maybe_write_files(self) -> None:
        if self.chunk_rows >= self.file_rows:
            self.write_files()

    def write_files(self) -> None:
        if not self.chunks:
            return
        df = pa.concat_tables(self.chunks) if len(self.chunks) > 1 else self.chunks[0]
        try:
            files = list(_dataframe_to_data_files(table_metadata=self.table.metadata, df=df,
                                                  io=self.table.io))
        except Exception as e:
            raise RetriableException(f"writing data files of {self.name} failed: {e}") from e
        self.files.extend(files)
        self.chunks, self.chunk_rows = [], 0

    def commit(self, positions: Offsets) -> bool:
        """Append everything buffered in one snapshot recording `positions` (this task's
        partitions; the other partitions' offsets are carried over). False if nothing to do."""
        self.write_files()
        if not self.files:
            return False
        deadline = time.monotonic() + self.commit_timeout_s
        delay = 0.05
        while True:
            try:
                self.table = self.catalog.load_table(self.table.name())
            except Exception as e:
                raise RetriableException(f"cannot load Iceberg table {self.name}: {e}") from e
            current = table_offsets(self.table.metadata, self.group, set(positions))
            moved = {tp: (self.offsets.get(tp), current.get(tp)) for tp in positions
                     if current.get(tp) != self.offsets.get(tp)}
            if moved:
                raise Fenced(f"offsets of {self.name} changed under this task "
                             f"(expected, found): {moved}")
            props = summary_properties(positions, self.group, self.task_id)
            try:
                with self.table.transaction() as tx, \
                        tx.update_snapshot(snapshot_properties=props).fast_append() as append:
                    for f in self.files:
                        append.append_data_file(f)
            except CommitFailedException as e:
                if time.monotonic() >= deadline:
                    raise RetriableException(f"commit to {self.name} kept conflicting: {e}") from e
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
                continue
            except Exception as e:
                raise RetriableException(f"commit to {self.name} failed: {e}") from e
            self.offsets.update(positions)
            self.files = []
            return True
