"""Everything above the log survives a leader change (issue 14) on a 3-broker cluster:
transactions across a leader change of a data partition and of their __transaction_state
partition (the transaction coordinator moves; a transaction left in PREPARE_COMMIT by a dead
coordinator is completed by the new one), consumer groups across a move of their
__consumer_offsets partition (committed offsets never regress, the group rebalances and goes on),
and the schema registry across a leader change of `_schemas`."""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from samsa.testing import SamsaCluster
from samsa.testing.registry import SamsaRegistry
from tests.cluster_util import wait_until
from tests.replication_util import (
    CLUSTER_OVERRIDES,
    RETRIABLE_CODES,
    bring_back,
    coordinator,
    create_topic,
    create_topic_on,
    internal_partition,
    move_leader,
    partition_view,
    wait_full_isr,
)
from tests.wire import Wire

pytestmark = [pytest.mark.timeout(420), pytest.mark.slow]

GROUP_KEY, TXN_KEY = 0, 1
DESCRIBE_TRANSACTIONS = 65


@pytest.fixture(scope="module")
def cluster() -> Iterator[SamsaCluster]:
    # coordinator writes give up after 1.5 s, before a stalled follower leaves the ISR (3 s)
    with SamsaCluster(3, overrides={**CLUSTER_OVERRIDES,
                                    "offsets.commit.timeout.ms": "1500"}) as c:
        c.wait_brokers(3)
        yield c


def _internal_isr(c: SamsaCluster, key: str, key_type: int) -> tuple[str, int]:
    """The key's internal partition, once created and fully in sync."""
    topic, p = internal_partition(c, key, key_type)
    wait_full_isr(c, topic, p)
    return topic, p


def txn_id(c: SamsaCluster, avoid: set[int]) -> tuple[str, int]:
    """A fresh transactional id whose coordinator is not on `avoid`, with its coordinator."""
    for _ in range(200):
        tid = f"tx-{uuid.uuid4().hex[:8]}"
        coord = coordinator(c, tid, TXN_KEY)
        if coord not in avoid:
            return tid, coord
    raise AssertionError(f"no transactional id coordinated outside {avoid}")


def transactional_producer(c: SamsaCluster, tid: str) -> Any:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": c.bootstrap, "transactional.id": tid,
                  "transaction.timeout.ms": 60000, "message.timeout.ms": 60000})
    p.init_transactions(60)
    return p


def produce_in_txn(p: Any, topic: str, values: list[str]) -> None:
    for v in values:
        p.produce(topic, v.encode(), partition=0)
    assert p.flush(60) == 0


def read_all(c: SamsaCluster, topic: str, isolation: str = "read_committed",
             partitions: int = 1) -> list[str]:
    """Everything a fresh consumer reads from the start, until 3 s pass without a record."""
    from confluent_kafka import Consumer, TopicPartition

    cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": f"rd-{uuid.uuid4()}",
                     "isolation.level": isolation, "enable.auto.commit": False})
    cons.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[str] = []
    idle = 0
    deadline = time.monotonic() + 60
    while idle < 6 and time.monotonic() < deadline:
        m = cons.poll(0.5)
        if m is None:
            idle += 1
        elif m.error() is None:
            idle = 0
            got.append(m.value().decode())
    cons.close()
    return got


def describe_txn(c: SamsaCluster, node: int, tid: str) -> tuple[int, str]:
    """(error, state) of a transactional id as `node` answers DescribeTransactions."""
    w = Wire(c.node(node).bootstrap, timeout=10)
    try:
        r = w.request(DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [tid]})
    finally:
        w.close()
    s = r.transaction_states[0]
    return int(s.error_code), str(s.transaction_state)


# ---- transactions --------------------------------------------------------------------------------
def test_transactions_across_data_partition_leader_changes(cluster: SamsaCluster) -> None:
    topic = "txn-data-move"
    create_topic(cluster, topic, 1)
    leader = partition_view(cluster, topic)["leader"]
    tid, coord = txn_id(cluster, avoid={leader})
    _internal_isr(cluster, tid, TXN_KEY)
    p = transactional_producer(cluster, tid)
    p.begin_transaction()
    produce_in_txn(p, topic, [f"d1-{i}" for i in range(50)])
    old, _ = move_leader(cluster, topic, 0, "kill")  # mid-transaction
    produce_in_txn(p, topic, [f"d1b-{i}" for i in range(50)])
    p.commit_transaction(60)
    p.begin_transaction()
    produce_in_txn(p, topic, [f"d2-{i}" for i in range(30)])
    p.abort_transaction(60)
    bring_back(cluster, old, [(topic, 0)])
    p.begin_transaction()
    produce_in_txn(p, topic, [f"d3-{i}" for i in range(20)])
    old, _ = move_leader(cluster, topic, 0, "shutdown")
    produce_in_txn(p, topic, [f"d3b-{i}" for i in range(20)])
    p.commit_transaction(60)
    bring_back(cluster, old, [(topic, 0)])
    committed = ([f"d1-{i}" for i in range(50)] + [f"d1b-{i}" for i in range(50)]
                 + [f"d3-{i}" for i in range(20)] + [f"d3b-{i}" for i in range(20)])
    assert read_all(cluster, topic) == committed
    uncommitted = read_all(cluster, topic, "read_uncommitted")
    assert sorted(uncommitted) == sorted(committed + [f"d2-{i}" for i in range(30)])


def test_transaction_coordinator_moves_mid_transaction(cluster: SamsaCluster) -> None:
    topic = "txn-coord-move"
    create_topic(cluster, topic, 1)
    leader = partition_view(cluster, topic)["leader"]
    tid, coord = txn_id(cluster, avoid={leader})
    state_tp = _internal_isr(cluster, tid, TXN_KEY)
    p = transactional_producer(cluster, tid)
    p.begin_transaction()
    produce_in_txn(p, topic, [f"t1-{i}" for i in range(50)])
    old, view = move_leader(cluster, *state_tp, "kill")  # the coordinator dies, ONGOING
    assert coordinator(cluster, tid, TXN_KEY) == view["leader"]
    p.commit_transaction(60)
    p.begin_transaction()
    produce_in_txn(p, topic, [f"t2-{i}" for i in range(30)])
    p.abort_transaction(60)
    bring_back(cluster, old, [state_tp])
    p.begin_transaction()
    produce_in_txn(p, topic, [f"t3-{i}" for i in range(20)])
    old, _ = move_leader(cluster, *state_tp, "shutdown")
    p.commit_transaction(60)
    bring_back(cluster, old, [state_tp])
    committed = [f"t1-{i}" for i in range(50)] + [f"t3-{i}" for i in range(20)]
    assert read_all(cluster, topic) == committed
    assert sorted(read_all(cluster, topic, "read_uncommitted")) == \
        sorted(committed + [f"t2-{i}" for i in range(30)])


def test_prepare_commit_is_completed_by_the_new_coordinator(cluster: SamsaCluster) -> None:
    """The transaction's only data partition lives on D alone. With D down the coordinator C
    writes PREPARE_COMMIT but cannot write the markers; C is killed; D comes back, the quorum
    (D, E) gives C's __transaction_state partition to E, and E finishes the commit."""
    tid, c_node = txn_id(cluster, avoid=set())
    state_tp = _internal_isr(cluster, tid, TXN_KEY)
    d_node, e_node = (n for n in (1, 2, 3) if n != c_node)
    topic = f"txn-stuck-{d_node}"
    create_topic_on(cluster, topic, [[d_node]])
    p = transactional_producer(cluster, tid)
    p.begin_transaction()
    produce_in_txn(p, topic, [f"s-{i}" for i in range(20)])
    cluster.node(d_node).kill()
    wait_until("D out of the ISR of the coordinator's partition",
               lambda: d_node not in partition_view(cluster, *state_tp)["isr"], 30)
    p.commit_transaction(60)  # answered once PREPARE_COMMIT is written; markers cannot be
    assert describe_txn(cluster, c_node, tid) == (0, "PrepareCommit")
    cluster.node(c_node).kill()
    cluster.node(d_node).start()
    wait_until("E leads the coordinator's partition",
               lambda: partition_view(cluster, *state_tp)["leader"] == e_node, 60)
    wait_until("E completed the commit",
               lambda: describe_txn(cluster, e_node, tid) == (0, "CompleteCommit"), 60)
    assert read_all(cluster, topic) == [f"s-{i}" for i in range(20)]
    # the producer goes on with the new coordinator
    p.begin_transaction()
    produce_in_txn(p, topic, ["after"])
    p.commit_transaction(60)
    bring_back(cluster, c_node, [state_tp])
    assert read_all(cluster, topic) == [f"s-{i}" for i in range(20)] + ["after"]


def test_commit_through_a_stalled_coordinator_follower(cluster: SamsaCluster) -> None:
    """The PrepareCommit write waits for a follower that is frozen (SIGSTOP) but still in the
    ISR, and times out: the coordinator answers a retriable error and keeps the transaction as
    it was, so the producer's retry commits it once the follower has left the ISR. (Before: the
    connection was closed and the transaction left in PrepareCommit in memory with no markers
    coming; every retry was answered CONCURRENT_TRANSACTIONS until the commit timed out.)"""
    tid, c_node = txn_id(cluster, avoid=set())
    state_tp = _internal_isr(cluster, tid, TXN_KEY)
    stalled = next(n for n in (1, 2, 3) if n != c_node)
    topic = f"txn-stall-{c_node}"
    create_topic_on(cluster, topic, [[c_node]])  # its markers are written locally
    p = transactional_producer(cluster, tid)
    p.begin_transaction()
    produce_in_txn(p, topic, [f"st-{i}" for i in range(10)])
    cluster.node(stalled).pause()
    # thawed after 4 s: the first PrepareCommit write has timed out by then (1.5 s), and a
    # client request that went to the frozen broker (FindCoordinator) gets its answer
    thaw = threading.Timer(4.0, cluster.node(stalled).resume)
    thaw.start()
    try:
        p.commit_transaction(60)
    finally:
        thaw.cancel()
        cluster.node(stalled).resume()
    assert describe_txn(cluster, c_node, tid) == (0, "CompleteCommit")
    assert read_all(cluster, topic) == [f"st-{i}" for i in range(10)]
    cluster.wait_brokers(3, 60)
    wait_full_isr(cluster, *state_tp)


def _raw(c: SamsaCluster, node: int, key: int, version: int, body: dict[str, Any]) -> Any:
    w = Wire(c.node(node).bootstrap, timeout=15)
    try:
        return w.request(key, version, body)
    finally:
        w.close()


def _retry(what: str, fn: Any, timeout: float = 30) -> Any:
    """fn() until its error code is not a retriable one."""
    deadline = time.monotonic() + timeout
    while True:
        r = fn()
        if r.error_code not in RETRIABLE_CODES or time.monotonic() > deadline:
            assert r.error_code == 0, (what, r.error_code)
            return r
        time.sleep(0.3)


def test_txn_offset_commit_through_a_stalled_follower(cluster: SamsaCluster) -> None:
    """TxnOffsetCommit whose write times out waiting for a frozen follower of the group's
    __consumer_offsets partition is answered COORDINATOR_NOT_AVAILABLE (Kafka's mapping, a
    retriable error), not by closing the connection."""
    group = f"g-stall-{uuid.uuid4().hex[:6]}"
    create_topic(cluster, "txn-offsets-target", 1)
    g_node = coordinator(cluster, group, GROUP_KEY)
    offsets_tp = _internal_isr(cluster, group, GROUP_KEY)
    stalled = next(n for n in (1, 2, 3) if n != g_node)
    tid, t_node = txn_id(cluster, avoid={stalled})
    _internal_isr(cluster, tid, TXN_KEY)
    init = _retry("InitProducerId", lambda: _raw(cluster, t_node, 22, 4, {
        "transactional_id": tid, "transaction_timeout": 60000, "producer_id": -1,
        "producer_epoch": -1}))
    ids = {"transactional_id": tid, "producer_id": init.producer_id,
           "producer_epoch": init.producer_epoch}
    _retry("AddOffsetsToTxn", lambda: _raw(cluster, t_node, 25, 3, {**ids, "group_id": group}))
    cluster.node(stalled).pause()
    try:
        resp = _raw(cluster, g_node, 28, 3, {
            **ids, "group_id": group, "generation_id": -1, "member_id": "",
            "group_instance_id": None, "topics": [{"name": "txn-offsets-target", "partitions": [
                {"partition_index": 0, "committed_offset": 5, "committed_leader_epoch": -1,
                 "committed_metadata": ""}]}]})
    finally:
        cluster.node(stalled).resume()
    codes = [p.error_code for t in resp.topics for p in t.partitions]
    assert codes in ([15], [0]), codes  # 0 only if the follower left the ISR that fast
    _retry("EndTxn", lambda: _raw(cluster, t_node, 26, 3, {**ids, "committed": False}), 60)
    cluster.wait_brokers(3, 60)
    wait_full_isr(cluster, *offsets_tp)


# ---- consumer groups -----------------------------------------------------------------------------
REBALANCE_COMMIT_ERRORS = {22, 25, 27}  # ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE_...


class Member:
    """A confluent-kafka group member that commits every record synchronously; commit errors
    are recorded (and must be retriable). A commit refused because the group rebalanced (Java's
    CommitFailedException) is given up: that record may be consumed again by its new owner."""

    def __init__(self, c: SamsaCluster, group: str, topic: str) -> None:
        from confluent_kafka import Consumer

        self.errors: list[Any] = []
        self.consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": group,
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                  "session.timeout.ms": 10000, "heartbeat.interval.ms": 500,
                                  "error_cb": self.errors.append})
        self.consumer.subscribe([topic])
        self.got: list[str] = []
        self.given_up = 0

    def poll(self) -> None:
        from confluent_kafka import KafkaException

        m = self.consumer.poll(0.1)
        if m is None:
            return
        if m.error() is not None:
            self.errors.append(m.error())
            return
        self.got.append(m.value().decode())
        for _ in range(50):
            try:
                self.consumer.commit(m, asynchronous=False)
                return
            except KafkaException as e:
                self.errors.append(e.args[0])
                if e.args[0].code() in REBALANCE_COMMIT_ERRORS:
                    self.given_up += 1
                    return
                time.sleep(0.2)
        raise AssertionError(f"commit not done: {self.errors[-3:]}")

    def assignment(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}


def committed(c: SamsaCluster, group: str, topic: str, parts: int) -> list[int]:
    """The group's committed offsets, as a fresh client fetches them (retried on errors)."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": group})
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                got = cons.committed([TopicPartition(topic, p) for p in range(parts)], 10)
                return [tp.offset for tp in got]
            except KafkaException:
                assert time.monotonic() < deadline, "committed offsets not readable"
                time.sleep(0.5)
    finally:
        cons.close()


def test_group_coordinator_moves(cluster: SamsaCluster) -> None:
    from confluent_kafka import Producer

    topic, parts, group = "grp-move", 3, f"g-move-{uuid.uuid4().hex[:6]}"
    create_topic(cluster, topic, parts)
    produced: list[str] = []

    def produce(prefix: str, n: int) -> None:
        pr = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                       "enable.idempotence": True})
        for i in range(n):
            produced.append(f"{prefix}-{i}")
            pr.produce(topic, produced[-1].encode(), partition=i % parts)
        assert pr.flush(60) == 0

    members = [Member(cluster, group, topic), Member(cluster, group, topic)]

    def consume_until(want: set[str], alive: list[Member], what: str) -> None:
        def step() -> bool:
            for m in alive:
                m.poll()
            return want <= {v for m in members for v in m.got}
        wait_until(what, step, 90, interval=0)

    produce("a", 300)
    coordinator(cluster, group, GROUP_KEY)
    offsets_tp = _internal_isr(cluster, group, GROUP_KEY)
    consume_until(set(produced), members, "first records consumed by the group")
    before = committed(cluster, group, topic, parts)
    assert sum(before) == 300
    old, view = move_leader(cluster, *offsets_tp, "kill")  # the group coordinator dies
    assert coordinator(cluster, group, GROUP_KEY) == view["leader"]
    assert committed(cluster, group, topic, parts) == before, "offsets regressed"
    produce("b", 300)
    consume_until(set(produced), members, "the group goes on after the coordinator moved")
    mid = committed(cluster, group, topic, parts)
    assert sum(mid) == 600 and all(x >= y for x, y in zip(mid, before, strict=True))
    # a rebalance with the new coordinator: one member leaves, the other takes everything
    members[0].consumer.close()
    alive = [members[1]]
    produce("c", 90)
    consume_until(set(produced), alive, "the remaining member took over")
    wait_until("the remaining member owns every partition",
               lambda: (members[1].poll(), members[1].assignment() == set(range(parts)))[1], 60,
               interval=0)
    bring_back(cluster, old, [offsets_tp])
    old, _ = move_leader(cluster, *offsets_tp, "shutdown")
    after = committed(cluster, group, topic, parts)
    assert sum(after) == 690 and all(x >= y for x, y in zip(after, mid, strict=True))
    produce("d", 60)
    consume_until(set(produced), alive, "the group goes on after a controlled shutdown")
    members[1].consumer.close()
    bring_back(cluster, old, [offsets_tp])
    assert sum(committed(cluster, group, topic, parts)) == 750
    for m in members:
        for e in m.errors:
            assert not e.fatal() and (e.code() < 0 or e.code() in RETRIABLE_CODES
                                      or e.code() in REBALANCE_COMMIT_ERRORS), e
    # at least once: everything consumed; a redelivery only of what was not committed
    consumed = [v for m in members for v in m.got]
    assert set(consumed) == set(produced)
    assert len(consumed) - len(set(consumed)) <= sum(m.given_up for m in members), \
        "records consumed again although their commit had succeeded"


# ---- schema registry -----------------------------------------------------------------------------
CT = {"Content-Type": "application/vnd.schemaregistry.v1+json"}


def _schema(n: int) -> str:
    return json.dumps({"type": "record", "name": "R", "fields": [
        {"name": f"f{i}", "type": "int", "default": 0} for i in range(n)]})


def test_schema_registry_across_schemas_leader_changes(cluster: SamsaCluster) -> None:
    reg = SamsaRegistry(cluster.bootstrap).start()
    try:
        # Confluent's kafkastore.topic.replication.factor: 3 (capped by the brokers)
        view = wait_full_isr(cluster, "_schemas")
        assert len(view["replicas"]) == 3
        ids = []
        with httpx.Client(base_url=reg.url, headers=CT, timeout=60) as h:
            for n in (1, 2):
                r = h.post("/subjects/rv-value/versions", json={"schema": _schema(n)})
                assert r.status_code == 200, r.text
                ids.append(r.json()["id"])
            for how in ("kill", "shutdown"):
                old, _ = move_leader(cluster, "_schemas", 0, how)
                assert h.get("/subjects/rv-value/versions/1").json()["id"] == ids[0]
                r = h.post("/subjects/rv-value/versions", json={"schema": _schema(len(ids) + 1)})
                assert r.status_code == 200, r.text
                assert r.json()["id"] > max(ids)
                ids.append(r.json()["id"])
                # incompatible is still refused (the state is all there)
                bad = h.post("/subjects/rv-value/versions",
                             json={"schema": json.dumps({"type": "string"})})
                assert bad.status_code == 409, bad.text
                bring_back(cluster, old, [("_schemas", 0)])
            assert h.get("/subjects/rv-value/versions").json() == list(range(1, len(ids) + 1))
        # a registry started now reads the same state from the replicated log
        fresh = SamsaRegistry(cluster.bootstrap).start()
        try:
            got = httpx.get(f"{fresh.url}/subjects/rv-value/versions/latest", headers=CT).json()
            assert got["id"] == ids[-1] and got["version"] == len(ids)
        finally:
            fresh.close()
    finally:
        reg.close()


# ---- Spark: the samsa source and the exactly-once sink ---------------------------------------------
@pytest.mark.timeout(900)
def test_spark_eos_across_leader_changes(cluster: SamsaCluster, tmp_path: Path) -> None:
    """The streaming job of test_spark_eos (samsa source -> exactly-once samsa sink) runs while
    the leader of an output partition is killed with -9 and the leader of an input partition is
    shut down: a read_committed consumer sees exactly one output per input."""
    pytest.importorskip("pyspark")
    from tests.spark_util import produce
    from tests.spark_util import read_all as spark_read_all

    n = 600
    bs = cluster.bootstrap
    create_topic(cluster, "reos-in", 3)
    create_topic(cluster, "reos-out", 3)
    sent = produce(bs, "reos-in", n, partitions=3, headers=False)
    job = Path(__file__).with_name("spark_eos_job.py")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    log_path = tmp_path / "job.log"
    log = open(log_path, "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([sys.executable, str(job), bs, "reos-in", "reos-out",
                             str(tmp_path / "checkpoint"), "run"], stdout=log,
                            stderr=subprocess.STDOUT, env=env, start_new_session=True)

    def outputs() -> int:
        assert proc.poll() is None, log_path.read_text()[-3000:]
        return len(spark_read_all(bs, "reos-out", committed=True, timeout_s=30))

    try:
        wait_until("the job's first outputs", lambda: outputs() >= 100, 300, interval=2)
        old, _ = move_leader(cluster, "reos-out", 0, "kill")
        start = outputs()
        wait_until("outputs after kill -9 of an output leader", lambda: outputs() >= start + 100,
                   300, interval=2)
        bring_back(cluster, old, [("reos-out", p) for p in range(3)])
        old, _ = move_leader(cluster, "reos-in", 1, "shutdown")
        start = outputs()
        wait_until("outputs after an input leader's controlled shutdown",
                   lambda: outputs() >= min(n, start + 100), 300, interval=2)
        bring_back(cluster, old, [("reos-in", p) for p in range(3)])
        wait_until("every input processed", lambda: outputs() >= n, 300, interval=2)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
        log.close()
    out = spark_read_all(bs, "reos-out", committed=True)
    counts = collections.Counter((m.key(), m.value()) for m in out)
    expected = collections.Counter((s["key"], s["value"] + b":out") for s in sent)
    assert counts == expected  # exactly one output per input
