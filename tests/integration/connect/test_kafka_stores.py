"""The Kafka-backed Connect stores against a real Samsa broker: the internal topics are created as
Kafka Connect creates them, a second store instance reading the topics sees the first one's state,
offsets land on the partition murmur2 picks (Kafka's default partitioner), the records are Kafka
Connect's bytes, and everything replays after a broker restart (kill -9)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.connect.errors import ConfigException, ConnectException
from samsa.connect.runtime.status import ConnectorTaskId, State, Status, TargetState
from samsa.connect.runtime.stores import codec
from samsa.connect.runtime.stores.config_store import ConfigUpdateListener, KafkaConfigBackingStore
from samsa.connect.runtime.stores.offset_store import (
    KafkaOffsetBackingStore,
    OffsetStorageReaderImpl,
    OffsetStorageWriter,
    connector_offsets,
    offset_key,
    reset_offsets,
)
from samsa.connect.runtime.stores.status_store import KafkaStatusBackingStore
from samsa.kafka_util import topic_config
from samsa.testing import SamsaBroker


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def client(b: SamsaBroker) -> dict[str, str]:
    return {"bootstrap.servers": b.bootstrap}


def read_all(b: SamsaBroker, topic: str, partitions: int) -> list[tuple[int, bytes | None, bytes | None]]:
    """(partition, key, value) of every record, with a plain consumer."""
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": name("check"),
                  "enable.auto.commit": False, "log_level": 3})
    try:
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in range(partitions)}
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: list[tuple[int, bytes | None, bytes | None]] = []
        seen = dict.fromkeys(range(partitions), 0)
        deadline = time.monotonic() + 20
        while any(seen[p] < ends[p] for p in ends) and time.monotonic() < deadline:
            for m in c.consume(100, 0.5):
                if m.error() is None:
                    out.append((m.partition() or 0, m.key(), m.value()))
                    seen[m.partition() or 0] = (m.offset() or 0) + 1
        return out
    finally:
        c.close()


class Events(ConfigUpdateListener):
    def __init__(self) -> None:
        self.updates: list[str] = []
        self.got = threading.Event()

    def on_connector_config_update(self, connector: str) -> None:
        self.updates.append(connector)
        self.got.set()


@pytest.fixture
def stores() -> Iterator[list[object]]:
    """Stores a test started, stopped at its end."""
    started: list[object] = []
    yield started
    for s in started:
        s.stop()  # type: ignore[attr-defined]


def test_config_topic_shared_between_workers(samsa_broker: SamsaBroker,
                                             stores: list[object]) -> None:
    topic = name("connect-configs")
    a = KafkaConfigBackingStore(topic, client(samsa_broker), replication_factor=3)
    a.start()
    stores.append(a)
    b = KafkaConfigBackingStore(topic, client(samsa_broker))
    events = Events()
    b.set_update_listener(events)
    b.start()
    stores.append(b)

    a.put_connector_config("src-1", {"connector.class": "FileStreamSource", "tasks.max": "2"},
                           TargetState.STOPPED)
    a.put_task_configs("src-1", [{"task": "0"}, {"task": "1"}])
    a.put_target_state("src-1", TargetState.PAUSED)
    b.refresh()
    snap = b.snapshot()
    assert snap.connector_config("src-1") == {"connector.class": "FileStreamSource", "tasks.max": "2"}
    assert snap.tasks("src-1") == [ConnectorTaskId("src-1", 0), ConnectorTaskId("src-1", 1)]
    assert snap.task_config(ConnectorTaskId("src-1", 1)) == {"task": "1"}
    assert snap.target_state("src-1") is TargetState.PAUSED
    assert snap.offset == a.snapshot().offset == 6  # the next offset, as Kafka counts
    assert events.got.wait(10) and events.updates == ["src-1"]

    # the topic is Kafka Connect's: one compacted partition, these exact records
    admin = AdminClient(client(samsa_broker))
    assert topic_config(admin, topic)["cleanup.policy"] == "compact"
    md = admin.list_topics(topic, timeout=10).topics[topic]
    assert len(md.partitions) == 1
    assert len(md.partitions[0].replicas) == 1  # 3 asked, capped by the one broker
    records = [(k, v) for _, k, v in read_all(samsa_broker, topic, 1)]
    assert records == [
        (b"target-state-src-1", b'{"state":"PAUSED","state.v2":"STOPPED"}'),
        (b"connector-src-1",
         b'{"properties":{"connector.class":"FileStreamSource","tasks.max":"2"}}'),
        (b"task-src-1-0", b'{"properties":{"task":"0"}}'),
        (b"task-src-1-1", b'{"properties":{"task":"1"}}'),
        (b"commit-src-1", b'{"tasks":2}'),
        (b"target-state-src-1", b'{"state":"PAUSED","state.v2":"PAUSED"}')]

    a.remove_connector_config("src-1")
    b.refresh()
    assert not b.snapshot().contains("src-1")


def test_records_a_kafka_worker_wrote_are_read(samsa_broker: SamsaBroker,
                                               stores: list[object]) -> None:
    topic = name("connect-configs")
    p = Producer(client(samsa_broker))
    for k, v in [("connector-j", '{"properties":{"connector.class":"X","name":"j"}}'),
                 ("task-j-0", '{"properties":{"a":"b"}}'),
                 ("commit-j", '{"tasks":1}'),
                 ("target-state-j", '{"state":"PAUSED"}')]:
        p.produce(topic, key=k.encode(), value=v.encode())
    assert p.flush(10) == 0
    s = KafkaConfigBackingStore(topic, client(samsa_broker))
    s.start()
    stores.append(s)
    snap = s.snapshot()
    assert snap.connector_config("j") == {"connector.class": "X", "name": "j"}
    assert snap.tasks("j") == [ConnectorTaskId("j", 0)]
    assert snap.target_state("j") is TargetState.PAUSED


def test_the_leader_writes_configs_in_transactions(samsa_broker: SamsaBroker,
                                                  stores: list[object]) -> None:
    """exactly.once.source.support=enabled: the leader's fencable writer; readers read committed
    and still reach the end past the transaction markers."""
    topic = name("connect-configs")
    props = {"config.storage.topic": topic, "group.id": name("g"),
             "exactly.once.source.support": "enabled"}
    leader = KafkaConfigBackingStore.from_worker_config(props, client(samsa_broker))
    leader.start()
    stores.append(leader)
    with pytest.raises(ConnectException, match="claiming write privileges"):
        leader.put_connector_config("c", {"a": "b"})
    leader.claim_write_privileges()
    leader.put_connector_config("c", {"a": "b"})
    leader.put_task_configs("c", [{"t": "0"}])
    leader.put_target_state("c", TargetState.STOPPED)  # not a privileged write in Kafka
    other = KafkaConfigBackingStore.from_worker_config(props, client(samsa_broker))
    other.start()
    stores.append(other)
    snap = other.snapshot()
    assert snap.connector_config("c") == {"a": "b"}
    assert snap.tasks("c") == [ConnectorTaskId("c", 0)]
    assert snap.target_state("c") is TargetState.STOPPED
    other.refresh(10)


def test_an_existing_delete_policy_topic_is_refused(samsa_broker: SamsaBroker) -> None:
    topic = name("connect-configs")
    admin = AdminClient(client(samsa_broker))
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    s = KafkaConfigBackingStore(topic, client(samsa_broker))
    with pytest.raises(ConfigException, match="cleanup.policy=compact"):
        s.start()


def test_offsets_partitioned_by_murmur2_and_shared(samsa_broker: SamsaBroker,
                                                   stores: list[object]) -> None:
    topic = name("connect-offsets")
    a = KafkaOffsetBackingStore(topic, client(samsa_broker), replication_factor=-1)
    a.start()
    stores.append(a)
    w = OffsetStorageWriter(a, "file-src")
    for i in range(40):
        w.offset({"filename": f"/data/in-{i}.txt"}, {"position": i * 10})
    assert w.begin_flush()
    fut = w.do_flush()
    assert fut is not None
    fut.result(30)

    records = read_all(samsa_broker, topic, 25)
    assert len(records) == 40
    assert len({p for p, _, _ in records}) > 5  # spread over the 25 partitions
    for part, key, value in records:
        assert key is not None
        assert part == codec.default_partition(key, 25)
        assert key.startswith(b'["file-src",{"filename":"/data/in-')
        assert value is not None and value.startswith(b'{"position":')
    assert {k for _, k, _ in records} == {
        offset_key("file-src", {"filename": f"/data/in-{i}.txt"}) for i in range(40)}

    b = KafkaOffsetBackingStore(topic, client(samsa_broker))
    b.start()
    stores.append(b)
    reader = OffsetStorageReaderImpl(b, "file-src")
    assert reader.offset({"filename": "/data/in-7.txt"}) == {"position": 70}
    assert len(connector_offsets(b, "file-src")) == 40
    assert reset_offsets(b, "file-src") == 40
    assert connector_offsets(a, "file-src") == []
    assert OffsetStorageReaderImpl(a, "file-src").offset({"filename": "/data/in-7.txt"}) is None

    # a task producing its offsets itself (exactly-once source) places them as Kafka would
    key, value = b.offset_record("file-src", {"filename": "/data/in-7.txt"}, {"position": 71})
    assert b.offset_partition(key) == codec.default_partition(key, 25)
    p = Producer(client(samsa_broker))
    p.produce(topic, key=key, value=value, partition=b.offset_partition(key))
    assert p.flush(10) == 0
    assert OffsetStorageReaderImpl(a, "file-src").offset({"filename": "/data/in-7.txt"}) == \
        {"position": 71}


def test_statuses_shared_between_workers(samsa_broker: SamsaBroker, stores: list[object]) -> None:
    topic = name("connect-status")
    a = KafkaStatusBackingStore(topic, client(samsa_broker))
    a.start()
    stores.append(a)
    a.put(Status("c", None, State.RUNNING, "w1:8083", None, 4))
    a.put(Status("c", 0, State.RUNNING, "w1:8083", None, 4))
    a.put(Status("c", 1, State.FAILED, "w1:8083", "trace", 4))
    a.put_topic("c", 0, "orders", 123)
    a.flush()
    b = KafkaStatusBackingStore(topic, client(samsa_broker))
    b.start()
    stores.append(b)
    assert b.get("c") == Status("c", None, State.RUNNING, "w1:8083", None, 4)
    assert [s.state for s in b.get_all("c")] == [State.RUNNING, State.FAILED]
    assert b.topics("c") == ["orders"]
    md = AdminClient(client(samsa_broker)).list_topics(topic, timeout=10).topics[topic]
    assert len(md.partitions) == 5

    # a worker of an older generation cannot overwrite the newer owner's report
    b.put_safe(Status("c", 0, State.UNASSIGNED, "w2:8083", None, 3))
    b.put(Status("c", 1, State.DESTROYED, "w1:8083", None, 4))
    b.delete_topics("c")
    b.flush()
    a.read_to_end()
    assert a.get_task(ConnectorTaskId("c", 0)) == Status("c", 0, State.RUNNING, "w1:8083", None, 4)
    assert [s.task for s in a.get_all("c")] == [0]
    assert a.topics("c") == []
    assert a.get_topic("c", "orders") is None
    a.put_topic("c", 0, "orders", 456)
    a.flush()
    a.read_to_end()  # statuses show once read back
    assert a.topics("c") == ["orders"]
    a.delete("c")  # a deleted connector: tombstones for it, its tasks and topics
    a.flush()
    b.read_to_end()
    assert b.get("c") is None and b.get_all("c") == [] and b.topics("c") == []
    keys = {k for _, k, v in read_all(samsa_broker, topic, 5) if v is None}
    assert {b"status-connector-c", b"status-task-c-0", b"status-task-c-1",
            b"status-topic-orders:connector-c"} <= keys


def test_a_broker_restart_replays_everything(stores: list[object]) -> None:
    with SamsaBroker() as broker:
        cfg_topic, off_topic, st_topic = name("cfg"), name("off"), name("st")
        cfg = KafkaConfigBackingStore(cfg_topic, client(broker), timeout_s=60)
        off = KafkaOffsetBackingStore(off_topic, client(broker), partitions=3, timeout_s=60)
        st = KafkaStatusBackingStore(st_topic, client(broker), partitions=2, timeout_s=60)
        for s in (cfg, off, st):
            s.start()
        cfg.put_connector_config("c", {"k": "v"})
        cfg.put_task_configs("c", [{"t": "0"}])
        w = OffsetStorageWriter(off, "c")
        w.offset({"p": 1}, {"o": 1})
        w.begin_flush()
        fut = w.do_flush()
        assert fut is not None
        fut.result(30)
        st.put(Status("c", None, State.RUNNING, "w", None, 1))
        st.flush()

        broker.restart(hard=True)  # kill -9

        # the running stores keep working ...
        cfg.put_target_state("c", TargetState.PAUSED)
        w.offset({"p": 1}, {"o": 2})
        w.begin_flush()
        fut = w.do_flush()
        assert fut is not None
        fut.result(60)
        # ... and fresh ones replay everything
        cfg2 = KafkaConfigBackingStore(cfg_topic, client(broker), timeout_s=60)
        off2 = KafkaOffsetBackingStore(off_topic, client(broker), partitions=3, timeout_s=60)
        st2 = KafkaStatusBackingStore(st_topic, client(broker), partitions=2, timeout_s=60)
        try:
            for s in (cfg2, off2, st2):
                s.start()
            snap = cfg2.snapshot()
            assert snap.connector_config("c") == {"k": "v"}
            assert snap.tasks("c") == [ConnectorTaskId("c", 0)]
            assert snap.target_state("c") is TargetState.PAUSED
            assert OffsetStorageReaderImpl(off2, "c").offset({"p": 1}) == {"o": 2}
            assert st2.get("c") == Status("c", None, State.RUNNING, "w", None, 1)
        finally:
            for s in (cfg2, off2, st2, cfg, off, st):
                s.stop()
