"""The Spark side of the reference pipeline (`samsa pipeline`): a streaming job enriches every order
event (parses the JSON, prices it with VAT, tiers it) and writes one result per order with the
exactly-once samsa sink; batch reads then aggregate input and output for checking."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

ORDER = "order long, customer string, amount_cents long, ts long"
VAT = 0.21


def enrich(events: DataFrame) -> DataFrame:
    """One priced order per event: key = customer, value = JSON."""
    e = events.select(F.from_json(F.col("value").cast("string"), ORDER).alias("e"), "partition", "offset")
    priced = e.select(
        "e.order", "e.customer", "e.amount_cents",
        F.round(F.col("e.amount_cents") * (1 + VAT)).cast("long").alias("gross_cents"),
        F.when(F.col("e.amount_cents") >= 25_000, "large").otherwise("small").alias("tier"),
        F.concat_ws("/", F.lit("orders"), "partition", "offset").alias("source"))
    return priced.select(F.col("customer").alias("key"),
                         F.to_json(F.struct("order", "customer", "amount_cents", "gross_cents", "tier",
                                            "source")).alias("value"))


def run_stream(spark: SparkSession, bs: str, src: str, dst: str, checkpoint: str,
               max_per_trigger: int) -> list[dict[str, Any]]:
    events = (spark.readStream.format("samsa").option("kafka.bootstrap.servers", bs)
              .option("subscribe", src).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", str(max_per_trigger)).load())
    q = (enrich(events).writeStream.format("samsa")
         .option("kafka.bootstrap.servers", bs).option("topic", dst)
         .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    q.awaitTermination()
    if q.exception() is not None:
        raise RuntimeError(f"the streaming query failed: {q.exception()}")
    return [p for p in q.recentProgress if p.get("numInputRows", 0) > 0]


def _read(spark: SparkSession, bs: str, topic: str) -> DataFrame:
    return (spark.read.format("samsa").option("kafka.bootstrap.servers", bs).option("subscribe", topic)
            .option("kafka.isolation.level", "read_committed").load())


def totals(spark: SparkSession, bs: str, src: str, dst: str) -> dict[str, Any]:
    """Batch reads of both topics: per-customer totals from the input and from the results, and
    how many results exist per order (exactly one each if the sink is exactly-once)."""
    inp = _read(spark, bs, src).select(F.from_json(F.col("value").cast("string"), ORDER).alias("e"))
    expected = {r.customer: (r.orders, r.net) for r in inp.groupBy("e.customer").agg(
        F.count(F.lit(1)).alias("orders"), F.sum("e.amount_cents").alias("net")).collect()}
    res = _read(spark, bs, dst).select(F.from_json(
        F.col("value").cast("string"),
        "order long, customer string, amount_cents long, gross_cents long, tier string, source string"
    ).alias("r")).select("r.*")
    per_source = res.groupBy("source").count()
    dup = per_source.where("count > 1").count()
    got = {r.customer: (r.orders, r.net, r.gross, r.large) for r in res.groupBy("customer").agg(
        F.count(F.lit(1)).alias("orders"), F.sum("amount_cents").alias("net"),
        F.sum("gross_cents").alias("gross"),
        F.sum(F.when(F.col("tier") == "large", 1).otherwise(0)).alias("large")).collect()}
    return {"expected": expected, "got": got, "results": res.count(), "duplicates": dup,
            "inputs": sum(v[0] for v in expected.values())}
