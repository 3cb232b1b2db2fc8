"""The status store: Kafka Connect's status-topic records byte for byte, reading records a Kafka
worker wrote, tombstones, and the generation rule of put_safe."""

from __future__ import annotations

from samsa.connect.runtime.status import ConnectorTaskId, State, Status
from samsa.connect.runtime.stores.kafka_log import LogRecord
from samsa.connect.runtime.stores.status_store import (
    KafkaStatusBackingStore,
    MemoryStatusBackingStore,
    TopicStatus,
    parse_task_status_key,
    parse_topic_status_key,
    status_key,
    status_value,
    topic_status_key,
    topic_status_value,
)


def test_records_are_kafka_connects_json() -> None:
    s = Status("my-conn", None, State.RUNNING, "10.0.0.1:8083", None, 3)
    assert status_key(s) == "status-connector-my-conn"
    assert status_value(s) == \
        b'{"state":"RUNNING","trace":null,"worker_id":"10.0.0.1:8083","generation":3}'
    t = Status("my-conn", 2, State.FAILED, "w:8083", "java.lang.Boom\n\tat x", 7)
    assert status_key(t) == "status-task-my-conn-2"
    assert status_value(t) == \
        b'{"state":"FAILED","trace":"java.lang.Boom\\n\\tat x","worker_id":"w:8083","generation":7}'
    assert status_value(Status("c", None, State.DESTROYED, "w", None, 1)) is None
    ts = TopicStatus("orders", "my-conn", 0, 1700000000123)
    assert topic_status_key("my-conn", "orders") == "status-topic-orders:connector-my-conn"
    assert topic_status_value(ts) == (b'{"topic":{"name":"orders","connector":"my-conn",'
                                      b'"task":0,"discoverTimestamp":1700000000123}}')
    assert topic_status_value(None) is None


def test_keys_parse_like_kafkas() -> None:
    assert parse_task_status_key("status-task-a-b-10") == ConnectorTaskId("a-b", 10)
    assert parse_task_status_key("status-task-ab") is None
    assert parse_topic_status_key("status-topic-t.1:connector-c-x") == ("t.1", "c-x")
    assert parse_topic_status_key("status-topic-t:connector-") is None
    assert parse_topic_status_key("status-topic-:connector-c") is None
    assert parse_topic_status_key("status-topic-t:other-c") is None


def rec(key: str, value: bytes | None, offset: int = 0) -> LogRecord:
    return LogRecord("connect-status", 0, offset, key.encode(), value)


def test_reading_what_a_kafka_worker_wrote() -> None:
    store = KafkaStatusBackingStore("connect-status", {"bootstrap.servers": "unused:1"})
    store._consumed(rec("status-connector-c",
                        b'{"state":"RUNNING","trace":null,"worker_id":"w1:8083","generation":2}'))
    store._consumed(rec("status-task-c-0",
                        b'{"state":"FAILED","trace":"boom","worker_id":"w1:8083","generation":2}'))
    store._consumed(rec("status-task-c-1",
                        b'{"state":"RUNNING","worker_id":"w2:8083","generation":2}'))
    store._consumed(rec("status-topic-orders:connector-c",
                        b'{"topic":{"name":"orders","connector":"c","task":1,'
                        b'"discoverTimestamp":17}}'))
    store._consumed(rec("status-task-c-x", b"{}"))  # skipped
    store._consumed(rec("status-connector-d", b"not json"))  # skipped
    store._consumed(rec("elsewhere", b"{}"))  # skipped
    assert store.get("c") == Status("c", None, State.RUNNING, "w1:8083", None, 2)
    assert [s.task for s in store.get_all("c")] == [0, 1]
    assert store.get_task(ConnectorTaskId("c", 0)) == Status("c", 0, State.FAILED, "w1:8083", "boom", 2)
    assert store.topics("c") == ["orders"]
    assert store.get_topic("c", "orders") == TopicStatus("orders", "c", 1, 17)
    assert store.connectors() == {"c"}
    store._consumed(rec("status-topic-orders:connector-c", None))
    assert store.topics("c") == []
    store._consumed(rec("status-task-c-1", None))
    assert [s.task for s in store.get_all("c")] == [0]
    store._consumed(rec("status-connector-c", None))  # a connector's tombstone drops its tasks
    assert store.get("c") is None and store.get_all("c") == []


def test_put_safe_keeps_a_newer_generation_from_another_worker() -> None:
    store = MemoryStatusBackingStore()
    store.put_safe(Status("c", 0, State.RUNNING, "w2", None, 5))
    store.put_safe(Status("c", 0, State.UNASSIGNED, "w1", None, 4))  # stale worker, older gen
    assert store.get_task(ConnectorTaskId("c", 0)) == Status("c", 0, State.RUNNING, "w2", None, 5)
    store.put(Status("c", 0, State.UNASSIGNED, "w1", None, 4))  # put is unconditional
    assert store.get_task(ConnectorTaskId("c", 0)).worker_id == "w1"  # type: ignore[union-attr]
    store.put_safe(Status("c", 0, State.RUNNING, "w1", None, 1))  # same worker: always
    store.put_safe(Status("c", 0, State.FAILED, "w3", "x", 1))  # equal generation: allowed
    assert store.get_task(ConnectorTaskId("c", 0)) == Status("c", 0, State.FAILED, "w3", "x", 1)


def test_memory_store_destroyed_and_topics() -> None:
    store = MemoryStatusBackingStore()
    store.put(Status("c", None, State.RUNNING, "w", None, 1))
    store.put(Status("c", 0, State.RUNNING, "w", None, 1))
    store.put_topic("c", 0, "a", 5)
    store.put_topic("c", 1, "a", 6)  # already known: kept as first seen
    store.put_topic_status(TopicStatus("b", "c", 0, 2))
    assert store.topics("c") == ["a", "b"]
    assert store.get_topic("c", "a") == TopicStatus("a", "c", 0, 5)
    store.delete_topics("c")
    assert store.topics("c") == []
    store.put(Status("c", None, State.DESTROYED, "w", None, 1))
    assert store.get("c") is None and store.get_all("c") == [] and store.connectors() == set()


def test_delete_drops_the_connector_its_tasks_and_topics() -> None:
    store = MemoryStatusBackingStore()
    store.put(Status("c", None, State.RUNNING, "w", None, 1))
    store.put(Status("c", 0, State.RUNNING, "w", None, 1))
    store.put(Status("c", 1, State.FAILED, "w", "x", 1))
    store.put(Status("d", 0, State.RUNNING, "w", None, 1))
    store.put_topic("c", 0, "t")
    store.delete("c")
    assert store.get("c") is None and store.get_all("c") == [] and store.topics("c") == []
    assert [s.task for s in store.get_all("d")] == [0]
