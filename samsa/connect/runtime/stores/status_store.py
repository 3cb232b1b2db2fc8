"""Connector, task and topic statuses, kept as Kafka Connect keeps them in its status topic
(compacted, `status.storage.partitions`):

  status-connector-<name>                {"state","trace","worker_id","generation"}
  status-task-<name>-<i>                 {"state","trace","worker_id","generation"}
  status-topic-<topic>:connector-<name>  {"topic": {"name","connector","task","discoverTimestamp"}}

A DESTROYED status is written as a tombstone. `put_safe` is Kafka's guarded write: it only
replaces a status that is absent, was written by the same worker, or carries an older or equal
generation (a worker that missed a rebalance cannot overwrite the new owner's report), and a
failed write is retried only while no newer write of that status happened meanwhile."""

from __future__ import annotations

import logging
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from ... import errors
from ..status import ConnectorTaskId, State, Status
from . import codec
from .kafka_log import DEFAULT_TIMEOUT_S, KafkaBasedLog, LogRecord, SendError

log = logging.getLogger("samsa.connect.status_store")

TASK_STATUS_PREFIX = "status-task-"
CONNECTOR_STATUS_PREFIX = "status-connector-"
TOPIC_STATUS_PREFIX = "status-topic-"
TOPIC_STATUS_SEPARATOR = ":connector-"
MAX_SEND_RETRIES = 10  # Kafka retries retriable failures forever; we bound it


@dataclass(frozen=True)
class TopicStatus:
    """A topic a connector's task used (KIP-558 active topics)."""

    topic: str
    connector: str
    task: int
    discover_timestamp: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.topic, "connector": self.connector, "task": self.task,
                "discoverTimestamp": self.discover_timestamp}


# ---- record keys and values ---------------------------------------------------------------------
def status_key(status: Status) -> str:
    if status.task is None:
        return CONNECTOR_STATUS_PREFIX + status.connector
    return f"{TASK_STATUS_PREFIX}{status.connector}-{status.task}"


def topic_status_key(connector: str, topic: str) -> str:
    return f"{TOPIC_STATUS_PREFIX}{topic}{TOPIC_STATUS_SEPARATOR}{connector}"


def status_value(status: Status) -> bytes | None:
    """The record value (None: the tombstone of a DESTROYED connector or task)."""
    if status.state is State.DESTROYED:
        return None
    return codec.dumps({"state": status.state.value, "trace": status.trace,
                        "worker_id": status.worker_id, "generation": status.generation})


def topic_status_value(status: TopicStatus | None) -> bytes | None:
    return None if status is None else codec.dumps({"topic": status.to_json()})


def parse_status(connector: str, task: int | None, data: bytes) -> Status | None:
    try:
        d = codec.loads(data)
        if not isinstance(d, dict):
            raise ValueError("not an object")
        trace = d.get("trace")
        gen = d["generation"]
        if not isinstance(gen, int):
            raise ValueError("generation is not an integer")
        return Status(connector, task, State(d["state"]), str(d["worker_id"]),
                      trace if isinstance(trace, str) else None, gen)
    except (ValueError, KeyError, TypeError) as e:
        log.error("failed to deserialize the status of %s%s: %s", connector,
                  "" if task is None else f"-{task}", e)
        return None


def parse_topic_status(data: bytes) -> TopicStatus | None:
    try:
        d = codec.loads(data)
        t = d["topic"]
        return TopicStatus(str(t["name"]), str(t["connector"]), int(t["task"]),
                           int(t["discoverTimestamp"]))
    except (ValueError, KeyError, TypeError) as e:
        log.error("failed to deserialize topic status %r: %s", data[:200], e)
        return None


def parse_task_status_key(key: str) -> ConnectorTaskId | None:
    name, sep, num = key[len(TASK_STATUS_PREFIX):].rpartition("-")
    if not sep or not name:
        return None
    try:
        return ConnectorTaskId(name, int(num))
    except ValueError:
        return None


def parse_topic_status_key(key: str) -> tuple[str, str] | None:
    """(topic, connector) of `status-topic-<topic>:connector-<name>` (topic names have no ':')."""
    rest = key[len(TOPIC_STATUS_PREFIX):]
    topic, sep, after = rest.partition(":")
    if not sep or not topic or not (":" + after).startswith(TOPIC_STATUS_SEPARATOR):
        return None
    connector = (":" + after)[len(TOPIC_STATUS_SEPARATOR):]
    if not connector:
        return None
    return topic, connector


# ---- the cache both stores keep -----------------------------------------------------------------
class _Entry:
    """One connector's or task's status as last read, and how many writes this worker made."""

    __slots__ = ("deleted", "sequence", "value")

    def __init__(self) -> None:
        self.value: Status | None = None
        self.sequence = 0
        self.deleted = False

    def can_write_safely(self, status: Status, sequence: int | None = None) -> bool:
        ok = (self.value is None or self.value.worker_id == status.worker_id
              or self.value.generation <= status.generation)
        return ok and (sequence is None or sequence == self.sequence)


class StatusBackingStore(ABC):
    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._connectors: dict[str, _Entry] = {}
        self._tasks: dict[str, dict[int, _Entry]] = {}
        self._topics: dict[str, dict[str, TopicStatus]] = {}
        self._generation = 0

    @abstractmethod
    def start(self) -> None: ...

    @abstractmethod
    def stop(self) -> None: ...

    def put(self, status: Status) -> None:
        """Record a connector's (task None) or task's status unconditionally."""
        self._send(status, safe=False)

    def put_safe(self, status: Status) -> None:
        """Record it unless a newer generation's report from another worker is there."""
        self._send(status, safe=True)

    @abstractmethod
    def _send(self, status: Status, safe: bool) -> None: ...

    def put_topic(self, connector: str, task: int, topic: str,
                  discover_timestamp: int | None = None) -> None:
        """Record that the task used `topic` (KIP-558), once per connector and topic."""
        if self.get_topic(connector, topic) is not None:
            return  # Kafka's worker reports a topic only the first time it sees it
        ts = int(time.time() * 1000) if discover_timestamp is None else discover_timestamp
        self.put_topic_status(TopicStatus(topic, connector, task, ts))

    @abstractmethod
    def put_topic_status(self, status: TopicStatus) -> None: ...

    @abstractmethod
    def delete_topic(self, connector: str, topic: str) -> None: ...

    def flush(self) -> None:  # noqa: B027 - optional hook
        """Wait for outstanding writes (a no-op in memory)."""

    def _entry(self, connector: str, task: int | None) -> _Entry:
        with self._lock:
            if task is None:
                return self._connectors.setdefault(connector, _Entry())
            return self._tasks.setdefault(connector, {}).setdefault(task, _Entry())

    def _remove(self, connector: str, task: int | None) -> None:
        """A tombstone: a connector's removes its tasks' statuses too (Kafka's remove)."""
        with self._lock:
            if task is None:
                e = self._connectors.pop(connector, None)
                if e is not None:
                    e.deleted = True
                for te in self._tasks.pop(connector, {}).values():
                    te.deleted = True
            else:
                tasks = self._tasks.get(connector, {})
                gone = tasks.pop(task, None)
                if gone is not None:
                    gone.deleted = True
                if not tasks:
                    self._tasks.pop(connector, None)

    def _read(self, status: Status) -> None:
        with self._lock:
            self._entry(status.connector, status.task).value = status

    def get(self, connector: str) -> Status | None:
        with self._lock:
            e = self._connectors.get(connector)
            return e.value if e is not None else None

    def get_task(self, task: ConnectorTaskId) -> Status | None:
        with self._lock:
            e = self._tasks.get(task.connector, {}).get(task.task)
            return e.value if e is not None else None

    def get_all(self, connector: str) -> list[Status]:
        """The statuses of the connector's tasks, by task number."""
        with self._lock:
            tasks = self._tasks.get(connector, {})
            return [e.value for _, e in sorted(tasks.items()) if e.value is not None]

    def get_topic(self, connector: str, topic: str) -> TopicStatus | None:
        with self._lock:
            return self._topics.get(connector, {}).get(topic)

    def get_all_topics(self, connector: str) -> list[TopicStatus]:
        with self._lock:
            return [self._topics[connector][t] for t in sorted(self._topics.get(connector, {}))]

    def topics(self, connector: str) -> list[str]:
        """The connector's active topic names (GET /connectors/{name}/topics)."""
        with self._lock:
            return sorted(self._topics.get(connector, {}))

    def delete_topics(self, connector: str) -> None:
        """Forget every active topic of the connector (PUT /connectors/{name}/topics/reset)."""
        for t in self.topics(connector):
            self.delete_topic(connector, t)

    def delete(self, connector: str) -> None:
        """A deleted connector's statuses: tombstones for it, each of its tasks and its active
        topics (KIP-558 resets them on deletion)."""
        with self._lock:
            tasks = list(self._tasks.get(connector, {}).items())
            conn = self._connectors.get(connector)
        gen = self._generation
        for task, e in tasks:
            worker = e.value.worker_id if e.value is not None else ""
            self.put(Status(connector, task, State.DESTROYED, worker, None, gen))
        if conn is not None:
            worker = conn.value.worker_id if conn.value is not None else ""
            self.put(Status(connector, None, State.DESTROYED, worker, None, gen))
        self.delete_topics(connector)

    def connectors(self) -> set[str]:
        with self._lock:
            return {c for c, e in self._connectors.items() if e.value is not None}

    def _apply_topic(self, topic: str, connector: str, status: TopicStatus | None) -> None:
        with self._lock:
            if status is None:
                active = self._topics.get(connector)
                if active is not None:
                    active.pop(topic, None)
                    if not active:
                        del self._topics[connector]
            else:
                self._topics.setdefault(connector, {})[topic] = status


class MemoryStatusBackingStore(StatusBackingStore):
    """Standalone mode: statuses live as long as the worker."""

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def _send(self, status: Status, safe: bool) -> None:
        with self._lock:
            e = self._entry(status.connector, status.task)
            if safe and not e.can_write_safely(status):
                return
            if status.state is State.DESTROYED:
                self._remove(status.connector, status.task)
            else:
                e.value = status

    def put_topic_status(self, status: TopicStatus) -> None:
        self._apply_topic(status.topic, status.connector, status)

    def delete_topic(self, connector: str, topic: str) -> None:
        self._apply_topic(topic, connector, None)


class KafkaStatusBackingStore(StatusBackingStore):
    """Distributed mode: `status.storage.topic`. Writes are asynchronous (a status shows once
    read back); `flush()` waits for the outstanding ones."""

    def __init__(self, topic: str, client: dict[str, Any], *, partitions: int = 5,
                 replication_factor: int = 3, topic_settings: dict[str, str] | None = None,
                 client_id: str = "connect-statuses", timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        super().__init__()
        if not topic.strip():
            raise errors.ConfigException("Must specify topic for connector status.")
        self.topic = topic
        self.timeout_s = timeout_s
        self.kafka_log = KafkaBasedLog(
            topic, client, self._consumed, partitions=partitions,
            replication_factor=replication_factor, topic_settings=topic_settings,
            client_id=client_id, timeout_s=timeout_s,
            purpose="connector and task statuses", topic_property="status.storage.topic")

    @classmethod
    def from_worker_config(cls, props: dict[str, str], client: dict[str, Any],
                           worker_id: str | None = None) -> KafkaStatusBackingStore:
        """`worker_id` is accepted for the herder's convenience; statuses carry their own."""
        group = props.get("group.id", "connect-cluster")
        own = {"topic", "replication.factor", "partitions"}
        settings = {k[15:]: v for k, v in props.items()
                    if k.startswith("status.storage.") and k[15:] not in own}
        return cls(props.get("status.storage.topic", ""), client,
                   partitions=int(props.get("status.storage.partitions", "5")),
                   replication_factor=int(props.get("status.storage.replication.factor", "3")),
                   topic_settings=settings,
                   client_id=f"{props.get('client.id', 'connect-cluster-' + group)}-statuses")

    def start(self) -> None:
        self.kafka_log.start()  # reads to the end: REST sees the latest statuses at once

    def stop(self) -> None:
        self.kafka_log.stop()

    def flush(self) -> None:
        self.kafka_log.flush(self.timeout_s)

    def read_to_end(self, timeout_s: float | None = None) -> None:
        self.kafka_log.read_to_end(timeout_s)

    def _send(self, status: Status, safe: bool) -> None:
        with self._lock:
            self._generation = status.generation
            entry = self._entry(status.connector, status.task)
            if safe and not entry.can_write_safely(status):
                return
            entry.sequence += 1
            sequence = entry.sequence
        key = status_key(status)
        value = status_value(status)
        attempts = [0]

        def done(err: SendError | None, _rec: LogRecord | None) -> None:
            if err is None:
                return
            if not err.retriable or attempts[0] >= MAX_SEND_RETRIES:
                log.error("Failed to write status update: %s", err)
                return
            with self._lock:  # retry only if nothing newer was written meanwhile
                if (entry.deleted or status.generation != self._generation
                        or (safe and not entry.can_write_safely(status, sequence))):
                    return
            attempts[0] += 1
            self.kafka_log.send(key, value, done)

        self.kafka_log.send(key, value, done)

    def _send_topic(self, connector: str, topic: str, status: TopicStatus | None) -> None:
        key = topic_status_key(connector, topic)
        value = topic_status_value(status)
        attempts = [0]

        def done(err: SendError | None, _rec: LogRecord | None) -> None:
            if err is None:
                return
            if err.retriable and attempts[0] < MAX_SEND_RETRIES:
                attempts[0] += 1
                self.kafka_log.send(key, value, done)
            else:
                log.error("Failed to write status update: %s", err)

        self.kafka_log.send(key, value, done)

    def put_topic_status(self, status: TopicStatus) -> None:
        self._send_topic(status.connector, status.topic, status)

    def delete_topic(self, connector: str, topic: str) -> None:
        self._send_topic(connector, topic, None)

    def _consumed(self, rec: LogRecord) -> None:
        key = codec.key_str(rec.key)
        if key is None:
            log.warning("Discarding record without a key at %d/%d", rec.partition, rec.offset)
        elif key.startswith(CONNECTOR_STATUS_PREFIX):
            name = key[len(CONNECTOR_STATUS_PREFIX):]
            if not name:
                log.warning("Discarding record with invalid connector status key %s", key)
            elif rec.value is None:
                self._remove(name, None)
            elif (st := parse_status(name, None, rec.value)) is not None:
                self._read(st)
        elif key.startswith(TASK_STATUS_PREFIX):
            tid = parse_task_status_key(key)
            if tid is None:
                log.warning("Discarding record with invalid task status key %s", key)
            elif rec.value is None:
                self._remove(tid.connector, tid.task)
            elif (st := parse_status(tid.connector, tid.task, rec.value)) is not None:
                self._read(st)
        elif key.startswith(TOPIC_STATUS_PREFIX):
            parsed = parse_topic_status_key(key)
            if parsed is None:
                log.warning("Discarding record with invalid topic status key %s", key)
                return
            topic, connector = parsed
            if rec.value is None:
                self._apply_topic(topic, connector, None)
            elif (ts := parse_topic_status(rec.value)) is not None:
                self._apply_topic(topic, connector, ts)
        else:
            log.warning("Discarding record with invalid key %s", key)
