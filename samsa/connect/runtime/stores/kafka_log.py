"""KafkaBasedLog: a compacted topic read from the beginning into memory, as Kafka Connect keeps
its config, offset and status topics. A reader thread hands every record (ours and other
workers') to a callback; `read_to_end()` is the barrier that makes a worker's view current:
it asks each partition's end and waits until the reader got there.

Writes go through an idempotent acks=all producer (`send`, asynchronous with a callback, or
`send_sync`); the config store's leader may add a transactional producer (KIP-618)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from ....kafka_util import create_compacted_topic, partition_count, topic_config, watermark
from ... import errors

log = logging.getLogger("samsa.connect.kafka_log")

DEFAULT_TIMEOUT_S = 30.0  # Kafka's READ_WRITE_TOTAL_TIMEOUT_MS


@dataclass(frozen=True)
class LogRecord:
    """One record read back from the topic (key and value bytes as written; None = null)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int = -1


class SendError(errors.ConnectException):
    """A write the producer gave up on; `retriable` says whether trying again may succeed."""

    def __init__(self, message: str, retriable: bool) -> None:
        super().__init__(message)
        self.retriable = retriable


SendCallback = Callable[[SendError | None, LogRecord | None], None]


class KafkaBasedLog:
    def __init__(self, topic: str, client: dict[str, Any], consumed: Callable[[LogRecord], None], *,
                 partitions: int = 1, replication_factor: int = -1,
                 topic_settings: dict[str, str] | None = None, client_id: str = "samsa-connect",
                 read_committed: bool = False, timeout_s: float = DEFAULT_TIMEOUT_S,
                 purpose: str = "", topic_property: str = "") -> None:
        """`client`: librdkafka settings (bootstrap.servers, security) shared by the producer,
        the consumer and the admin client. `purpose`/`topic_property` word the error raised when
        an existing topic is not compacted, as Kafka's does."""
        self.topic = topic
        self.partitions = partitions
        self.replication_factor = replication_factor
        self.topic_settings = dict(topic_settings or {})
        self.timeout_s = timeout_s
        self._consumed = consumed
        self._purpose = purpose or "internal data"
        self._topic_property = topic_property
        self._base = {"log_level": 3, **client, "client.id": client_id}
        self._read_committed = read_committed
        self._producer: Producer | None = None
        self._consumer: Consumer | None = None
        self._ends: Consumer | None = None
        self._ends_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._cv = threading.Condition()
        self._position: dict[int, int] = {}  # next offset the callback will see, per partition
        self._partition_count = 0

    # ---- lifecycle ----------------------------------------------------------------------
    def start(self) -> None:
        """Create the topic if needed, read it from the beginning and return once everything it
        held at start is applied."""
        admin = AdminClient(self._base)
        try:
            created = create_compacted_topic(admin, self.topic, self.partitions,
                                             self.replication_factor, self.topic_settings,
                                             self.timeout_s)
        except KafkaException as e:
            raise errors.ConnectException(f"cannot create topic {self.topic}: {e}") from None
        if not created:
            self._check_compacted(admin)
        self._partition_count = self._describe(admin)
        self._producer = Producer({**self._base, "enable.idempotence": True, "acks": "all",
                                   "linger.ms": 0, "partitioner": "murmur2_random"})
        iso = "read_committed" if self._read_committed else "read_uncommitted"
        conf = {**self._base, "group.id": f"{self._base['client.id']}-reader",
                "enable.auto.commit": False, "enable.partition.eof": False,
                "fetch.wait.max.ms": 50, "isolation.level": iso, "auto.offset.reset": "earliest"}
        self._consumer = Consumer(conf)
        self._ends = Consumer(conf)
        self._position = dict.fromkeys(range(self._partition_count), 0)
        self._consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING)
                               for p in range(self._partition_count)])
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=f"kafka-log-{self.topic}",
                                        daemon=True)
        self._thread.start()
        self.read_to_end()

    def _describe(self, admin: AdminClient) -> int:
        """The topic's partition count (a topic just created may take a moment to show)."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                return partition_count(admin, self.topic, max(0.5, deadline - time.monotonic()))
            except KafkaException as e:
                if time.monotonic() >= deadline:
                    raise errors.ConnectException(
                        f"cannot describe topic {self.topic}: {e}") from None
            time.sleep(0.2)

    def _check_compacted(self, admin: AdminClient) -> None:
        """Kafka refuses an existing internal topic whose cleanup.policy deletes records: offsets,
        configs or statuses would silently vanish."""
        try:
            policy = topic_config(admin, self.topic, self.timeout_s).get("cleanup.policy", "")
        except KafkaException as e:
            log.warning("cannot check the cleanup policy of %s: %s", self.topic, e)
            return
        if "delete" in {p.strip() for p in policy.split(",")}:
            raise errors.ConfigException(
                f"Topic '{self.topic}' supplied via the '{self._topic_property}' property is required "
                f"to have 'cleanup.policy=compact' to guarantee consistency and durability of "
                f"{self._purpose}, but found the topic currently has 'cleanup.policy={policy}'. "
                "Continuing would likely result in eventually losing "
                f"{self._purpose} and problems restarting this Connect cluster in the future. "
                f"Change the '{self._topic_property}' property in the Connect worker "
                "configurations to use a topic with 'cleanup.policy=compact'.")

    def partition_count(self) -> int:
        return self._partition_count

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None
        if self._producer is not None:
            self._producer.flush(5)
        for c in (self._consumer, self._ends):
            if c is not None:
                try:
                    c.close()
                except (KafkaException, RuntimeError):
                    pass
        self._consumer = self._ends = None

    # ---- reading ------------------------------------------------------------------------
    def _run(self) -> None:
        c = self._consumer
        assert c is not None
        while not self._stop.is_set():
            if self._producer is not None:
                self._producer.poll(0)  # delivery callbacks of send()
            try:
                msgs = c.consume(500, 0.1)
            except (KafkaException, RuntimeError) as e:
                log.warning("reading %s: %s", self.topic, e)
                time.sleep(0.2)
                continue
            for m in msgs:
                self._apply(m)
            if not msgs:
                self._catch_up_positions(c)

    def _apply(self, m: Message) -> None:
        err = m.error()
        if err is not None:
            if err.code() != KafkaError._PARTITION_EOF:
                log.warning("reading %s: %s", self.topic, err)
            return
        part = m.partition() or 0
        off = m.offset() or 0
        _, ts = m.timestamp()
        rec = LogRecord(self.topic, part, off, m.key(), m.value(), ts)
        try:
            self._consumed(rec)
        except Exception:  # a record we cannot apply must not stop the reader
            log.exception("skipping %s record at %d/%d", self.topic, part, off)
        with self._cv:
            if off + 1 > self._position.get(part, 0):
                self._position[part] = off + 1
                self._cv.notify_all()

    def _catch_up_positions(self, c: Consumer) -> None:
        """An idle reader's position can be past the last record it saw (compacted or aborted
        records, transaction markers): move the read positions there."""
        try:
            pos = c.position([TopicPartition(self.topic, p) for p in self._position])
        except (KafkaException, RuntimeError):
            return
        with self._cv:
            moved = False
            for tp in pos:
                if tp.offset is not None and tp.offset > self._position.get(tp.partition, 0):
                    self._position[tp.partition] = tp.offset
                    moved = True
            if moved:
                self._cv.notify_all()

    def end_offsets(self, timeout_s: float | None = None) -> dict[int, int]:
        """Each partition's end (its last stable offset when reading committed data)."""
        assert self._ends is not None, "start() first"
        deadline = time.monotonic() + (self.timeout_s if timeout_s is None else timeout_s)
        out: dict[int, int] = {}
        with self._ends_lock:
            for p in range(self._partition_count):
                left = max(0.1, deadline - time.monotonic())
                try:
                    out[p] = watermark(self._ends, TopicPartition(self.topic, p), left)[1]
                except KafkaException as e:
                    raise errors.ConnectException(
                        f"cannot read the end of {self.topic}-{p}: {e}") from None
        return out

    def read_to_end(self, timeout_s: float | None = None) -> None:
        """Return once every record in the topic at the time of the call has been handed to the
        callback (ConnectException after `timeout_s`)."""
        timeout = self.timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout
        ends = self.end_offsets(timeout)
        with self._cv:
            ok = self._cv.wait_for(
                lambda: all(self._position.get(p, 0) >= end for p, end in ends.items()),
                max(0.0, deadline - time.monotonic()))
        if not ok:
            raise errors.ConnectException(f"timed out reading {self.topic} to its end {ends}")

    def positions(self) -> dict[int, int]:
        with self._cv:
            return dict(self._position)

    # ---- writing ------------------------------------------------------------------------
    def send(self, key: bytes | str | None, value: bytes | None,
             callback: SendCallback | None = None, partition: int | None = None) -> None:
        """Append asynchronously; `callback(error, record)` runs on the reader thread once the
        broker acknowledged (or the producer gave up on) the record."""
        p = self._producer
        assert p is not None, "start() first"
        kb = key.encode("utf-8") if isinstance(key, str) else key

        def done(err: KafkaError | None, msg: Message) -> None:
            if callback is None:
                if err is not None:
                    log.error("writing to %s: %s", self.topic, err.str())
                return
            if err is not None:
                callback(SendError(f"writing to {self.topic}: {err.str()}", err.retriable()), None)
            else:
                callback(None, LogRecord(self.topic, msg.partition() or 0, msg.offset() or 0,
                                         kb, value))

        kwargs: dict[str, Any] = {"key": kb, "value": value, "on_delivery": done}
        if partition is not None:
            kwargs["partition"] = partition
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                p.produce(self.topic, **kwargs)
                return
            except BufferError:  # the producer's queue is full: let deliveries drain it
                if time.monotonic() > deadline:
                    raise SendError(f"writing to {self.topic}: the producer queue stays full",
                                    True) from None
                p.poll(0.1)

    def send_sync(self, records: Iterable[tuple[bytes | str | None, bytes | None]],
                  timeout_s: float | None = None) -> list[LogRecord]:
        """Append in order and wait until each is acknowledged; the first failure raises."""
        results: list[tuple[SendError | None, LogRecord | None]] = []
        lock = threading.Condition()

        def done(err: SendError | None, rec: LogRecord | None) -> None:
            with lock:
                results.append((err, rec))
                lock.notify_all()

        n = 0
        for k, v in records:
            self.send(k, v, done)
            n += 1
        self.flush(self.timeout_s if timeout_s is None else timeout_s)
        with lock:
            lock.wait_for(lambda: len(results) >= n, 1.0)
            got = list(results)
        if len(got) < n:
            raise SendError(f"timed out writing to {self.topic}", True)
        out = []
        for err, rec in got:
            if err is not None:
                raise err
            assert rec is not None
            out.append(rec)
        return out

    def send_transaction(self, producer: Producer,
                         records: Iterable[tuple[bytes | str | None, bytes | None]],
                         timeout_s: float | None = None) -> None:
        """Append all records in one transaction of `producer` (an initialized transactional
        producer: see `transactional_producer`)."""
        timeout = self.timeout_s if timeout_s is None else timeout_s
        producer.begin_transaction()
        for k, v in records:
            kb = k.encode("utf-8") if isinstance(k, str) else k
            producer.produce(self.topic, key=kb, value=v)
        producer.commit_transaction(timeout)

    def transactional_producer(self, transactional_id: str) -> Producer:
        """A fencable producer for this topic (Kafka's config-topic leader writer, KIP-618)."""
        p = Producer({**self._base, "client.id": f"{self._base['client.id']}-leader",
                      "transactional.id": transactional_id, "enable.idempotence": True,
                      "acks": "all", "linger.ms": 0, "partitioner": "murmur2_random"})
        p.init_transactions(self.timeout_s)
        return p

    def flush(self, timeout_s: float | None = None) -> None:
        if self._producer is not None:
            self._producer.flush(self.timeout_s if timeout_s is None else timeout_s)
