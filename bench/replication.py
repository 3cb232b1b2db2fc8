"""Replication cost on a local 3-broker cluster (issue 14): RF=3 acks=all vs RF=1 acks=1 (and
RF=3 acks=1) throughput and end-to-end latency, side by side in the same run.

    .venv/bin/python bench/replication.py [--repeats 3] [--count 200000] [--partitions 3]
                                          [--lat-seconds 10] [--out FILE]

One cluster (samsa.testing.SamsaCluster: node 1 a dedicated controller, nodes 2-4 brokers, every
setting at its default) serves every configuration. Per repeat, each configuration (order rotated
between repeats, so drift in the shared host's load hits all of them) gets:
1. produce throughput: a fresh topic of --partitions partitions (RF=3 topics with
   min.insync.replicas=2), --count 1 KiB records from 2 confluent-kafka processes
   (bench/clients.py: produce_batch, linger.ms=5, no compression, every delivery checked), timed
   from the start signal to the last flush(); before the run every partition has a leader and
   its full ISR. Also timed: until the high watermarks (ListOffsets) cover every record, i.e.
   every record is on every in-sync replica; and the three brokers' CPU seconds (/proc);
2. end-to-end latency: bench/run.py's measure_latency (a paced 2,000 msg/s of 1 KiB, a consumer
   thread assigned at the log end, latency = receive time - send time embedded in the record,
   default fetch.wait.max.ms) on another fresh topic with the same RF/acks. A consumer only sees
   records below the high watermark, so with RF=3 the figure includes replication.
The report gives medians per configuration and each one's ratio to RF=1 acks=1.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from clients import ClientPool, Task
from cluster_common import METADATA, METADATA_VERSION, Link, load_line, run_header, write_report
from common import CLK_TCK, QUIET, delete_topic, log, machine_info, steal_seconds
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from run import measure_latency

from samsa.testing import SamsaCluster

SIZE = 1024
ADMIN_TIMEOUT = 30.0


@dataclass(frozen=True)
class Setup:
    label: str
    rf: int
    acks: str


SETUPS = (Setup("RF=1 acks=1", 1, "1"), Setup("RF=3 acks=all", 3, "all"),
          Setup("RF=3 acks=1", 3, "1"))


@dataclass
class Results:
    rates: list[float] = field(default_factory=list)      # records/s acknowledged
    replicated: list[float] = field(default_factory=list)  # records/s up to the high watermark
    cpu_per_gb: list[float] = field(default_factory=list)  # broker CPU s per GB produced
    lat_p50: list[float] = field(default_factory=list)
    lat_p99: list[float] = field(default_factory=list)
    ack_p50: list[float] = field(default_factory=list)
    ack_p99: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def partitions_ready(link: Link, topic: str, partitions: int, rf: int) -> bool:
    """Raw Metadata: every partition has a leader and rf replicas in its ISR."""
    resp = link.request(METADATA, METADATA_VERSION, {
        "topics": [{"name": topic}], "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False})
    if not resp.topics or int(resp.topics[0].error_code) != 0:
        return False
    ps = resp.topics[0].partitions
    return len(ps) == partitions and all(
        int(p.leader_id) >= 0 and len(p.isr_nodes) == rf for p in ps)


def make_topic(admin: AdminClient, link: Link, topic: str, partitions: int, rf: int) -> None:
    config = {"min.insync.replicas": "2"} if rf >= 3 else {}
    fs = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=rf,
                                       config=config)],
                             operation_timeout=ADMIN_TIMEOUT, request_timeout=ADMIN_TIMEOUT)
    fs[topic].result(timeout=ADMIN_TIMEOUT)
    deadline = time.monotonic() + ADMIN_TIMEOUT
    while not partitions_ready(link, topic, partitions, rf):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{topic}: partitions without a leader or full ISR")
        time.sleep(0.05)


def broker_cpu(cluster: SamsaCluster) -> float:
    total = 0.0
    for node in cluster.brokers:
        with open(f"/proc/{node.pid}/stat") as f:
            stat = f.read()
        fields = stat[stat.rindex(")") + 2:].split()
        total += (int(fields[11]) + int(fields[12])) / CLK_TCK
    return total


def replicated_by(bootstrap: str, topic: str, partitions: int, count: int,
                  timeout: float = 120.0) -> float:
    """Monotonic time at which the partitions' high watermarks (ListOffsets latest, which a
    client sees) add up to `count`: every record is on every ISR replica. None-safe: gives up
    after `timeout` and returns NaN."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "rbench-hw", **QUIET})
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            total = sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1]
                        for p in range(partitions))
            if total >= count:
                return time.monotonic()
            time.sleep(0.01)
        return float("nan")
    finally:
        c.close()


def throughput(cluster: SamsaCluster, admin: AdminClient, link: Link, pool: ClientPool,
               s: Setup, partitions: int, count: int, tag: str) -> tuple[float, float, float]:
    """(records/s acknowledged, records/s on every replica, broker CPU s per GB produced)."""
    topic = f"rbench-tp-rf{s.rf}-acks{s.acks}-{tag}"
    make_topic(admin, link, topic, partitions, s.rf)
    shares = [count // pool.size + (1 if i < count % pool.size else 0) for i in range(pool.size)]
    tasks = [Task("produce", cluster.bootstrap, topic, partitions, SIZE, n, s.acks, "none", i)
             for i, n in enumerate(shares)]
    cpu0 = broker_cpu(cluster)
    seconds, outs = pool.run(tasks)
    done = time.monotonic()
    failed = [o.error for o in outs if o.error is not None]
    if failed:
        delete_topic(admin, topic)
        raise RuntimeError(failed[0])
    everywhere = seconds + replicated_by(cluster.bootstrap, topic, partitions, count) - done
    cpu = broker_cpu(cluster) - cpu0
    delete_topic(admin, topic)
    return count / seconds, count / everywhere, cpu / (count * SIZE / 1e9)


def latency(cluster: SamsaCluster, admin: AdminClient, link: Link, s: Setup, partitions: int,
            seconds: float, tag: str) -> tuple[float, float, float, float]:
    topic = f"rbench-lat-rf{s.rf}-acks{s.acks}-{tag}"
    make_topic(admin, link, topic, partitions, s.rf)
    try:
        lat = measure_latency(cluster.bootstrap, topic, partitions, seconds, acks=s.acks)
    finally:
        delete_topic(admin, topic)
    if lat.received < lat.sent:
        raise RuntimeError(f"latency: {lat.received}/{lat.sent} records received")
    return lat.p50_ms, lat.p99_ms, lat.ack_p50_ms, lat.ack_p99_ms


def med(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def fmt(x: float | None, digits: int = 0) -> str:
    return "–" if x is None else f"{x:,.{digits}f}"


def rat(a: float | None, b: float | None) -> str:
    return "–" if a is None or not b else f"{a / b:.2f}×"


def report(res: dict[str, Results], args: argparse.Namespace, command: str,
           elapsed: float, steal: float) -> str:
    base = res[SETUPS[0].label]
    lines = run_header("Replication: RF=3 acks=all vs RF=1 acks=1 on a local 3-broker cluster",
                       command)
    lines += machine_info() + [""]
    lines += [f"Cluster: samsa.testing.SamsaCluster, node 1 a dedicated controller, nodes 2-4 "
              "brokers, all on this host, default settings (replica.fetch.wait.max.ms=500, "
              "num.replica.fetchers=1, no fsync per produce). RF=3 topics have "
              f"min.insync.replicas=2. {args.repeats} repeats, configurations rotated; medians. "
              f"{elapsed:.0f} s in all, CPU steal {steal:.0f} s.", "",
              f"## Produce throughput ({args.count:,} × 1 KiB records per run, {args.partitions} "
              f"partitions, {args.clients} confluent-kafka processes, linger.ms=5, no "
              "compression)", "",
              "| configuration | records/s acknowledged | MB/s | vs RF=1 acks=1 (runs) | "
              "records/s up to the high watermark | broker CPU s / GB produced |",
              "|---|---:|---:|---:|---:|---:|"]
    for s in SETUPS:
        r = res[s.label]
        m = med(r.rates)
        runs = " / ".join(f"{x / y:.2f}" for x, y in zip(r.rates, base.rates, strict=False))
        lines.append(f"| {s.label} | {fmt(m)} | {fmt(m and m * SIZE / 1e6, 1)} | "
                     f"{rat(m, med(base.rates))} ({runs}) | {fmt(med(r.replicated))} | "
                     f"{fmt(med(r.cpu_per_gb), 1)} |")
    lines += ["", "Records/s acknowledged: from the start signal to the last producer's flush(). "
              "Up to the high watermark: until the partitions' high watermarks (ListOffsets) add "
              "up to the count, i.e. every record is on every in-sync replica (with acks=1 the "
              "followers may still be catching up when the producers finish). Broker CPU: the "
              "three brokers' utime+stime over that whole span.",
              "", f"## End-to-end latency (2,000 msg/s of 1 KiB for {args.lat_seconds:.0f} s, "
              f"{args.partitions} partitions; produce → consume, and produce → delivery report)",
              "", "| configuration | e2e p50 ms | e2e p99 ms | p99 vs RF=1 acks=1 | ack p50 ms | "
              "ack p99 ms |", "|---|---:|---:|---:|---:|---:|"]
    for s in SETUPS:
        r = res[s.label]
        lines.append(f"| {s.label} | {fmt(med(r.lat_p50), 1)} | {fmt(med(r.lat_p99), 1)} | "
                     f"{rat(med(r.lat_p99), med(base.lat_p99))} | {fmt(med(r.ack_p50), 1)} | "
                     f"{fmt(med(r.ack_p99), 1)} |")
    lines += ["", "Every run:", ""]
    for s in SETUPS:
        r = res[s.label]
        lat = ", ".join(f"{a:.1f}/{b:.1f}" for a, b in zip(r.lat_p50, r.lat_p99, strict=False))
        lines.append(f"- {s.label}: records/s {', '.join(f'{x:,.0f}' for x in r.rates)}; e2e "
                     f"p50/p99 ms {lat}" + (f"; errors: {'; '.join(r.errors)}" if r.errors else ""))
    lines += ["", load_line()]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--count", type=int, default=200_000)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--lat-seconds", type=float, default=10.0)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" /
                                         "replication-latest.md"))
    args = ap.parse_args()
    command = "python bench/replication.py " + " ".join(sys.argv[1:])
    res = {s.label: Results() for s in SETUPS}
    start, steal0 = time.monotonic(), steal_seconds()
    pool = ClientPool(args.clients)
    try:
        with SamsaCluster(4, roles="controller", controllers=1) as cluster:
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap, **QUIET})
            link = Link(cluster.brokers[0].bootstrap, timeout=5.0)
            warm = Setup("warm-up", 3, "all")
            throughput(cluster, admin, link, pool, warm, args.partitions, args.count // 4, "w")
            throughput(cluster, admin, link, pool, SETUPS[0], args.partitions, args.count // 4,
                       "w")
            for r in range(args.repeats):
                order = SETUPS[r % len(SETUPS):] + SETUPS[:r % len(SETUPS)]
                for s in order:
                    out = res[s.label]
                    try:
                        rate, everywhere, cpu = throughput(cluster, admin, link, pool, s,
                                                           args.partitions, args.count, str(r))
                        out.rates.append(rate)
                        out.replicated.append(everywhere)
                        out.cpu_per_gb.append(cpu)
                        p50, p99, a50, a99 = latency(cluster, admin, link, s, args.partitions,
                                                     args.lat_seconds, str(r))
                        out.lat_p50.append(p50)
                        out.lat_p99.append(p99)
                        out.ack_p50.append(a50)
                        out.ack_p99.append(a99)
                        log(f"{s.label} run {r}: {rate:,.0f} records/s "
                            f"({rate * SIZE / 1e6:.1f} MB/s), replicated {everywhere:,.0f}/s, "
                            f"CPU {cpu:.1f} s/GB; e2e p50 "
                            f"{p50:.1f} ms p99 {p99:.1f} ms; ack p50 {a50:.1f} p99 {a99:.1f}")
                    except Exception as e:  # noqa: BLE001 - recorded in the report
                        out.errors.append(f"run {r}: {type(e).__name__}: {e}"[:200])
                        log(f"{s.label} run {r} failed: {e}")
            link.close()
    finally:
        pool.close()
    text = report(res, args, command, time.monotonic() - start, steal_seconds() - steal0)
    write_report(args.out, text)
    log(f"written to {args.out} (load {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
