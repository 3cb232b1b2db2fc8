"""`samsa pipeline`: the reference data pipeline. A single-node Samsa (127.0.0.1:9092 or a free port,
data in ./samsa-data) starts, a generator produces order events, a PySpark Structured Streaming job
reads them with the `samsa` source, totals them per customer and writes the totals back to a topic
with the exactly-once `samsa` sink; the walk-through checks the result against a batch read."""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import time
from pathlib import Path

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from ._common import CliError, UsageError, guarded
from .demo import DATA_DIR, DEFAULT_PORT, HOST, BrokerProcess, _say, _step, free_port, port_is_free

EVENTS = "pipeline-orders"
RESULTS = "pipeline-priced-orders"
PARTITIONS = 3


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("pipeline", help="start a broker and run the reference PySpark pipeline on it",
                       description="Start a single-node Samsa broker (127.0.0.1:9092, another free "
                                   "port if busy; data in ./samsa-data), produce order events, run a "
                                   "PySpark Structured Streaming job (samsa source -> per-customer "
                                   "totals -> exactly-once samsa sink), verify and explain the result.")
    p.add_argument("--events", type=int, default=5000, metavar="N",
                   help="how many order events to generate (default: 5000)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"preferred port (default: {DEFAULT_PORT})")
    p.add_argument("--data-dir", default=DATA_DIR, help=f"broker data directory (default: ./{DATA_DIR})")
    p.set_defaults(func=guarded("samsa pipeline", run))


def ensure_topics(bs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bs})
    existing = admin.list_topics(timeout=10).topics
    new = [NewTopic(t, PARTITIONS) for t in (EVENTS, RESULTS) if t not in existing]
    for t, fut in (admin.create_topics(new, request_timeout=30).items() if new else []):
        try:
            fut.result(35)
        except KafkaException as e:
            if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise CliError(f"cannot create topic {t}: {e}") from None


def generate(bs: str, n: int) -> tuple[int, float]:
    """n order events keyed by customer; returns (count, seconds)."""
    rng = random.Random()
    t0 = time.monotonic()
    p = Producer({"bootstrap.servers": bs, "enable.idempotence": True, "linger.ms": 5})
    failed: list[KafkaError] = []
    for i in range(n):
        customer = f"customer-{rng.randrange(25):02d}"
        event = {"order": i, "customer": customer, "amount_cents": rng.randrange(100, 50_000),
                 "ts": int(time.time() * 1000)}
        while True:
            try:
                p.produce(EVENTS, key=customer, value=json.dumps(event),
                          on_delivery=lambda err, _m: failed.append(err) if err else None)
                break
            except BufferError:
                p.poll(0.05)
    if p.flush(60) or failed:
        raise CliError(f"producing events failed: {failed[:1] or 'timed out'}")
    return n, time.monotonic() - t0


def run(args: argparse.Namespace) -> int:
    if args.events <= 0:
        raise UsageError("--events must be positive")
    try:
        from samsa.spark.pipeline_job import run_stream, totals
        from samsa.spark.session import local_session
    except ImportError as e:
        raise CliError(f"PySpark is not installed ({e}); pip install 'samsa[spark]'") from None
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise CliError("Spark needs a Java runtime (17 or newer) on PATH or in JAVA_HOME")
    data_dir = Path(args.data_dir)
    checkpoint = data_dir.parent / f"{data_dir.name}-checkpoints" / "priced-orders"
    port = args.port
    _step(f"Samsa reference pipeline: {args.events} order events -> PySpark Structured Streaming -> "
          "one priced order per event, exactly once.")
    _say()
    if not port_is_free(port):
        new = free_port()
        _step(f"Note: port {port} is busy (another broker running?), so this pipeline uses port {new}.")
        port = new
    broker = BrokerProcess(port, data_dir)
    _step("1. Starting a single-node Samsa broker:")
    _say(f"     samsa serve --listeners PLAINTEXT://{HOST}:{port} --log-dirs {data_dir}")
    try:
        took = broker.start()
        bs = broker.bootstrap
        _step(f"   Up at {bs} in {took:.1f} s.")
        ensure_topics(bs)
        n, secs = generate(bs, args.events)
        _step(f"2. The generator produced {n} order events (JSON, keyed by customer) to '{EVENTS}' "
              f"({PARTITIONS} partitions) in {secs:.1f} s.")
        _step("3. Starting Spark (local[2]) with the samsa data source registered ...")
        t0 = time.monotonic()
        spark = local_session("samsa-pipeline")
        _step(f"   Spark {spark.version} ready in {time.monotonic() - t0:.1f} s.")
        _step(f"4. Streaming job: readStream.format('samsa') on '{EVENTS}' -> parse JSON, add VAT and a "
              f"tier -> writeStream.format('samsa') to '{RESULTS}' (one Kafka transaction per task and "
              f"micro-batch: exactly-once), trigger availableNow, checkpoint {checkpoint}/")
        t0 = time.monotonic()
        progress = run_stream(spark, bs, EVENTS, RESULTS, str(checkpoint), max(500, n // 4))
        secs = time.monotonic() - t0
        rows_in = sum(p["numInputRows"] for p in progress)
        for p in progress:
            _say(f"     micro-batch {p['batchId']}: {p['numInputRows']} events in")
        _step(f"   {len(progress)} micro-batches, {rows_in} new events processed in {secs:.1f} s.")
        _step("5. Checking with batch reads (spark.read.format('samsa'), read_committed) of both topics:")
        t = totals(spark, bs, EVENTS, RESULTS)
        spark.stop()
        per_customer_ok = all(t["got"].get(c, (0, 0))[:2] == v for c, v in t["expected"].items())
        ok = t["results"] == t["inputs"] and t["duplicates"] == 0 and per_customer_ok
        _say(f"     {t['inputs']} order events in '{EVENTS}', {t['results']} priced orders in "
             f"'{RESULTS}', {t['duplicates']} orders with more than one result")
        _say("     top customers by gross revenue (from the results topic):")
        top = sorted(t["got"].items(), key=lambda kv: -kv[1][2])[:5]
        for cust, (orders, net, gross, large) in top:
            _say(f"       {cust}: {orders:5d} orders ({large} large)  net {net / 100:12,.2f}  "
                 f"gross {gross / 100:12,.2f}")
        _say(f"     exactly one result per event, per-customer totals equal: {'yes' if ok else 'NO'}")
    except BaseException:
        broker.stop()
        raise
    _step("6. Stopping the broker (SIGTERM, clean shutdown).")
    broker.stop()
    _say()
    if not ok:
        raise CliError("the results topic does not hold exactly one result per event (see above)")
    _say(f"Done. Run it again: new events are added and the job resumes from its checkpoint, "
         f"processing only the new ones. Data: {data_dir}/, checkpoint: {checkpoint}/")
    return 0
