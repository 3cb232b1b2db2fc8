"""`samsa metadata-quorum`, `samsa cluster describe|up` and the SamsaCluster harness, run against real
Samsa processes: a single node (a one-voter quorum) and a 3-node cluster."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.cli.main import main
from samsa.testing import ClusterNode, SamsaBroker, SamsaCluster, free_port
from samsa.testing.cluster import NodeSpec

pytestmark = pytest.mark.timeout(120)

STATUS_LABELS = ["ClusterId", "LeaderId", "LeaderEpoch", "HighWatermark", "MaxFollowerLag",
                 "MaxFollowerLagTimeMs", "CurrentVoters", "CurrentObservers"]
REPLICATION_HEADER = ["NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp",
                      "LastCaughtUpTimestamp", "Status"]


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def status_fields(text: str) -> dict[str, str]:
    """Kafka's --status layout: 'Label:' padded to 24 columns, then the value."""
    fields = {}
    for line in text.splitlines():
        assert re.fullmatch(r"[A-Za-z]+: +\S.*", line), line
        label, value = line[:24], line[24:]
        assert label.rstrip().endswith(":") and not value.startswith(" "), line
        fields[label.rstrip()[:-1]] = value
    return fields


def replication_rows(text: str) -> list[list[str]]:
    """Kafka's table: every cell padded to its column width and followed by a tab."""
    lines = text.splitlines()
    rows = [line.split("\t") for line in lines]
    for r in rows:
        assert r[-1] == "", "each row ends with a tab"
    widths = [len(c) for c in rows[0][:-1]]
    for r in rows:
        assert [len(c) for c in r[:-1]] == widths, "cells padded to the column width"
    return [[c.strip() for c in r[:-1]] for r in rows]


# ---- one node: a single-voter quorum --------------------------------------------------------------
def test_status_single_node(samsa_broker: SamsaBroker) -> None:
    bs = samsa_broker.bootstrap
    code, out, err = run("metadata-quorum", "--bootstrap-server", bs, "describe", "--status")
    assert code == 0, err
    f = status_fields(out)
    assert list(f) == STATUS_LABELS
    admin = AdminClient({"bootstrap.servers": bs})
    md = admin.list_topics(timeout=10)
    assert f["ClusterId"] == md.cluster_id
    assert int(f["LeaderId"]) == md.controller_id
    assert int(f["LeaderEpoch"]) >= 1
    assert f["MaxFollowerLag"] == "0" and f["MaxFollowerLagTimeMs"] == "0"
    port = bs.rsplit(":", 1)[1]
    assert f["CurrentVoters"] == f'[{{"id": {md.controller_id}, "endpoints": ["PLAINTEXT://127.0.0.1:{port}"]}}]'
    assert f["CurrentObservers"] == "[]"
    # the high watermark is the metadata log's: creating a topic commits records and moves it on
    hw = int(f["HighWatermark"])
    admin.create_topics([NewTopic("mq-status", 2, 1)])["mq-status"].result(15)
    _, out2, _ = run("metadata-quorum", "--bootstrap-server", bs, "describe", "--status")
    assert int(status_fields(out2)["HighWatermark"]) > hw


def test_replication_single_node(samsa_broker: SamsaBroker) -> None:
    bs = samsa_broker.bootstrap
    code, out, err = run("metadata-quorum", "--bootstrap-server", bs, "describe", "--replication")
    assert code == 0, err
    rows = replication_rows(out)
    assert rows[0] == REPLICATION_HEADER
    assert len(rows) == 2
    node, directory, leo, lag, fetch, caught_up, status = rows[1]
    _, st, _ = run("metadata-quorum", "--bootstrap-server", bs, "describe", "--status")
    assert node == status_fields(st)["LeaderId"] and status == "Leader"
    assert directory == "AAAAAAAAAAAAAAAAAAAAAA"  # Kafka's text form of the zero Uuid
    assert int(leo) >= int(status_fields(st)["HighWatermark"]) and lag == "0"
    assert int(fetch) > 0 and int(caught_up) > 0
    code, out, err = run("metadata-quorum", "--bootstrap-server", bs, "describe", "--replication",
                         "--human-readable")
    assert code == 0, err
    assert re.fullmatch(r"\d+ ms ago", replication_rows(out)[1][4])


@pytest.mark.parametrize("flags, message", [
    ([], "One of --status or --replication must be specified"),
    (["--status", "--replication"], "Only one of --status or --replication"),
    (["--status", "--human-readable"], "--human-readable is only supported along with --replication"),
])
def test_describe_flag_errors(samsa_broker: SamsaBroker, flags: list[str], message: str) -> None:
    code, out, err = run("metadata-quorum", "--bootstrap-server", samsa_broker.bootstrap,
                         "describe", *flags)
    assert code == 2 and out == ""
    assert message in err


def test_unreachable_server() -> None:
    port = free_port()
    code, out, err = run("metadata-quorum", "--bootstrap-server", f"127.0.0.1:{port}", "describe",
                         "--status")
    assert code == 1 and out == ""
    assert f"cannot reach 127.0.0.1:{port}" in err
    code, _, err = run("cluster", "describe", "--bootstrap-server", f"127.0.0.1:{port}")
    assert code == 1 and f"cannot reach 127.0.0.1:{port}" in err


def test_cluster_describe_single_node(samsa_broker: SamsaBroker) -> None:
    bs = samsa_broker.bootstrap
    code, out, err = run("cluster", "describe", "--bootstrap-server", bs, "--json")
    assert code == 0, err
    info = json.loads(out)
    md = AdminClient({"bootstrap.servers": bs}).list_topics(timeout=10)
    assert info["cluster_id"] == md.cluster_id
    assert info["controller_id"] == md.controller_id
    host, port = bs.rsplit(":", 1)
    assert info["brokers"] == [{"id": md.controller_id, "host": host, "port": int(port),
                                "rack": None, "fenced": False}]
    code, out, err = run("cluster", "describe", "--bootstrap-server", bs)
    assert code == 0, err
    assert f"ClusterId:        {md.cluster_id}" in out
    assert re.search(rf"^{md.controller_id} +{re.escape(bs)} +- +unfenced$", out, re.M), out


# ---- three nodes ----------------------------------------------------------------------------------
def test_cluster_harness_and_tools(samsa_cluster: SamsaCluster) -> None:
    c = samsa_cluster
    assert len(c.bootstrap.split(",")) == 3
    assert c.wait_brokers(3, timeout=30) == [1, 2, 3]
    leader = c.wait_for_leader(30)
    code, out, err = run("metadata-quorum", "--bootstrap-server", c.bootstrap, "describe",
                         "--status")
    assert code == 0, err
    f = status_fields(out)
    assert f["ClusterId"] == c.cluster_id
    assert int(f["LeaderId"]) == leader
    assert sorted(v["id"] for v in json.loads(f["CurrentVoters"])) == [1, 2, 3]
    code, out, err = run("metadata-quorum", "--bootstrap-controller", c.bootstrap_controller,
                         "describe", "--replication")
    assert code == 0, err
    rows = replication_rows(out)[1:]
    assert sorted(int(r[0]) for r in rows) == [1, 2, 3]
    assert [r[6] for r in rows] == ["Leader", "Follower", "Follower"]
    assert int(rows[0][0]) == leader
    # node 3 answers from its own image, which may be a moment behind the controller's
    expected = [(n.node_id, n.spec.port, False) for n in c.nodes]
    deadline = time.monotonic() + 15
    while True:
        code, out, err = run("cluster", "describe", "--bootstrap-server", c.nodes[2].bootstrap,
                             "--json")
        assert code == 0, err
        info = json.loads(out)
        got = [(b["id"], b["port"], b["fenced"]) for b in info["brokers"]]
        if got == expected or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert info["cluster_id"] == c.cluster_id and info["controller_id"] == leader
    assert got == expected


def test_cluster_kill_and_pause_leader(samsa_cluster: SamsaCluster) -> None:
    c = samsa_cluster
    old = c.wait_for_leader(30)
    c.node(old).kill()
    new = c.wait_for_leader(30, exclude=[old])
    assert new != old
    c.node(old).start()
    assert c.wait_brokers(3, timeout=30) == [1, 2, 3]
    # SIGSTOP the leader past the election timeout: the others elect a new one; after SIGCONT
    # the old leader follows the new epoch (one leader, the highest epoch, everywhere)
    paused = c.wait_for_leader(30)
    c.node(paused).pause()
    try:
        other = c.wait_for_leader(30, exclude=[paused])
    finally:
        c.node(paused).resume()
    deadline = time.monotonic() + 30
    while True:
        views = c.quorum_views()
        if len(views) == 3 and len(set(views.values())) == 1:
            break
        assert time.monotonic() < deadline, f"nodes disagree on the leader: {views}"
        time.sleep(0.1)
    assert next(iter(views.values()))[0] == other


@pytest.fixture
def cluster_up() -> Iterator[tuple[subprocess.Popen[str], str]]:
    with tempfile.TemporaryDirectory(prefix="samsa-up-") as d:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SAMSA_")}
        proc = subprocess.Popen([sys.executable, "-m", "samsa.cli.main", "cluster", "up",
                                 "--nodes", "3", "--data-dir", d, "--startup-timeout", "30"],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env=env, start_new_session=True)
        try:
            yield proc, d
        finally:
            # its own process group: a failed test leaves no node behind
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def test_cluster_up_prints_bootstrap_and_stops_on_sigint(
        cluster_up: tuple[subprocess.Popen[str], str]) -> None:
    proc, data_dir = cluster_up
    assert proc.stdout is not None
    lines: list[str] = []
    bootstrap = None
    deadline = time.monotonic() + 60
    while bootstrap is None and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if line.startswith("bootstrap servers: "):
            bootstrap = line.split(": ", 1)[1].strip()
    assert bootstrap is not None, "".join(lines)
    pids = [int(m) for m in re.findall(r" pid (\d+) ", "".join(lines))]
    assert len(pids) == 3 and len(bootstrap.split(",")) == 3
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=15)
    assert sorted(md.brokers) == [1, 2, 3]
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, "".join(lines) + out
    assert "cluster stopped" in out
    for pid in pids:  # every node process is gone (reaped by `cluster up`)
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert sorted(os.listdir(data_dir)) == ["cluster.id", "node-1", "node-2", "node-3"]


def test_node_lifecycle_single_node(tmp_path: Path) -> None:
    """ClusterNode's process control and SamsaCluster's wire questions, on one embedded-default
    node (no voters configured: a combined single voter), which runs today."""
    port = free_port()
    spec = NodeSpec(1, ("broker",), "127.0.0.1", port, 0, tmp_path / "node-1")
    spec.data_dir.mkdir(parents=True)
    spec.config_path.write_text(f"listeners=PLAINTEXT://127.0.0.1:{port}\nlog.dirs={spec.log_dir}\n")
    cluster = SamsaCluster(1, data_dir=tmp_path)
    node = ClusterNode(spec, startup_timeout=30)
    cluster.nodes = [node]
    try:
        node.start()
        pid = node.pid
        assert pid is not None and node.running
        assert cluster.wait_for_leader(20) == 1
        assert cluster.wait_brokers(1, 20) == [1]
        node.pause()
        assert cluster.active_controller() is None  # a paused node is not asked
        with pytest.raises(TimeoutError):
            cluster.wait_for_leader(0.3)
        node.resume()
        assert cluster.active_controller() == 1
        node.kill()
        assert not node.running and node.pid is None
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
        node.start()
        assert cluster.wait_for_leader(20) == 1
        node.pause()
        node.stop()  # SIGTERM reaches a paused node too (SIGCONT first)
        assert not node.running
        assert "listening on" in node.log_text()
    finally:
        node.kill()
