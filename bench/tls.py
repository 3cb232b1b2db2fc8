"""Produce and consume throughput over SSL vs PLAINTEXT on one broker, in the same run.

One Samsa broker serves a PLAINTEXT and an SSL listener (certificates from samsa.testing.tls);
rounds alternate PLAINTEXT and SSL so both see the same machine load. Each round produces
`--records` records of `--size` bytes with confluent-kafka to a new topic (acks=1), then reads them
all back with a consumer. Reported: the median MB/s of each protocol, the SSL/PLAINTEXT ratio
(issue 17's goal: TLS keeps >= 70 %) and the broker's CPU seconds per MB.

    PYTHONPATH=. python bench/tls.py --records 100000 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer

from samsa.testing import SamsaBroker, free_port
from samsa.testing.tls import TlsFiles, ssl_listener_overrides

CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def produce(bs: str, conf: dict[str, str], topic: str, records: int, size: int) -> float:
    p = Producer({"bootstrap.servers": bs, "linger.ms": 5, "batch.size": 1 << 20, "acks": 1,
                  "queue.buffering.max.messages": 1_000_000, **conf})
    payload = os.urandom(size)
    p.list_topics(topic, timeout=30)  # auto-create and connect before the clock starts
    t0 = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                p.produce(topic, payload)
                break
            except BufferError:
                p.poll(0.01)
    left = p.flush(120)
    elapsed = time.perf_counter() - t0
    if left:
        raise RuntimeError(f"{left} records not delivered")
    return records * size / elapsed / 1e6


def consume(bs: str, conf: dict[str, str], topic: str, records: int, size: int) -> float:
    c = Consumer({"bootstrap.servers": bs, "group.id": f"bench-{topic}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "fetch.max.bytes": 52428800, **conf})
    c.subscribe([topic])
    got = 0
    t0: float | None = None
    deadline = time.monotonic() + 300
    while got < records and time.monotonic() < deadline:
        for m in c.consume(10000, 1.0):
            if m.error() is None:
                if t0 is None:
                    t0 = time.perf_counter()
                got += 1
    elapsed = time.perf_counter() - (t0 or time.perf_counter())
    c.close()
    if got < records:
        raise RuntimeError(f"consumed {got} of {records}")
    return records * size / elapsed / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="samsa-bench-tls-") as tmp:
        tls = TlsFiles.create(Path(tmp) / "certs")
        plain = free_port()
        overrides, ssl_port = ssl_listener_overrides(tls, plain)
        overrides["listeners"] = f"SSL://127.0.0.1:{ssl_port},PLAINTEXT://127.0.0.1:{plain}"
        protocols = {"PLAINTEXT": (f"127.0.0.1:{plain}", {}),
                     "SSL": (f"127.0.0.1:{ssl_port}", tls.confluent())}
        results: dict[str, dict[str, list[float]]] = {
            p: {"produce": [], "consume": [], "cpu_per_mb": []} for p in protocols}
        with SamsaBroker(Path(tmp) / "data", port=plain, overrides=overrides) as b:
            assert b.proc is not None
            for rnd in range(args.rounds):
                for proto, (bs, conf) in protocols.items():
                    topic = f"bench-tls-{proto.lower()}-{uuid.uuid4().hex[:6]}"
                    cpu0 = cpu_seconds(b.proc.pid)
                    pr = produce(bs, conf, topic, args.records, args.size)
                    co = consume(bs, conf, topic, args.records, args.size)
                    cpu = cpu_seconds(b.proc.pid) - cpu0
                    mb = 2 * args.records * args.size / 1e6
                    results[proto]["produce"].append(pr)
                    results[proto]["consume"].append(co)
                    results[proto]["cpu_per_mb"].append(cpu / mb)
                    print(f"round {rnd + 1} {proto:<9} produce {pr:7.1f} MB/s  consume "
                          f"{co:7.1f} MB/s  broker CPU {cpu / mb * 1000:.1f} ms/MB",
                          file=sys.stderr, flush=True)
    med = {p: {k: statistics.median(v) for k, v in r.items()} for p, r in results.items()}
    print(f"\n{args.records} records x {args.size} B, {args.rounds} rounds (medians), "
          f"confluent-kafka, acks=1, one partition\n")
    print("| protocol | produce MB/s | consume MB/s | broker CPU ms/MB |")
    print("|---|---:|---:|---:|")
    for p, m in med.items():
        print(f"| {p} | {m['produce']:.1f} | {m['consume']:.1f} | "
              f"{m['cpu_per_mb'] * 1000:.1f} |")
    pl, sl = med["PLAINTEXT"], med["SSL"]
    print(f"| SSL / PLAINTEXT | {sl['produce'] / pl['produce']:.0%} | "
          f"{sl['consume'] / pl['consume']:.0%} | |")


if __name__ == "__main__":
    main()
