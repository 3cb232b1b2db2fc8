"""The config store: Kafka Connect's config-topic records byte for byte, the task commit rule
(task configs visible only with a complete commit; the inconsistent set), deletions, target
states old and new, listeners, and the memory store built on the same replay."""

from __future__ import annotations

import base64

from samsa.connect.runtime.herder import RestartRequest
from samsa.connect.runtime.status import ConnectorTaskId, TargetState
from samsa.connect.runtime.stores.config_store import (
    ConfigLogState,
    ConfigUpdateListener,
    KafkaConfigBackingStore,
    MemoryConfigBackingStore,
    SessionKey,
    commit_value,
    connector_config_value,
    parse_task_key,
    restart_value,
    session_key_value,
    target_state_value,
)


class Log:
    """Replays records as a worker reading the config topic does."""

    def __init__(self, started: bool = True) -> None:
        self.state = ConfigLogState()
        self.state.started = started
        self.offset = 0

    def add(self, key: str, value: bytes | str | None) -> None:
        if isinstance(value, str):
            value = value.encode()
        self.state.apply(self.offset, key, value)
        self.offset += 1


class Recorder(ConfigUpdateListener):
    def __init__(self) -> None:
        self.events: list[tuple[str, object]] = []

    def on_connector_config_remove(self, connector: str) -> None:
        self.events.append(("remove", connector))

    def on_connector_config_update(self, connector: str) -> None:
        self.events.append(("update", connector))

    def on_task_config_update(self, tasks: list[ConnectorTaskId]) -> None:
        self.events.append(("tasks", list(tasks)))

    def on_connector_target_state_change(self, connector: str) -> None:
        self.events.append(("target", connector))

    def on_restart_request(self, request: RestartRequest) -> None:
        self.events.append(("restart", request))

    def on_session_key_update(self, key: SessionKey) -> None:
        self.events.append(("session", key))


def test_record_values_are_kafka_connects_json() -> None:
    assert connector_config_value({"connector.class": "FileStreamSource", "tasks.max": "1"}) == \
        b'{"properties":{"connector.class":"FileStreamSource","tasks.max":"1"}}'
    assert commit_value(2) == b'{"tasks":2}'
    assert target_state_value(TargetState.PAUSED) == b'{"state":"PAUSED","state.v2":"PAUSED"}'
    # workers before 3.5 know no STOPPED: they read "state" and pause
    assert target_state_value(TargetState.STOPPED) == b'{"state":"PAUSED","state.v2":"STOPPED"}'
    assert session_key_value(SessionKey(b"\x01\x02", "HmacSHA256", 1700000000000)) == \
        b'{"key":"AQI=","algorithm":"HmacSHA256","creation-timestamp":1700000000000}'
    assert restart_value(RestartRequest("c", only_failed=True, include_tasks=False)) == \
        b'{"include-tasks":false,"only-failed":true}'
    assert connector_config_value({"name": "caf\u00e9"}) == '{"properties":{"name":"café"}}'.encode()


def test_task_keys_with_dashes_in_the_name() -> None:
    assert parse_task_key("task-my-conn-12") == ConnectorTaskId("my-conn", 12)
    assert parse_task_key("task-x-y") is None
    assert parse_task_key("task--1") is None


def test_task_configs_wait_for_their_commit() -> None:
    log = Log()
    log.add("connector-foo", '{"properties":{"connector.class":"X"}}')
    log.add("task-foo-0", '{"properties":{"k":"0"}}')
    log.add("task-foo-1", '{"properties":{"k":"1"}}')
    snap = log.state.snapshot()
    assert snap.tasks("foo") == []
    assert snap.task_configs == {}
    log.add("commit-foo", '{"tasks":2}')
    snap = log.state.snapshot()
    assert snap.tasks("foo") == [ConnectorTaskId("foo", 0), ConnectorTaskId("foo", 1)]
    assert snap.task_config(ConnectorTaskId("foo", 1)) == {"k": "1"}
    assert snap.offset == 4  # the next offset to read, as Kafka reports it
    assert snap.target_state("foo") is TargetState.STARTED
    assert "foo" not in snap.inconsistent


def test_an_incomplete_commit_marks_the_connector_inconsistent_until_a_complete_one() -> None:
    # Kafka's example: task-foo-0's first write was compacted away
    log = Log()
    log.add("connector-foo", '{"properties":{}}')
    log.add("task-foo-1", '{"properties":{"k":"old1"}}')
    log.add("commit-foo", '{"tasks":2}')
    snap = log.state.snapshot()
    assert snap.inconsistent == {"foo"}
    assert snap.tasks("foo") == []
    assert snap.task_counts["foo"] == 2
    # the buffered configs were dropped: a fresh complete set is needed
    log.add("task-foo-0", '{"properties":{"k":"new0"}}')
    log.add("commit-foo", '{"tasks":2}')
    assert log.state.snapshot().inconsistent == {"foo"}
    log.add("task-foo-0", '{"properties":{"k":"n0"}}')
    log.add("task-foo-1", '{"properties":{"k":"n1"}}')
    log.add("commit-foo", '{"tasks":2}')
    snap = log.state.snapshot()
    assert snap.inconsistent == set()
    assert snap.tasks_config("foo") == {ConnectorTaskId("foo", 0): {"k": "n0"},
                                        ConnectorTaskId("foo", 1): {"k": "n1"}}


def test_extra_task_configs_from_a_larger_count_are_harmless() -> None:
    log = Log()
    log.add("connector-foo", '{"properties":{}}')
    log.add("task-foo-1", '{"properties":{"k":"old1"}}')  # left over from 2 tasks
    log.add("task-foo-0", '{"properties":{"k":"0"}}')
    log.add("commit-foo", '{"tasks":1}')
    snap = log.state.snapshot()
    assert snap.tasks("foo") == [ConnectorTaskId("foo", 0)]
    assert "foo" not in snap.inconsistent


def test_zero_tasks_commit_and_connector_deletion() -> None:
    log = Log()
    log.add("connector-foo", '{"properties":{"a":"b"}}')
    log.add("task-foo-0", '{"properties":{}}')
    log.add("commit-foo", '{"tasks":1}')
    log.add("commit-foo", '{"tasks":0}')  # KIP-875 stop: zero task configs
    assert log.state.snapshot().tasks("foo") == []
    log.add("task-foo-0", '{"properties":{}}')
    log.add("commit-foo", '{"tasks":1}')
    log.add("target-state-foo", '{"state":"PAUSED"}')
    log.add("connector-foo", None)
    snap = log.state.snapshot()
    assert not snap.contains("foo")
    assert snap.tasks("foo") == [] and snap.task_configs == {}
    log.add("target-state-foo", None)
    assert log.state.snapshot().target_states == {}


def test_target_states_old_and_new_records() -> None:
    log = Log()
    log.add("connector-a", '{"properties":{}}')
    log.add("target-state-a", '{"state":"PAUSED"}')  # written by a pre-3.5 worker
    assert log.state.snapshot().target_state("a") is TargetState.PAUSED
    log.add("target-state-a", '{"state":"PAUSED","state.v2":"STOPPED"}')
    assert log.state.snapshot().target_state("a") is TargetState.STOPPED
    log.add("target-state-a", '{"state":"PAUSED","state.v2":7}')  # bad v2: fall back on state
    assert log.state.snapshot().target_state("a") is TargetState.PAUSED
    log.add("target-state-a", '{"state":"BOGUS"}')
    assert log.state.snapshot().target_state("a") is TargetState.PAUSED
    # a target-state tombstone while the connector exists: back to the default
    log.add("target-state-a", None)
    assert log.state.snapshot().target_state("a") is TargetState.STARTED


def test_an_initial_target_state_precedes_its_connector() -> None:
    log = Log()
    log.add("target-state-b", '{"state":"PAUSED","state.v2":"STOPPED"}')
    log.add("connector-b", '{"properties":{}}')
    assert log.state.snapshot().target_state("b") is TargetState.STOPPED


def test_garbage_records_are_skipped() -> None:
    log = Log()
    log.add("connector-a", b"{not json")
    log.add("connector-b", '{"nope":1}')
    log.add("commit-c", '{"tasks":"2"}')
    log.add("session-key", '{"key":"!!","algorithm":"x","creation-timestamp":1}')
    log.add("mystery", '{}')
    log.add("connector-d", '{"properties":{"x":"y"}}')
    snap = log.state.snapshot()
    assert snap.connectors() == ["d"]
    assert snap.session_key is None
    assert snap.offset == 6


def test_session_key_task_count_and_fencing() -> None:
    log = Log()
    key = base64.b64encode(b"secret").decode()
    log.add("session-key", f'{{"key":"{key}","algorithm":"HmacSHA256","creation-timestamp":5}}')
    log.add("connector-e", '{"properties":{}}')
    log.add("task-e-0", '{"properties":{}}')
    log.add("commit-e", '{"tasks":1}')
    snap = log.state.snapshot()
    assert snap.session_key == SessionKey(b"secret", "HmacSHA256", 5)
    assert snap.pending_fencing == {"e"}
    log.add("tasks-fencing-e", '{"task-count":1}')
    snap = log.state.snapshot()
    assert snap.pending_fencing == set() and snap.task_count_records == {"e": 1}


def test_listeners_fire_only_once_started() -> None:
    log = Log(started=False)
    rec = Recorder()
    log.state.listener = rec
    log.add("connector-a", '{"properties":{}}')
    log.add("restart-connector-a", '{"include-tasks":true,"only-failed":false}')
    assert rec.events == []
    log.state.started = True
    log.add("connector-a", '{"properties":{"v":"2"}}')
    log.add("task-a-0", '{"properties":{}}')
    log.add("commit-a", '{"tasks":1}')
    log.add("target-state-a", '{"state":"PAUSED","state.v2":"PAUSED"}')
    log.add("target-state-a", '{"state":"PAUSED","state.v2":"PAUSED"}')  # no change: no event
    log.add("restart-connector-a", '{"include-tasks":true}')
    log.add("connector-a", None)
    assert rec.events == [
        ("update", "a"), ("tasks", [ConnectorTaskId("a", 0)]), ("target", "a"),
        ("restart", RestartRequest("a", only_failed=False, include_tasks=True)), ("remove", "a")]


def test_memory_store_writes_through_the_same_records() -> None:
    store = MemoryConfigBackingStore()
    rec = Recorder()
    store.set_update_listener(rec)
    store.start()
    store.put_connector_config("c", {"connector.class": "X"}, TargetState.STOPPED)
    store.put_task_configs("c", [{"t": "0"}, {"t": "1"}])
    snap = store.snapshot()
    assert snap.target_state("c") is TargetState.STOPPED
    assert snap.tasks("c") == [ConnectorTaskId("c", 0), ConnectorTaskId("c", 1)]
    assert snap.task_config(ConnectorTaskId("c", 1)) == {"t": "1"}
    store.put_target_state("c", TargetState.STARTED)
    store.put_task_configs("c", [{"t": "new"}])
    snap = store.snapshot()
    assert snap.tasks("c") == [ConnectorTaskId("c", 0)]
    assert snap.task_config(ConnectorTaskId("c", 0)) == {"t": "new"}
    assert snap.target_state("c") is TargetState.STARTED
    assert store.contains("c")
    store.remove_connector_config("c")
    snap = store.snapshot()
    assert not store.contains("c") and snap.target_states == {} and snap.tasks("c") == []
    assert ("tasks", [ConnectorTaskId("c", 0), ConnectorTaskId("c", 1)]) in rec.events
    assert rec.events[-1] == ("remove", "c")


def test_snapshots_are_copies() -> None:
    store = MemoryConfigBackingStore()
    store.start()
    store.put_connector_config("c", {"a": "1"})
    snap = store.snapshot()
    snap.connector_configs["c"]["a"] = "changed"
    store.put_connector_config("d", {})
    assert store.snapshot().connector_config("c") == {"a": "1"}
    assert snap.connectors() == ["c"]


def test_kafka_store_reads_worker_settings() -> None:
    props = {"config.storage.topic": "cfg", "config.storage.replication.factor": "1",
             "config.storage.min.insync.replicas": "1", "group.id": "g",
             "exactly.once.source.support": "enabled"}
    store = KafkaConfigBackingStore.from_worker_config(props, {"bootstrap.servers": "x:1"})
    assert store.topic == "cfg"
    assert store.kafka_log.replication_factor == 1
    assert store.kafka_log.topic_settings == {"min.insync.replicas": "1"}
    assert store.kafka_log.partitions == 1
