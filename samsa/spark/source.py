"""The `samsa` data source: batch and streaming reads with the options and row schema of Spark's
Kafka source; writes are in sink.py."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from . import offsets as off
from .options import SourceOptions, source_options, split_key
from .reading import OffsetRange, read_range, split
from .schema import ddl

log = logging.getLogger("samsa.spark")

DEFAULT_MAX_RECORDS_PER_PARTITION = 500_000


def plan(opts: SourceOptions, start: dict[str, int], end: dict[str, int]) -> list[OffsetRange]:
    """Input partitions for [start, end): one per topic partition, large ranges split, and at least
    minPartitions pieces when that option is set."""
    ranges = [(k, start.get(k, 0), e) for k, e in sorted(end.items()) if e > start.get(k, 0)]
    total = sum(e - s for _, s, e in ranges)
    max_rows = opts.max_records_per_partition or DEFAULT_MAX_RECORDS_PER_PARTITION
    if opts.min_partitions and total:
        max_rows = min(max_rows, max(1, math.ceil(total / opts.min_partitions)))
    out: list[OffsetRange] = []
    for k, s, e in ranges:
        t, p = split_key(k)
        out.extend(split(t, p, s, e, max_rows))
    return out


def rate_limit(start: dict[str, int], latest: dict[str, int], limit: int) -> dict[str, int]:
    """Spread `limit` offsets over partitions in proportion to their lag (as Spark's Kafka source)."""
    lags = {k: max(0, latest[k] - start.get(k, latest[k])) for k in latest}
    total = sum(lags.values())
    if total <= limit:
        return dict(latest)
    out = {}
    for k, lag in lags.items():
        share = limit * lag / total
        step = math.ceil(share) if share < 1 else math.floor(share)
        out[k] = start.get(k, latest[k]) + min(lag, step)
    return out


class SamsaDataSource(DataSource):
    """format("samsa"): Spark's Kafka source and sink options, any Kafka-compatible broker."""

    @classmethod
    def name(cls) -> str:
        return "samsa"

    def _include_headers(self) -> bool:
        return str(self.options.get("includeHeaders", "false")).strip().lower() == "true"

    def schema(self) -> str:
        return ddl(self._include_headers())

    def reader(self, schema: StructType) -> DataSourceReader:
        r = SamsaBatchReader(source_options(dict(self.options), streaming=False))
        r.remote = _remote_options(dict(self.options))
        return r

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        r = SamsaStreamReader(source_options(dict(self.options), streaming=True))
        r.remote = _remote_options(dict(self.options))
        return r

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from .sink import SamsaBatchWriter
        return SamsaBatchWriter(dict(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from .sink import SamsaStreamWriter
        return SamsaStreamWriter(dict(self.options), schema)


# ---- tiered storage: `samsa.remote.read` reads remote segments from the store (spark/remote.py) --
def _remote_options(raw: dict[str, str]) -> Any:
    if not any(k.lower() == "samsa.remote.read" for k in raw):
        return None
    from .remote import remote_options
    return remote_options(raw)


def _plan_with_remote(remote: Any, o: SourceOptions, start: dict[str, int],
                      end: dict[str, int], earliest: dict[str, int] | None = None
                      ) -> list[InputPartition]:
    """Offsets held by remote segments are read from the store, the rest through a broker."""
    if remote is None:
        return list(plan(o, start, end))
    from .remote import plan_remote
    parts, rest = plan_remote(o.client, start, end,
                              o.max_records_per_partition or DEFAULT_MAX_RECORDS_PER_PARTITION,
                              earliest)
    return [*parts, *plan(o, rest, end)]


def _read_any(remote: Any, o: SourceOptions, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    if remote is not None:
        from .remote import RemoteSegmentRange, read_remote_range
        if isinstance(partition, RemoteSegmentRange):
            yield from read_remote_range(remote, partition, o.include_headers, o.read_committed,
                                         o.fail_on_data_loss)
            return
    assert isinstance(partition, OffsetRange)
    yield from read_range(o.client, partition, o.include_headers, o.fail_on_data_loss,
                          o.poll_timeout_ms)
# ---- end tiered storage ----------------------------------------------------------------------


class SamsaBatchReader(DataSourceReader):
    remote: Any = None  # RemoteReadOptions when samsa.remote.read=true

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        o = self.opts
        with off.consumer(o.client) as c:
            keys = off.partitions(c, o.subscription)
            marks = off.watermarks(c, keys)
            start = off.resolve(c, o.starting, keys, o, marks, "starting")
            end = off.resolve(c, o.ending, keys, o, marks, "ending")
        start = off.check_loss(start, marks, o.fail_on_data_loss)
        for k in keys:
            if start[k] > end[k]:
                raise ValueError(f"starting offset {start[k]} of {k} is after its ending offset {end[k]}")
        return _plan_with_remote(self.remote, o, start, end, {k: m[0] for k, m in marks.items()})

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from _read_any(self.remote, self.opts, partition)


class SamsaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets: {"topic/partition": next offset}. Planning runs in a long-lived driver-side Python
    process; read() runs on executors. New partitions start from their earliest offset."""

    remote: Any = None  # RemoteReadOptions when samsa.remote.read=true

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._available_now: dict[str, int] | None = None
        self._last_trigger = time.monotonic()

    def initialOffset(self) -> dict[str, Any]:
        o = self.opts
        with off.consumer(o.client) as c:
            keys = off.partitions(c, o.subscription)
            marks = off.watermarks(c, keys)
            return dict(off.resolve(c, o.starting, keys, o, marks, "starting"))

    def _latest(self, start: dict[str, int]) -> tuple[dict[str, int], dict[str, tuple[int, int]]]:
        with off.consumer(self.opts.client) as c:
            keys = off.partitions(c, self.opts.subscription)
            marks = off.watermarks(c, keys)
        latest = {k: marks[k][1] for k in keys}
        for k in start:
            if k not in latest:
                msg = f"partition {k} is gone (topic deleted?); some data may have been lost"
                if self.opts.fail_on_data_loss:
                    raise off.DataLossError(msg + ". Set failOnDataLoss=false to continue without it.")
                log.warning(msg)
        return latest, marks

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        start = {k: int(v) for k, v in start.items()}
        latest, marks = self._latest(start)
        # a partition that is new since `start` begins at its earliest offset
        begin = {k: start.get(k, marks[k][0]) for k in latest}
        if self._available_now is not None:
            latest = {k: min(v, self._available_now.get(k, begin[k])) if k in self._available_now
                      else begin[k] for k, v in latest.items()}
        latest = {k: max(v, begin[k]) for k, v in latest.items()}
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        if max_rows is None and not isinstance(limit, ReadAllAvailable):
            max_rows = self.opts.max_offsets_per_trigger
        end = rate_limit(begin, latest, max_rows) if max_rows else latest
        o = self.opts
        if o.min_offsets_per_trigger and self._available_now is None:
            waited_ms = (time.monotonic() - self._last_trigger) * 1000
            available = sum(end[k] - begin[k] for k in end)
            if available < o.min_offsets_per_trigger and waited_ms < o.max_trigger_delay_ms:
                return dict(start)  # not enough yet: no batch this trigger
        if end != start:
            self._last_trigger = time.monotonic()
        # keep partitions that vanished at their last offset so the offset log stays monotonic
        return {**start, **end}

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.opts.max_offsets_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        with off.consumer(self.opts.client) as c:
            keys = off.partitions(c, self.opts.subscription)
            marks = off.watermarks(c, keys)
        self._available_now = {k: marks[k][1] for k in keys}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        s = {k: int(v) for k, v in start.items()}
        e = {k: int(v) for k, v in end.items()}
        new = [k for k in e if k not in s]
        if new:
            with off.consumer(self.opts.client) as c:
                marks = off.watermarks(c, new)
            s.update({k: marks[k][0] for k in new})
        return _plan_with_remote(self.remote, self.opts, s, e)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from _read_any(self.remote, self.opts, partition)

    def commit(self, end: dict[str, Any]) -> None:
        pass

    def stop(self) -> None:
        pass
