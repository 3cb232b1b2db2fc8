"""Misconfiguration and bad input against real cluster processes get clear answers: a controller
whose node.id is not a voter, an unformatted data dir, a duplicate node.id, a node of another
cluster, a broker whose quorum is down, and malformed Raft RPCs on the CONTROLLER listener."""

from __future__ import annotations

import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa.testing import SamsaCluster, free_port
from samsa.testing.cluster import (
    ClusterNode,
    NodeSpec,
    child_env,
    format_storage,
    random_cluster_id,
    write_config,
)
from tests.cluster_util import create_topic_retrying, quorum_view, topics, wait_until
from tests.wire import Wire

pytestmark = pytest.mark.timeout(180)


def serve(config: Path, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """`samsa serve <config>` expected to give up on its own."""
    return subprocess.run([sys.executable, "-m", "samsa.cli.main", "serve", str(config)],
                          capture_output=True, text=True, env=child_env(), timeout=timeout,
                          check=False)


def spec(tmp: Path, node_id: int, roles: tuple[str, ...], name: str | None = None) -> NodeSpec:
    return NodeSpec(node_id, roles, "127.0.0.1", free_port() if "broker" in roles else 0,
                    free_port() if "controller" in roles else 0,
                    tmp / (name or f"node-{node_id}"))


# ---- a node alone ---------------------------------------------------------------------------------
def test_controller_not_among_the_voters_exits_with_a_clear_message(tmp_path: Path) -> None:
    s = spec(tmp_path, 5, ("broker", "controller"))
    voters = f"1@127.0.0.1:{free_port()},2@127.0.0.1:{free_port()}"
    config = write_config(s, voters, {})
    done = serve(config)
    assert done.returncode != 0
    out = done.stdout + done.stderr
    assert "node id 5 must be included in the set of voters" in out, out
    assert "controller.quorum.voters" in out, out
    assert "Traceback" not in out, out


def test_unformatted_dir_refuses_to_start_with_the_format_hint(tmp_path: Path) -> None:
    s = spec(tmp_path, 1, ("broker", "controller"))
    config = write_config(s, f"1@127.0.0.1:{s.controller_port}", {})
    done = serve(config)
    assert done.returncode != 0
    out = done.stdout + done.stderr
    assert "samsa storage format" in out, out
    assert "meta.properties" in out, out
    assert "Traceback" not in out, out
    assert not (s.log_dir / "meta.properties").exists()  # nothing formatted behind our back


# ---- one cluster (3 voters + broker-only node 4) shared by the tests below -------------------------
@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SamsaCluster]:
    c = SamsaCluster(4, controllers=3, data_dir=tmp_path_factory.mktemp("cfg"))
    try:
        c.format()
        yield c
    finally:
        c.close()


def running(c: SamsaCluster) -> SamsaCluster:
    """The shared cluster with every node up (start() skips running nodes)."""
    return c.start()


def test_broker_with_its_quorum_down_retries_then_serves(cluster: SamsaCluster) -> None:
    c = cluster
    broker = c.node(4)
    if any(n.running for n in c.controllers):
        pytest.skip("the voters are already up (test order)")
    broker.launch()
    try:
        # no voter answers: the broker keeps trying, says why in its log, and does not exit
        wait_until("the broker saying why it waits",
                   lambda: "waiting for the metadata quorum" in broker.log_text(), 40, 0.2)
        time.sleep(1.0)
        assert broker.running, broker.log_text()[-3000:]
        assert "Traceback" not in broker.log_text(), broker.log_text()[-3000:]
        # once the voters come up it registers and serves
        for node in c.controllers:
            node.launch()
        running(c)
        assert c.wait_brokers(4, timeout=60) == [1, 2, 3, 4]
        create_topic_retrying(broker.bootstrap, "after-quorum", 2, {})
        wait_until("the topic on node 4", lambda: "after-quorum" in topics(broker.bootstrap), 30)
    except BaseException:
        print(broker.log_text()[-4000:])
        raise


def test_duplicate_node_id_is_refused(cluster: SamsaCluster, tmp_path: Path) -> None:
    c = running(cluster)
    original = c.node(4)
    # the same node.id 4 with a fresh dir and its own ports, same cluster, while node 4 is alive
    twin_spec = spec(tmp_path, 4, ("broker",), "twin")
    write_config(twin_spec, c.voters, {})
    format_storage(twin_spec, c.cluster_id)
    twin = ClusterNode(twin_spec, startup_timeout=60)
    twin.launch()
    try:
        wait_until("DUPLICATE_BROKER_REGISTRATION in the twin's log",
                   lambda: "DUPLICATE_BROKER_REGISTRATION" in twin.log_text(), 60, 0.2)
        assert "Traceback" not in twin.log_text(), twin.log_text()[-3000:]
        # node 4 is listed once, with the original's endpoint, by every broker
        for node in c.brokers:
            w = Wire(node.bootstrap)
            try:
                md = w.request(3, 12, {"topics": [], "allow_auto_topic_creation": False,
                                       "include_topic_authorized_operations": False})
            finally:
                w.close()
            fours = [(b.host, b.port) for b in md.brokers if b.node_id == 4]
            assert fours == [("127.0.0.1", original.spec.port)], (node, md.brokers)
        assert original.running
    finally:
        twin.kill()


def test_node_of_another_cluster_is_not_admitted(cluster: SamsaCluster, tmp_path: Path) -> None:
    c = running(cluster)
    stranger_spec = spec(tmp_path, 7, ("broker",), "stranger")
    write_config(stranger_spec, c.voters, {})
    format_storage(stranger_spec, random_cluster_id())
    stranger = ClusterNode(stranger_spec, startup_timeout=60)
    stranger.launch()
    try:
        wait_until("INCONSISTENT_CLUSTER_ID in the stranger's log",
                   lambda: "INCONSISTENT_CLUSTER_ID" in stranger.log_text(), 60, 0.2)
        assert "Traceback" not in stranger.log_text(), stranger.log_text()[-3000:]
        ids = sorted(b for b, _ in c.describe_cluster())
        assert ids == [1, 2, 3, 4]
    finally:
        stranger.kill()


def _raft_frames(w: Wire) -> list[tuple[str, bytes]]:
    """Vote, BeginQuorumEpoch and Fetch frames of the CONTROLLER listener, each made bad."""
    vote = w.encode(52, 2, {"cluster_id": "x", "voter_id": 1, "topics": [
        {"topic_name": "__cluster_metadata", "partitions": [
            {"partition_index": 0, "replica_epoch": 1, "candidate_id": 2,
             "candidate_directory_id": None, "voter_directory_id": None,
             "last_offset_epoch": 0, "last_offset": 0, "pre_vote": False}]}]})
    begin = w.encode(53, 1, {"cluster_id": "x", "voter_id": 1, "topics": [
        {"topic_name": "__cluster_metadata", "partitions": [
            {"partition_index": 0, "voter_directory_id": None, "leader_id": 2,
             "leader_epoch": 1}]}], "leader_endpoints": []})
    fetch = w.encode(1, 17, {"cluster_id": "x", "replica_state": {"replica_id": 9,
                                                                 "replica_epoch": -1},
                             "max_wait": 0, "min_bytes": 0, "max_bytes": 1000,
                             "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                             "topics": [{"topic_id": None, "partitions": [
                                 {"partition": 0, "current_leader_epoch": 1, "fetch_offset": 0,
                                  "last_fetched_epoch": 0, "log_start_offset": -1,
                                  "partition_max_bytes": 1000, "replica_directory_id": None}]}],
                             "forgotten_topics_data": [], "rack_id": ""})
    out = []
    for name, frame in (("vote", vote), ("begin", begin), ("fetch", fetch)):
        body = frame[4:]
        cut = body[:len(body) // 2]  # truncated: the size prefix says so, the body stops early
        out.append((f"{name}-truncated", struct.pack(">i", len(cut)) + cut))
        head = body[:8]  # api key, version, correlation id, then garbage
        garbage = head + bytes((i * 37 + 11) % 256 for i in range(len(body) - 8))
        out.append((f"{name}-garbage", struct.pack(">i", len(garbage)) + garbage))
    return out


def test_malformed_raft_rpcs_close_the_connection(cluster: SamsaCluster) -> None:
    c = running(cluster)
    address = c.node(1).controller_address
    probe = Wire(address)
    frames = _raft_frames(probe)
    probe.close()
    for name, frame in frames:
        w = Wire(address, timeout=10)
        try:
            w.send_raw(frame)
            assert w.is_closed(10), f"{name}: the connection stayed open"
        finally:
            w.close()
    # every voter still answers, one leader, metadata writes still work
    for node in c.controllers:
        view = quorum_view(node.controller_address, timeout=5)
        assert view is not None, node
    create_topic_retrying(c.node(2).bootstrap, "after-garbage", 1, {})
    assert c.wait_brokers(4, timeout=30) == [1, 2, 3, 4]
