"""SSL vs PLAINTEXT throughput of two source trees (a reference and a candidate), in one run.

For each tree one broker (PLAINTEXT + SSL listeners, as bench/tls.py) runs from that tree
(PYTHONPATH); rounds go tree by tree and protocol by protocol, so all four combinations see the
same machine load. Each round produces `--records` records of `--size` bytes (confluent-kafka,
acks=1) and reads them back. Reported per tree: medians and min-max of produce/consume MB/s,
the SSL/PLAINTEXT ratio of the medians, and the broker's CPU ms per MB moved.

    PYTHONPATH=. python bench/tls_compare.py --ref /tmp/tls-ref --new . --records 100000 --rounds 5
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from confluent_kafka.admin import AdminClient  # noqa: E402
from tls import consume, cpu_seconds, produce  # noqa: E402

from samsa.testing import SamsaBroker, free_port  # noqa: E402
from samsa.testing.tls import TlsFiles, ssl_listener_overrides  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--ref", required=True, help="reference source tree")
    ap.add_argument("--new", default=".", help="candidate source tree")
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--perf-stat", action="store_true",
                    help="also count the broker's page faults per MB (perf stat)")
    ap.add_argument("--warmup", type=int, default=1, help="uncounted rounds first")
    ap.add_argument("--data-parent", default=None,
                    help="where the data dirs go, e.g. /dev/shm to keep disk write-back out")
    ap.add_argument("--produce-only", action="store_true",
                    help="skip the consumers: broker CPU is then per MB produced")
    args = ap.parse_args()
    trees = {"ref": str(Path(args.ref).resolve()), "new": str(Path(args.new).resolve())}
    with tempfile.TemporaryDirectory(prefix="samsa-tls-compare-", dir=args.data_parent) as tmp:
        tls = TlsFiles.create(Path(tmp) / "certs")
        brokers: dict[str, tuple[SamsaBroker, dict[str, tuple[str, dict[str, str]]]]] = {}
        old_path, old_cwd = os.environ.get("PYTHONPATH"), os.getcwd()
        try:
            for name, tree in trees.items():
                plain = free_port()
                overrides, ssl_port = ssl_listener_overrides(tls, plain)
                overrides["listeners"] = f"SSL://127.0.0.1:{ssl_port},PLAINTEXT://127.0.0.1:{plain}"
                # `python -m` puts the working directory first on sys.path: start in the tree
                os.environ["PYTHONPATH"] = tree
                os.chdir(tree)
                b = SamsaBroker(Path(tmp) / f"data-{name}", port=plain, overrides=overrides).start()
                brokers[name] = (b, {"PLAINTEXT": (f"127.0.0.1:{plain}", {}),
                                     "SSL": (f"127.0.0.1:{ssl_port}", tls.confluent())})
        finally:
            os.chdir(old_cwd)
            if old_path is None:
                os.environ.pop("PYTHONPATH", None)
            else:
                os.environ["PYTHONPATH"] = old_path
        res: dict[tuple[str, str], dict[str, list[float]]] = {
            (t, p): {"produce": [], "consume": [], "cpu": []}
            for t in trees for p in ("PLAINTEXT", "SSL")}
        try:
            admins = {name: AdminClient({"bootstrap.servers": b.bootstrap})
                      for name, (b, _) in brokers.items()}
            for rnd in range(-args.warmup, args.rounds):
                order = list(trees) if rnd % 2 == 0 else list(reversed(trees))
                for name in order:
                    b, protos = brokers[name]
                    assert b.proc is not None
                    for proto, (bs, conf) in protos.items():
                        topic = f"cmp-{name}-{proto.lower()}-{uuid.uuid4().hex[:6]}"
                        cpu0 = cpu_seconds(b.proc.pid)
                        stat = subprocess.Popen(
                            ["perf", "stat", "-x,", "-e", "page-faults", "-p",
                             str(b.proc.pid)], stderr=subprocess.PIPE, text=True,
                        ) if args.perf_stat else None
                        pr = produce(bs, conf, topic, args.records, args.size)
                        co = 0.0 if args.produce_only else consume(bs, conf, topic, args.records,
                                                                    args.size)
                        moved = (1 if args.produce_only else 2) * args.records * args.size / 1e6
                        cpu = (cpu_seconds(b.proc.pid) - cpu0) / moved
                        # the next turn writes into recycled memory, as a long-running broker
                        admins[name].delete_topics([topic])[topic].result(60)
                        counts = ""
                        if stat is not None:
                            stat.send_signal(signal.SIGINT)
                            _, err = stat.communicate(30)
                            vals = {ln.split(",")[2]: float(ln.split(",")[0]) for ln in
                                    err.splitlines() if ln.count(",") >= 2
                                    and ln.split(",")[0].replace(".", "").isdigit()}
                            pf = vals.get("page-faults", 0) / moved
                            res[(name, proto)].setdefault("pf", []).append(pf)
                            counts = f"  {pf:.0f} page faults/MB"
                        if rnd < 0:
                            continue  # warm-up
                        r = res[(name, proto)]
                        r["produce"].append(pr)
                        r["consume"].append(co)
                        r["cpu"].append(cpu * 1000)
                        print(f"round {rnd + 1} {name} {proto:<9} produce {pr:7.1f} MB/s  consume "
                              f"{co:7.1f} MB/s  broker CPU {cpu * 1000:.2f} ms/MB{counts}",
                              file=sys.stderr, flush=True)
        finally:
            for b, _ in brokers.values():
                b.stop()
    print(f"\n{args.records} records x {args.size} B, {args.rounds} rounds; median (min-max)\n")
    print("| tree | protocol | produce MB/s | consume MB/s | broker CPU ms/MB |")
    print("|---|---|---:|---:|---:|")

    def fmt(v: list[float]) -> str:
        return f"{statistics.median(v):.1f} ({min(v):.0f}-{max(v):.0f})"

    for (t, p), r in res.items():
        extra = f", {statistics.median(r['pf']):.0f} faults/MB" if r.get("pf") else ""
        print(f"| {t} | {p} | {fmt(r['produce'])} | {fmt(r['consume'])} | "
              f"{statistics.median(r['cpu']):.2f}{extra} |")
    for proto in ("PLAINTEXT", "SSL"):
        rr, nr = res[("ref", proto)], res[("new", proto)]
        pairs = [n / r for n, r in zip(nr["produce"], rr["produce"], strict=True)]
        cpairs = [n / r for n, r in zip(nr["consume"], rr["consume"], strict=True) if r > 0]
        print(f"| new / ref | {proto} | {statistics.median(pairs):.0%} (median of per-round "
              f"ratios) | {statistics.median(cpairs) if cpairs else 0:.0%} | "
              f"{statistics.median(nr['cpu']) / statistics.median(rr['cpu']):.0%} |")
    for t in trees:
        pl, sl = res[(t, "PLAINTEXT")], res[(t, "SSL")]
        ratios = [s / p for s, p in zip(sl["produce"], pl["produce"], strict=True)]
        print(f"| {t} | SSL / PLAINTEXT | "
              f"{statistics.median(sl['produce']) / statistics.median(pl['produce']):.0%} "
              f"(per round {min(ratios):.0%}-{max(ratios):.0%}) | "
              f"{statistics.median(sl['consume']) / max(statistics.median(pl['consume']), 1e-9):.0%}"
              " | |")


if __name__ == "__main__":
    main()
