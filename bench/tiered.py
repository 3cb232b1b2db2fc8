"""Tiered storage (issue 19): produce throughput with and without uploads running, upload
throughput, and backfill read throughput from the remote tier vs reading the same data locally,
for the local-directory store and for S3 (moto's server in its own process, over HTTP).

Two brokers run side by side in the same run: one tiering to a local directory, one to S3.
1. Produce (local-directory broker): rounds alternate a plain topic and a tiered one
   (segment.bytes 8 MiB, local.retention.bytes 16 MiB: segments roll, are copied and deleted
   locally while the producer writes). Reported: the medians and their ratio (goal: >= 95 %),
   and the bytes the broker uploaded during the tiered rounds (proof that uploads ran).
2. Upload: a 4-partition topic written with remote.log.copy.disable=true, then copying is turned
   on (with local.retention.bytes 8 MiB); MB/s = bytes copied / time from the change to the last
   copy (from the broker's "copied ..." log lines, ms resolution).
3. Backfill of that topic from offset 0 (almost all of it only remote now): a confluent-kafka
   consumer through the broker (remote tier via the broker's reader), and the Spark `samsa`
   source with samsa.remote.read=true (segments straight from the store, no broker in the data
   path); baseline: the same reads of a plain topic of the same size (local data).

    PYTHONPATH=. python bench/tiered.py --mib 64 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from samsa.testing import SamsaBroker, free_port

MiB = 1 << 20
BUCKET = "samsa-bench"
AWS = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
       "AWS_DEFAULT_REGION": "us-east-1"}
TIERED = {"remote.log.storage.system.enable": "true",
          "remote.log.manager.task.interval.ms": "200",
          "log.retention.check.interval.ms": "500",
          "rlmm.config.remote.log.metadata.topic.num.partitions": "3"}
COPIED = re.compile(r"^(\S+ \S+) INFO samsa\.remote: copied (\S+)-(\d+):\S+ \[(\d+), (\d+)\] "
                    r"\((\d+) bytes\)", re.M)


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def start_moto() -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                             str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(url, timeout=1).read()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError("moto server did not start") from None
            time.sleep(0.2)
    import boto3
    boto3.client("s3", endpoint_url=url, region_name="us-east-1",
                 aws_access_key_id="bench", aws_secret_access_key="bench").create_bucket(
        Bucket=BUCKET)
    return proc, url


def create(bs: str, topic: str, partitions: int, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": bs})  # kept alive until the answer
    admin.create_topics([NewTopic(topic, partitions, config={
        "segment.bytes": str(8 * MiB), "retention.ms": "-1", **config})])[topic].result(30)


def alter(bs: str, topic: str, **config: str) -> None:
    # incremental: only the named settings change (AlterConfigs would reset the others)
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry
    res = ConfigResource("topic", topic, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in config.items()])
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.incremental_alter_configs([res]).values():
        f.result(30)


def produce(bs: str, topic: str, mib: int, size: int, partitions: int = 1) -> float:
    """MB/s of acks=1 produce of `mib` MiB of `size`-byte records."""
    p = Producer({"bootstrap.servers": bs, "linger.ms": 5, "batch.size": 1 << 20, "acks": 1,
                  "queue.buffering.max.messages": 1_000_000, "log_level": 3})
    payload = os.urandom(size)
    n = mib * MiB // size
    p.list_topics(topic, timeout=30)
    t0 = time.perf_counter()
    for i in range(n):
        while True:
            try:
                p.produce(topic, payload, partition=i % partitions)
                break
            except BufferError:
                p.poll(0.01)
    if p.flush(300):
        raise RuntimeError("records not delivered")
    return n * size / (time.perf_counter() - t0) / 1e6


def consume(bs: str, topic: str, partitions: int, records: int, size: int) -> float:
    """MB/s of reading every record from offset 0 with one consumer (no group)."""
    c = Consumer({"bootstrap.servers": bs, "group.id": "bench-tiered", "enable.auto.commit": False,
                  "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 8 * MiB,
                  "log_level": 3})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = 0
    t0 = time.perf_counter()
    deadline = time.monotonic() + 600
    while got < records and time.monotonic() < deadline:
        got += sum(1 for m in c.consume(10000, 1.0) if m.error() is None)
    elapsed = time.perf_counter() - t0
    c.close()
    if got < records:
        raise RuntimeError(f"consumed {got} of {records} from {topic}")
    return records * size / elapsed / 1e6


def copies(b: SamsaBroker, topic: str) -> list[tuple[float, int, int, int]]:
    """(time, partition, end offset, bytes) of each "copied" line the broker logged for topic."""
    out = []
    for m in COPIED.finditer(b.log_text()):
        if m.group(2) != topic:
            continue
        ts = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
        out.append((ts, int(m.group(3)), int(m.group(5)), int(m.group(6))))
    return out


def closed_segments(b: SamsaBroker, topic: str, partitions: int) -> int:
    return sum(max(0, len(list((b.data_dir / "logs" / f"{topic}-{p}").glob("*.log"))) - 1)
               for p in range(partitions))


def upload(b: SamsaBroker, topic: str, partitions: int, mib: int, size: int) -> float:
    """Write with copying off, turn it on, MB/s until every closed segment is copied."""
    create(b.bootstrap, topic, partitions, **{"remote.storage.enable": "true",
                                               "remote.log.copy.disable": "true"})
    produce(b.bootstrap, topic, mib, size, partitions)
    want = closed_segments(b, topic, partitions)
    if want == 0:
        raise SystemExit("--backfill-mib too small: no closed 8 MiB segment to copy")
    time.sleep(1.0)  # a few remote log manager passes: none may copy while copying is off
    if copies(b, topic):
        raise RuntimeError("segments were copied while remote.log.copy.disable=true")
    t0 = time.time()
    alter(b.bootstrap, topic, **{"remote.log.copy.disable": "false",
                                 "local.retention.bytes": str(8 * MiB)})
    deadline = time.monotonic() + 600
    while len(done := copies(b, topic)) < want:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{len(done)} of {want} segments copied")
        time.sleep(0.2)
    last = max(t for t, *_ in done)
    return sum(n for *_, n in done) / (last - t0) / 1e6


def wait_local_trimmed(b: SamsaBroker, topic: str, partitions: int, keep: int) -> None:
    deadline = time.monotonic() + 120
    while True:
        local = sum(f.stat().st_size for p in range(partitions)
                    for f in (b.data_dir / "logs" / f"{topic}-{p}").glob("*.log"))
        if local <= keep * partitions:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"local data of {topic} still {local} bytes")
        time.sleep(0.3)


def spark_read(spark: Any, opts: dict[str, str]) -> tuple[float, int]:
    """(MB/s of value bytes, rows) of a batch read of the whole topic."""
    t0 = time.perf_counter()
    row = spark.read.format("samsa").options(**opts).load() \
        .selectExpr("sum(length(value)) AS b", "count(*) AS n").collect()[0]
    return row["b"] / (time.perf_counter() - t0) / 1e6, int(row["n"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--mib", type=int, default=64, help="MiB per produce round")
    ap.add_argument("--backfill-mib", type=int, default=128)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-spark", action="store_true")
    args = ap.parse_args()
    os.environ.update(AWS)  # the S3 broker's credential chain (and this process's)
    moto, endpoint = start_moto()
    rows: list[tuple[str, str]] = []
    try:
        with tempfile.TemporaryDirectory(prefix="samsa-bench-tiered-") as tmp:
            store = Path(tmp) / "remote-store"
            s3 = {"remote.log.storage.manager.class.name": "s3", "rsm.config.bucket": BUCKET,
                  "rsm.config.endpoint.url": endpoint, "rsm.config.region": "us-east-1"}
            local_b = SamsaBroker(Path(tmp) / "local", overrides={**TIERED,
                                                                  "rsm.config.dir": str(store)})
            s3_b = SamsaBroker(Path(tmp) / "s3", overrides={**TIERED, **s3})
            with local_b, s3_b:
                rows += bench_produce(local_b, args)
                results = bench_backfill(local_b, s3_b, store, s3, args)
                rows += results
    finally:
        moto.terminate()
        moto.wait(10)
    lines = [f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average "
             f"{os.getloadavg()[0]:.1f}; {args.size}-byte records; produce {args.mib} MiB x "
             f"{args.rounds} rounds per topic (medians); upload and backfill {args.backfill_mib} "
             "MiB in 4 partitions", "", "| measurement | result |", "|---|---:|"]
    lines += [f"| {k} | {v} |" for k, v in rows]
    report = "\n".join(lines) + "\n"
    print("\n" + report)
    out = Path(__file__).resolve().parent / "results" / "tiered-latest.md"
    out.write_text(report)


def bench_produce(b: SamsaBroker, args: argparse.Namespace) -> list[tuple[str, str]]:
    res: dict[str, list[float]] = {"plain": [], "tiered": []}
    uploaded = 0
    for rnd in range(args.rounds):
        order = ["plain", "tiered"] if rnd % 2 == 0 else ["tiered", "plain"]
        for kind in order:
            topic = f"produce-{kind}-{rnd}"
            conf = ({"remote.storage.enable": "true", "local.retention.bytes": str(16 * MiB)}
                    if kind == "tiered" else {})
            create(b.bootstrap, topic, 1, **conf)
            t0 = time.time()
            mbs = produce(b.bootstrap, topic, args.mib, args.size)
            t1 = time.time()
            res[kind].append(mbs)
            if kind == "tiered":
                uploaded += sum(n for t, _p, _e, n in copies(b, topic) if t0 <= t <= t1)
            log(f"round {rnd + 1} produce {kind:<6} {mbs:7.1f} MB/s")
    plain, tiered = statistics.median(res["plain"]), statistics.median(res["tiered"])
    return [("produce, plain topic (MB/s)", f"{plain:.1f}"),
            ("produce, tiered topic with uploads running (MB/s)", f"{tiered:.1f}"),
            ("tiered / plain", f"{tiered / plain:.1%}"),
            ("bytes uploaded while the tiered rounds produced", f"{uploaded / MiB:.0f} MiB")]


def bench_backfill(local_b: SamsaBroker, s3_b: SamsaBroker, store: Path, s3: dict[str, str],
                   args: argparse.Namespace) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    mib, size, parts = args.backfill_mib, args.size, 4
    records = mib * MiB // size // parts * parts
    create(local_b.bootstrap, "backfill-plain", parts)
    produce(local_b.bootstrap, "backfill-plain", mib, size, parts)
    for name, b in (("local-directory store", local_b), ("S3 (moto)", s3_b)):
        rate = upload(b, "backfill-tiered", parts, mib, size)
        log(f"upload to the {name}: {rate:.1f} MB/s")
        out.append((f"upload to the {name} (MB/s)", f"{rate:.1f}"))
        wait_local_trimmed(b, "backfill-tiered", parts, 24 * MiB)
    base = consume(local_b.bootstrap, "backfill-plain", parts, records, size)
    out.append(("backfill via a consumer, local data (MB/s)", f"{base:.1f}"))
    for name, b in (("local-directory store", local_b), ("S3 (moto)", s3_b)):
        mbs = consume(b.bootstrap, "backfill-tiered", parts, records, size)
        log(f"consumer backfill from the {name}: {mbs:.1f} MB/s")
        out.append((f"backfill via a consumer through the broker, remote tier in the {name} "
                    "(MB/s)", f"{mbs:.1f} ({mbs / base:.0%} of local)"))
    if args.no_spark:
        return out
    from samsa.spark import local_session
    spark = local_session("bench-tiered")
    try:
        base_opts = {"subscribe": "backfill-plain",
                     "kafka.bootstrap.servers": local_b.bootstrap}
        spark_read(spark, base_opts)  # warm-up: JVM, Python workers
        sb, n = spark_read(spark, base_opts)
        assert n == records, (n, records)
        out.append(("Spark backfill through the broker, local data (MB/s)", f"{sb:.1f}"))
        stores = (("local-directory store", local_b, {"rsm.config.dir": str(store)}),
                  ("S3 (moto)", s3_b, {**s3, "rsm.config.aws.access.key.id": "bench",
                                       "rsm.config.aws.secret.access.key": "bench"}))
        for name, b, rsm in stores:
            opts = {"subscribe": "backfill-tiered", "kafka.bootstrap.servers": b.bootstrap}
            via, n = spark_read(spark, opts)
            assert n == records, (n, records)
            direct, n = spark_read(spark, {**opts, "samsa.remote.read": "true", **rsm})
            assert n == records, (n, records)
            log(f"Spark backfill, {name}: through the broker {via:.1f} MB/s, "
                f"from the store {direct:.1f} MB/s")
            out.append((f"Spark backfill through the broker, remote tier in the {name} (MB/s)",
                        f"{via:.1f} ({via / sb:.0%} of local)"))
            out.append((f"Spark backfill straight from the {name} (samsa.remote.read) (MB/s)",
                        f"{direct:.1f} ({direct / sb:.0%} of local)"))
    finally:
        spark.stop()
    return out


if __name__ == "__main__":
    main()
