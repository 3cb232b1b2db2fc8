"""The Spark driver of the seeds' pipeline (`samsa pipeline` runs it as a child process, so a test
can kill -9 it): a Structured Streaming query reads `order-events` with the samsa source, decodes
the Protobuf values through the schema registry, sums revenue per product in 1-minute event-time
windows with a 10-minute watermark, and writes every micro-batch exactly once into the warehouse.

Output mode is update, not append: append would emit a window only once the watermark passes its
end (10 minutes of event time later), so the newest windows would never reach the warehouse while
the stream is quiet. In update mode every batch emits the changed windows with their absolute
values, which are upserted; together with the (query id, batch id) record written in the same
transaction (samsa.pipeline.warehouse) the totals are exact after every batch, even across a crash.

    python -m samsa.spark.pipeline_job --bootstrap 127.0.0.1:9092 --registry http://127.0.0.1:8081 \\
        --warehouse duckdb:samsa-data/pipeline/warehouse.duckdb --checkpoint samsa-data/pipeline/checkpoint \\
        --done-file samsa-data/pipeline/produced.json

It stops by itself once the done file exists (written by the generator: {"order-events/0": end,
...}) and the query has committed batches up to those offsets."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from samsa.pipeline.events import SUBJECT, TOPIC
from samsa.pipeline.warehouse import BatchWriter

WINDOW = "1 minute"
WATERMARK = "10 minutes"


def revenue(spark: SparkSession, bs: str, registry: str, max_per_trigger: int,
            registry_options: dict[str, str] | None = None) -> DataFrame:
    """Revenue per product and 1-minute event-time window (cancelled orders do not count)."""
    from .registry_decode import from_protobuf

    raw = (spark.readStream.format("samsa").option("kafka.bootstrap.servers", bs)
           .option("subscribe", TOPIC).option("startingOffsets", "earliest")
           .option("maxOffsetsPerTrigger", str(max_per_trigger)).load())
    o = raw.select(from_protobuf("value", registry, subject=SUBJECT, options=registry_options)
                   .alias("o")).select("o.*")
    live = F.col("status") != "CANCELLED"
    return (o.withColumn("event_time", F.timestamp_millis("event_time_ms"))
            .withWatermark("event_time", WATERMARK)
            .groupBy(F.window("event_time", WINDOW), "product_id")
            .agg(F.sum(F.when(live, 1).otherwise(0)).alias("orders"),
                 F.sum(F.when(live, F.col("quantity")).otherwise(0)).alias("units"),
                 F.sum(F.when(live, F.col("quantity") * F.col("unit_price_cents")).otherwise(0))
                 .alias("revenue_cents"))
            .select(F.unix_millis("window.start").alias("ws"), F.unix_millis("window.end").alias("we"),
                    "product_id", "orders", "units", "revenue_cents"))


def say(msg: str) -> None:
    print(msg, flush=True)


def _end_offsets(progress: dict[str, Any] | None) -> dict[str, int]:
    if not progress or not progress.get("sources"):
        return {}
    end = progress["sources"][0].get("endOffset")
    if isinstance(end, str):
        end = json.loads(end)
    return {str(k): int(v) for k, v in (end or {}).items()}


def run(args: argparse.Namespace) -> int:
    from .session import local_session

    t0 = time.monotonic()
    spark = local_session("samsa-pipeline")
    # idle progress every second: lastProgress then shows the committed offsets soon after the end
    spark.conf.set("spark.sql.streaming.noDataProgressEventInterval", "1000")
    say(f"spark {spark.version} ready in {time.monotonic() - t0:.1f} s")
    writer = BatchWriter(args.warehouse)
    written: dict[int, tuple[int, bool]] = {}
    lock = threading.Lock()
    checkpoint = Path(args.checkpoint)

    def query_id() -> str:
        # the id Spark keeps in the checkpoint: stable across restarts of the same query
        return str(json.loads((checkpoint / "metadata").read_text().splitlines()[0])["id"])

    def write_batch(df: DataFrame, batch_id: int) -> None:
        rows = [(int(r.ws), int(r.we), str(r.product_id), int(r.orders), int(r.units),
                 int(r.revenue_cents)) for r in df.collect()]
        res = writer.write(query_id(), batch_id, rows)
        with lock:
            written[batch_id] = (res.rows, res.skipped)
        if batch_id == args.crash_after_commit and not res.skipped:
            # fault injection for the tests: die in the worst place, after the warehouse commit
            # and before Spark records the batch in its checkpoint's commit log
            say(f"micro-batch {batch_id}: committed to the warehouse; crashing (kill -9) as asked")
            os.killpg(0, signal.SIGKILL)

    q = (revenue(spark, args.bootstrap, args.registry, args.max_per_trigger,
                 dict(p.split("=", 1) for p in args.registry_property))
         .writeStream.outputMode("update").foreachBatch(write_batch)
         .option("checkpointLocation", str(checkpoint))
         .trigger(processingTime=f"{args.trigger_ms} milliseconds").start())
    say(f"streaming query {q.id} started (checkpoint {checkpoint})")
    done_file = Path(args.done_file) if args.done_file else None
    reported = -1
    deadline = time.monotonic() + args.timeout
    try:
        while q.isActive and time.monotonic() < deadline:
            q.awaitTermination(1)
            for p in q.recentProgress:
                b = int(p["batchId"])
                if b <= reported or "addBatch" not in p.get("durationMs", {}):
                    continue  # already told, or an idle report (no batch ran)
                with lock:
                    rows, skipped = written.get(b, (0, False))
                note = " (already in the warehouse: skipped)" if skipped else ""
                say(f"micro-batch {b}: {p['numInputRows']} events in, {rows} window rows "
                    f"upserted{note}")
                reported = b
            if done_file is not None and done_file.exists() and not q.status["isTriggerActive"]:
                target = {str(k): int(v) for k, v in json.loads(done_file.read_text()).items()}
                got = _end_offsets(q.lastProgress)
                if all(got.get(k, -1) >= v for k, v in target.items()):
                    say("caught up with the generator: stopping the query")
                    q.stop()
                    break
        if q.exception() is not None:
            say(f"the streaming query failed: {q.exception()}")
            return 1
        if q.isActive:
            say(f"timed out after {args.timeout:.0f} s")
            q.stop()
            return 1
        return 0
    finally:
        writer.close()
        spark.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m samsa.spark.pipeline_job", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--registry", required=True, help="schema registry URL")
    ap.add_argument("--registry-property", action="append", default=[], metavar="KEY=VALUE",
                    help="registry client setting (basic.auth.credentials.source, "
                         "basic.auth.user.info, schema.registry.ssl.*), repeatable")
    ap.add_argument("--warehouse", required=True, help="duckdb:<path> or postgresql://...")
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--done-file", help="stop once the offsets in this JSON file are processed")
    ap.add_argument("--max-per-trigger", type=int, default=10_000, help="maxOffsetsPerTrigger")
    ap.add_argument("--trigger-ms", type=int, default=1000, help="processing-time trigger interval")
    ap.add_argument("--timeout", type=float, default=600.0, help="give up after this many seconds")
    ap.add_argument("--crash-after-commit", type=int, default=-1, help=argparse.SUPPRESS)
    return run(ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
