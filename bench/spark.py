"""Spark benchmark: rows/s of the samsa PySpark source and sink on a local Samsa broker.

    .venv/bin/python bench/spark.py [--rows N] [--partitions P] [--value-bytes B] [--out FILE]

Measures (local[2], Arrow batches, noop sink where nothing is written):
  batch read       spark.read.format("samsa") -> write.format("noop")
  streaming read   readStream.format("samsa") -> writeStream.format("noop"), trigger availableNow
  streaming write  readStream.format("samsa") -> writeStream.format("samsa") (exactly-once
                   transactions) to a second topic, trigger availableNow
Each figure is the wall time of the Spark action (session start and a warm-up read excluded).
Every job must see exactly --rows rows (an Observation on the batch read, the streaming queries'
numInputRows, a read_committed count of the sink's output topic); otherwise the report says which
and the script exits 1. The raw report goes to stdout and to --out (default
bench/results/spark-latest.md)."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import create_topic, log, machine_info, write_report  # noqa: E402
from pyspark.sql import Observation  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402
from pyspark.sql.streaming import StreamingQuery  # noqa: E402

from samsa.spark import local_session  # noqa: E402
from samsa.testing import SamsaBroker  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "bench" / "results" / "spark-latest.md"


def fill(bs: str, topic: str, rows: int, value_bytes: int) -> float:
    p = Producer({"bootstrap.servers": bs, "linger.ms": 20, "batch.size": 1_000_000,
                  "compression.type": "lz4", "log_level": 3})
    value = b"x" * value_bytes
    t0 = time.monotonic()
    for i in range(rows):
        while True:
            try:
                p.produce(topic, key=b"k%d" % (i % 1000), value=value)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(120) == 0
    return time.monotonic() - t0


def streamed_rows(query: StreamingQuery) -> int:
    """Input rows over the micro-batches of a finished availableNow query (its progress log)."""
    return sum(int(p["numInputRows"]) for p in query.recentProgress)


def check(rows: int, results: list[tuple[str, float, int]], committed: int) -> list[str]:
    """Every job must have seen each row once; the sink must have left each row once."""
    bad = [f"{name}: saw {seen:,} rows, expected {rows:,}"
           for name, _, seen in results if seen != rows]
    if committed != rows:
        bad.append(f"exactly-once write: {committed:,} committed rows in bench-out, expected {rows:,}")
    return bad


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--value-bytes", type=int, default=100)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"default {DEFAULT_OUT}")
    args = ap.parse_args()
    results: list[tuple[str, float, int]] = []  # job, seconds, rows the job saw
    with SamsaBroker() as broker, tempfile.TemporaryDirectory() as tmp:
        bs = broker.bootstrap
        admin = AdminClient({"bootstrap.servers": bs, "log_level": 3})
        create_topic(admin, "bench-in", args.partitions)
        create_topic(admin, "bench-out", args.partitions)
        secs = fill(bs, "bench-in", args.rows, args.value_bytes)
        log(f"produced {args.rows} rows in {secs:.1f} s")
        spark = local_session("samsa-bench")
        opts = {"kafka.bootstrap.servers": bs, "subscribe": "bench-in", "startingOffsets": "earliest"}

        # warm-up (Python workers, JIT): not measured
        warm = {"kafka.bootstrap.servers": bs, "assign": '{"bench-in":[0]}',
                "endingOffsets": '{"bench-in":{"0":1000}}'}
        spark.read.format("samsa").options(**warm).load().count()
        obs = Observation("batch-read")
        t0 = time.monotonic()
        (spark.read.format("samsa").options(**opts).load()
         .observe(obs, F.count(F.lit(1)).alias("n"))
         .write.format("noop").mode("overwrite").save())
        results.append(("batch read (noop sink)", time.monotonic() - t0, int(obs.get["n"])))

        t0 = time.monotonic()
        q = (spark.readStream.format("samsa").options(**opts).load().writeStream.format("noop")
             .option("checkpointLocation", f"{tmp}/ck-read").trigger(availableNow=True).start())
        q.awaitTermination()
        results.append(("streaming read (noop sink)", time.monotonic() - t0, streamed_rows(q)))

        t0 = time.monotonic()
        q = (spark.readStream.format("samsa").options(**opts).load().selectExpr("key", "value")
             .writeStream.format("samsa").option("kafka.bootstrap.servers", bs)
             .option("topic", "bench-out").option("checkpointLocation", f"{tmp}/ck-write")
             .trigger(availableNow=True).start())
        q.awaitTermination()
        results.append(("streaming read + exactly-once write", time.monotonic() - t0,
                        streamed_rows(q)))
        # not timed: what the sink left visible to a read_committed reader
        committed = (spark.read.format("samsa").option("kafka.bootstrap.servers", bs)
                     .option("subscribe", "bench-out")
                     .option("kafka.isolation.level", "read_committed").load().count())
        spark.stop()

    bad = check(args.rows, results, committed)
    lines = [f"### Spark (samsa PySpark source/sink), {args.rows:,} rows of {args.value_bytes} B, "
             f"{args.partitions} partitions, local[2]", "", *machine_info(), "",
             "| job | seconds | rows/s | rows seen |", "|---|---:|---:|---:|"]
    lines += [f"| {name} | {secs:.1f} | {args.rows / secs:,.0f} | {seen:,} |"
              for name, secs, seen in results]
    lines += ["", f"rows in bench-out for read_committed: {committed:,}", "",
              "check: " + ("; ".join(bad) if bad else "every job saw every row, once")]
    write_report("\n".join(lines), args.out)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
