"""`samsa cluster up`: a local N-node cluster in one command (separate processes and data dirs, the
same config writing as samsa.testing.SamsaCluster); `samsa cluster describe`: the cluster id, the
brokers with their fenced state and the active controller."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

from ._common import CliError, UsageError, add_bootstrap, guarded, print_table

PROG = "samsa cluster"


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("cluster", help="run a local cluster, describe a cluster",
                       description="Run a local multi-node cluster, or describe a running one.")
    csub = p.add_subparsers(dest="cluster_command", required=True, metavar="ACTION")

    up = csub.add_parser("up", help="run a local N-node cluster until Ctrl-C",
                         description="Format and start N combined broker+controller nodes on this "
                                     "machine, each its own process with its own data dir; print "
                                     "the bootstrap servers; Ctrl-C or SIGTERM stops them all.")
    up.add_argument("--nodes", type=int, default=3, metavar="N", help="number of nodes (default 3)")
    up.add_argument("--base-port", type=int, metavar="P",
                    help="node i listens on P+2(i-1) (PLAINTEXT) and P+2(i-1)+1 (CONTROLLER); "
                         "default: free ports")
    up.add_argument("--data-dir", metavar="DIR",
                    help="parent of the nodes' data dirs, kept afterwards so the cluster can be "
                         "started again (default: a temporary dir, removed on exit)")
    up.add_argument("--controllers", type=int, metavar="K",
                    help="only nodes 1..K are controllers (the others are brokers only); "
                         "default: every node")
    up.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                    help="a config for every node, repeatable")
    up.add_argument("--startup-timeout", type=float, default=60.0, metavar="S",
                    help="seconds to wait for the quorum and the brokers (default 60)")
    up.set_defaults(func=guarded(f"{PROG} up", cluster_up))

    d = csub.add_parser("describe", help="cluster id, brokers (fenced or not), active controller")
    add_bootstrap(d, command_config=True)
    d.add_argument("--json", action="store_true", help="print one JSON object")
    d.set_defaults(func=guarded(f"{PROG} describe", describe))


# ---- up -----------------------------------------------------------------------------------------
def _overrides(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        k, sep, v = item.partition("=")
        if not sep or not k.strip():
            raise UsageError(f"--override expects KEY=VALUE, got {item!r}")
        out[k.strip()] = v.strip()
    return out


def cluster_up(args: argparse.Namespace) -> int:
    from samsa.testing.cluster import SamsaCluster

    if args.nodes < 1:
        raise UsageError("--nodes must be at least 1")
    if args.base_port is not None and not 0 < args.base_port <= 65535 - 2 * args.nodes:
        raise UsageError(f"--base-port {args.base_port} leaves no room for {args.nodes} nodes")
    try:
        cluster = SamsaCluster(args.nodes, overrides=_overrides(args.override),
                               data_dir=Path(args.data_dir) if args.data_dir else None,
                               controllers=args.controllers, startup_timeout=args.startup_timeout,
                               base_port=args.base_port)
    except ValueError as e:
        raise UsageError(str(e)) from None
    stop = False

    def on_signal(signum: int, frame: Any) -> None:
        nonlocal stop
        stop = True

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            cluster.start()
        except RuntimeError as e:
            raise CliError(str(e)) from None
        except TimeoutError as e:
            raise CliError(f"the cluster did not come up: {e}") from None
        print(f"samsa: cluster {cluster.cluster_id} with {args.nodes} nodes, data in "
              f"{cluster.data_dir}", flush=True)
        for node in cluster.nodes:
            print(f"  node {node.node_id} ({','.join(node.spec.roles)}): "
                  f"{node.bootstrap or '-'} controller {node.controller_address or '-'} "
                  f"pid {node.pid} log {node.log_path}", flush=True)
        print(f"bootstrap servers: {cluster.bootstrap}", flush=True)
        print("Ctrl-C stops the cluster", flush=True)
        while not stop:
            for node in cluster.nodes:
                if not node.running:
                    print(f"samsa: node {node.node_id} exited; see {node.log_path}",
                          file=sys.stderr, flush=True)
                    node.proc = None  # reported once; the others keep running
            time.sleep(0.2)
        print("samsa: stopping the cluster", flush=True)
    finally:
        # a second Ctrl-C during shutdown must not leave nodes behind
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        cluster.close()
        for s, h in previous.items():
            signal.signal(s, h)
    print("samsa: cluster stopped", flush=True)
    return 0


# ---- describe -----------------------------------------------------------------------------------
def describe(args: argparse.Namespace) -> int:
    from . import _cluster_wire as w  # lazily: kio takes a while to import

    with w.connect(args.bootstrap_server) as conn:
        info = w.describe_cluster(conn)
        try:
            quorum: w.Quorum | None = w.describe_quorum(conn)
        except w.CliError:
            quorum = None  # an older broker: DescribeCluster's controller id is all we have
    active = quorum.leader_id if quorum is not None else info.controller_id
    voters = sorted(r.replica_id for r in quorum.voters) if quorum is not None else []
    if args.json:
        print(json.dumps({
            "cluster_id": info.cluster_id, "controller_id": active,
            "leader_epoch": quorum.leader_epoch if quorum is not None else None,
            "voters": voters,
            "brokers": [{"id": b.broker_id, "host": b.host, "port": b.port, "rack": b.rack,
                         "fenced": b.fenced} for b in sorted(info.brokers,
                                                              key=lambda b: b.broker_id)]}))
        return 0
    print(f"ClusterId:        {info.cluster_id}")
    print(f"ActiveController: {active if active >= 0 else 'none'}"
          + (f" (epoch {quorum.leader_epoch})" if quorum is not None and active >= 0 else ""))
    if voters:
        print(f"Voters:           {','.join(map(str, voters))}")
    print()

    def state(fenced: bool | None) -> str:
        return "unknown" if fenced is None else "fenced" if fenced else "unfenced"

    print_table(["BrokerId", "Host:Port", "Rack", "State"],
                [[b.broker_id, f"{b.host}:{b.port}", b.rack, state(b.fenced)]
                 for b in sorted(info.brokers, key=lambda b: b.broker_id)])
    return 0
