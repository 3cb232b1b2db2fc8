"""Produce and consume throughput over PLAINTEXT, SSL and SASL_SSL on one broker, in the same run.

One Samsa broker serves a PLAINTEXT, an SSL and a SASL_SSL (PLAIN) listener (certificates from
samsa.testing.tls); each round runs every protocol once, in an order rotated from round to round,
so all see the same machine load. A protocol's turn produces `--records` records of `--size`
bytes with confluent-kafka to a new topic (acks=1), then reads them all back with a consumer.

Reported per protocol: the median MB/s of produce and consume, their ratio to PLAINTEXT (issue
17's goal: TLS keeps >= 70 %), and where the CPU goes: the broker's CPU ms per MB while producing
and while consuming, and this process's (the clients': librdkafka encrypts here) for the whole
turn. Consume time runs from assign() to the last record. The report is printed and written to
--out (default bench/results/tls-latest.md).

    PYTHONPATH=. python bench/tls.py --records 100000 --rounds 3

`--profile SSL` (or another protocol) adds one more produce + consume turn of that protocol with
`perf record` sampling the broker; where its CPU went (by shared object: OpenSSL, the Python
interpreter, uvloop, the kernel; and the hottest symbols) is added to the report and kept in
bench/results/tls-profile-latest.md.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from samsa.testing import SamsaBroker, free_port
from samsa.testing.tls import TlsFiles

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import process_cpu_seconds as cpu_seconds  # noqa: E402

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "tls-latest.md"



def own_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def produce(bs: str, conf: dict[str, str], topic: str, records: int, size: int) -> float:
    p = Producer({"bootstrap.servers": bs, "linger.ms": 5, "batch.size": 1 << 20, "acks": 1,
                  "queue.buffering.max.messages": 1_000_000, **conf})
    payload = os.urandom(size)
    p.list_topics(topic, timeout=30)  # auto-create, connect and authenticate before the clock
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
    """From assign() to the last record (the connection is made and authenticated first)."""
    c = Consumer({"bootstrap.servers": bs, "group.id": f"bench-{topic}",
                  "enable.auto.commit": False, "fetch.max.bytes": 52428800, **conf})
    c.list_topics(topic, timeout=30)
    got = 0
    t0 = time.perf_counter()
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    deadline = time.monotonic() + 300
    while got < records and time.monotonic() < deadline:
        for m in c.consume(10000, 1.0):
            if m.error() is None:
                got += 1
    elapsed = time.perf_counter() - t0
    c.close()
    if got < records:
        raise RuntimeError(f"consumed {got} of {records}")
    return records * size / elapsed / 1e6


def listeners(tls: TlsFiles) -> tuple[dict[str, str], dict[str, tuple[str, dict[str, str]]], int]:
    """Broker overrides for the three listeners, each protocol's (bootstrap, client settings),
    and the PLAINTEXT port (SamsaBroker waits on it)."""
    plain, ssl_port, sasl_port = free_port(), free_port(), free_port()
    overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{ssl_port},"
                     f"SASL_SSL://127.0.0.1:{sasl_port}",
        **tls.broker_ssl("none", prefix="listener.name.ssl."),
        **tls.broker_ssl("none", prefix="listener.name.sasl_ssl."),
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config":
            f'{PLAIN_MODULE} required user_bench="bench-secret";'}
    ca = {"ssl.ca.location": str(tls.ca_file)}
    protocols = {
        "PLAINTEXT": (f"127.0.0.1:{plain}", {}),
        "SSL": (f"127.0.0.1:{ssl_port}", {"security.protocol": "SSL", **ca}),
        "SASL_SSL": (f"127.0.0.1:{sasl_port}", {
            "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
            "sasl.username": "bench", "sasl.password": "bench-secret", **ca})}
    return overrides, protocols, plain


KEYS = ("produce", "consume", "broker_produce", "broker_consume", "client")
PROFILE_OUT = Path(__file__).resolve().parent / "results" / "tls-profile-latest.md"


def _perf_report(data: Path, sort: str, top: int) -> list[str]:
    out = subprocess.run(["perf", "report", "--stdio", "--no-children", "--sort", sort,
                          "-i", str(data)], capture_output=True, text=True, check=False).stdout
    rows = [ln.strip() for ln in out.splitlines() if ln.strip() and not ln.startswith("#")]
    return [f"- {r[:140]}" for r in rows[:top]]


def profile_turn(pid: int, bs: str, conf: dict[str, str], records: int, size: int) -> list[str]:
    """One produce + consume turn with `perf record` sampling the broker process; where its CPU
    went, by shared object (OpenSSL, Python, uvloop, the kernel) and by symbol."""
    if shutil.which("perf") is None:
        return ["(perf not found: no profile)"]
    data = PROFILE_OUT.with_suffix(".data")
    rec = subprocess.Popen(["perf", "record", "-F", "2999", "-p", str(pid), "-o", str(data)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # attached
    topic = f"bench-tls-profile-{uuid.uuid4().hex[:6]}"
    produce(bs, conf, topic, records, size)
    consume(bs, conf, topic, records, size)
    rec.send_signal(2)  # SIGINT: perf writes what it has
    rec.wait(60)
    by_dso = _perf_report(data, "dso", 8)
    by_sym = _perf_report(data, "dso,sym", 15)
    PROFILE_OUT.write_text("\n".join(["by shared object:", *by_dso, "", "by symbol:", *by_sym])
                           + "\n")
    data.unlink(missing_ok=True)
    return ["Broker CPU samples (perf record -F 2999 -p <broker>), by shared object:", "",
            *by_dso, "", "Hottest symbols:", "", *by_sym]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=str(DEFAULT_OUT))
    ap.add_argument("--profile", choices=("PLAINTEXT", "SSL", "SASL_SSL"), default=None)
    ap.add_argument("--protocols", default="PLAINTEXT,SSL,SASL_SSL",
                    help="comma-separated; PLAINTEXT always runs (the ratios' base)")
    ap.add_argument("--warmup", type=int, default=1,
                    help="uncounted rounds first (a new broker and fresh memory are slower)")
    ap.add_argument("--data-parent", default=None,
                    help="where the data dir goes, e.g. /dev/shm to keep disk write-back out")
    args = ap.parse_args()
    mb = args.records * args.size / 1e6
    with tempfile.TemporaryDirectory(prefix="samsa-bench-tls-", dir=args.data_parent) as tmp:
        tls = TlsFiles.create(Path(tmp) / "certs")
        overrides, protocols, plain = listeners(tls)
        wanted = {"PLAINTEXT", *args.protocols.split(",")}
        names = [p for p in protocols if p in wanted]
        results: dict[str, dict[str, list[float]]] = {p: {k: [] for k in KEYS} for p in names}
        with SamsaBroker(Path(tmp) / "data", port=plain, overrides=overrides) as b:
            assert b.proc is not None
            admin = AdminClient({"bootstrap.servers": b.bootstrap})
            for proto, (bs, conf) in protocols.items():  # warm-up: __consumer_offsets, imports
                produce(bs, conf, f"warm-up-{proto.lower()}", 2000, args.size)
                consume(bs, conf, f"warm-up-{proto.lower()}", 2000, args.size)
            for rnd in range(-args.warmup, args.rounds):
                order = names[rnd % len(names):] + names[:rnd % len(names)]
                for proto in order:
                    bs, conf = protocols[proto]
                    topic = f"bench-tls-{proto.lower()}-{uuid.uuid4().hex[:6]}"
                    me0, cpu0 = own_cpu(), cpu_seconds(b.proc.pid)
                    pr = produce(bs, conf, topic, args.records, args.size)
                    cpu1 = cpu_seconds(b.proc.pid)
                    co = consume(bs, conf, topic, args.records, args.size)
                    cpu2, me2 = cpu_seconds(b.proc.pid), own_cpu()
                    # each turn's topic goes, so the next writes into recycled memory as a
                    # long-running broker does (fresh pages cost this VM more than the work)
                    admin.delete_topics([topic])[topic].result(60)
                    if rnd < 0:
                        print(f"warm-up {proto:<9} produce {pr:7.1f} MB/s  consume {co:7.1f} MB/s",
                              file=sys.stderr, flush=True)
                        continue
                    r = results[proto]
                    r["produce"].append(pr)
                    r["consume"].append(co)
                    r["broker_produce"].append((cpu1 - cpu0) / mb * 1000)
                    r["broker_consume"].append((cpu2 - cpu1) / mb * 1000)
                    r["client"].append((me2 - me0) / (2 * mb) * 1000)
                    print(f"round {rnd + 1} {proto:<9} produce {pr:7.1f} MB/s  consume "
                          f"{co:7.1f} MB/s  broker CPU {r['broker_produce'][-1]:.1f} / "
                          f"{r['broker_consume'][-1]:.1f} ms/MB  clients "
                          f"{r['client'][-1]:.1f} ms/MB", file=sys.stderr, flush=True)
            profile = (profile_turn(b.proc.pid, *protocols[args.profile], args.records, args.size)
                       if args.profile else [])
    med = {p: {k: statistics.median(v) for k, v in r.items()} for p, r in results.items()}
    base = med["PLAINTEXT"]
    # the host's speed drifts between rounds more than within one: each protocol is also set
    # against the PLAINTEXT turn of its own round (median of those paired ratios)
    paired = {p: {k: statistics.median(a / b for a, b in zip(r[k], results["PLAINTEXT"][k],
                                                                strict=True))
                  for k in ("produce", "consume")} for p, r in results.items()}
    lines = [f"{args.records} records x {args.size} B per protocol and round, {args.rounds} "
             f"rounds (medians; every round runs each protocol once, order rotated), "
             f"confluent-kafka, acks=1, one partition, one broker; {args.warmup} warm-up round(s); "
             f"data dir under {args.data_parent or tempfile.gettempdir()}", "",
             "| protocol | produce MB/s | vs PLAINTEXT (medians / paired) | consume MB/s | vs "
             "PLAINTEXT (medians / paired) | broker CPU ms/MB produce | broker CPU ms/MB consume | "
             "client CPU ms/MB |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for p, m in med.items():
        q = paired[p]
        lines.append(f"| {p} | {m['produce']:.1f} | {m['produce'] / base['produce']:.0%} / "
                     f"{q['produce']:.0%} | {m['consume']:.1f} | "
                     f"{m['consume'] / base['consume']:.0%} / {q['consume']:.0%} | "
                     f"{m['broker_produce']:.2f} | {m['broker_consume']:.2f} | "
                     f"{m['client']:.2f} |")
    lines += ["", "Per round (produce / consume MB/s):", ""]
    for p, r in results.items():
        lines.append(f"- {p}: " + ", ".join(f"{a:.1f} / {c:.1f}"
                                           for a, c in zip(r["produce"], r["consume"],
                                                           strict=True)))
    if profile:
        lines += ["", f"Profile of one {args.profile} turn:", "", *profile]
    report = "\n".join(lines) + "\n"
    print("\n" + report)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(f"# bench/tls.py {' '.join(sys.argv[1:])}\n\n{report}")


if __name__ == "__main__":
    main()
