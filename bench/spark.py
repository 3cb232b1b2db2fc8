"""Spark benchmark: rows/s of the samsa PySpark source and sink on a local Samsa broker.

    .venv/bin/python bench/spark.py [--rows N] [--partitions P] [--value-bytes B]

Measures (local[2], Arrow batches, noop sink where nothing is written):
  batch read       spark.read.format("samsa") -> write.format("noop")
  streaming read   readStream.format("samsa") -> writeStream.format("noop"), trigger availableNow
  streaming write  readStream.format("samsa") -> writeStream.format("samsa") (exactly-once
                   transactions) to a second topic, trigger availableNow
Each figure is the wall time of the Spark action (session start and a warm-up read excluded)."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import create_topic, log, machine_info  # noqa: E402

from samsa.spark import local_session  # noqa: E402
from samsa.testing import SamsaBroker  # noqa: E402


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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--value-bytes", type=int, default=100)
    args = ap.parse_args()
    results: list[tuple[str, float]] = []
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
        t0 = time.monotonic()
        spark.read.format("samsa").options(**opts).load().write.format("noop").mode("overwrite").save()
        results.append(("batch read (noop sink)", time.monotonic() - t0))

        t0 = time.monotonic()
        (spark.readStream.format("samsa").options(**opts).load().writeStream.format("noop")
         .option("checkpointLocation", f"{tmp}/ck-read").trigger(availableNow=True).start()
         .awaitTermination())
        results.append(("streaming read (noop sink)", time.monotonic() - t0))

        t0 = time.monotonic()
        (spark.readStream.format("samsa").options(**opts).load().selectExpr("key", "value")
         .writeStream.format("samsa").option("kafka.bootstrap.servers", bs).option("topic", "bench-out")
         .option("checkpointLocation", f"{tmp}/ck-write").trigger(availableNow=True).start()
         .awaitTermination())
        results.append(("streaming read + exactly-once write", time.monotonic() - t0))
        spark.stop()

    print(f"\n### Spark (samsa PySpark source/sink), {args.rows} rows of {args.value_bytes} B, "
          f"{args.partitions} partitions, local[2]\n")
    for line in machine_info():
        print(line)
    print("\n| job | seconds | rows/s |\n|---|---:|---:|")
    for name, secs in results:
        print(f"| {name} | {secs:.1f} | {args.rows / secs:,.0f} |")


if __name__ == "__main__":
    main()
