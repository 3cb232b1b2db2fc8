"""Probe for bench/cluster_failover.py's slow paths: after each kill -9 of the active controller,
ONE CreateTopics (20 s timeout, no retry) through each surviving broker and one straight to the new
leader's CONTROLLER listener as soon as DescribeQuorum names it; at 4 s, for any unanswered one,
py-spy dumps the survivors' threads (idle event loop = waiting on an asyncio timer/sleep, not
blocked in synchronous code).

    PYTHONPATH=. .venv/bin/python bench/cluster_failover_probe.py [ROUNDS] [--no-dump]
"""
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from cluster_common import Link, create_topic, quorum_view  # noqa: E402
from cluster_failover import settle  # noqa: E402

from samsa.cli import _cluster_wire as w  # noqa: E402
from samsa.testing import SamsaCluster  # noqa: E402

args = [a for a in sys.argv[1:] if not a.startswith("--")]
rounds = int(args[0]) if args else 6
dump = "--no-dump" not in sys.argv and shutil.which("py-spy") is not None
with SamsaCluster(3, data_dir=tempfile.mkdtemp(prefix="samsa-probe-")) as c:
    links = {n.node_id: Link(n.controller_address, timeout=1.0) for n in c.nodes}
    for i in range(rounds):
        leader, epoch = settle(c, links)
        surv = [n for n in c.nodes if n.node_id != leader]
        res = {}
        t0 = time.monotonic()
        c.node(leader).kill()

        def via(node, key, res=res, t0=t0, i=i):  # noqa: ANN001
            link = Link(node.bootstrap, timeout=20.0)
            try:
                code, msg = create_topic(link, f"diag-{i}-{key}", 1, 1)
                res[key] = ((time.monotonic() - t0) * 1000, code, msg)
            except w.CliError as e:
                res[key] = ((time.monotonic() - t0) * 1000, "err", str(e))
            link.close()

        def direct(res=res, t0=t0, i=i, surv=surv, leader=leader, epoch=epoch):  # noqa: ANN001
            # wait for a new leader, then CreateTopics straight to its CONTROLLER listener
            while time.monotonic() - t0 < 20:
                for n in surv:
                    try:
                        lid, ep = quorum_view(links[n.node_id])
                    except w.CliError:
                        continue
                    if lid not in (-1, leader) and ep > epoch:
                        res["elected"] = ((time.monotonic() - t0) * 1000, lid)
                        lk = Link(c.node(lid).controller_address, timeout=20.0)
                        try:
                            code, msg = create_topic(lk, f"diag-{i}-direct", 1, 1)
                            res["direct"] = ((time.monotonic() - t0) * 1000, code, msg)
                        except w.CliError as e:
                            res["direct"] = ((time.monotonic() - t0) * 1000, "err", str(e))
                        lk.close()
                        return
                time.sleep(0.005)

        ths = [threading.Thread(target=via, args=(n, f"via{n.node_id}")) for n in surv]
        ths.append(threading.Thread(target=direct))
        for t in ths:
            t.start()
        time.sleep(4.0)
        pending = [f"via{n.node_id}" for n in surv if f"via{n.node_id}" not in res]
        if pending and dump:
            print(f"round {i}: at 4 s pending {pending}; res so far {res}", flush=True)
            for n in surv:
                print(f"--- node {n.node_id} pid {n.pid} ss", flush=True)
                print(subprocess.run(["ss", "-tnpH", "state", "established"], capture_output=True,
                                     text=True).stdout.count(f"pid={n.pid},"), "sockets", flush=True)
                out = subprocess.run(["ss", "-tnpH"], capture_output=True, text=True).stdout
                for line in out.splitlines():
                    if f"pid={n.pid}," in line:
                        parts = line.split()
                        if parts[1] != "0" or parts[2] != "0":
                            print("  ", line[:160], flush=True)
                print(subprocess.run(["py-spy", "dump", "--pid", str(n.pid)],
                                     capture_output=True, text=True).stdout[-3000:], flush=True)
        for t in ths:
            t.join(25)
        print(f"round {i}: killed {leader} epoch {epoch}: {res}", flush=True)
        links[leader].close()
        c.node(leader).start()
