"""Metadata propagation: CreateTopics acknowledged -> every broker answers Metadata with the topic
(issue 13: goal p99 <= 100 ms).

    .venv/bin/python bench/cluster_propagation.py [--topics 300] [--nodes 3] [--partitions 3]
        [--replication-factor 3] [--out FILE]

A combined cluster (samsa.testing.SamsaCluster, defaults) is started and settled. Topics are
created one at a time with a raw CreateTopics to the brokers in turn (the receiving broker forwards
it to the active controller unless it is that controller). From the moment its answer arrives,
each broker is asked with a raw Metadata request for that topic (one persistent connection per
broker, asked in turn with no pause) until it lists the topic without error and with a leader for
every partition; the figure per topic is the time until the last broker does. Also reported: the
CreateTopics round trip and the time per broker role (the broker that took the request, the
others). Raw per-topic figures go to --out.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cluster_common import (  # noqa: E402
    Link,
    create_topic,
    load_line,
    percentile,
    run_header,
    topic_ready,
)

from samsa.cli import _cluster_wire as w  # noqa: E402
from samsa.testing import SamsaCluster  # noqa: E402

TOPIC_TIMEOUT = 10.0


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def row_of(label: str, v: list[float]) -> str:
    if not v:
        return f"| {label} | – | – | – | – | 0 |"
    return (f"| {label} | {percentile(v, 50):.1f} | {percentile(v, 99):.1f} | {max(v):.1f} | "
            f"{min(v):.1f} | {len(v)} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topics", type=int, default=300)
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--replication-factor", type=int, default=3)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" /
                                         "propagation-latest.md"))
    args = ap.parse_args()
    command = "python bench/cluster_propagation.py " + " ".join(sys.argv[1:])
    lines = run_header("Metadata propagation: CreateTopics acknowledged -> every broker's Metadata",
                       command)
    acks: list[float] = []
    last: list[float] = []
    own: list[float] = []
    others: list[float] = []
    per_topic: list[str] = []
    failures: list[str] = []
    with SamsaCluster(args.nodes) as cluster:
        brokers = cluster.brokers
        active = cluster.active_controller()
        create_links = [Link(b.bootstrap, timeout=35.0) for b in brokers]
        meta_links = [Link(b.bootstrap, timeout=5.0) for b in brokers]
        # warm-up: connections open, code paths loaded
        for i, link in enumerate(create_links):
            create_topic(link, f"prop-warm-{i}", args.partitions, args.replication_factor)
        time.sleep(1.0)
        start = time.monotonic()
        for i in range(args.topics):
            k = i % len(brokers)
            name = f"prop-{i}"
            t_send = time.monotonic()
            try:
                code, msg = create_topic(create_links[k], name, args.partitions,
                                         args.replication_factor)
            except w.CliError as e:
                failures.append(f"{name}: {e}")
                continue
            t_ack = time.monotonic()
            if code != 0:
                failures.append(f"{name}: {w.error_name(code)} {msg}")
                continue
            acks.append((t_ack - t_send) * 1000)
            seen: dict[int, float] = {}
            polls = 0
            while len(seen) < len(brokers) and time.monotonic() - t_ack < TOPIC_TIMEOUT:
                for j, link in enumerate(meta_links):
                    if j in seen:
                        continue
                    polls += 1
                    try:
                        ok = topic_ready(link, name, args.partitions)
                    except w.CliError:
                        ok = False
                    if ok:
                        seen[j] = (time.monotonic() - t_ack) * 1000
            if len(seen) < len(brokers):
                failures.append(f"{name}: not on brokers "
                                f"{[brokers[j].node_id for j in range(len(brokers)) if j not in seen]}"
                                f" after {TOPIC_TIMEOUT:.0f} s")
                continue
            last.append(max(seen.values()))
            own.append(seen[k])
            others.extend(v for j, v in seen.items() if j != k)
            per_topic.append(f"| {name} | {brokers[k].node_id} | {acks[-1]:.1f} | "
                             + " | ".join(f"{seen[j]:.1f}" for j in range(len(brokers)))
                             + f" | {polls} |")
        elapsed = time.monotonic() - start
        for link in create_links + meta_links:
            link.close()
    lines += [f"{args.nodes} combined nodes (broker,controller), default settings; active "
              f"controller at start: node {active}. {args.topics} topics of {args.partitions} "
              f"partitions, replication factor {args.replication_factor}, created one at a time "
              f"through brokers in turn in {elapsed:.1f} s; {len(failures)} failed.", "",
              "| measurement (ms) | p50 | p99 | max | min | samples |",
              "|---|---:|---:|---:|---:|---:|",
              row_of("CreateTopics ack → every broker lists the topic (the goal's figure)", last),
              row_of("↳ the broker that took the CreateTopics", own),
              row_of("↳ each other broker", others),
              row_of("CreateTopics round trip (send → ack)", acks), "",
              "p99 is nearest-rank. A broker's time includes the Metadata round trips before it "
              "(brokers are asked in turn, so the resolution is about one round of requests).", ""]
    if failures:
        lines += ["Failures:", "", *[f"- {f}" for f in failures[:50]], ""]
    lines += ["| topic | CreateTopics via node | round trip ms | "
              + " | ".join(f"node {b.node_id} ms" for b in brokers) + " | Metadata requests |",
              "|---|---:|---:|" + "---:|" * len(brokers) + "---:|", *per_topic, "", load_line()]
    text = "\n".join(lines) + "\n"
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)
    print("\n".join(lines[:30]))


if __name__ == "__main__":
    main()
