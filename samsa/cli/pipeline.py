"""`samsa pipeline`: the seeds' pipeline on the embedded default, end to end. A single-node Samsa
(127.0.0.1:9092 or a free port, data in ./samsa-data) starts with its schema registry; a generator
produces Protobuf order events (Confluent wire format) to `order-events`; a PySpark Structured
Streaming job (a child process) decodes them through the registry, sums revenue per product in
1-minute event-time windows and writes them exactly once into the warehouse; at the same time a
Kafka Connect worker runs the Snowflake-shaped sink that lands the raw events. The walk-through
then checks both warehouse tables against the events in the topic.

Warehouse layout: DuckDB by default. A DuckDB file has one read-write process at a time, so the
Spark driver owns `<data>/pipeline/warehouse.duckdb` (product_revenue_1m, spark_committed_batches)
and the Connect worker `<data>/pipeline/raw.duckdb` (ORDER_EVENTS); the check opens both read-only
after the writers stopped. With `--warehouse postgresql://...` all tables share that database."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING

from ._common import CliError, UsageError, guarded
from .demo import DATA_DIR, DEFAULT_PORT, HOST, BrokerProcess, _say, _step, free_port, port_is_free
from .progress import Progress

if TYPE_CHECKING:
    from samsa.pipeline.events import Event

REGISTRY_PORT = 8081
CONNECT_PORT = 8083


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("pipeline", help="run the seeds' pipeline: Protobuf events -> Spark + Connect "
                                        "-> warehouse, checked",
                       description="Start a single-node Samsa broker with its schema registry "
                                   "(127.0.0.1:9092, another free port if busy; data in "
                                   "./samsa-data), produce Protobuf order events, run a PySpark "
                                   "Structured Streaming job (windowed revenue per product, written "
                                   "exactly once into the warehouse) and a Kafka Connect worker with "
                                   "the Snowflake-shaped sink (raw events), then check both tables "
                                   "against the events. Re-running adds events and resumes.")
    p.add_argument("--events", type=int, default=20_000, metavar="N",
                   help="how many order events to generate (default: 20000)")
    p.add_argument("--seconds", type=float, default=12.0,
                   help="spread the events over this much wall time (default: 12)")
    p.add_argument("--minutes", type=int, default=30,
                   help="simulated minutes of shop time the events cover (default: 30)")
    p.add_argument("--warehouse", metavar="URL",
                   help="postgresql://user@host:port/db (default: DuckDB files in <data-dir>/pipeline/)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"preferred port (default: {DEFAULT_PORT})")
    p.add_argument("--data-dir", default=DATA_DIR, help=f"broker data directory (default: ./{DATA_DIR})")
    p.add_argument("--no-connect", action="store_true", help="skip the Connect worker (raw events)")
    p.set_defaults(func=guarded("samsa pipeline", run))


def _port(preferred: int) -> int:
    return preferred if port_is_free(preferred) else free_port()


def _wait_http(url: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except (urllib.error.URLError, OSError):
            time.sleep(0.1)
    raise CliError(f"{url} did not answer within {timeout:.0f} s")


def run(args: argparse.Namespace) -> int:
    if args.events <= 0 or args.minutes <= 0 or args.seconds < 0:
        raise UsageError("--events and --minutes must be positive, --seconds not negative")
    try:
        import pyspark  # noqa: F401

        from samsa.pipeline import connect as sink
        from samsa.pipeline import events as ev
        from samsa.pipeline import warehouse as wh
        from samsa.pipeline.driver import SparkDriver
    except ImportError as e:
        raise CliError(f"a dependency is missing ({e}); pip install 'samsa[spark,connectors]'") from None
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise CliError("Spark needs a Java runtime (17 or newer) on PATH or in JAVA_HOME")
    data_dir = Path(args.data_dir)
    work = data_dir / "pipeline"
    warehouse = args.warehouse or wh.default_url(data_dir)
    raw = wh.raw_url(warehouse, data_dir)
    duck = wh.is_duckdb(warehouse)
    port = args.port
    _step(f"Samsa's reference pipeline: {args.events} Protobuf order events -> Spark Structured "
          "Streaming (windowed revenue) + Kafka Connect (raw events) -> warehouse, exactly once.")
    _say()
    if not port_is_free(port):
        new = free_port()
        _step(f"Note: port {port} is busy (another broker running?), so this pipeline uses port {new}.")
        port = new
    registry = f"http://{HOST}:{_port(REGISTRY_PORT)}"
    broker = BrokerProcess(port, data_dir)
    broker.argv += ["--schema-registry", registry]
    worker: sink.ConnectProcess | None = None
    driver: SparkDriver | None = None
    _step("1. Starting a single-node Samsa broker with its schema registry:")
    _say(f"     samsa serve --listeners PLAINTEXT://{HOST}:{port} --log-dirs {data_dir} "
         f"--schema-registry {registry}")
    try:
        took = broker.start()
        bs = broker.bootstrap
        _wait_http(registry + "/subjects", 30)
        _step(f"   Broker at {bs}, registry at {registry}, up in {took:.1f} s.")
        work.mkdir(parents=True, exist_ok=True)
        created = ev.ensure_topic(bs)
        schema_id = ev.register_schema(registry)
        _step(f"2. Topic '{ev.TOPIC}' ({ev.PARTITIONS} partitions{', created' if created else ''}); "
              f"OrderEvent (order_event.proto) registered as '{ev.SUBJECT}', schema id {schema_id}.")
        driver = SparkDriver(bs, registry, warehouse, work,
                             on_line=lambda line: _say(f"     spark | {line}"))
        driver.done_file.unlink(missing_ok=True)
        _step(f"3. Spark driver (python -m samsa.spark.pipeline_job, local[2]) starting: readStream "
              f"format('samsa') -> from_protobuf via the registry -> watermark 10 min -> revenue per "
              f"product per 1-minute window -> update mode, foreachBatch upsert + batch id in one "
              f"transaction into {warehouse} (checkpoint {driver.checkpoint}/)")
        t0 = time.monotonic()
        driver.start()
        if not args.no_connect:
            worker = sink.ConnectProcess(bs, registry, work, _port(CONNECT_PORT), sink.sink_config(raw))
            _step(f"4. Kafka Connect: a standalone worker runs '{sink.CONNECTOR}' "
                  "(com.snowflake.kafka.connector.SnowflakeSinkConnector, the seeds' config, "
                  f"ProtobufConverter) into {wh.RAW_TABLE} at {raw} ...")
            worker.start()
            _step(f"   Sink RUNNING in {worker.wait_running():.1f} s (REST {worker.url}).")
        else:
            _step("4. Kafka Connect skipped (--no-connect).")
        if not driver.wait_streaming(180):
            raise CliError(f"the Spark driver did not start its query:\n{driver.log_tail()}")
        start_ms = ev.resume_point(bs)
        _step(f"5. Generator: {args.events} events over {args.seconds:.0f} s, keyed by order id, "
              f"event times from {wh.to_ts(start_ms)} UTC over {args.minutes} simulated minutes, "
              f"~{ev.LATE_SHARE:.0%} up to {ev.MAX_LATENESS_MS // 60_000} min late (out of order).")
        # a bar on a terminal, a line every few seconds otherwise (samsa/cli/progress.py)
        bar = Progress("     generator |", total=args.events, unit="events produced")
        produced = ev.generate(bs, registry, args.events, start_ms=start_ms,
                               span_ms=args.minutes * ev.MINUTE_MS, seconds=args.seconds,
                               order_prefix=f"o{start_ms // ev.MINUTE_MS}",
                               progress=bar.update)
        bar.update(produced.count)
        bar.finish()
        ends = ev.end_offsets(bs)
        driver.done_file.write_text(json.dumps({f"{ev.TOPIC}/{p}": e for p, e in ends.items()}))
        _step(f"   Produced {produced.count} events in {produced.seconds:.1f} s ({produced.late} late); "
              f"topic end offsets {ends}.")
        rc = driver.wait(300)
        if rc != 0:
            raise CliError(f"the Spark driver {'timed out' if rc is None else f'exited with {rc}'}:\n"
                           f"{driver.log_tail()}")
        _step(f"   Spark caught up and stopped ({time.monotonic() - t0:.1f} s after it was started).")
        if worker is not None:
            got = sink.wait_caught_up(bs, ends, worker, 120)
            _step(f"   Connect sink committed offsets {got}.")
        _step("6. Checking the warehouse against every event in the topic:")
        events = ev.read_events(bs)
        if worker is not None:
            worker.stop()  # releases raw.duckdb
        ok = check(events, warehouse, raw if worker is not None else None)
    except BaseException:
        if driver is not None:
            driver.kill()
        if worker is not None:
            worker.stop()
        broker.stop()
        raise
    _step("7. Stopping the broker (SIGTERM, clean shutdown).")
    broker.stop()
    _say()
    if not ok:
        raise CliError("the warehouse does not match the events (see above)")
    where = f"{work}/warehouse.duckdb and {work}/raw.duckdb" if duck else warehouse
    _say(f"Done. Warehouse: {where}. Run it again: new events are added, the Spark job resumes from "
         f"its checkpoint and the sink from its offsets in the warehouse.")
    return 0


def check(events: list[Event], warehouse: str, raw: str | None) -> bool:
    """Compare both tables with what the topic holds; print the summary and a small result table."""
    from samsa.connect.connectors.sql import open_database
    from samsa.pipeline import events as ev
    from samsa.pipeline import warehouse as wh

    expected = ev.window_totals(events)
    db = open_database(warehouse)
    try:
        got = wh.read_revenue(db)
        batches = wh.batches_committed(db)
    finally:
        db.close()
    wrong = sorted(k for k in expected.keys() | got.keys() if expected.get(k) != got.get(k))
    revenue_ok = not wrong
    _say(f"     {len(events)} events in '{ev.TOPIC}' -> {len(expected)} (window, product) totals "
         f"expected; {wh.REVENUE} holds {len(got)} rows from {batches} committed micro-batches; "
         f"{len(wrong)} differ")
    for k in wrong[:5]:
        _say(f"       window {wh.to_ts(k[0])} {k[1]}: expected {expected.get(k)}, warehouse {got.get(k)}")
    raw_ok = True
    if raw is not None:
        rdb = open_database(raw)
        try:
            rows = wh.read_raw(rdb)
        finally:
            rdb.close()
        want = {(e.partition, e.offset): e.order_id for e in events}
        have: dict[tuple[int, int], str] = {}
        dups = 0
        for p, off, order in rows:
            dups += (int(p), int(off)) in have
            have[(int(p), int(off))] = str(order)
        missing = len(want.keys() - have.keys())
        mismatched = sum(1 for k, v in have.items() if want.get(k) != v)
        raw_ok = dups == 0 and missing == 0 and mismatched == 0 and len(rows) == len(events)
        _say(f"     {wh.RAW_TABLE} holds {len(rows)} rows for {len(events)} events: {dups} duplicates, "
             f"{missing} missing, {mismatched} not matching their event")
    totals: dict[str, list[int]] = {}
    for (_, prod), (orders, units, revenue) in got.items():
        t = totals.setdefault(prod, [0, 0, 0])
        t[0] += orders
        t[1] += units
        t[2] += revenue
    _say("     top products by revenue (from the warehouse):")
    _say(f"       {'product':8} {'orders':>7} {'units':>7} {'revenue':>14}")
    for prod, (orders, units, revenue) in sorted(totals.items(), key=lambda kv: -kv[1][2])[:5]:
        _say(f"       {prod:8} {orders:7d} {units:7d} {revenue / 100:14,.2f}")
    _say(f"     revenue per product and window equals the events' totals: {'yes' if revenue_ok else 'NO'}")
    if raw is not None:
        _say(f"     exactly one raw row per event: {'yes' if raw_ok else 'NO'}")
    return revenue_ok and raw_ok
