"""The `samsa` PySpark source: batch and streaming reads return exactly the produced records with
the schema of Spark's Kafka source; offsets, timestamps, isolation, partition splitting, new
partitions, and failOnDataLoss."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions

from samsa.testing import SamsaBroker
from tests.spark_util import KAFKA_SCHEMA, KAFKA_SCHEMA_HEADERS, create_topic, produce

pyspark = pytest.importorskip("pyspark")
from pyspark.sql import DataFrame, SparkSession  # noqa: E402
from pyspark.sql.types import _parse_datatype_string  # noqa: E402

pytestmark = pytest.mark.timeout(300)



def reader(spark: SparkSession, bs: str, **opts: str) -> Any:
    r = spark.read.format("samsa").option("kafka.bootstrap.servers", bs)
    for k, v in opts.items():
        r = r.option(k, v)
    return r


def as_records(df: DataFrame) -> list[dict[str, Any]]:
    out = []
    for row in df.collect():
        d = row.asDict()
        out.append({"key": d["key"], "value": d["value"], "topic": d["topic"],
                    "partition": d["partition"], "offset": d["offset"],
                    "timestamp": int(d["timestamp"].timestamp() * 1000),
                    "headers": [(h["key"], h["value"]) for h in d["headers"]] if d.get("headers") else None})
    return sorted(out, key=lambda r: (r["partition"], r["offset"]))


def test_batch_read_returns_exactly_the_produced_records(spark: SparkSession,
                                                        samsa_broker: SamsaBroker) -> None:
    bs = samsa_broker.bootstrap
    create_topic(bs, "sr-batch", 3)
    sent = produce(bs, "sr-batch", 900, partitions=3)
    df = reader(spark, bs, subscribe="sr-batch", includeHeaders="true").load()
    assert df.schema == _parse_datatype_string(KAFKA_SCHEMA_HEADERS)
    assert as_records(df) == sent
    plain = reader(spark, bs, subscribe="sr-batch").load()
    assert plain.schema == _parse_datatype_string(KAFKA_SCHEMA)
    assert {r.timestampType for r in plain.select("timestampType").distinct().collect()} == {0}
    # large partitions become several input partitions; the rows do not change
    split = reader(spark, bs, subscribe="sr-batch", maxRecordsPerPartition="50").load()
    assert split.rdd.getNumPartitions() == 18
    assert split.count() == 900


def test_batch_offsets_assign_pattern_and_timestamps(spark: SparkSession, samsa_broker: SamsaBroker) -> None:
    bs = samsa_broker.bootstrap
    create_topic(bs, "sr-off-a", 2)
    create_topic(bs, "sr-off-b", 1)
    a = produce(bs, "sr-off-a", 200, partitions=2, ts0=1_000_000)
    produce(bs, "sr-off-b", 50, ts0=1_000_000)
    rng = reader(spark, bs, subscribe="sr-off-a",
                 startingOffsets=json.dumps({"sr-off-a": {"0": 10, "1": -2}}),
                 endingOffsets=json.dumps({"sr-off-a": {"0": 20, "1": -1}})).load()
    got = sorted((r.partition, r.offset) for r in rng.select("partition", "offset").collect())
    assert got == [(0, o) for o in range(10, 20)] + [(1, o) for o in range(100)]
    assigned = reader(spark, bs, assign=json.dumps({"sr-off-a": [1]})).load()
    assert {r.partition for r in assigned.select("partition").collect()} == {1}
    assert assigned.count() == 100
    pattern = reader(spark, bs, subscribePattern="sr-off-.*").load()
    assert pattern.count() == 250
    # timestamps: record i has timestamp 1_000_000 + i; partition 0 holds the even i
    by_ts = reader(spark, bs, subscribe="sr-off-a", startingTimestamp="1000150").load()
    assert sorted(r.offset for r in by_ts.where("partition = 0").collect()) == list(range(75, 100))
    ts = json.dumps({"sr-off-a": {"0": 1000190, "1": 1000000}})
    per_part = reader(spark, bs, subscribe="sr-off-a", startingOffsetsByTimestamp=ts).load()
    assert per_part.where("partition = 0").count() == 5 and per_part.where("partition = 1").count() == 100
    assert sorted(x["offset"] for x in a if x["partition"] == 0)[-1] == 99
    with pytest.raises(Exception, match="subscribe"):
        reader(spark, bs).load().count()
    with pytest.raises(Exception, match="latest"):
        reader(spark, bs, subscribe="sr-off-a", startingOffsets="latest").load().count()


def test_read_committed_skips_aborted_transactions(spark: SparkSession, samsa_broker: SamsaBroker) -> None:
    bs = samsa_broker.bootstrap
    create_topic(bs, "sr-txn", 1)
    p = Producer({"bootstrap.servers": bs, "transactional.id": "sr-txn-p"})
    p.init_transactions(30)
    for i, commit in enumerate([True, False, True]):
        p.begin_transaction()
        for j in range(10):
            p.produce("sr-txn", value=f"{i}-{j}".encode())
        p.flush(30)  # else abort_transaction purges the unsent records and the log never has them
        p.commit_transaction(30) if commit else p.abort_transaction(30)
    committed = reader(spark, bs, subscribe="sr-txn", **{"kafka.isolation.level": "read_committed"}).load()
    values = sorted(r.value.decode() for r in committed.collect())
    assert values == sorted([f"0-{j}" for j in range(10)] + [f"2-{j}" for j in range(10)])
    assert reader(spark, bs, subscribe="sr-txn").load().count() == 30  # read_uncommitted sees all


def run_stream(spark: SparkSession, bs: str, checkpoint: Path, sink: list[Any], **opts: str) -> Any:
    r = (spark.readStream.format("samsa").option("kafka.bootstrap.servers", bs)
         .option("startingOffsets", "earliest"))
    for k, v in opts.items():
        r = r.option(k, v)

    def collect(df: DataFrame, batch_id: int) -> None:
        sink.append((batch_id, df.collect()))

    q = (r.load().writeStream.foreachBatch(collect).option("checkpointLocation", str(checkpoint))
         .trigger(availableNow=True).start())
    try:
        q.awaitTermination(240)
    except Exception:
        pass  # a failed query raises here; callers look at q.exception()
    return q


def test_streaming_read_restart_new_partitions(spark: SparkSession, samsa_broker: SamsaBroker,
                                               tmp_path: Path) -> None:
    bs = samsa_broker.bootstrap
    create_topic(bs, "sr-stream", 2)
    sent = produce(bs, "sr-stream", 500, partitions=2)
    batches: list[Any] = []
    q = run_stream(spark, bs, tmp_path / "ck", batches, subscribe="sr-stream", includeHeaders="true",
                   maxOffsetsPerTrigger="200")
    assert q.exception() is None
    assert [len(rows) for _, rows in batches] == [200, 200, 100]  # availableNow drains, 200 per batch
    got = [r for _, rows in batches for r in rows]
    assert sorted((r.partition, r.offset) for r in got) == \
        [(s["partition"], s["offset"]) for s in sent]
    assert {(r.key, r.value) for r in got} == {(s["key"], s["value"]) for s in sent}
    # more data and a new partition; restart from the checkpoint reads only the new records
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_partitions([NewPartitions("sr-stream", 3)])["sr-stream"].result(30)
    more = produce(bs, "sr-stream", 90, partitions=3, prefix="m")
    batches.clear()
    run_stream(spark, bs, tmp_path / "ck", batches, subscribe="sr-stream", includeHeaders="true",
               maxOffsetsPerTrigger="200")
    got = [r for _, rows in batches for r in rows]
    assert sorted((r.partition, r.offset) for r in got) == [(s["partition"], s["offset"]) for s in more]
    assert {r.partition for r in got} == {0, 1, 2}


def test_fail_on_data_loss(spark: SparkSession, samsa_broker: SamsaBroker, tmp_path: Path) -> None:
    bs = samsa_broker.bootstrap
    create_topic(bs, "sr-loss", 1)
    produce(bs, "sr-loss", 100)
    batches: list[Any] = []
    run_stream(spark, bs, tmp_path / "ck", batches, subscribe="sr-loss", maxOffsetsPerTrigger="100")
    assert sum(len(r) for _, r in batches) == 100
    produce(bs, "sr-loss", 100, prefix="n")  # offsets 100..199
    # retention removes offsets below 150 (DeleteRecords moves the log start offset as retention does)
    admin = AdminClient({"bootstrap.servers": bs})
    res = admin.delete_records([TopicPartition("sr-loss", 0, 150)])
    list(res.values())[0].result(30)
    # failOnDataLoss=true (default): the query stops with an error naming the loss
    q = run_stream(spark, bs, tmp_path / "ck", [], subscribe="sr-loss")
    assert q.exception() is not None and "data may have been lost" in str(q.exception())
    with pytest.raises(Exception, match="data may have been lost"):
        reader(spark, bs, subscribe="sr-loss", startingOffsets=json.dumps({"sr-loss": {"0": 120}})
               ).load().count()
    # failOnDataLoss=false: skip what is gone and continue from the log start offset
    batches.clear()
    q = run_stream(spark, bs, tmp_path / "ck", batches, subscribe="sr-loss", failOnDataLoss="false")
    assert q.exception() is None
    assert sorted(r.offset for _, rows in batches for r in rows) == list(range(150, 200))
    df = reader(spark, bs, subscribe="sr-loss", failOnDataLoss="false",
                startingOffsets=json.dumps({"sr-loss": {"0": 120}})).load()
    assert sorted(r.offset for r in df.collect()) == list(range(150, 200))
