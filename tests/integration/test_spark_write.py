"""Writing with the `samsa` sink: df.write with topic/key/value/headers/partition columns, and the
exactly-once writeStream — a micro-batch replayed after its Kafka transactions committed (Spark's
commit log lost, as after a driver crash) writes nothing twice; a re-run task writes nothing twice
and fences an attempt left with an open transaction; a task without Spark's batch/query ids fails."""

from __future__ import annotations

import collections
from pathlib import Path

import pytest

from samsa.testing import SamsaBroker
from tests.spark_util import create_topic, produce, read_all

pytest.importorskip("pyspark")
from pyspark.sql import SparkSession  # noqa: E402

pytestmark = pytest.mark.timeout(300)



def test_batch_write_columns(spark: SparkSession, samsa_broker: SamsaBroker) -> None:
    bs = samsa_broker.bootstrap
    create_topic(bs, "sw-a", 2)
    create_topic(bs, "sw-b", 1)
    rows = [(f"k{i}", f"v{i}".encode(), "sw-a" if i % 2 else "sw-b", (i // 2) % 2 if i % 2 else None,
             [(f"h{i}", b"x")]) for i in range(100)]
    df = spark.createDataFrame(rows, "key string, value binary, topic string, partition int, "
                                     "headers array<struct<key:string,value:binary>>")
    df.write.format("samsa").mode("append").option("kafka.bootstrap.servers", bs).save()
    a = read_all(bs, "sw-a", committed=False)
    b = read_all(bs, "sw-b", committed=False)
    assert len(a) == 50 and len(b) == 50
    for m in a:
        i = int(m.key()[1:])
        assert m.value() == f"v{i}".encode() and m.partition() == (i // 2) % 2
        assert m.headers() == [(f"h{i}", b"x")]
    # the topic option overrides the column
    df.select("key", "value").write.format("samsa").mode("append").option("kafka.bootstrap.servers", bs) \
        .option("topic", "sw-b").save()
    assert len(read_all(bs, "sw-b", committed=False)) == 150
    with pytest.raises(Exception, match="value"):
        df.select("key").write.format("samsa").mode("append").option("kafka.bootstrap.servers", bs) \
            .option("topic", "sw-b").save()


def copy_stream(spark: SparkSession, bs: str, src: str, dst: str, ck: Path) -> None:
    q = (spark.readStream.format("samsa").option("kafka.bootstrap.servers", bs).option("subscribe", src)
         .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "100")
         .option("includeHeaders", "true").load()
         .selectExpr("key", "value", "headers")
         .writeStream.format("samsa").option("kafka.bootstrap.servers", bs).option("topic", dst)
         .option("checkpointLocation", str(ck)).trigger(availableNow=True).start())
    q.awaitTermination(240)
    assert q.exception() is None


def test_stream_write_is_exactly_once_when_a_committed_batch_is_replayed(
        spark: SparkSession, samsa_broker: SamsaBroker, tmp_path: Path) -> None:
    bs = samsa_broker.bootstrap
    create_topic(bs, "sw-in", 2)
    create_topic(bs, "sw-out", 2)
    sent = produce(bs, "sw-in", 300, partitions=2)
    ck = tmp_path / "ck"
    copy_stream(spark, bs, "sw-in", "sw-out", ck)
    assert len(read_all(bs, "sw-out")) == 300
    # forget that the last two batches were committed: a restart replays them with the same offsets,
    # as after a driver crash between the sink's Kafka commits and Spark's commit log write
    commits = sorted((ck / "commits").iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1)
    last = [p for p in commits if p.name.isdigit()][-2:]
    for p in last:
        p.unlink()
        (ck / "commits" / f".{p.name}.crc").unlink(missing_ok=True)
    copy_stream(spark, bs, "sw-in", "sw-out", ck)
    out = read_all(bs, "sw-out")
    assert collections.Counter((m.key(), m.value()) for m in out) == \
        collections.Counter((s["key"], s["value"]) for s in sent)
    assert all(m.headers() == s["headers"] for m, s in zip(
        sorted(out, key=lambda m: m.value()), sorted(sent, key=lambda s: s["value"]), strict=True))


def test_stream_sink_refuses_a_task_without_its_streaming_ids(
        spark: SparkSession, samsa_broker: SamsaBroker) -> None:
    """The exactly-once writer in a real Spark task that lacks the micro-batch id or the query id
    fails the task and writes nothing: no fallback to batch 0 / a made-up query id, which would
    skip (batch 0 already committed) or mix up batches."""
    import pyarrow as pa
    from confluent_kafka import Consumer, TopicPartition
    from pyspark.sql.types import BinaryType, StructField, StructType

    from samsa.spark.sink import SamsaStreamWriter

    bs = samsa_broker.bootstrap
    create_topic(bs, "sw-noid", 1)
    writer = SamsaStreamWriter({"kafka.bootstrap.servers": bs, "topic": "sw-noid"},
                               StructType([StructField("value", BinaryType())]))

    def task(_rows: object) -> list[int]:
        msg = writer.write(iter([pa.RecordBatch.from_pydict({"value": [b"x"]})]))
        return [msg.records]  # type: ignore[attr-defined]

    sc = spark.sparkContext
    with pytest.raises(Exception, match=r"needs the micro-batch id \(task property streaming"):
        sc.parallelize([0], 1).mapPartitions(task).collect()
    sc.setLocalProperty("streaming.sql.batchId", "3")  # local properties reach the job's tasks
    try:
        with pytest.raises(Exception, match=r"needs the streaming query id \(task property sql"):
            sc.parallelize([0], 1).mapPartitions(task).collect()
    finally:
        sc.setLocalProperty("streaming.sql.batchId", None)  # type: ignore[arg-type]
    c = Consumer({"bootstrap.servers": bs, "group.id": "sw-noid-probe"})
    try:
        assert c.get_watermark_offsets(TopicPartition("sw-noid", 0), 10) == (0, 0)
    finally:
        c.close()


def test_stream_sink_task_retries_write_each_batch_once(
        spark: SparkSession, samsa_broker: SamsaBroker) -> None:
    """A sink task of (query, batch, partition) run again after it committed (a retried or
    speculative attempt) writes nothing; an attempt that died with its transaction open is fenced
    and aborted by the next attempt, which writes the rows once. Real Spark tasks, with the batch
    and query ids Spark would set given as local properties."""
    import pyarrow as pa
    from confluent_kafka import Producer
    from pyspark.sql.types import BinaryType, StructField, StructType

    from samsa.spark.sink import SamsaStreamWriter

    bs = samsa_broker.bootstrap
    create_topic(bs, "sw-retry", 1)
    writer = SamsaStreamWriter({"kafka.bootstrap.servers": bs, "topic": "sw-retry"},
                               StructType([StructField("value", BinaryType())]))

    def attempt(batch: int) -> tuple[int, bool]:
        def task(_rows: object) -> list[tuple[int, bool]]:
            rows = pa.RecordBatch.from_pydict({"value": [b"b%d-%d" % (batch, i) for i in range(10)]})
            msg = writer.write(iter([rows]))
            return [(msg.records, msg.skipped)]  # type: ignore[attr-defined]

        sc.setLocalProperty("streaming.sql.batchId", str(batch))
        try:
            (result,) = sc.parallelize([0], 1).mapPartitions(task).collect()
        finally:
            sc.setLocalProperty("streaming.sql.batchId", None)  # type: ignore[arg-type]
        return result

    sc = spark.sparkContext
    sc.setLocalProperty("sql.streaming.queryId", "retry-q")
    try:
        assert attempt(0) == (10, False)
        assert attempt(0) == (0, True)  # the same task again: already committed, nothing written
        assert attempt(1) == (10, False)
        # an attempt of batch 2 dies after producing, its transaction left open (a killed executor)
        zombie = Producer({"bootstrap.servers": bs, "transactional.id": "samsa-spark-retry-q-0"})
        zombie.init_transactions(30)
        zombie.begin_transaction()
        for i in range(5):
            zombie.produce("sw-retry", value=b"zombie-%d" % i, partition=0)
        assert zombie.flush(10) == 0
        assert attempt(2) == (10, False)  # fences the zombie, aborts its transaction, writes once
    finally:
        sc.setLocalProperty("sql.streaming.queryId", None)  # type: ignore[arg-type]
    committed = [m.value() for m in read_all(bs, "sw-retry", committed=True)]
    assert sorted(committed) == sorted(b"b%d-%d" % (b, i) for b in range(3) for i in range(10))
    uncommitted = [m.value() for m in read_all(bs, "sw-retry", committed=False)]
    assert sorted(uncommitted) == sorted(committed + [b"zombie-%d" % i for i in range(5)])
