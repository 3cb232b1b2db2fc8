"""Log compaction benchmark, one command: `python bench/cleaner.py`.

1. Cleaner alone: a partition log of --dirty-mb keyed records (--keys distinct keys) is cleaned
   in-process, once with --value-bytes values and once with 1 KiB values: MB/s of dirty log.
2. Cleaner under load, for each --modes entry (process: the default, cleaning in a child process;
   thread: in a thread of the broker): a broker holds a compacted topic with --dirty-mb of dirty
   data (min.cleanable.dirty.ratio=1.0, so it is not cleaned yet) while a producer writes to another
   topic as fast as it can. After a --seconds baseline window the dirty topic's ratio is lowered to
   0.01, the cleaner cleans it, and the produce rate during the cleaning pass is compared with the
   baseline. The cleaner's own MB/s comes from its stats (dirty bytes / pass duration).

Prints a markdown report and writes it to --out (default bench/results/cleaner-latest.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import KafkaError, Producer  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from samsa.protocol.records import encode_batch  # noqa: E402
from samsa.storage.cleaner import STATS_FILE, CleanerConfig, LogCleaner  # noqa: E402
from samsa.storage.log import LogConfig, PartitionLog  # noqa: E402
from samsa.testing import SamsaBroker  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_report  # noqa: E402

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "cleaner-latest.md"


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def keyed_batch(rnd: random.Random, keys: int, value: bytes, n: int, ts: int) -> bytes:
    return encode_batch([(b"key-%08d" % rnd.randrange(keys), value, [], ts) for _ in range(n)])


def cleaner_alone(dirty_mb: int, keys: int, value_bytes: int) -> dict[str, Any]:
    """Clean a dirty log in this process (inline): the cleaner's speed with no competition."""
    with tempfile.TemporaryDirectory(prefix="samsa-bench-") as tmp:
        d = Path(tmp)
        now = int(time.time() * 1000)
        lg = PartitionLog.open(d / "t-0", "t", 0, LogConfig(segment_bytes=16 << 20,
                                                            cleanup_policy="compact"), True)
        rnd = random.Random(1)
        value = b"v" * value_bytes
        per_batch = max(1, 16384 // (value_bytes + 20))
        while lg.size_bytes < dirty_mb * 1_000_000:
            lg.append(bytearray(keyed_batch(rnd, keys, value, per_batch, now)), now)
        lg.roll()
        cl = LogCleaner(CleanerConfig(mode="inline"), [d])
        t0 = time.perf_counter()
        asyncio.run(cl.clean_once({("t", 0): lg}, now_ms=now))
        elapsed = time.perf_counter() - t0
        run = cl.last_run
        assert run is not None and run.outcome == "done", run
        m = cl.metrics()
        lg.close()
        return {"value_bytes": value_bytes, "dirty_mb": run.dirty_bytes / 1e6, "seconds": elapsed,
                "mb_per_s": run.dirty_bytes / 1e6 / elapsed,
                "records_per_s": m["records_read"] / elapsed, "records": m["records_read"],
                "kept": m["records_retained"], "written_mb": m["bytes_written"] / 1e6}


class LoadProducer(threading.Thread):
    """Produces keyless 100-byte records to `topic` as fast as the broker takes them; delivery
    times are bucketed so any window's rate can be read afterwards."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.p = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5,
                           "batch.size": 262144, "queue.buffering.max.messages": 200000,
                           "log_level": 3})
        self.topic = topic
        self.stop = threading.Event()
        self.times: list[float] = []
        self.errors = 0

    def _done(self, err: KafkaError | None, _msg: Any) -> None:
        if err is None:
            self.times.append(time.monotonic())
        else:
            self.errors += 1

    def run(self) -> None:
        value = b"p" * 100
        while not self.stop.is_set():
            try:
                for _ in range(1000):
                    self.p.produce(self.topic, value=value, on_delivery=self._done)
            except BufferError:
                pass
            self.p.poll(0.001)
        self.p.flush(30)

    def rate(self, t0: float, t1: float) -> float:
        return sum(1 for t in self.times if t0 <= t < t1) / (t1 - t0)


def under_load(mode: str, dirty_mb: int, keys: int, value_bytes: int,
               seconds: float) -> dict[str, Any]:
    with SamsaBroker(overrides={"log.cleaner.backoff.ms": "200",
                                "samsa.log.cleaner.mode": mode}) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        futs = admin.create_topics([
            NewTopic("dirty", 1, 1, config={"cleanup.policy": "compact",
                                            "segment.bytes": str(4 << 20),
                                            "min.cleanable.dirty.ratio": "1.0"}),
            NewTopic("load", 1, 1)])
        for f in futs.values():
            f.result(30)
        log(f"[{mode}] filling 'dirty' with {dirty_mb} MB")
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
                      "queue.buffering.max.messages": 500000, "log_level": 3})
        rnd = random.Random(2)
        value = b"v" * value_bytes
        n = dirty_mb * 1_000_000 // (value_bytes + 30)
        for i in range(n):
            while True:
                try:
                    p.produce("dirty", key=b"key-%08d" % rnd.randrange(keys), value=value)
                    break
                except BufferError:
                    p.poll(0.01)
            if i % 10000 == 0:
                p.poll(0)
        assert p.flush(120) == 0
        load = LoadProducer(b.bootstrap, "load")
        load.start()
        time.sleep(2)  # warm-up
        t_base = time.monotonic()
        time.sleep(seconds)
        t_trigger = time.monotonic()
        res = admin.incremental_alter_configs([ConfigResource(
            "TOPIC", "dirty", incremental_configs=[ConfigEntry(
                "min.cleanable.dirty.ratio", "0.01",
                incremental_operation=AlterConfigOpType.SET)])])
        for f in res.values():
            f.result(30)
        log(f"[{mode}] cleaning triggered")
        stats_path = b.data_dir / "logs" / STATS_FILE
        run = None
        deadline = time.monotonic() + 600
        wall_trigger = time.time() * 1000 - (time.monotonic() - t_trigger) * 1000
        while time.monotonic() < deadline:
            try:
                st = json.loads(stats_path.read_text())
                last = st.get("last_run") or {}
                if (last.get("partition") == "dirty-0" and last.get("outcome") == "done"
                        and last.get("started_ms", 0) >= wall_trigger - 1000):
                    run = last
                    break
            except (OSError, ValueError):
                pass
            time.sleep(0.05)
        assert run is not None, f"no cleaning pass finished:\n{b.log_text()[-3000:]}"
        # the pass's window on the monotonic clock
        c0 = t_trigger + (run["started_ms"] - wall_trigger) / 1000
        c1 = c0 + run["duration_s"]
        time.sleep(0.5)
        load.stop.set()
        load.join(60)
        base = load.rate(t_base, t_trigger)
        during = load.rate(c0, c1)
        return {"mode": mode, "dirty_mb": run["dirty_bytes"] / 1e6, "clean_s": run["duration_s"],
                "cleaner_mb_per_s": run["dirty_mb_per_s"], "records_read": run["records_read"],
                "records_kept": run["records_retained"], "base_msgs": base, "during_msgs": during,
                "ratio": during / base if base else 0.0, "errors": load.errors}


def report(alone: list[dict[str, Any]], loaded: list[dict[str, Any]], args: argparse.Namespace) -> str:
    lines = [
        f"Run of {time.strftime('%Y-%m-%d %H:%M')} on {platform.node() or 'this machine'}: "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}; `python bench/cleaner.py "
        f"--dirty-mb {args.dirty_mb} --keys {args.keys} --value-bytes {args.value_bytes} "
        f"--seconds {args.seconds}`.",
        "",
        "Cleaner alone (in-process, one pass over a fully dirty log; keys are 12 bytes):",
        "",
        "| value size | dirty log | pass | dirty MB/s | records/s | kept |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for a in alone:
        lines.append(f"| {a['value_bytes']} B | {a['dirty_mb']:.0f} MB | {a['seconds']:.1f} s | "
                     f"{a['mb_per_s']:.1f} | {a['records_per_s']:,.0f} | "
                     f"{a['kept']:,} of {a['records']:,} |")
    lines += [
        "",
        "Cleaner in a broker while a producer writes 100-byte records to another topic "
        "(acks=1, linger.ms=5) as fast as it can:",
        "",
        "| cleaner runs in | dirty log | pass | cleaner dirty MB/s | produce before | "
        "produce while cleaning | ratio |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in loaded:
        lines.append(f"| {r['mode']} | {r['dirty_mb']:.0f} MB | {r['clean_s']:.1f} s | "
                     f"{r['cleaner_mb_per_s']:.1f} | {r['base_msgs']:,.0f} msg/s | "
                     f"{r['during_msgs']:,.0f} msg/s | {r['ratio']:.2f} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--dirty-mb", type=int, default=100)
    ap.add_argument("--keys", type=int, default=100000)
    ap.add_argument("--value-bytes", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--modes", default="process,thread")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"raw report, default {DEFAULT_OUT}")
    args = ap.parse_args()
    alone = []
    for vb in dict.fromkeys([args.value_bytes, 1024]):
        log(f"cleaner alone, {vb} B values")
        alone.append(cleaner_alone(args.dirty_mb, args.keys, vb))
    loaded = [under_load(m, args.dirty_mb, args.keys, args.value_bytes, args.seconds)
              for m in args.modes.split(",") if m]
    write_report(report(alone, loaded, args), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
