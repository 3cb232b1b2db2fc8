"""Real clients against a 3-broker cluster (issue 13): confluent-kafka, kafka-python, aiokafka and
kcat see every broker and produce/consume a topic whose partitions are spread across them; a
consumer group and transactions work with their coordinators on a broker other than the leaders
of the partitions they touch (markers travel as WriteTxnMarkers); a group request sent to a broker
that is not the group's coordinator gets NOT_COORDINATOR; producer ids are unique cluster-wide."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from samsa.testing import SamsaCluster
from tests.wire import Wire

pytestmark = pytest.mark.timeout(300)

TOPIC = "spread"
PARTITIONS = 6
N = 60
NOT_COORDINATOR = 16
GROUP_KEY, TXN_KEY = 0, 1


@pytest.fixture(scope="module")
def cluster() -> Iterator[SamsaCluster]:
    with SamsaCluster(3, overrides={"offsets.topic.num.partitions": "6",
                                    "transaction.state.log.num.partitions": "6",
                                    "group.initial.rebalance.delay.ms": "0"}) as c:
        c.wait_brokers(3)
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
        _wait_leaders(c, TOPIC, PARTITIONS)
        yield c


def _request(bootstrap: str, key: int, version: int, body: dict[str, Any]) -> Any:
    w = Wire(bootstrap)
    try:
        return w.request(key, version, body)
    finally:
        w.close()


def leaders(c: SamsaCluster, topic: str) -> dict[int, int]:
    resp = _request(c.bootstrap.split(",")[0], 3, 12,
                    {"topics": [{"name": topic}], "allow_auto_topic_creation": False})
    return {p.partition_index: p.leader_id for t in resp.topics for p in t.partitions}


def _wait_leaders(c: SamsaCluster, topic: str, n: int) -> dict[int, int]:
    deadline = time.monotonic() + 30
    while True:
        found = leaders(c, topic)
        if len(found) == n and all(v >= 0 for v in found.values()):
            return found
        assert time.monotonic() < deadline, f"no leaders for {topic}: {found}"
        time.sleep(0.1)


def coordinator(c: SamsaCluster, key: str, key_type: int = GROUP_KEY) -> tuple[int, str]:
    """(node id, host:port) of the key's coordinator, by FindCoordinator v4 (batched)."""
    deadline = time.monotonic() + 30
    while True:
        resp = _request(c.bootstrap.split(",")[-1], 10, 4,
                        {"key_type": key_type, "coordinator_keys": [key]})
        r = resp.coordinators[0]
        if r.error_code == 0:
            return r.node_id, f"{r.host}:{r.port}"
        assert time.monotonic() < deadline, f"no coordinator for {key}: {r}"
        time.sleep(0.1)


def bootstrap_of(c: SamsaCluster, node_id: int) -> str:
    return c.node(node_id).bootstrap


def test_topic_is_spread_over_all_brokers(cluster: SamsaCluster) -> None:
    assert set(leaders(cluster, TOPIC).values()) == {1, 2, 3}


def test_confluent_kafka_produces_and_consumes_across_brokers(cluster: SamsaCluster) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(timeout=10)
    assert sorted(md.brokers) == [1, 2, 3]
    p = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True})
    for i in range(N):
        p.produce(TOPIC, value=f"ck-{i}".encode(), partition=i % PARTITIONS)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "ck-reader",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    got: dict[int, list[str]] = {}
    deadline = time.monotonic() + 30
    while sum(len(v) for v in got.values()) < N and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error() and m.value().startswith(b"ck-"):
            got.setdefault(m.partition(), []).append(m.value().decode())
    c.close()
    for part in range(PARTITIONS):
        assert got.get(part) == [f"ck-{i}" for i in range(part, N, PARTITIONS)]


def test_kafka_python_produces_and_consumes_across_brokers(cluster: SamsaCluster) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = "kp-spread"
    _create(cluster, topic)
    prod = KafkaProducer(bootstrap_servers=cluster.bootstrap)
    futures = [prod.send(topic, value=f"kp-{i}".encode(), partition=i % PARTITIONS)
               for i in range(N)]
    for f in futures:
        f.get(timeout=30)
    prod.close()
    cons = KafkaConsumer(bootstrap_servers=cluster.bootstrap, consumer_timeout_ms=3000,
                         enable_auto_commit=False)
    cons.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
    cons.seek_to_beginning()
    brokers = {b.node_id for b in cons._client.cluster.brokers()}
    got = sorted(int(r.value.decode()[3:]) for r in cons)
    cons.close()
    assert brokers == {1, 2, 3}
    assert got == list(range(N))


def _create(c: SamsaCluster, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    assert set(_wait_leaders(c, topic, PARTITIONS).values()) == {1, 2, 3}


def test_aiokafka_produces_and_consumes_across_brokers(cluster: SamsaCluster) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    topic = "aio-spread"
    _create(cluster, topic)

    async def run() -> tuple[set[int], list[int]]:
        prod = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap)
        await prod.start()
        try:
            for i in range(N):
                await prod.send_and_wait(topic, f"aio-{i}".encode(), partition=i % PARTITIONS)
            brokers = {b.nodeId for b in prod.client.cluster.brokers()}
        finally:
            await prod.stop()
        cons = AIOKafkaConsumer(bootstrap_servers=cluster.bootstrap, enable_auto_commit=False)
        await cons.start()
        got: list[int] = []
        try:
            cons.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
            await cons.seek_to_beginning()
            deadline = time.monotonic() + 30
            while len(got) < N and time.monotonic() < deadline:
                batch = await cons.getmany(timeout_ms=500)
                got += [int(r.value.decode()[4:]) for rs in batch.values() for r in rs]
        finally:
            await cons.stop()
        return brokers, sorted(got)

    brokers, got = asyncio.run(run())
    assert brokers == {1, 2, 3}
    assert got == list(range(N))


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed")
def test_kcat_sees_brokers_and_moves_data(cluster: SamsaCluster) -> None:
    topic = "kcat-spread"
    _create(cluster, topic)
    md = json.loads(subprocess.run(["kcat", "-b", cluster.bootstrap, "-L", "-J", "-t", topic],
                                   capture_output=True, text=True, timeout=30, check=True).stdout)
    assert sorted(b["id"] for b in md["brokers"]) == [1, 2, 3]
    for part in range(PARTITIONS):
        data = "".join(f"kc-{part}-{i}\n" for i in range(5))
        subprocess.run(["kcat", "-b", cluster.bootstrap, "-P", "-t", topic, "-p", str(part)],
                       input=data, text=True, timeout=30, check=True)
    out = subprocess.run(["kcat", "-b", cluster.bootstrap, "-C", "-t", topic, "-o", "beginning",
                          "-e", "-q"], capture_output=True, text=True, timeout=30, check=True)
    lines = sorted(out.stdout.split())
    assert lines == sorted(f"kc-{p}-{i}" for p in range(PARTITIONS) for i in range(5))


def test_consumer_group_commits_and_resumes_across_brokers(cluster: SamsaCluster) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    topic = "grp-spread"
    _create(cluster, topic)
    group = "grp-cross"
    coord, _ = coordinator(cluster, group)
    assert set(leaders(cluster, topic).values()) - {coord}, "some partition led elsewhere"

    def produce(prefix: str) -> None:
        p = Producer({"bootstrap.servers": cluster.bootstrap})
        for i in range(N):
            p.produce(topic, value=f"{prefix}-{i}".encode(), partition=i % PARTITIONS)
        assert p.flush(30) == 0

    def consume_all(want: int) -> tuple[list[str], set[int]]:
        conf = {"bootstrap.servers": cluster.bootstrap, "group.id": group,
                "auto.offset.reset": "earliest", "enable.auto.commit": False,
                "session.timeout.ms": 10000, "heartbeat.interval.ms": 500}
        members = [Consumer(conf), Consumer(conf)]
        for m in members:
            m.subscribe([topic])
        got: list[str] = []
        assigned: list[set[int]] = [set(), set()]
        deadline = time.monotonic() + 45
        while (len(got) < want or not all(assigned)) and time.monotonic() < deadline:
            for i, m in enumerate(members):
                msg = m.poll(0.2)
                assigned[i] = {tp.partition for tp in m.assignment()}
                if msg is not None and not msg.error():
                    got.append(msg.value().decode())
                    m.commit(msg, asynchronous=False)
        for m in members:
            m.close()
        assert all(assigned), f"both members got partitions: {assigned}"
        return got, assigned[0] | assigned[1]

    produce("a")
    got, parts = consume_all(N)
    assert sorted(got) == sorted(f"a-{i}" for i in range(N))
    assert parts == set(range(PARTITIONS))
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
    committed = c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
    c.close()
    assert [tp.offset for tp in committed] == [N // PARTITIONS] * PARTITIONS
    produce("b")
    got, _ = consume_all(N)
    assert sorted(got) == sorted(f"b-{i}" for i in range(N)), "resumed from the commits"


def _txn_id_coordinated_by(c: SamsaCluster, node: int | None = None,
                           avoid: int | None = None) -> tuple[str, int]:
    for i in range(200):
        tid = f"txn-{i}"
        coord, _ = coordinator(c, tid, TXN_KEY)
        if (node is None or coord == node) and coord != avoid:
            return tid, coord
    raise AssertionError("no transactional id found for the wanted coordinator")


def _read_committed(c: SamsaCluster, topic: str, isolation: str = "read_committed") -> list[str]:
    from confluent_kafka import Consumer, TopicPartition

    cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": f"rc-{uuid.uuid4()}",
                     "isolation.level": isolation, "enable.auto.commit": False})
    cons.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got: list[str] = []
    idle = 0
    deadline = time.monotonic() + 20
    while idle < 6 and time.monotonic() < deadline:
        m = cons.poll(0.5)
        if m is None:
            idle += 1
        elif not m.error():
            idle = 0
            got.append(m.value().decode())
    cons.close()
    return got


def test_transactions_span_all_brokers(cluster: SamsaCluster) -> None:
    from confluent_kafka import Producer

    topic = "txn-spread"
    _create(cluster, topic)
    tid, coord = _txn_id_coordinated_by(cluster)
    assert set(leaders(cluster, topic).values()) - {coord}
    p = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": tid})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(N):
        p.produce(topic, value=f"commit-{i}".encode(), partition=i % PARTITIONS)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(N):
        p.produce(topic, value=f"abort-{i}".encode(), partition=i % PARTITIONS)
    p.flush(30)
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce(topic, value=b"commit-last", partition=0)
    p.commit_transaction(30)
    got = _read_committed(cluster, topic)
    assert sorted(got) == sorted([f"commit-{i}" for i in range(N)] + ["commit-last"])
    # read_uncommitted sees the aborted records too: they were written, then marked
    assert len(_read_committed(cluster, topic, "read_uncommitted")) == 2 * N + 1


def test_transactional_offsets_on_another_broker(cluster: SamsaCluster) -> None:
    """send_offsets_to_transaction: the group's coordinator (TxnOffsetCommit and the marker of
    its __consumer_offsets partition) is not the transaction coordinator."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    topic = "eos-out"
    _create(cluster, topic)
    group = next(g for g in (f"eos-{i}" for i in range(200))
                 if coordinator(cluster, g)[0] == 1)
    tid, _ = _txn_id_coordinated_by(cluster, avoid=1)
    meta = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
    p = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": tid})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, value=b"eos", partition=1)
    offsets = [TopicPartition(TOPIC, part, 7) for part in range(PARTITIONS)]
    p.send_offsets_to_transaction(offsets, meta.consumer_group_metadata(), 30)
    p.commit_transaction(30)
    committed = meta.committed([TopicPartition(TOPIC, part) for part in range(PARTITIONS)],
                               timeout=10)
    meta.close()
    assert [tp.offset for tp in committed] == [7] * PARTITIONS
    assert _read_committed(cluster, topic) == ["eos"]


def test_group_requests_to_a_non_coordinator_get_not_coordinator(cluster: SamsaCluster) -> None:
    group = "raw-group"
    coord, address = coordinator(cluster, group)
    assert address == bootstrap_of(cluster, coord)
    other = next(n for n in (1, 2, 3) if n != coord)
    bs = bootstrap_of(cluster, other)
    hb = _request(bs, 12, 4, {"group_id": group, "generation_id": 1, "member_id": "m"})
    assert hb.error_code == NOT_COORDINATOR
    join = _request(bs, 11, 5, {"group_id": group, "session_timeout": 10000,
                                "rebalance_timeout": 10000, "member_id": "",
                                "protocol_type": "consumer",
                                "protocols": [{"name": "range", "metadata": b""}]})
    assert join.error_code == NOT_COORDINATOR
    fetch = _request(bs, 9, 8, {"groups": [{"group_id": group, "topics": None}],
                                "require_stable": False})
    assert [g.error_code for g in fetch.groups] == [NOT_COORDINATOR]
    commit = _request(bs, 8, 8, {"group_id": group, "generation_id_or_member_epoch": -1,
                                 "member_id": "", "topics": [
                                     {"name": TOPIC, "partitions": [
                                         {"partition_index": 0, "committed_offset": 1}]}]})
    assert commit.topics[0].partitions[0].error_code == NOT_COORDINATOR
    described = _request(bs, 15, 5, {"groups": [group]})
    assert described.groups[0].error_code == NOT_COORDINATOR
    tid, tcoord = _txn_id_coordinated_by(cluster)
    init = _request(bootstrap_of(cluster, next(n for n in (1, 2, 3) if n != tcoord)), 22, 4,
                    {"transactional_id": tid, "transaction_timeout": 10000,
                     "producer_id": -1, "producer_epoch": -1})
    assert init.error_code == NOT_COORDINATOR
    # the coordinator itself answers normally
    ok = _request(address, 9, 8, {"groups": [{"group_id": group, "topics": None}],
                                  "require_stable": False})
    assert [g.error_code for g in ok.groups] == [0]


def test_producer_ids_are_unique_across_brokers(cluster: SamsaCluster) -> None:
    pids = []
    for node in (1, 2, 3):
        for _ in range(3):
            r = _request(bootstrap_of(cluster, node), 22, 4,
                         {"transactional_id": None, "transaction_timeout": 0,
                          "producer_id": -1, "producer_epoch": -1})
            assert r.error_code == 0
            pids.append(r.producer_id)
    assert len(set(pids)) == len(pids)


def test_not_leader_answers_name_the_leader(cluster: SamsaCluster) -> None:
    """KIP-951: Produce v11 and Fetch v16 sent to a broker that does not lead the partition get
    NOT_LEADER_OR_FOLLOWER with the current leader and its endpoint; older versions do not."""
    from samsa.protocol.records import encode_batch

    lead = leaders(cluster, TOPIC)
    part = 0
    leader = lead[part]
    other = next(n for n in (1, 2, 3) if n != leader)
    bs = bootstrap_of(cluster, other)
    host, port = bootstrap_of(cluster, leader).rsplit(":", 1)
    batch = encode_batch([(b"k", b"v", [], int(time.time() * 1000))])
    body = {"transactional_id": None, "acks": 1, "timeout": 5000, "topic_data": [
        {"name": TOPIC, "partition_data": [{"index": part, "records": batch}]}]}
    produced = _request(bs, 0, 11, body)
    p = produced.responses[0].partition_responses[0]
    assert p.error_code == 6  # NOT_LEADER_OR_FOLLOWER
    assert p.current_leader.leader_id == leader and p.current_leader.leader_epoch >= 0
    assert [(e.node_id, e.host, e.port) for e in produced.node_endpoints] == \
        [(leader, host, int(port))]
    assert _request(bs, 0, 9, body).responses[0].partition_responses[0].error_code == 6

    md = _request(bs, 3, 12, {"topics": [{"name": TOPIC}], "allow_auto_topic_creation": False})
    topic_id = md.topics[0].topic_id
    fetch = {"max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
             "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
             "topics": [{"topic_id": topic_id, "partitions": [
                 {"partition": part, "fetch_offset": 0, "partition_max_bytes": 1 << 20,
                  "log_start_offset": -1, "current_leader_epoch": -1,
                  "last_fetched_epoch": -1}]}]}
    fetched = _request(bs, 1, 16, fetch)
    fp = fetched.responses[0].partitions[0]
    assert fp.error_code == 6
    assert fp.current_leader.leader_id == leader
    assert [(e.node_id, e.host, e.port) for e in fetched.node_endpoints] == \
        [(leader, host, int(port))]


def test_markers_wait_for_a_restarted_leader(cluster: SamsaCluster) -> None:
    """A partition leader is down (kill -9) when a transaction commits: the coordinator retries
    its WriteTxnMarkers until the leader is back, and the commit holds."""
    import threading

    from confluent_kafka import Producer

    topic = "txn-down"
    _create(cluster, topic)
    controller = cluster.active_controller()
    tid, coord = _txn_id_coordinated_by(cluster)
    down = next(n for n in (1, 2, 3) if n not in (coord, controller))
    assert down in leaders(cluster, topic).values()
    p = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": tid})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(N):
        p.produce(topic, value=f"down-{i}".encode(), partition=i % PARTITIONS)
    assert p.flush(30) == 0
    node = cluster.node(down)
    node.kill()
    errors: list[BaseException] = []

    def commit() -> None:
        try:
            p.commit_transaction(60)
        except BaseException as e:  # reported below
            errors.append(e)

    t = threading.Thread(target=commit)
    t.start()
    time.sleep(1.0)
    node.start()
    t.join(90)
    assert not t.is_alive() and not errors, errors
    cluster.wait_brokers(3, timeout=60)
    got = _read_committed(cluster, topic)
    assert sorted(got) == sorted(f"down-{i}" for i in range(N))


def test_coordinator_restart_replays_its_partitions(cluster: SamsaCluster) -> None:
    """kill -9 of a group's coordinator: restarted, it replays the __consumer_offsets partitions
    it hosts and serves the group's offsets again (this test restarts a node: keep it last)."""
    from confluent_kafka import Consumer, TopicPartition

    group = "restart-group"
    coord, _ = coordinator(cluster, group)
    conf = {"bootstrap.servers": cluster.bootstrap, "group.id": group,
            "enable.auto.commit": False}
    c = Consumer(conf)
    c.commit(offsets=[TopicPartition(TOPIC, p, 3 + p) for p in range(PARTITIONS)],
             asynchronous=False)
    c.close()
    cluster.node(coord).restart(hard=True)
    cluster.wait_brokers(3, timeout=60)
    assert coordinator(cluster, group)[0] == coord
    c = Consumer(conf)
    committed = c.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=30)
    c.close()
    assert [tp.offset for tp in committed] == [3 + p for p in range(PARTITIONS)]


def test_deleting_a_topic_drops_its_offsets_on_the_group_coordinator(
        cluster: SamsaCluster) -> None:
    """DeleteTopics sent to a broker that does not coordinate the group: the coordinator drops
    the topic's committed offsets when it applies the removal, so a re-created topic of the same
    name starts with none."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient

    topic, group = "offsets-die-with-topic", "grp-deleted-topic"
    _create(cluster, topic)
    coord, _ = coordinator(cluster, group)
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                  "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, p, 5) for p in range(PARTITIONS)],
             asynchronous=False)
    got = c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
    assert [tp.offset for tp in got] == [5] * PARTITIONS
    c.close()
    other = next(n for n in (1, 2, 3) if n != coord)
    admin = AdminClient({"bootstrap.servers": bootstrap_of(cluster, other)})
    for f in admin.delete_topics([topic]).values():
        f.result(15)
    _create(cluster, topic)
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
    got = c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
    c.close()
    assert [tp.offset for tp in got] == [-1001] * PARTITIONS
