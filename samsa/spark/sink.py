"""Writing DataFrames to topics. Input columns as Spark's Kafka sink: value (required, string or
binary), key (string or binary), topic (string; the `topic` option overrides it), partition (int),
headers (array<struct<key:string,value:binary>>).

df.write is at-least-once (an idempotent producer, like Spark's Kafka sink). writeStream is
exactly-once: see transactional.py and docs/spark.md."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from confluent_kafka import KafkaError, KafkaException, Message, Producer
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

from .options import SinkOptions, sink_options

log = logging.getLogger("samsa.spark")

_COLUMNS = {"key", "value", "topic", "partition", "headers"}


class SinkSchemaError(ValueError):
    pass


def check_schema(schema: StructType, opts: SinkOptions) -> None:
    fields = {f.name.lower(): f.dataType for f in schema.fields}
    if "value" not in fields:
        raise SinkSchemaError("the samsa sink needs a 'value' column (string or binary)")
    for name in ("key", "value"):
        if name in fields and not isinstance(fields[name], StringType | BinaryType):
            got = fields[name].simpleString()
            raise SinkSchemaError(f"column '{name}' must be string or binary, got {got}")
    if "topic" in fields and not isinstance(fields["topic"], StringType):
        raise SinkSchemaError("column 'topic' must be a string")
    if "topic" not in fields and opts.topic is None:
        raise SinkSchemaError("set the 'topic' option or provide a 'topic' column")
    if "partition" in fields and not isinstance(fields["partition"], IntegerType):
        raise SinkSchemaError("column 'partition' must be an int")
    if "headers" in fields:
        h = fields["headers"]
        ok = (isinstance(h, ArrayType) and isinstance(h.elementType, StructType)
              and [f.name for f in h.elementType.fields] == ["key", "value"])
        if not ok:
            raise SinkSchemaError("column 'headers' must be array<struct<key:string,value:binary>>")


def producer_conf(opts: SinkOptions, **extra: Any) -> dict[str, Any]:
    from samsa.client_security import fail_on_auth_error

    conf: dict[str, Any] = {"enable.idempotence": True, "linger.ms": 5, "batch.size": 1_000_000,
                            "queue.buffering.max.messages": 500_000, "log_level": 3,
                            "error_cb": fail_on_auth_error}
    conf.update(opts.client)
    conf.update(extra)
    return conf


@dataclass
class SinkCommitMessage(WriterCommitMessage):
    partition: int
    records: int
    skipped: bool = False


class _Errors:
    def __init__(self) -> None:
        self.first: KafkaError | None = None

    def __call__(self, err: KafkaError | None, _msg: Message) -> None:
        if err is not None and self.first is None:
            self.first = err


def produce_batches(producer: Producer, batches: Iterator[pa.RecordBatch], opts: SinkOptions,
                    errors: _Errors) -> int:
    """Produce every row of every batch; returns the row count. Raises on the first delivery error."""
    n = 0
    for batch in batches:
        names = {name.lower(): i for i, name in enumerate(batch.schema.names)}
        rows = batch.num_rows
        values = batch.column(names["value"]).to_pylist()
        keys = batch.column(names["key"]).to_pylist() if "key" in names else [None] * rows
        if opts.topic is not None:
            topics = [opts.topic] * rows
        else:
            topics = batch.column(names["topic"]).to_pylist()
        parts = batch.column(names["partition"]).to_pylist() if "partition" in names else None
        hdrs = batch.column(names["headers"]).to_pylist() if "headers" in names else None
        for i in range(rows):
            topic = topics[i]
            if topic is None:
                raise SinkSchemaError("null topic: set the 'topic' option or fill the 'topic' column")
            kwargs: dict[str, Any] = {"value": values[i], "key": keys[i]}
            if parts is not None and parts[i] is not None:
                kwargs["partition"] = parts[i]
            if hdrs is not None and hdrs[i]:
                kwargs["headers"] = [(h["key"], h["value"]) for h in hdrs[i]]
            while True:
                try:
                    producer.produce(topic, on_delivery=errors, **kwargs)
                    break
                except BufferError:
                    producer.poll(0.05)
            n += 1
            if n % 10_000 == 0:
                producer.poll(0)
        if errors.first is not None:
            raise KafkaException(errors.first)
    return n


class SamsaBatchWriter(DataSourceArrowWriter):
    """df.write: at-least-once, like Spark's Kafka sink (a retried task may write rows twice)."""

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.opts = sink_options(options)
        check_schema(schema, self.opts)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        from pyspark import TaskContext
        ctx = TaskContext.get()
        part = ctx.partitionId() if ctx else 0
        producer = Producer(producer_conf(self.opts))
        errors = _Errors()
        n = produce_batches(producer, iterator, self.opts, errors)
        remaining = producer.flush(120)
        if remaining:
            raise KafkaException(KafkaError(KafkaError._MSG_TIMED_OUT, f"{remaining} records unsent"))
        if errors.first is not None:
            raise KafkaException(errors.first)
        return SinkCommitMessage(part, n)


class SamsaStreamWriter(DataSourceStreamArrowWriter):
    """writeStream: exactly-once through per-task Kafka transactions (transactional.py)."""

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.opts = sink_options(options)
        check_schema(schema, self.opts)
        self.control_topic = {k.lower(): v for k, v in options.items()}.get(
            "eos.controltopic", "_samsa_spark_sink")

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        from .transactional import write_batch_exactly_once
        return write_batch_exactly_once(self.opts, self.control_topic, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass  # every task already committed its own transaction

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass  # open transactions are aborted when the task's transactional.id is re-initialised
