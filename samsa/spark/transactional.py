"""Exactly-once streaming writes.

Each task of micro-batch B of query Q (Spark partition P) writes its rows in one Kafka transaction
whose transactional.id is "samsa-spark-Q-P". In the same transaction it commits, for the consumer
group "samsa-spark-sink-Q-P", offset B+1 on partition 0 of a control topic (send_offsets_to_transaction
is the marker: it becomes visible atomically with the rows). Before writing, the task
 1. initialises the producer, which fences any earlier attempt with the same id and completes or aborts
    its transaction, then
 2. reads the group's committed offset: if it is already > B, this (Q, B, P) was committed before a
    crash and the task writes nothing.
Spark replays a batch with the same offsets after a restart and the source is deterministic, so a
replayed task carries the same rows as the attempt that may already have committed."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from .options import SinkOptions
from .sink import SinkCommitMessage, _Errors, produce_batches, producer_conf

TIMEOUT_S = 60.0


def ensure_control_topic(opts: SinkOptions, topic: str) -> None:
    admin = AdminClient({**opts.client, "log_level": 3})
    if topic in admin.list_topics(timeout=TIMEOUT_S).topics:
        return
    fut = admin.create_topics([NewTopic(topic, 1, config={"cleanup.policy": "compact"})],
                              request_timeout=TIMEOUT_S)[topic]
    try:
        fut.result(TIMEOUT_S)
    except KafkaException as e:
        if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise


class SinkContextError(RuntimeError):
    """The task does not carry the ids exactly-once depends on: writing anyway could skip or
    duplicate a batch, so the write fails instead."""


BATCH_ID = "streaming.sql.batchId"
QUERY_ID = "sql.streaming.queryId"


def task_identity(get: Callable[[str], str | None]) -> tuple[str, int]:
    """(query id, micro-batch id) from a Spark task's local properties (`get`), or
    SinkContextError. No defaults: a made-up batch id 0 would be skipped as already committed
    once batch 0 is, and a shared "unknown" query id would mix queries' markers."""
    raw_batch = get(BATCH_ID)
    query_id = get(QUERY_ID)
    if raw_batch is None or not raw_batch.strip().isdigit():
        raise SinkContextError(
            f"the samsa exactly-once sink needs the micro-batch id (task property {BATCH_ID}), got "
            f"{raw_batch!r}: it only runs as a writeStream sink of a Structured Streaming query")
    if not query_id or not query_id.strip():
        raise SinkContextError(
            f"the samsa exactly-once sink needs the streaming query id (task property {QUERY_ID}), "
            f"got {query_id!r}: it only runs as a writeStream sink of a Structured Streaming query")
    return query_id.strip(), int(raw_batch)


def committed_batch(opts: SinkOptions, group: str, control_topic: str) -> int:
    """The next batch id this task's group recorded as committed (0 if none: no offset yet).
    A failed lookup raises: guessing 0 could write a committed batch again."""
    c = Consumer({**opts.client, "group.id": group, "enable.auto.commit": False, "log_level": 3})
    try:
        (res,) = c.committed([TopicPartition(control_topic, 0)], timeout=TIMEOUT_S)
        if res.error is not None:
            raise KafkaException(res.error)
        return max(0, int(res.offset))  # OFFSET_INVALID (-1001) when the group has no offset
    finally:
        c.close()


def write_batch_exactly_once(opts: SinkOptions, control_topic: str,
                             batches: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
    from pyspark import TaskContext
    ctx = TaskContext.get()
    assert ctx is not None, "the samsa stream writer runs inside a Spark task"
    query_id, batch_id = task_identity(ctx.getLocalProperty)
    part = ctx.partitionId()
    group = f"samsa-spark-sink-{query_id}-{part}"
    ensure_control_topic(opts, control_topic)
    producer = Producer(producer_conf(opts, **{"transactional.id": f"samsa-spark-{query_id}-{part}",
                                               "transaction.timeout.ms": 60_000}))
    producer.init_transactions(TIMEOUT_S)
    if committed_batch(opts, group, control_topic) > batch_id:
        for _ in batches:  # drain the input; the rows are already in the topic
            pass
        return SinkCommitMessage(part, 0, skipped=True)
    errors = _Errors()
    producer.begin_transaction()
    try:
        n = produce_batches(producer, batches, opts, errors)
        meta = Consumer({**opts.client, "group.id": group, "log_level": 3})
        try:
            producer.send_offsets_to_transaction([TopicPartition(control_topic, 0, batch_id + 1)],
                                                 meta.consumer_group_metadata(), TIMEOUT_S)
        finally:
            meta.close()
        producer.commit_transaction(TIMEOUT_S)
    except BaseException:
        try:
            producer.abort_transaction(TIMEOUT_S)
        except KafkaException:
            pass  # fenced or fatal: the next init_transactions with this id cleans up
        raise
    if errors.first is not None:
        raise KafkaException(errors.first)
    return SinkCommitMessage(part, n)
