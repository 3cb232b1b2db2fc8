"""Produce/consume-throughput A/B of two Samsa versions in the same run, plus the validator's cost.

    .venv/bin/python bench/ab_produce.py [--base main] [--repeats 5] [--count 200000] [--no-consume]

`--acks 1,all` and `--compressions none` choose the produce cells (default: acks=1, none and lz4).
`--base` is a git ref: its tree is extracted (git archive) to a temporary dir, its C extensions
built there if it has a setup.py, and a broker runs from it ("before") next to a broker from this
checkout ("after"). Each cell (1 KiB messages, 1 partition, acks=1, compression none and lz4)
runs --repeats times per broker, alternating which goes first, from the same bench client
processes as bench/run.py; the report gives the median msg/s per side, the after/before ratio with
every run's ratio, and CPU steal (the shared host's other guests). Unless --no-consume, every run
then reads the topic back (each client process reads all of it from offset 0, as bench/run.py's
consume cells), and the consume rate (messages delivered to all readers / seconds) gets its own
table.

First it times the validator alone (samsa.protocol.recordcheck) on batches like the ones the
clients send: µs per batch for the C walk, the Python reference, and validate_records with
decompression, next to the CRC check every batch already paid.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import timeit
from io import BytesIO
from pathlib import Path

from clients import ClientPool, Task, payloads
from common import ROOT, SamsaProcess, create_topic, delete_topic, log, steal_seconds

SIZE = 1024
CELLS = (("none", 1), ("lz4", 1))


class VersionedSamsa(SamsaProcess):
    """A Samsa broker running the code under `code_root`."""

    def __init__(self, workdir: Path, code_root: Path, label: str) -> None:
        self.name = label
        super().__init__(workdir)
        self.code_root = code_root

    def env(self) -> dict[str, str]:
        env = super().env()
        env["PYTHONPATH"] = str(self.code_root)
        return env


def extract(ref: str, dest: Path) -> Path:
    data = subprocess.run(["git", "-C", str(ROOT), "archive", ref], check=True,
                          capture_output=True, timeout=120).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(dest, filter="data")
    if (dest / "setup.py").exists():
        subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=dest,
                       check=True, capture_output=True, timeout=300)
    return dest


def micro() -> list[str]:
    """µs per batch, best of 5: the CRC/header check every batch already paid, the C and Python
    record walks over the decompressed records, and validate_records (decompression + C walk)."""
    sys.path.insert(0, str(ROOT))
    from samsa.protocol import codecs, recordcheck
    from samsa.protocol.batch import validate_single_batch
    from samsa.protocol.records import encode_batch

    out = ["| records × 1 KiB | codec | CRC + header (µs) | C walk (µs) | Python walk (µs) | "
           "validate_records (µs) |", "|---:|---|---:|---:|---:|---:|"]
    values = payloads(SIZE)  # the bench clients' messages (text, compressible like real data)
    for n in (16, 1000):
        recs = [(None, values[i % len(values)], [], 1_700_000_000_000 + i) for i in range(n)]
        for codec in (codecs.NONE, codecs.LZ4) if n == 16 else sorted(codecs.NAMES):
            raw = encode_batch(recs, compression=codec)
            h = validate_single_batch(raw)
            payload = codecs.decompress(codec, memoryview(raw)[61:])

            def per(fn, reps: int) -> float:  # type: ignore[no-untyped-def]
                return min(timeit.repeat(fn, number=reps, repeat=5)) / reps * 1e6

            reps = 2000 if n == 16 else 100
            crc = per(lambda raw=raw: validate_single_batch(raw), reps)
            c = per(lambda p=payload, n=n: recordcheck.check_c(p, n, False), reps)
            py = per(lambda p=payload, n=n: recordcheck.check_py(p, n, False), max(reps // 20, 5))
            full = per(lambda raw=raw, h=h: recordcheck.validate_records(
                raw, h, max_message_bytes=1048588), reps)
            out.append(f"| {n} | {codecs.NAMES[codec]} | {crc:.1f} | {c:.1f} | {py:.0f} | {full:.1f} |")
    return out


def run_once(broker: VersionedSamsa, pool: ClientPool, compression: str, partitions: int,
             count: int, tag: str, consume: bool = False, acks: str = "1") -> tuple[float, float]:
    """(produce msg/s, consume msg/s or 0.0)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 3})
    topic = f"ab-{compression}-a{acks}-{tag}"
    create_topic(admin, topic, partitions)
    shares = [count // pool.size + (1 if i < count % pool.size else 0) for i in range(pool.size)]
    tasks = [Task("produce", broker.bootstrap, topic, partitions, SIZE, n, acks, compression, i)
             for i, n in enumerate(shares)]
    seconds, outs = pool.run(tasks)
    failed = [o.error for o in outs if o.error is not None]
    read_rate = 0.0
    if consume and not failed:
        readers = [Task("consume", broker.bootstrap, topic, partitions, SIZE, count, worker=i)
                   for i in range(pool.size)]
        read_s, read_outs = pool.run(readers)
        failed = [o.error for o in read_outs if o.error is not None]
        read_rate = count * pool.size / read_s
    delete_topic(admin, topic)
    if failed:
        raise RuntimeError(f"{broker.name}: {failed[0]}")
    return count / seconds, read_rate


class _Done(Exception):
    """--consume-only finished its tables."""


def consume_only(sides: list[VersionedSamsa], pool: ClientPool, count: int,
                 repeats: int) -> list[str]:
    """Consume A/B with less noise: each side's topic is produced once per cell, then read back
    `repeats` times per side, alternating which side goes first."""
    from confluent_kafka.admin import AdminClient

    out: list[str] = []
    for compression, partitions in CELLS:
        topics = {}
        for s in sides:
            admin = AdminClient({"bootstrap.servers": s.bootstrap, "log_level": 3})
            topic = f"abc-{compression}"
            create_topic(admin, topic, partitions)
            shares = [count // pool.size + (1 if i < count % pool.size else 0)
                      for i in range(pool.size)]
            _, outs = pool.run([Task("produce", s.bootstrap, topic, partitions, SIZE, n, "1",
                                     compression, i) for i, n in enumerate(shares)])
            failed = [o.error for o in outs if o.error is not None]
            if failed:
                raise RuntimeError(f"{s.name}: {failed[0]}")
            topics[s.name] = (admin, topic)
        reads: dict[str, list[float]] = {"before": [], "after": []}
        steal0 = steal_seconds()
        for r in range(repeats):
            for s in sides if r % 2 == 0 else sides[::-1]:
                topic = topics[s.name][1]
                secs, outs = pool.run([Task("consume", s.bootstrap, topic, partitions, SIZE, count,
                                            worker=i) for i in range(pool.size)])
                failed = [o.error for o in outs if o.error is not None]
                if failed:
                    raise RuntimeError(f"{s.name}: {failed[0]}")
                reads[s.name].append(count * pool.size / secs)
                log(f"{compression} {s.name} read {r}: {reads[s.name][-1]:,.0f} msg/s")
        out.append(_row(compression, partitions, reads, steal_seconds() - steal0))
        for admin, topic in topics.values():
            delete_topic(admin, topic)
    return out


def _row(compression: str, partitions: int, rates: dict[str, list[float]], steal: float) -> str:
    b, a = statistics.median(rates["before"]), statistics.median(rates["after"])
    runs = " / ".join(f"{x / y:.2f}" for x, y in zip(rates["after"], rates["before"], strict=True))
    return f"| {compression} | {partitions} | {b:,.0f} | {a:,.0f} | {a / b:.2f}× ({runs}) | {steal:.1f} |"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="main", help="git ref of the 'before' code (default main)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--count", type=int, default=200_000, help="1 KiB messages per run")
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--acks", default="1",
                    help="comma-separated acks settings of the produce cells (default 1; e.g. "
                         "1,all)")
    ap.add_argument("--compressions", default="none,lz4",
                    help="comma-separated compression types of the produce cells")
    ap.add_argument("--micro-only", action="store_true", help="only the validator micro-benchmark")
    ap.add_argument("--no-consume", action="store_true", help="produce only (no read-back)")
    ap.add_argument("--consume-only", action="store_true",
                    help="produce each cell's topic once per side, then only A/B the reads")
    args = ap.parse_args()
    if args.micro_only:
        print("\n".join(micro()))
        return

    load0 = os.getloadavg()
    lines = ["## Validator micro-benchmark", "", *micro(), ""]
    print("\n".join(lines), file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(prefix="samsa-ab-") as tmp:
        t = Path(tmp)
        base = extract(args.base, t / "base")
        sides = [VersionedSamsa(t / "before", base, "before"), VersionedSamsa(t / "after", ROOT, "after")]
        for s in sides:
            s.workdir.mkdir()
            s.start()
        pool = ClientPool(args.clients)
        try:
            if args.consume_only:
                run_once(sides[0], pool, "none", 1, args.count // 4, "warm", True)
                run_once(sides[1], pool, "none", 1, args.count // 4, "warm", True)
                rows = consume_only(sides, pool, args.count, args.repeats)
                lines += [f"## Consume-only A/B, 1 KiB ({args.clients} readers of the whole "
                          "topic, the same topic re-read each run; msg/s delivered, median)", "",
                          "| compression | partitions | before | after | after/before (runs) | "
                          "steal s |", "|---|---:|---:|---:|---:|---:|", *rows, ""]
                raise _Done
            consume = not args.no_consume
            for s in sides:  # warm-up, unrecorded
                run_once(s, pool, "none", 1, args.count // 4, "warm", consume)
            header = ["| compression | partitions | before | after | after/before (runs) | steal s |",
                      "|---|---:|---:|---:|---:|---:|"]
            produced: list[str] = []
            consumed: list[str] = []
            cells = [(c, 1, a) for a in args.acks.split(",") for c in args.compressions.split(",")]
            for compression, partitions, acks in cells:
                rates: dict[str, list[float]] = {"before": [], "after": []}
                reads: dict[str, list[float]] = {"before": [], "after": []}
                steal0 = steal_seconds()
                for r in range(args.repeats):
                    order = sides if r % 2 == 0 else sides[::-1]
                    for s in order:
                        rate, read = run_once(s, pool, compression, partitions, args.count,
                                              f"{s.name}{r}", consume, acks)
                        rates[s.name].append(rate)
                        reads[s.name].append(read)
                        log(f"{compression} acks={acks} {s.name} run {r}: produce {rate:,.0f} msg/s, "
                            f"consume {read:,.0f} msg/s")
                steal = steal_seconds() - steal0
                label = compression if acks == "1" else f"{compression}, acks={acks}"
                produced.append(_row(label, partitions, rates, steal))
                if consume:
                    consumed.append(_row(label, partitions, reads, steal))
            lines += [f"## Produce throughput, 1 KiB, acks={args.acks} (msg/s, median of runs)", "",
                      *header, *produced, ""]
            if consume:
                lines += [f"## Consume throughput, 1 KiB ({args.clients} readers of the whole "
                          "topic; msg/s delivered, median of runs)", "", *header, *consumed, ""]
        except _Done:
            pass
        finally:
            pool.close()
            for s in sides:
                s.stop()
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load1 = os.getloadavg()
    lines.append(f"\nbase {args.base}, {args.repeats} runs × {args.count:,} messages per cell and "
                 f"side, {args.clients} client processes, {when}; load average (1/5/15 min) at "
                 f"start {load0[0]:.1f}/{load0[1]:.1f}/{load0[2]:.1f}, at end "
                 f"{load1[0]:.1f}/{load1[1]:.1f}/{load1[2]:.1f}")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
