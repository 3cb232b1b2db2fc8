"""Connector and task configurations, target states and the session key, kept as Kafka Connect
keeps them in its config topic (one partition, compacted), so a topic written by Kafka Connect
reads here and the other way round. Record keys are strings, values schemaless JSON:

  connector-<name>       {"properties": {...}}              null: the connector was deleted
  task-<name>-<i>        {"properties": {...}}              buffered until the commit record
  commit-<name>          {"tasks": N}                       applies the buffered task configs
  target-state-<name>    {"state": ..., "state.v2": ...}    STOPPED is written as "state": "PAUSED"
  session-key            {"key": b64, "algorithm": ..., "creation-timestamp": ms}
  restart-connector-<n>  {"include-tasks": bool, "only-failed": bool}
  tasks-fencing-<name>   {"task-count": N}                  (exactly-once source, KIP-618)
  logger-cluster-<ns>    {"level": ...}                     (KIP-976)

The commit rule: task configs become visible only with their connector's commit record, and only
if every task 0..N-1 was seen since the previous commit; otherwise the connector is marked
inconsistent (a compacted log or a leader that died mid-write) and has no tasks until the next
complete commit. The memory store (standalone) applies the same records through the same code."""

from __future__ import annotations

import base64
import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaException, Producer

from ... import errors
from ..herder import RestartRequest
from ..status import ConnectorTaskId, TargetState
from . import codec
from .kafka_log import DEFAULT_TIMEOUT_S, KafkaBasedLog, LogRecord

log = logging.getLogger("samsa.connect.config_store")

CONNECTOR_PREFIX = "connector-"
TASK_PREFIX = "task-"
COMMIT_TASKS_PREFIX = "commit-"
TARGET_STATE_PREFIX = "target-state-"
TASK_COUNT_RECORD_PREFIX = "tasks-fencing-"
RESTART_PREFIX = "restart-connector-"
LOGGER_CLUSTER_PREFIX = "logger-cluster-"
SESSION_KEY_KEY = "session-key"


def connector_key(name: str) -> str:
    return CONNECTOR_PREFIX + name


def task_key(task: ConnectorTaskId) -> str:
    return f"{TASK_PREFIX}{task.connector}-{task.task}"


def commit_key(name: str) -> str:
    return COMMIT_TASKS_PREFIX + name


def target_state_key(name: str) -> str:
    return TARGET_STATE_PREFIX + name


def parse_task_key(key: str) -> ConnectorTaskId | None:
    """`task-<connector>-<n>`: the connector name may itself contain dashes."""
    name, sep, num = key[len(TASK_PREFIX):].rpartition("-")
    if not sep or not name:
        return None
    try:
        return ConnectorTaskId(name, int(num))
    except ValueError:
        return None


@dataclass(frozen=True)
class SessionKey:
    """The key workers sign internal REST requests with (KIP-507)."""

    key: bytes
    algorithm: str
    creation_timestamp: int


# ---- record values --------------------------------------------------------------------------
def connector_config_value(props: dict[str, str]) -> bytes:
    return codec.dumps({"properties": dict(props)})


def commit_value(tasks: int) -> bytes:
    return codec.dumps({"tasks": tasks})


def target_state_value(state: TargetState) -> bytes:
    """Workers before Kafka 3.5 know no STOPPED: they read "state" and pause instead."""
    old = TargetState.PAUSED if state is TargetState.STOPPED else state
    return codec.dumps({"state": old.value, "state.v2": state.value})


def session_key_value(key: SessionKey) -> bytes:
    return codec.dumps({"key": base64.b64encode(key.key).decode("ascii"),
                        "algorithm": key.algorithm, "creation-timestamp": key.creation_timestamp})


def restart_value(request: RestartRequest) -> bytes:
    return codec.dumps({"include-tasks": request.include_tasks, "only-failed": request.only_failed})


def task_count_value(count: int) -> bytes:
    return codec.dumps({"task-count": count})


def logger_level_value(level: str) -> bytes:
    return codec.dumps({"level": level})


# ---- the snapshot -------------------------------------------------------------------------------
@dataclass
class ClusterConfigState:
    """An immutable view of the config topic up to `offset` (the next offset to read; -1 when
    nothing was read), as the herder and the assignor use it."""

    offset: int = -1
    connector_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    task_configs: dict[ConnectorTaskId, dict[str, str]] = field(default_factory=dict)
    task_counts: dict[str, int] = field(default_factory=dict)
    target_states: dict[str, TargetState] = field(default_factory=dict)
    inconsistent: set[str] = field(default_factory=set)
    session_key: SessionKey | None = None
    task_count_records: dict[str, int] = field(default_factory=dict)
    task_config_generations: dict[str, int] = field(default_factory=dict)
    pending_fencing: set[str] = field(default_factory=set)

    def connectors(self) -> list[str]:
        return sorted(self.connector_configs)

    def contains(self, name: str) -> bool:
        return name in self.connector_configs

    def connector_config(self, name: str) -> dict[str, str] | None:
        return self.connector_configs.get(name)

    def target_state(self, name: str) -> TargetState | None:
        return self.target_states.get(name)

    def task_count(self, name: str) -> int:
        return self.task_counts.get(name, 0)

    def tasks(self, name: str) -> list[ConnectorTaskId]:
        """The connector's committed tasks; none while its task configs are inconsistent."""
        if name in self.inconsistent:
            return []
        return [ConnectorTaskId(name, i) for i in range(self.task_counts.get(name, 0))]

    def task_config(self, task: ConnectorTaskId) -> dict[str, str] | None:
        return self.task_configs.get(task)

    def tasks_config(self, name: str) -> dict[ConnectorTaskId, dict[str, str]]:
        return {t: self.task_configs[t] for t in self.tasks(name) if t in self.task_configs}


class ConfigUpdateListener:
    """What a herder hears about config changes (Kafka's ConfigBackingStore.UpdateListener).
    Called on the store's reader thread (Kafka store) or the writer's thread (memory store), only
    once the store has started; keep them short."""

    def on_connector_config_remove(self, connector: str) -> None: ...

    def on_connector_config_update(self, connector: str) -> None: ...

    def on_task_config_update(self, tasks: list[ConnectorTaskId]) -> None: ...

    def on_connector_target_state_change(self, connector: str) -> None: ...

    def on_session_key_update(self, key: SessionKey) -> None: ...

    def on_restart_request(self, request: RestartRequest) -> None: ...

    def on_logging_level_update(self, namespace: str, level: str) -> None: ...


class ConfigLogState:
    """The state the config records build, applied record by record (Kafka's ConsumeCallback)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.offset = -1
        self.connector_configs: dict[str, dict[str, str]] = {}
        self.task_configs: dict[ConnectorTaskId, dict[str, str]] = {}
        self.task_counts: dict[str, int] = {}
        self.target_states: dict[str, TargetState] = {}
        self.inconsistent: set[str] = set()
        self.deferred: dict[str, dict[ConnectorTaskId, dict[str, str]]] = {}
        self.session_key: SessionKey | None = None
        self.task_count_records: dict[str, int] = {}
        self.generations: dict[str, int] = {}
        self.pending_fencing: set[str] = set()
        self.started = False
        self.listener: ConfigUpdateListener = ConfigUpdateListener()

    def snapshot(self) -> ClusterConfigState:
        with self.lock:
            return ClusterConfigState(
                offset=self.offset,
                connector_configs={k: dict(v) for k, v in self.connector_configs.items()},
                task_configs={k: dict(v) for k, v in self.task_configs.items()},
                task_counts=dict(self.task_counts), target_states=dict(self.target_states),
                inconsistent=set(self.inconsistent), session_key=self.session_key,
                task_count_records=dict(self.task_count_records),
                task_config_generations=dict(self.generations),
                pending_fencing=set(self.pending_fencing))

    def apply(self, offset: int, key: str | None, value: bytes | None) -> None:
        if key is None:
            log.error("discarding a config record without a key at offset %d", offset)
            return
        try:
            data = codec.loads(value)
        except ValueError as e:
            log.error("discarding config record %s at offset %d: not JSON (%s)", key, offset, e)
            return
        with self.lock:
            self.offset = offset + 1  # Kafka: the offset of the *next* record
        if key.startswith(TARGET_STATE_PREFIX):
            self._target_state(key[len(TARGET_STATE_PREFIX):], data)
        elif key.startswith(CONNECTOR_PREFIX):
            self._connector_config(key[len(CONNECTOR_PREFIX):], data)
        elif key.startswith(TASK_PREFIX):
            self._task_config(key, data)
        elif key.startswith(COMMIT_TASKS_PREFIX):
            self._commit(key[len(COMMIT_TASKS_PREFIX):], data)
        elif key.startswith(RESTART_PREFIX):
            self._restart(key[len(RESTART_PREFIX):], data)
        elif key.startswith(TASK_COUNT_RECORD_PREFIX):
            self._task_count_record(key[len(TASK_COUNT_RECORD_PREFIX):], data)
        elif key == SESSION_KEY_KEY:
            self._session_key(data)
        elif key.startswith(LOGGER_CLUSTER_PREFIX):
            self._logger_level(key[len(LOGGER_CLUSTER_PREFIX):], data)
        else:
            log.error("discarding config update record with invalid key: %s", key)

    def _target_state(self, name: str, data: Any) -> None:
        removed = False
        changed = True
        with self.lock:
            if data is None:
                self.target_states.pop(name, None)
                removed = True
                if name in self.connector_configs:  # every connector has a target state
                    self.target_states[name] = TargetState.STARTED
            else:
                if not isinstance(data, dict):
                    log.error("ignoring target state of %s: not an object", name)
                    return
                raw = data.get("state.v2")
                if raw is not None and not isinstance(raw, str):
                    log.error("invalid 'state.v2' of connector %s: %r", name, raw)
                    raw = None
                if raw is None:  # written by a worker before Kafka 3.5
                    raw = data.get("state")
                    if not isinstance(raw, str):
                        log.error("invalid 'state' of connector %s: %r", name, raw)
                        return
                try:
                    state = TargetState(raw)
                except ValueError:
                    log.error("invalid target state of connector %s: %s", name, raw)
                    return
                changed = self.target_states.get(name) != state
                self.target_states[name] = state
            exists = name in self.connector_configs
        # a removed target state is announced by the connector's removal; a state written
        # before its connector (an initial state) is announced with the connector
        if self.started and not removed and changed and exists:
            self.listener.on_connector_target_state_change(name)

    def _connector_config(self, name: str, data: Any) -> None:
        with self.lock:
            if data is None:
                self.connector_configs.pop(name, None)
                self.task_counts.pop(name, None)
                for t in [t for t in self.task_configs if t.connector == name]:
                    del self.task_configs[t]
                self.deferred.pop(name, None)
                removed = True
            else:
                props = data.get("properties") if isinstance(data, dict) else None
                if not isinstance(props, dict):
                    log.error("ignoring config of connector %s: no 'properties' object", name)
                    return
                self.connector_configs[name] = {str(k): _str(v) for k, v in props.items()}
                self.target_states.setdefault(name, TargetState.STARTED)
                removed = False
        if self.started:
            if removed:
                self.listener.on_connector_config_remove(name)
            else:
                self.listener.on_connector_config_update(name)

    def _task_config(self, key: str, data: Any) -> None:
        task = parse_task_key(key)
        if task is None:
            log.error("ignoring task configuration: %s is not a task config key", key)
            return
        props = data.get("properties") if isinstance(data, dict) else None
        if not isinstance(props, dict):
            log.error("ignoring config of task %s: no 'properties' object", task)
            return
        with self.lock:
            self.deferred.setdefault(task.connector, {})[task] = {
                str(k): _str(v) for k, v in props.items()}

    def _commit(self, name: str, data: Any) -> None:
        count = data.get("tasks") if isinstance(data, dict) else None
        if not isinstance(count, int) or isinstance(count, bool):
            log.error("ignoring task commit of connector %s: no integer 'tasks'", name)
            return
        updated: list[ConnectorTaskId] = []
        with self.lock:
            deferred = self.deferred.pop(name, {})
            seen = {t.task for t in deferred}
            # every task the commit names must have a config since the previous commit; extra
            # ones (a compacted history of a larger task count) are harmless
            if not all(i in seen for i in range(count)):
                log.debug("incomplete task configs for connector %s (compaction?)", name)
                self.inconsistent.add(name)
            else:
                if deferred:
                    self.task_configs.update(deferred)
                    updated = sorted(deferred)
                    self.generations[name] = self.generations.get(name, -1) + 1
                self.inconsistent.discard(name)
            self.task_counts[name] = count
            self.pending_fencing.add(name)
        if self.started:
            self.listener.on_task_config_update(updated)

    def _restart(self, name: str, data: Any) -> None:
        if not isinstance(data, dict):
            log.error("ignoring restart request for %s: not an object", name)
            return
        only_failed = data.get("only-failed")
        include_tasks = data.get("include-tasks")
        req = RestartRequest(name, only_failed=only_failed if isinstance(only_failed, bool) else False,
                             include_tasks=include_tasks if isinstance(include_tasks, bool) else False)
        if self.started:
            self.listener.on_restart_request(req)

    def _task_count_record(self, name: str, data: Any) -> None:
        count = data.get("task-count") if isinstance(data, dict) else None
        if not isinstance(count, int):
            log.error("ignoring task count record of connector %s", name)
            return
        with self.lock:
            self.task_count_records[name] = count
            self.pending_fencing.discard(name)

    def _session_key(self, data: Any) -> None:
        if not isinstance(data, dict):
            log.error("ignoring session key: not an object")
            return
        k, alg, ts = data.get("key"), data.get("algorithm"), data.get("creation-timestamp")
        if not isinstance(k, str) or not isinstance(alg, str) or not isinstance(ts, int):
            log.error("ignoring session key with invalid fields")
            return
        try:
            raw = base64.b64decode(k, validate=True)
        except ValueError:
            log.error("ignoring session key: 'key' is not base64")
            return
        key = SessionKey(raw, alg, ts)
        with self.lock:
            self.session_key = key
        if self.started:
            self.listener.on_session_key_update(key)

    def _logger_level(self, namespace: str, data: Any) -> None:
        level = data.get("level") if isinstance(data, dict) else None
        if not isinstance(level, str):
            log.error("ignoring logging level for namespace %s", namespace)
            return
        # levels written before this worker started were applied by the workers of that time
        if self.started:
            self.listener.on_logging_level_update(namespace, level)


def _str(v: Any) -> str:
    """Config values are strings; a null (allowed by the schema) stays as Kafka's map keeps it."""
    return v if isinstance(v, str) else ("" if v is None else str(v))


# ---- the stores ---------------------------------------------------------------------------------
class ConfigBackingStore(ABC):
    """Kafka Connect's ConfigBackingStore: writes return once the change is visible in
    `snapshot()` (Kafka store: written and read back)."""

    def __init__(self) -> None:
        self._log = ConfigLogState()

    def set_update_listener(self, listener: ConfigUpdateListener) -> None:
        self._log.listener = listener

    @abstractmethod
    def start(self) -> None: ...

    @abstractmethod
    def stop(self) -> None: ...

    def snapshot(self) -> ClusterConfigState:
        return self._log.snapshot()

    def contains(self, connector: str) -> bool:
        with self._log.lock:
            return connector in self._log.connector_configs

    @abstractmethod
    def _write(self, records: Sequence[tuple[str, bytes | None]], privileged: bool = True) -> None:
        """Append the records in order and return once they are applied."""

    def put_connector_config(self, connector: str, props: dict[str, str],
                             target_state: TargetState | None = None) -> None:
        """Create or update; an initial target state (KIP-875) is written first."""
        recs: list[tuple[str, bytes | None]] = []
        if target_state is not None:
            recs.append((target_state_key(connector), target_state_value(target_state)))
        recs.append((connector_key(connector), connector_config_value(props)))
        self._write(recs)

    def remove_connector_config(self, connector: str) -> None:
        self._write([(connector_key(connector), None), (target_state_key(connector), None)])

    def put_task_configs(self, connector: str, configs: list[dict[str, str]]) -> None:
        """The task configs, then the commit record that makes them visible together."""
        self.refresh()
        tasks = [(task_key(ConnectorTaskId(connector, i)), connector_config_value(c))
                 for i, c in enumerate(configs)]
        if tasks:
            self._write(tasks)
        self._write([(commit_key(connector), commit_value(len(configs)))])

    def put_target_state(self, connector: str, state: TargetState) -> None:
        self._write([(target_state_key(connector), target_state_value(state))], privileged=False)

    def put_session_key(self, key: SessionKey) -> None:
        self._write([(SESSION_KEY_KEY, session_key_value(key))])

    def put_restart_request(self, request: RestartRequest) -> None:
        self._write([(RESTART_PREFIX + request.connector, restart_value(request))])

    def put_task_count_record(self, connector: str, count: int) -> None:
        self._write([(TASK_COUNT_RECORD_PREFIX + connector, task_count_value(count))])

    def put_logger_level(self, namespace: str, level: str) -> None:
        self._write([(LOGGER_CLUSTER_PREFIX + namespace, logger_level_value(level))],
                    privileged=False)

    def refresh(self, timeout_s: float | None = None) -> None:  # noqa: B027 - optional hook
        """Read to the end of the log (a no-op in memory)."""

    def claim_write_privileges(self) -> None:  # noqa: B027 - optional hook
        """The leader's fencable writer (exactly-once source support); a no-op otherwise."""

    def relinquish_write_privileges(self) -> None:  # noqa: B027 - optional hook
        """Give the fencable writer up (a no-op without one)."""


class MemoryConfigBackingStore(ConfigBackingStore):
    """Standalone mode: the same records, applied as they are written; nothing survives a
    restart (the standalone herder re-reads its connector files)."""

    def __init__(self) -> None:
        super().__init__()
        self._next = 0
        self._write_lock = threading.RLock()  # a listener may write again

    def start(self) -> None:
        self._log.started = True

    def stop(self) -> None:
        self._log.started = False

    def _write(self, records: Sequence[tuple[str, bytes | None]], privileged: bool = True) -> None:
        with self._write_lock:
            for k, v in records:
                off = self._next
                self._next += 1
                self._log.apply(off, k, v)


class KafkaConfigBackingStore(ConfigBackingStore):
    """Distributed mode: the config topic (`config.storage.topic`, one partition)."""

    def __init__(self, topic: str, client: dict[str, Any], *, replication_factor: int = 3,
                 topic_settings: dict[str, str] | None = None,
                 client_id: str = "connect-configs", transactional_id: str | None = None,
                 read_committed: bool = False, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        """`transactional_id`: with exactly.once.source.support enabled the leader writes
        through a fencable transactional producer (claim_write_privileges); `read_committed`
        then, as Kafka's worker does."""
        super().__init__()
        if not topic.strip():
            raise errors.ConfigException("Must specify topic for connector configuration.")
        self.topic = topic
        self.timeout_s = timeout_s
        self._transactional_id = transactional_id
        self._fencable: Producer | None = None
        self.kafka_log = KafkaBasedLog(
            topic, client, self._consumed, partitions=1, replication_factor=replication_factor,
            topic_settings=topic_settings, client_id=client_id, read_committed=read_committed,
            timeout_s=timeout_s, purpose="connector configurations",
            topic_property="config.storage.topic")

    @classmethod
    def from_worker_config(cls, props: dict[str, str], client: dict[str, Any]) -> KafkaConfigBackingStore:
        eos = props.get("exactly.once.source.support", "disabled").lower()
        group = props.get("group.id", "connect-cluster")
        return cls(props.get("config.storage.topic", ""), client,
                   replication_factor=int(props.get("config.storage.replication.factor", "3")),
                   topic_settings=_topic_settings(props, "config.storage."),
                   client_id=f"{props.get('client.id', 'connect-cluster-' + group)}-configs",
                   transactional_id=f"connect-cluster-{group}" if eos != "disabled" else None,
                   read_committed=eos == "enabled")

    def _consumed(self, rec: LogRecord) -> None:
        self._log.apply(rec.offset, codec.key_str(rec.key), rec.value)

    def start(self) -> None:
        self.kafka_log.start()
        n = self.kafka_log.partition_count()
        if n > 1:
            raise errors.ConfigException(
                f"Topic '{self.topic}' supplied via the 'config.storage.topic' property is "
                "required to have a single partition in order to guarantee consistency of "
                f"connector configurations, but found {n} partitions.")
        self._log.started = True

    def stop(self) -> None:
        self.relinquish_write_privileges()
        self.kafka_log.stop()

    def refresh(self, timeout_s: float | None = None) -> None:
        self.kafka_log.read_to_end(timeout_s)

    def claim_write_privileges(self) -> None:
        if self._transactional_id is None or self._fencable is not None:
            return
        try:
            self._fencable = self.kafka_log.transactional_producer(self._transactional_id)
        except KafkaException as e:
            self._fencable = None
            raise errors.ConnectException(
                f"Failed to create and initialize fencable producer for config topic: {e}") from None

    def relinquish_write_privileges(self) -> None:
        self._fencable = None  # confluent-kafka closes a producer when it is collected

    def _write(self, records: Sequence[tuple[str, bytes | None]], privileged: bool = True) -> None:
        try:
            if privileged and self._transactional_id is not None:
                if self._fencable is None:
                    raise errors.ConnectException(
                        "Cannot produce to config topic without claiming write privileges first")
                try:
                    self.kafka_log.send_transaction(self._fencable, records, self.timeout_s)
                except KafkaException as e:
                    self.relinquish_write_privileges()
                    raise errors.ConnectException(
                        f"Failed to perform fencable send to config topic: {e}") from None
            else:
                self.kafka_log.send_sync(records, self.timeout_s)
            self.kafka_log.read_to_end(self.timeout_s)
        except errors.ConnectException as e:
            raise errors.ConnectException(f"Error writing to the config topic {self.topic}: {e}") from e


def _topic_settings(props: dict[str, str], prefix: str) -> dict[str, str]:
    """Extra topic configs for creating an internal topic (`<prefix><topic config>`), without
    the worker settings that share the prefix."""
    own = {"topic", "replication.factor", "partitions"}
    return {k[len(prefix):]: v for k, v in props.items()
            if k.startswith(prefix) and k[len(prefix):] not in own}
