"""Executor-side reading: one confluent-kafka consumer assigned to an exact offset range (no group),
yielding pyarrow.RecordBatches in the row schema of Spark's Kafka source."""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from pyspark.sql.datasource import InputPartition

from .offsets import DataLossError, consumer_conf, watermark
from .schema import HEADER_TYPE, arrow_schema

BATCH_ROWS = 10_000
_TS_TYPE = {0: -1, 1: 0, 2: 1}  # librdkafka timestamp type -> Kafka's TimestampType id
_TS = pa.timestamp("us", tz="UTC")


@dataclass
class OffsetRange(InputPartition):
    """Offsets [start, end) of one topic partition: one Spark input partition."""
    topic: str
    partition: int
    start: int
    end: int

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__(f"{topic}/{partition}:{start}-{end}")
        self.topic, self.partition, self.start, self.end = topic, partition, start, end


def split(topic: str, partition: int, start: int, end: int, max_rows: int) -> list[OffsetRange]:
    """Split a range into pieces of at most max_rows offsets."""
    if end <= start:
        return []
    pieces = []
    for s in range(start, end, max_rows):
        pieces.append(OffsetRange(topic, partition, s, min(end, s + max_rows)))
    return pieces


class _Columns:
    def __init__(self, topic: str, partition: int, headers: bool) -> None:
        self.topic, self.partition, self.headers = topic, partition, headers
        self.schema = arrow_schema(headers)
        self.clear()

    def clear(self) -> None:
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.offsets: list[int] = []
        self.ts: list[int] = []
        self.ts_types: list[int] = []
        self.hdrs: list[list[dict[str, object]] | None] = []

    def add(self, msgs: list[Any], offsets: list[int], headers: bool) -> None:
        """Append a run of records (comprehensions: this is the per-record hot path)."""
        self.keys.extend([m.key() for m in msgs])
        self.values.extend([m.value() for m in msgs])
        self.offsets.extend(offsets)
        ts = [m.timestamp() for m in msgs]
        self.ts.extend([t[1] * 1000 for t in ts])
        self.ts_types.extend([_TS_TYPE.get(t[0], -1) for t in ts])
        if headers:
            hs: list[Any] = [m.headers() for m in msgs]
            self.hdrs.extend([[{"key": k, "value": v} for k, v in h] if h else None for h in hs])

    def __len__(self) -> int:
        return len(self.offsets)

    def batch(self) -> pa.RecordBatch:
        n = len(self.offsets)
        cols = [
            pa.array(self.keys, pa.binary()),
            pa.array(self.values, pa.binary()),
            pa.array([self.topic] * n, pa.string()),
            pa.array([self.partition] * n, pa.int32()),
            pa.array(self.offsets, pa.int64()),
            pa.array(self.ts, _TS),
            pa.array(self.ts_types, pa.int32()),
        ]
        if self.headers:
            cols.append(pa.array(self.hdrs, HEADER_TYPE))
        out = pa.RecordBatch.from_arrays(cols, schema=self.schema)
        self.clear()
        return out


def read_range(client: dict[str, str], r: OffsetRange, include_headers: bool, fail_on_data_loss: bool,
               poll_timeout_ms: int) -> Iterator[pa.RecordBatch]:
    """Every record of [r.start, r.end) that the isolation level lets through, in offset order.

    Gaps (compaction, aborted transactions, control records) are normal. Offsets below the log
    start offset (deleted by retention) are data loss: an error, or skipped if failOnDataLoss=false."""
    if r.end <= r.start:
        return
    conf = consumer_conf(client)
    conf.update({"enable.partition.eof": True, "auto.offset.reset": "error",
                 "fetch.message.max.bytes": 8 * 1024 * 1024, "queued.min.messages": 200_000})
    c = Consumer(conf)
    try:
        tp = TopicPartition(r.topic, r.partition)
        lo, hi = watermark(c, tp)
        start = r.start
        if start < lo:
            msg = (f"offsets {start}..{min(lo, r.end) - 1} of {r.topic}/{r.partition} no longer exist "
                   "(retention deleted them); some data may have been lost")
            if fail_on_data_loss:
                raise DataLossError(msg + ". Set failOnDataLoss=false to skip lost data and continue.")
            start = lo
            if start >= r.end:
                return
        c.assign([TopicPartition(r.topic, r.partition, start)])
        cols = _Columns(r.topic, r.partition, include_headers)
        deadline = time.monotonic() + poll_timeout_ms / 1000
        done = False
        next_offset = start
        while not done:
            # ask for no more than the range still holds, or consume() waits out its timeout
            msgs = c.consume(max(1, min(BATCH_ROWS, r.end - next_offset)), 0.2)
            if not msgs and time.monotonic() > deadline:
                raise TimeoutError(f"no records of {r.topic}/{r.partition} from offset {start} within "
                                   f"{poll_timeout_ms} ms (kafkaConsumer.pollTimeoutMs)")
            data = [m for m in msgs if m.error() is None]
            if data:
                deadline = time.monotonic() + poll_timeout_ms / 1000
                offs: list[int] = [m.offset() for m in data]  # type: ignore[misc]
                if offs[-1] >= r.end - 1:
                    done = True
                    cut = bisect.bisect_left(offs, r.end)
                    data, offs = data[:cut], offs[:cut]
                if offs:
                    next_offset = offs[-1] + 1
                cols.add(data, offs, include_headers)
            for m in msgs:
                err = m.error()
                if err is None or done:
                    continue
                if err.code() == KafkaError._PARTITION_EOF:
                    if (m.offset() or 0) >= r.end:
                        done = True
                    continue  # else the end is not visible yet (in flight, or beyond the stable offset)
                if err.code() == KafkaError._AUTO_OFFSET_RESET:
                    if fail_on_data_loss:
                        raise DataLossError(f"offset out of range in {r.topic}/{r.partition}: "
                                            f"{err.str()}; some data may have been lost")
                    lo, _ = watermark(c, tp)
                    if lo >= r.end:
                        done = True
                    else:
                        c.assign([TopicPartition(r.topic, r.partition, lo)])
                    continue
                raise KafkaException(err)
            if len(cols) >= BATCH_ROWS or (done and len(cols)):
                yield cols.batch()
    finally:
        c.close()
