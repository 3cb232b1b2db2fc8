"""Controller failover time after `kill -9` of the active controller (issue 13: p50/p99 over
>= 50 kills, goal <= 2 s with default timeouts).

    .venv/bin/python bench/cluster_failover.py [--kills 50] [--nodes 3] [--out FILE]

A 3-node combined cluster (samsa.testing.SamsaCluster, every quorum timeout at Kafka's default)
is started once. Each round: wait until every node agrees on the leader and DescribeCluster lists
every broker unfenced, SIGKILL the active controller, then measure from the kill, with two threads
polling at the same time:
- "new leader elected": the first DescribeQuorum answer from a survivor (CONTROLLER listener,
  one persistent connection per survivor, polled every 5 ms) naming a live leader of a higher
  epoch; "all survivors agree": the time every survivor names it;
- "metadata writes available again": the first CreateTopics through a surviving broker (PLAINTEXT,
  raw request, a fresh topic name per attempt) answered without error. The broker forwards it to
  the active controller and retries while there is none, so one attempt usually spans the outage.
The killed node is restarted before the next round. Raw per-kill figures go to --out.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cluster_common import (  # noqa: E402
    Link,
    cell,
    create_topic,
    load_line,
    percentile,
    quorum_view,
    run_header,
    summary,
    write_report,
)

from samsa.cli import _cluster_wire as w  # noqa: E402
from samsa.testing import SamsaCluster  # noqa: E402

ROUND_TIMEOUT = 15.0
ATTEMPT_TIMEOUT = 3.0


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def views(cluster: SamsaCluster, links: dict[int, Link]) -> dict[int, tuple[int, int]]:
    out = {}
    for node in cluster.nodes:
        if not node.running:
            continue
        try:
            out[node.node_id] = quorum_view(links[node.node_id])
        except w.CliError:
            pass
    return out


def settle(cluster: SamsaCluster, links: dict[int, Link], timeout: float = 60.0) -> tuple[int, int]:
    """Until every node names the same live leader and epoch and every broker is unfenced."""
    deadline = time.monotonic() + timeout
    while True:
        seen = views(cluster, links)
        pairs = set(seen.values())
        if len(seen) == len(cluster.nodes) and len(pairs) == 1:
            leader, epoch = next(iter(pairs))
            if leader >= 0:
                cluster.wait_brokers(len(cluster.brokers), max(1.0, deadline - time.monotonic()))
                return leader, epoch
        if time.monotonic() > deadline:
            raise TimeoutError(f"cluster did not settle: {seen}")
        time.sleep(0.05)


def watch_quorum(addresses: list[str], killed: int, old_epoch: int, t0: float,
                 out: dict[str, float | int], stop: threading.Event) -> None:
    links = [Link(a, timeout=1.0) for a in addresses]
    seen: dict[str, tuple[int, int]] = {}
    try:
        while not stop.is_set() and time.monotonic() - t0 < ROUND_TIMEOUT:
            for link in links:
                try:
                    leader, epoch = quorum_view(link)
                except w.CliError:
                    continue
                seen[link.address] = (leader, epoch)
                if leader not in (-1, killed) and epoch > old_epoch and "elected" not in out:
                    out["elected"] = (time.monotonic() - t0) * 1000
                    out["leader"], out["epoch"] = leader, epoch
            views = set(seen.values())
            if len(seen) == len(links) and len(views) == 1:
                leader, epoch = next(iter(views))
                if leader not in (-1, killed) and epoch > old_epoch:
                    out["agreed"] = (time.monotonic() - t0) * 1000
                    return
            time.sleep(0.005)
    finally:
        for link in links:
            link.close()


def write_until_ok(node_id: int, address: str, tag: str, t0: float,
                   out: dict[str, float | int], errors: list[str], stop: threading.Event) -> None:
    """CreateTopics through one surviving broker until one succeeds. An attempt not answered in
    ATTEMPT_TIMEOUT is abandoned (new connection, new topic name), as a client's retry would."""
    link = Link(address, timeout=ATTEMPT_TIMEOUT)
    attempt = 0
    try:
        while not stop.is_set() and time.monotonic() - t0 < ROUND_TIMEOUT:
            attempt += 1
            sent = time.monotonic()
            try:
                code, msg = create_topic(link, f"failover-{tag}-{node_id}-{attempt}", 1, 1)
            except w.CliError as e:
                errors.append(f"node {node_id}: {e} after {time.monotonic() - sent:.1f} s")
                time.sleep(0.01)
                continue
            if code == 0:
                out[f"writable-{node_id}"] = (time.monotonic() - t0) * 1000
                out[f"attempts-{node_id}"] = attempt
                return
            errors.append(f"node {node_id}: {w.error_name(code)} {msg}".strip())
            time.sleep(0.01)
    finally:
        link.close()


def one_round(cluster: SamsaCluster, links: dict[int, Link], i: int) -> dict[str, float | int | str]:
    leader, epoch = settle(cluster, links)
    survivors = [n for n in cluster.nodes if n.node_id != leader]
    out: dict[str, float | int] = {}
    errors: list[str] = []
    stop = threading.Event()
    t0 = time.monotonic()
    cluster.node(leader).kill()  # SIGKILL, then waits for the process to be reaped
    threads = [threading.Thread(target=watch_quorum, args=(
        [n.controller_address for n in survivors], leader, epoch, t0, out, stop))]
    threads += [threading.Thread(target=write_until_ok, args=(
        n.node_id, n.bootstrap, str(i), t0, out, errors, stop)) for n in survivors]
    for t in threads:
        t.start()
    for t in threads:
        t.join(ROUND_TIMEOUT + ATTEMPT_TIMEOUT + 5)
    stop.set()
    row: dict[str, float | int | str] = {"kill": i, "killed": leader, "old_epoch": epoch, **out}
    new = out.get("leader")
    for n in survivors:
        role = "leader" if n.node_id == new else "follower"
        if f"writable-{n.node_id}" in out:
            row[f"writable-{role}"] = out[f"writable-{n.node_id}"]
            row[f"attempts-{role}"] = out[f"attempts-{n.node_id}"]
    done = [float(out[k]) for k in out if str(k).startswith("writable-")]
    if done:
        row["writable"] = min(done)
    row["errors"] = "; ".join(sorted(set(errors)))[:300]
    links[leader].close()
    cluster.node(leader).start()
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=50)
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "failover-latest.md"))
    args = ap.parse_args()
    command = "python bench/cluster_failover.py " + " ".join(sys.argv[1:])
    lines = run_header("Controller failover after kill -9 of the active controller", command)
    rows: list[dict[str, float | int | str]] = []
    start = time.monotonic()
    with SamsaCluster(args.nodes) as cluster:
        links = {n.node_id: Link(n.controller_address, timeout=1.0) for n in cluster.nodes}
        for i in range(args.kills):
            row = one_round(cluster, links, i)
            rows.append(row)
            log(f"kill {i}: node {row['killed']} (epoch {row['old_epoch']}) -> "
                f"leader {row.get('leader')} epoch {row.get('epoch')}: elected "
                f"{row.get('elected', float('nan')):.0f} ms, agreed {row.get('agreed', float('nan')):.0f}"
                f" ms, writable via follower {row.get('writable-follower', float('nan')):.0f} ms, "
                f"via new leader {row.get('writable-leader', float('nan')):.0f} ms {row['errors']}")
        settle(cluster, links)
    elapsed = time.monotonic() - start

    def col(key: str) -> list[float]:
        return [float(r[key]) for r in rows if key in r]

    keys = ("elected", "agreed", "writable", "writable-follower", "writable-leader")
    missing = {k: sum(1 for r in rows if k not in r) for k in keys}
    lines += [f"{args.nodes} combined nodes (broker,controller), default quorum timeouts "
              "(controller.quorum.election.timeout.ms=1000, fetch.timeout.ms=2000, "
              "election.backoff.max.ms=1000), "
              f"{len(rows)} kills in {elapsed:.0f} s. Time from SIGKILL of the active controller:",
              "",
              "| measurement | p50 ms | p99 ms | max ms | min ms | rounds without it |",
              "|---|---:|---:|---:|---:|---:|"]
    for key, label in (("elected", "new leader elected (first survivor's DescribeQuorum)"),
                       ("agreed", "all survivors name the new leader"),
                       ("writable", "metadata writes available again (first CreateTopics ok "
                                    "through either surviving broker)"),
                       ("writable-follower", "↳ CreateTopics through the surviving follower's "
                                             "broker (forwarded)"),
                       ("writable-leader", "↳ CreateTopics through the new controller's own "
                                           "broker listener")):
        v = col(key)
        if v:
            lines.append(f"| {label} | {percentile(v, 50):.0f} | {percentile(v, 99):.0f} | "
                         f"{max(v):.0f} | {min(v):.0f} | {missing[key]} |")
        else:
            lines.append(f"| {label} | – | – | – | – | {missing[key]} |")
    lines += ["", "p99 is nearest-rank: with 50 samples it is the largest. Each surviving broker "
              f"gets CreateTopics attempts from its own thread; an attempt unanswered after "
              f"{ATTEMPT_TIMEOUT:.0f} s is abandoned and retried on a new connection.", "",
              "| kill | killed node | old epoch | new leader | new epoch | elected ms | agreed ms | "
              "writable ms | via follower ms (attempts) | via new leader ms (attempts) | "
              "errors seen while waiting |",
              "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        def f(k: str, r: dict[str, float | int | str] = r) -> str:
            return cell(r.get(k))
        lines.append(f"| {r['kill']} | {r['killed']} | {r['old_epoch']} | {f('leader')} | "
                     f"{f('epoch')} | {f('elected')} | {f('agreed')} | {f('writable')} | "
                     f"{f('writable-follower')} ({f('attempts-follower')}) | "
                     f"{f('writable-leader')} ({f('attempts-leader')}) | {r['errors'] or ''} |")
    lines += ["", load_line()]
    write_report(args.out, "\n".join(lines) + "\n")
    for key in keys:
        log(f"{key}: {summary(col(key))}")


if __name__ == "__main__":
    main()
