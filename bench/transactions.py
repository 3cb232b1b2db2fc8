"""Transactional produce benchmark: Samsa vs Tansu, side by side.

    .venv/bin/python bench/transactions.py [--quick] [--out FILE]

Runs, one broker at a time on 127.0.0.1 (Samsa first, then Tansu), with a confluent-kafka producer
in this process, for message sizes {100 B, 1 KiB}, on a fresh 3-partition topic per cell:

1. idempotent (the baseline): enable.idempotence=true, acks=all, produce round-robin over the
   partitions for a fixed time, then flush;
2. transactional, 100 records per transaction: init_transactions once, then a loop of
   begin_transaction / 100 x produce (round-robin over the partitions) / commit_transaction;
3. the same with 10 records per transaction (the per-transaction cost dominates).

Timed regions start after a warm-up (connection, metadata, InitProducerId, one transaction or
message per partition) and end when the last commit (or flush) returned. Afterwards every cell is
checked: the partitions' high watermarks must equal records + one commit marker per transaction and
partition, and a read_committed consumer must read exactly the records produced. Broker CPU =
utime+stime from /proc over the timed region. Results go to stdout and to --out (default
bench/results/txn-latest.md). Every wait is bounded; failures are reported in table cells.
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

DEFAULT_OUT = ROOT / "bench" / "results" / "txn-latest.md"

SIZES = (100, 1024)
PARTITIONS = 3
LINGER_MS = 5


@dataclass(frozen=True)
class Mode:
    key: str
    per_txn: int | None  # records per transaction; None: idempotent, no transactions

    @property
    def label(self) -> str:
        if self.per_txn is None:
            return "idempotent (no transactions)"
        return f"transactional, {self.per_txn} records/txn"


IDEMPOTENT = Mode("idempotent", None)
MODES = (IDEMPOTENT, Mode("txn100", 100), Mode("txn10", 10))

FULL_SECONDS = 10.0
QUICK_SECONDS = 3.0
TXN_CALL_TIMEOUT = 30.0   # init_transactions / commit_transaction
FLUSH_TIMEOUT = 60.0
VERIFY_TIMEOUT = 90.0


def size_label(size: int) -> str:
    return "1 KiB" if size == 1024 else f"{size} B"


def payloads(size: int, count: int = 64, seed: int = 11) -> list[bytes]:
    rng = random.Random(seed)
    return [bytes(rng.randrange(32, 127) for _ in range(size)) for _ in range(count)]


# --------------------------------------------------------------------------------------------
# Workloads


@dataclass
class Run:
    messages: int
    txns: int
    seconds: float
    cpu_s: float
    size: int
    check: str = "not checked"

    @property
    def msgs_per_s(self) -> float:
        return self.messages / self.seconds

    @property
    def txns_per_s(self) -> float:
        return self.txns / self.seconds

    @property
    def mb_per_s(self) -> float:
        return self.messages * self.size / self.seconds / 1e6

    @property
    def cpu_ms_per_1000(self) -> float:
        return self.cpu_s * 1000 / (self.messages / 1000)


class DeliveryErrors:
    def __init__(self) -> None:
        self.errors: list[str] = []
        self.acked = 0

    def __call__(self, err: KafkaError | None, _msg: Any) -> None:
        if err is None:
            self.acked += 1
        elif len(self.errors) < 5:
            self.errors.append(str(err))

    def raise_if_any(self, what: str) -> None:
        if self.errors:
            raise RuntimeError(f"{what}: delivery errors: {'; '.join(self.errors)}")


def kafka_text(e: KafkaException) -> str:
    err = e.args[0] if e.args and isinstance(e.args[0], KafkaError) else None
    if err is None:
        return str(e)
    flags = [f for f, on in (("fatal", err.fatal()), ("retriable", err.retriable()),
                             ("abortable", err.txn_requires_abort())) if on]
    return f"{err.name()}: {err.str()}" + (f" ({', '.join(flags)})" if flags else "")


def producer_config(bootstrap: str, on_delivery: DeliveryErrors) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
            "linger.ms": LINGER_MS, "on_delivery": on_delivery, **QUIET}


def run_idempotent(broker: BrokerProcess, topic: str, size: int, seconds: float) -> tuple[Run, int]:
    """(timed run, warm-up records)."""
    values = payloads(size)
    dr = DeliveryErrors()
    p = Producer(producer_config(broker.bootstrap, dr))
    for part in range(PARTITIONS):  # warm-up: connection, metadata, InitProducerId, one batch each
        p.produce(topic, values[0], partition=part)
    if p.flush(FLUSH_TIMEOUT):
        raise TimeoutError("idempotent warm-up not delivered")
    dr.raise_if_any("warm-up")
    n = 0
    cpu0 = broker.cpu_seconds()
    start = time.perf_counter()
    end = start + seconds
    produce_fn, poll = p.produce, p.poll
    while time.perf_counter() < end:
        try:
            produce_fn(topic, values[n & 63], partition=n % PARTITIONS)
            n += 1
            if n & 0x3FF == 0:
                poll(0)
                dr.raise_if_any("idempotent produce")
        except BufferError:
            poll(0.005)
    if p.flush(FLUSH_TIMEOUT):
        raise TimeoutError(f"idempotent: records undelivered {FLUSH_TIMEOUT:.0f}s after the loop")
    elapsed = time.perf_counter() - start
    cpu = broker.cpu_seconds() - cpu0
    dr.raise_if_any("idempotent produce")
    if dr.acked != n + PARTITIONS:
        raise RuntimeError(f"idempotent: {dr.acked - PARTITIONS}/{n} acknowledged")
    return Run(n, 0, elapsed, cpu, size), PARTITIONS


def run_transactional(broker: BrokerProcess, topic: str, size: int, per_txn: int, seconds: float,
                      tid: str) -> tuple[Run, int]:
    """(timed run, warm-up records); the warm-up is one committed transaction."""
    values = payloads(size)
    dr = DeliveryErrors()
    p = Producer({**producer_config(broker.bootstrap, dr), "transactional.id": tid,
                  "transaction.timeout.ms": 60000})
    step = "init_transactions"
    n = txns = 0
    try:
        p.init_transactions(TXN_CALL_TIMEOUT)
        step = "warm-up transaction"
        p.begin_transaction()
        for part in range(PARTITIONS):
            p.produce(topic, values[0], partition=part)
        p.commit_transaction(TXN_CALL_TIMEOUT)
        dr.raise_if_any("warm-up transaction")
        step = "transaction loop"
        cpu0 = broker.cpu_seconds()
        start = time.perf_counter()
        end = start + seconds
        produce_fn, poll = p.produce, p.poll
        while time.perf_counter() < end:
            p.begin_transaction()
            i = 0
            while i < per_txn:
                try:
                    produce_fn(topic, values[(n + i) & 63], partition=i % PARTITIONS)
                    i += 1
                except BufferError:
                    poll(0.005)
            p.commit_transaction(TXN_CALL_TIMEOUT)
            n += per_txn
            txns += 1
            if txns & 0x3F == 0:
                dr.raise_if_any("transactional produce")
        elapsed = time.perf_counter() - start
        cpu = broker.cpu_seconds() - cpu0
    except KafkaException as e:
        raise RuntimeError(f"{step} failed after {txns} transactions: {kafka_text(e)}") from None
    dr.raise_if_any("transactional produce")
    return Run(n, txns, elapsed, cpu, size), PARTITIONS


def verify(bootstrap: str, topic: str, records: int, txns: int) -> str:
    """High watermarks = records + markers; read_committed reads exactly `records`."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-verify",
                  "isolation.level": "read_committed", "enable.auto.commit": False,
                  "enable.partition.eof": True, "fetch.queue.backoff.ms": 10, **QUIET})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        n = 0
        at_end: set[int] = set()
        deadline = time.monotonic() + VERIFY_TIMEOUT
        while len(at_end) < PARTITIONS:
            if time.monotonic() > deadline:
                return f"read_committed: {n}/{records} read, no end after {VERIFY_TIMEOUT:.0f}s"
            for m in c.consume(num_messages=10_000, timeout=0.5):
                err = m.error()
                if err is None:
                    n += 1
                elif err.code() == KafkaError._PARTITION_EOF:
                    at_end.add(m.partition() or 0)
                else:
                    return f"read_committed error after {n}: {err}"
        # after reading to the end, so a high watermark cannot lag behind what was readable
        hw = sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=15)[1]
                 for p in range(PARTITIONS))
        expected_hw = records + txns * PARTITIONS
        problems = []
        if hw != expected_hw:
            problems.append(f"high watermarks sum {hw:,}, expected {expected_hw:,} (records"
                            + (f" + {PARTITIONS} markers per txn)" if txns else ")"))
        if n != records:
            problems.append(f"read_committed read {n:,}, expected {records:,}")
        return "; ".join(problems) or "ok"
    finally:
        c.close()


# --------------------------------------------------------------------------------------------
# Driver


def cell_error(e: BaseException) -> str:
    """Our own RuntimeErrors carry the client's error text: keep more of it than short_error."""
    if not isinstance(e, RuntimeError) or type(e) is not RuntimeError:
        return short_error(e)
    text = str(e).replace("|", "/").replace("\n", " ")
    return text if len(text) <= 300 else text[:297] + "..."


@dataclass
class TxnResults:
    name: str
    version: str = ""
    start_error: str | None = None
    cells: dict[tuple[int, str], Run | str] = field(default_factory=dict)
    wall_s: float = 0.0
    notes: list[str] = field(default_factory=list)


def run_broker(factory: Callable[[Path], BrokerProcess], seconds: float, run_id: str) -> TxnResults:
    workdir = Path(tempfile.mkdtemp(prefix="samsa-bench-txn-"))
    broker = factory(workdir)
    res = TxnResults(broker.name, version=broker.version())
    t_start = time.monotonic()
    admin: AdminClient | None = None
    try:
        try:
            broker.start()
        except Exception as e:  # noqa: BLE001 - reported in every cell
            res.start_error = f"{broker.name} failed to start: {short_error(e)}"
            log(res.start_error)
            return res
        pid = broker.proc.pid if broker.proc else "?"
        log(f"{broker.name} up at {broker.bootstrap} (pid {pid})")
        for size in SIZES:
            for mode in MODES:
                topic = f"bench-txn-{run_id}-{size}b-{mode.key}"
                try:
                    ensure_alive(broker, res.notes)
                    admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
                    create_topic(admin, topic, PARTITIONS)
                    if mode.per_txn is None:
                        run, warm = run_idempotent(broker, topic, size, seconds)
                        warm_txns = 0
                    else:
                        run, warm = run_transactional(broker, topic, size, mode.per_txn, seconds,
                                                      f"bench-{run_id}-{size}-{mode.key}")
                        warm_txns = 1
                    run.check = verify(broker.bootstrap, topic, run.messages + warm,
                                       run.txns + warm_txns)
                    res.cells[(size, mode.key)] = run
                    log(f"{broker.name} {size_label(size)} {mode.label}: {run.msgs_per_s:,.0f} msg/s, "
                        f"{run.txns_per_s:,.1f} txn/s ({run.messages:,} msgs, {run.txns:,} txns "
                        f"in {run.seconds:.1f} s, broker CPU {run.cpu_s:.1f} s); check: {run.check}")
                except Exception as e:  # noqa: BLE001 - the error text is the cell
                    res.cells[(size, mode.key)] = cell_error(e)
                    log(f"{broker.name} {size_label(size)} {mode.label} failed: "
                        f"{res.cells[(size, mode.key)]}")
                    traceback.print_exc()
                if admin is not None:
                    note = delete_topic(admin, topic)
                    if note:
                        res.notes.append(f"{broker.name}: {note}")
        if not broker.alive():
            res.notes.append(f"{broker.name} was not running at the end of its run")
    finally:
        admin = None
        finish_broker(broker, res.notes, workdir)
        res.wall_s = time.monotonic() - t_start
    return res


# --------------------------------------------------------------------------------------------
# Report


def ratio_fine(a: float | None, b: float | None) -> str:
    """a/b with enough digits for ratios far below 1."""
    if a is None or b is None or b == 0:
        return "—"
    r = a / b
    return f"{r:.3f}×" if r < 0.1 else f"{r:.2f}×"


def cell(r: TxnResults, size: int, mode: Mode) -> Run | str:
    if r.start_error:
        return f"{r.name} not run (see Setup)"
    return r.cells.get((size, mode.key), "not run")


def render(samsa: TxnResults, tansu: TxnResults, args: argparse.Namespace, seconds: float,
           started: dt.datetime, wall_s: float) -> str:
    out: list[str] = []
    mode_name = "quick" if args.quick else "full"
    out.append(f"# Samsa vs Tansu transactional produce benchmark ({mode_name})")
    out.append("")
    out.append("**Provisional**: run on a 2-core machine shared with other concurrent work; re-run "
               "on a quiet machine before quoting these numbers.")
    out.append("")
    out.append(f"Run {started:%Y-%m-%d %H:%M:%S} UTC, {wall_s:.0f} s total "
               f"(Samsa {samsa.wall_s:.0f} s, Tansu {tansu.wall_s:.0f} s).")
    out.append("")
    out.append("## Setup")
    out.append("")
    out.extend(machine_info())
    out.append(f"- Samsa: {samsa.version}; default settings, disk log in a temp dir")
    out.append(f"- Tansu: {tansu.version}; `--storage-engine memory://tansu/`")
    out.append(f"- One confluent-kafka producer in the benchmark process; enable.idempotence=true, "
               f"acks=all, linger.ms={LINGER_MS}, no compression; a fresh {PARTITIONS}-partition "
               f"topic per cell, records round-robin over the partitions (so every transaction "
               f"adds all {PARTITIONS} partitions and gets {PARTITIONS} commit markers).")
    out.append(f"- Each cell runs its loop for {seconds:.0f} s after a warm-up (InitProducerId, one "
               "transaction or one record per partition); the time ends when the last "
               "commit_transaction() (or the final flush) returned. Transactional loop: "
               "begin_transaction(), N x produce(), commit_transaction() (which waits for every "
               "record and the EndTxn answer): one transaction in flight at a time.")
    out.append("- Check after each cell: high watermarks = records + one marker per transaction "
               "and partition, and a read_committed consumer reads exactly the records produced.")
    for r in (samsa, tansu):
        if r.start_error:
            out.append(f"- **{r.start_error}**")
    out.append("")

    out.append("## Throughput")
    out.append("")
    out.append("Records/s and committed transactions/s; higher is better. Samsa/Tansu is the "
               "ratio of records/s (>1 means Samsa faster).")
    out.append("")
    out.append("| size | mode | Samsa msg/s | Samsa txn/s | Samsa MB/s | Tansu msg/s | Tansu txn/s "
               "| Tansu MB/s | Samsa/Tansu |")
    out.append("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for size in SIZES:
        for mode in MODES:
            row = [size_label(size), mode.label]
            rates: list[float | None] = []
            for r in (samsa, tansu):
                v = cell(r, size, mode)
                if isinstance(v, Run):
                    row += [fmt_num(v.msgs_per_s),
                            "—" if mode.per_txn is None else fmt_num(v.txns_per_s, 1),
                            fmt_num(v.mb_per_s, 1)]
                    rates.append(v.msgs_per_s)
                else:
                    row += [f"error: {v}", "", ""]
                    rates.append(None)
            row.append(ratio(rates[0], rates[1]))
            out.append("| " + " | ".join(row) + " |")
    out.append("")

    out.append("## Cost of transactions")
    out.append("")
    out.append("Records/s of the mode relative to idempotent produce of the same size on the "
               "same broker (1.00× = no cost), broker CPU per 1,000 records, and the check.")
    out.append("")
    out.append("| size | mode | Samsa vs idempotent | Tansu vs idempotent "
               "| broker CPU ms per 1,000 msgs (Samsa / Tansu) | records (Samsa / Tansu) "
               "| check (Samsa / Tansu) |")
    out.append("|---|---|---:|---:|---|---|---|")
    for size in SIZES:
        for mode in MODES:
            row = [size_label(size), mode.label]
            cpu: list[str] = []
            counts: list[str] = []
            checks: list[str] = []
            for r in (samsa, tansu):
                v = cell(r, size, mode)
                base = cell(r, size, IDEMPOTENT)
                if isinstance(v, Run):
                    row.append(ratio_fine(v.msgs_per_s, base.msgs_per_s)
                               if isinstance(base, Run) else "—")
                    cpu.append(f"{v.cpu_ms_per_1000:.0f}")
                    counts.append(f"{v.messages:,}")
                    checks.append(v.check.replace("|", "/"))
                else:
                    row.append("—")
                    cpu.append("—")
                    counts.append("—")
                    checks.append("—")
            row += [" / ".join(cpu), " / ".join(counts), " / ".join(checks)]
            out.append("| " + " | ".join(row) + " |")
    out.append("")

    out.append("Reading the numbers:")
    out.append("")
    out.append("- With one transaction in flight, every transaction pays sequential round trips: "
               "AddPartitionsToTxn before the first records of its partitions can be sent, the "
               "Produce requests, then EndTxn (the coordinator writes PrepareCommit, the markers "
               "and CompleteCommit before answering). Transactions/s is therefore nearly the same "
               "for 10 and 100 records and for both sizes; records/s scales with records per "
               "transaction.")
    out.append("- A \"high watermarks\" mismatch in the check column means the partitions' end "
               "offsets do not add up to records + markers although read_committed read the "
               "expected number of records; it is reported, not fixed up.")
    out.append("")

    notes = samsa.notes + tansu.notes
    if notes:
        out.append("## Notes")
        out.append("")
        out.extend(f"- {n}" for n in notes)
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Samsa vs Tansu transactional produce benchmark")
    ap.add_argument("--quick", action="store_true",
                    help=f"{QUICK_SECONDS:.0f} s per cell instead of {FULL_SECONDS:.0f} s")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"default {DEFAULT_OUT}")
    ap.add_argument("--only", choices=("samsa", "tansu"), help="run one broker only (debugging)")
    ap.add_argument("--seconds", type=float, help="loop length per cell (overrides --quick)")
    args = ap.parse_args(argv)

    seconds = args.seconds or (QUICK_SECONDS if args.quick else FULL_SECONDS)
    started = dt.datetime.now(dt.UTC)
    run_id = f"{int(time.time())}"
    t0 = time.monotonic()
    results: dict[str, TxnResults] = {}
    for name, factory in (("samsa", SamsaProcess), ("tansu", TansuProcess)):
        if args.only and args.only != name:
            results[name] = TxnResults(name, start_error=f"{name} not run (--only)")
            continue
        log(f"=== {name} ===")
        try:
            results[name] = run_broker(factory, seconds, run_id)
        except Exception as e:  # noqa: BLE001 - never lose the other broker's results
            traceback.print_exc()
            results[name] = TxnResults(name, start_error=f"{name} run aborted: {short_error(e)}")
    report = render(results["samsa"], results["tansu"], args, seconds, started,
                    time.monotonic() - t0)
    write_report(report, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
