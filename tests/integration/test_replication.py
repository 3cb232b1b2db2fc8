"""Partition replication on a real 3-broker cluster (issue 14): followers copy the leader's
batches byte for byte, acks=all waits for the ISR, a kill -9 of the leader loses no acknowledged
record, the returning broker truncates what it alone had and rejoins the ISR, and Kafka's epoch
checks answer stale and unknown leader epochs and non-replica followers."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from samsa.testing import SamsaCluster
from tests import replication_util
from tests.cluster_util import wait_until
from tests.wire import Wire

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

TOPIC = "replicated"
FETCH, LIST_OFFSETS, METADATA, OFFSET_FOR_LEADER_EPOCH = 1, 2, 3, 23
NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH = 6, 74, 75
FETCH_MAX = 65536


@pytest.fixture(scope="module")
def cluster() -> Iterator[SamsaCluster]:
    with SamsaCluster(3, overrides={"broker.session.timeout.ms": "3000",
                                    "broker.heartbeat.interval.ms": "500",
                                    "replica.lag.time.max.ms": "3000",
                                    "offsets.topic.replication.factor": "3",
                                    "offsets.topic.num.partitions": "3",
                                    "transaction.state.log.replication.factor": "3",
                                    "transaction.state.log.num.partitions": "3",
                                    "group.initial.rebalance.delay.ms": "0",
                                    "replica.fetch.max.bytes": str(FETCH_MAX)}) as c:
        c.wait_brokers(3)
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        fs = admin.create_topics([NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})])
        fs[TOPIC].result(30)
        yield c


def partition_view(c: SamsaCluster, topic: str = TOPIC, p: int = 0) -> dict[str, Any]:
    """Leader, epoch, replicas and ISR of a partition, as a live broker's Metadata says."""
    return replication_util.partition_view(c, topic, p)


def produce(c: SamsaCluster, values: list[bytes]) -> list[tuple[bytes, int]]:
    """acks=all idempotent produce; (value, offset) of each acknowledged record."""
    from confluent_kafka import Producer

    acked: list[tuple[bytes, int]] = []
    errors: list[Any] = []

    def report(err: Any, msg: Any) -> None:
        if err is None:
            acked.append((msg.value(), msg.offset()))
        else:
            errors.append(err)

    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5, "message.timeout.ms": 60000})
    for v in values:
        p.produce(TOPIC, v, on_delivery=report)
        p.poll(0)
    assert p.flush(90) == 0
    assert not errors, errors
    return acked


def consume_all(c: SamsaCluster, expect: int) -> list[tuple[int, bytes]]:
    from confluent_kafka import Consumer, TopicPartition

    cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": f"g-{time.monotonic_ns()}",
                     "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    cons.assign([TopicPartition(TOPIC, 0, 0)])
    out: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 60
    while len(out) < expect and time.monotonic() < deadline:
        m = cons.poll(0.5)
        if m is not None and m.error() is None:
            out.append((m.offset(), m.value()))
    cons.close()
    return out


def segment_bytes(c: SamsaCluster, node_id: int, topic: str = TOPIC, p: int = 0) -> bytes:
    d = Path(c.node(node_id).spec.log_dir) / f"{topic}-{p}"
    return b"".join(f.read_bytes() for f in sorted(d.glob("*.log")))


def wait_identical(c: SamsaCluster, nodes: list[int], timeout: float = 30) -> bytes:
    def same() -> bytes | None:
        data = {n: segment_bytes(c, n) for n in nodes}
        first = data[nodes[0]]
        return first if first and all(v == first for v in data.values()) else None
    return wait_until("replicas byte-identical", same, timeout)


def test_followers_copy_the_leader_byte_for_byte(cluster: SamsaCluster) -> None:
    view = wait_until("full ISR", lambda: (v := partition_view(cluster))["leader"] >= 0
                      and len(v["isr"]) == 3 and v, 30)
    acked = produce(cluster, [f"a-{i}".encode() for i in range(300)])
    assert len(acked) == 300
    data = wait_identical(cluster, list(view["replicas"]))
    assert len(data) > 300 * 5


def test_leader_kill_loses_no_acknowledged_record(cluster: SamsaCluster) -> None:
    before = wait_until("full ISR", lambda: (v := partition_view(cluster))["leader"] >= 0
                        and len(v["isr"]) == 3 and v, 30)
    acked = produce(cluster, [f"b-{i}".encode() for i in range(200)])
    old = before["leader"]
    cluster.node(old).kill()
    after = wait_until("a new leader", lambda: (v := partition_view(cluster))["leader"]
                       not in (-1, old) and v, 30)
    assert after["epoch"] > before["epoch"]
    assert old not in after["isr"]
    acked += produce(cluster, [f"c-{i}".encode() for i in range(200)])
    # the returning broker catches up from the new leader and rejoins the ISR
    cluster.node(old).restart()
    wait_until("the old leader back in the ISR",
               lambda: old in partition_view(cluster)["isr"], 60)
    wait_identical(cluster, list(after["replicas"]))
    end = max(o for _, o in acked) + 1
    seen = consume_all(cluster, end)
    values = [v for _, v in seen]
    for v, off in acked:
        assert (off, v) in seen, f"acknowledged {v!r} at {off} is missing"
    assert len(values) == len(set(values)), "duplicates"
    offsets = [o for o, _ in seen]
    assert offsets == sorted(offsets)


def _fetch_body(topic_id: Any, epoch: int, offset: int, replica: int = -1,
                last_epoch: int = -1) -> dict[str, Any]:
    return {"replica_state": {"replica_id": replica, "replica_epoch": -1},
            "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1,
            "topics": [{"topic_id": topic_id, "partitions": [
                {"partition": 0, "current_leader_epoch": epoch, "fetch_offset": offset,
                 "last_fetched_epoch": last_epoch, "log_start_offset": -1,
                 "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""}


def _topic_id(w: Wire) -> Any:
    resp = w.request(METADATA, 12, {"topics": [{"name": TOPIC, "topic_id": None}],
                                    "allow_auto_topic_creation": False,
                                    "include_topic_authorized_operations": False})
    return resp.topics[0].topic_id


def test_epoch_checks_and_offset_for_leader_epoch(cluster: SamsaCluster) -> None:
    import datetime

    view = wait_until("a leader", lambda: (v := partition_view(cluster))["leader"] >= 0 and v, 30)
    leader = cluster.node(view["leader"])
    w = Wire(leader.bootstrap)
    try:
        tid = _topic_id(w)

        def fetch(**kw: Any) -> Any:
            body = _fetch_body(tid, **kw)
            body["max_wait"] = datetime.timedelta(0)
            return w.request(FETCH, 15, body).responses[0].partitions[0]

        epoch = view["epoch"]
        assert fetch(epoch=epoch, offset=0).error_code == 0
        assert fetch(epoch=epoch - 1, offset=0).error_code == FENCED_LEADER_EPOCH
        assert fetch(epoch=epoch + 1, offset=0).error_code == UNKNOWN_LEADER_EPOCH
        # a "follower" that is not a replica of the partition (node 99)
        assert fetch(epoch=epoch, offset=0, replica=99).error_code == NOT_LEADER_OR_FOLLOWER
        # a follower claiming an epoch the leader never had diverges at once
        p = fetch(epoch=epoch, offset=10**6, replica=view["replicas"][-1]
                  if view["replicas"][-1] != view["leader"] else view["replicas"][0],
                  last_epoch=epoch + 5)
        assert p.error_code == 0 and p.diverging_epoch.epoch <= epoch
        # OffsetForLeaderEpoch: the current epoch ends at the log end; epoch 0 ended where the
        # first leader change happened (earlier test), strictly below the log end
        resp = w.request(OFFSET_FOR_LEADER_EPOCH, 4, {"replica_id": -1, "topics": [
            {"topic": TOPIC, "partitions": [
                {"partition": 0, "current_leader_epoch": epoch, "leader_epoch": epoch},
                {"partition": 0, "current_leader_epoch": epoch, "leader_epoch": 0},
                {"partition": 0, "current_leader_epoch": epoch - 1, "leader_epoch": 0}]}]})
        cur, first, stale = resp.topics[0].partitions
        lo = w.request(LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": TOPIC, "partitions": [{"partition_index": 0, "current_leader_epoch": epoch,
                                            "timestamp": -1}]}]}).topics[0].partitions[0]
        assert cur.error_code == 0 and cur.leader_epoch == epoch
        assert cur.end_offset >= lo.offset
        assert first.error_code == 0 and first.leader_epoch == 0 and first.end_offset < lo.offset
        assert stale.error_code == FENCED_LEADER_EPOCH
        assert lo.leader_epoch == epoch
    finally:
        w.close()


def test_reassignment_throttle_bounds_the_copy_rate(cluster: SamsaCluster, tmp_path: Path) -> None:
    """`samsa partitions reassign --execute --throttle R` (Kafka's flow: leader- and
    follower-throttled replica lists, per-broker rates): the new replica fills no faster than R
    bytes/s (plus a second's burst and one fetch), then the reassignment completes and the
    copies are identical."""
    import contextlib
    import io
    import json

    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from samsa.cli.main import main

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("throttled", 1, replica_assignment=[[1]])])["throttled"] \
        .result(30)
    # small batches: a fetch always returns at least one whole batch (KIP-74), so the batch size
    # bounds how far one fetch can overshoot the quota
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 20,
                  "batch.size": 16384})
    wait_until("leader", lambda: partition_view(cluster, "throttled")["leader"] == 1, 30)
    value = b"x" * 1000
    for i in range(2000):
        p.produce("throttled", value, key=str(i).encode())
        p.poll(0)
    assert p.flush(60) == 0
    total = len(segment_bytes(cluster, 1, "throttled"))
    assert total > 1_900_000
    rate = 400_000
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "throttled", "partition": 0, "replicas": [1, 2]}]}))

    def cli(*argv: str) -> tuple[int, str]:
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            code = main(["partitions", "reassign", "--bootstrap-server", cluster.bootstrap,
                         "--reassignment-json-file", str(plan), *argv])
        return code, out.getvalue()

    start = time.monotonic()
    assert cli("--execute", "--throttle", str(rate))[0] == 0
    d = Path(cluster.node(2).spec.log_dir) / "throttled-0"
    seen = 0
    while seen < total and time.monotonic() - start < 30:
        time.sleep(0.25)
        seen = sum(f.stat().st_size for f in d.glob("*.log")) if d.exists() else 0
        bound = rate * (time.monotonic() - start + 1) + 2 * FETCH_MAX
        assert seen <= bound, f"{seen} bytes copied in {time.monotonic() - start:.1f} s"
    code, out = cli("--verify", "--wait", "--wait-timeout", "60")
    assert code == 0 and "is completed" in out, out
    assert partition_view(cluster, "throttled")["replicas"] == (1, 2)
    wait_until("copies identical", lambda: segment_bytes(cluster, 2, "throttled")
               == segment_bytes(cluster, 1, "throttled"), 30)


def test_sigterm_of_a_leader_exits_cleanly_while_producing(cluster: SamsaCluster) -> None:
    """A controlled shutdown of a partition leader with acks=all writes running: leadership moves,
    the broker exits by itself (no fetcher started by the shutdown's own metadata change keeps it
    alive, none writes into closed logs), and nothing acknowledged is lost."""
    import subprocess
    import threading

    from confluent_kafka import Producer

    view = wait_until("full ISR", lambda: (v := partition_view(cluster))["leader"] >= 0
                      and len(v["isr"]) == 3 and v, 60)
    node = cluster.node(view["leader"])
    acked: list[tuple[bytes, int]] = []
    stop = threading.Event()

    def write() -> None:
        p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                      "enable.idempotence": True, "linger.ms": 2})
        i = 0
        while not stop.is_set():
            p.produce(TOPIC, f"t-{i}".encode(), on_delivery=lambda e, m: e is None and
                      acked.append((m.value(), m.offset())))
            p.poll(0.005)
            i += 1
        p.flush(60)

    writer = threading.Thread(target=write)
    writer.start()
    time.sleep(1.0)
    assert node.proc is not None
    node.proc.terminate()
    try:
        code = node.proc.wait(15)
    except subprocess.TimeoutExpired:
        code = None
    time.sleep(1.0)
    stop.set()
    writer.join(90)
    log_text = node.log_text()
    node.proc = None if code is not None else node.proc
    if code is None:
        node.kill()
    assert code == 0, "the broker did not exit after SIGTERM within 15 s"
    assert "Bad file descriptor" not in log_text
    after = wait_until("a new leader", lambda: (v := partition_view(cluster))["leader"]
                       not in (-1, node.node_id) and v, 30)
    assert after["epoch"] > view["epoch"]
    node.start()
    wait_until("back in the ISR", lambda: node.node_id in partition_view(cluster)["isr"], 60)
    seen = set(consume_all(cluster, max(o for _, o in acked) + 1))
    missing = [(v, o) for v, o in acked if (o, v) not in seen]
    assert not missing, missing[:5]
