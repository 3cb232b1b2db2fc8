"""The `_schemas` topic as the registry's store: an idempotent producer for writes and a reader
thread that applies every record (ours and other instances') to the in-memory state.

A write returns once the reader applied it, so a request sees its own write; `sync()` waits
until everything written before the call is applied (used before allocating ids and after
forwarding a write to the leader)."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from ..kafka_util import create_compacted_topic, watermark
from . import errors
from .state import RegistryState

log = logging.getLogger("samsa.registry.store")

# Confluent's kafkastore.topic.replication.factor: the topic gets the smaller of this and the
# number of brokers, so `_schemas` survives a broker's loss on a cluster (a leader change)
REPLICATION_FACTOR = 3


class KafkaStore:
    def __init__(self, bootstrap: str, topic: str, state: RegistryState, *,
                 timeout_s: float = 30.0, client_id: str = "samsa-registry",
                 replication_factor: int = REPLICATION_FACTOR,
                 security: dict[str, Any] | None = None) -> None:
        self.bootstrap = bootstrap
        self.replication_factor = replication_factor
        self.topic = topic
        self.state = state
        self.timeout_s = timeout_s
        # security: librdkafka settings from kafkastore.* (storeconf.client_config)
        base: dict[str, Any] = {"bootstrap.servers": bootstrap, "client.id": client_id, "log_level": 3,
                                **(security or {})}
        self._base = base
        self._producer: Producer | None = None
        self._consumer: Consumer | None = None
        self._wm: Consumer | None = None
        self._wm_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.read_upto = 0  # every offset below has been applied (or compacted away)

    # ---- lifecycle ----------------------------------------------------------------------
    def start(self) -> None:
        """Create the topic if needed, start reading it and return when the whole log is applied."""
        self._ensure_topic()
        self._producer = Producer({**self._base, "enable.idempotence": True, "acks": "all",
                                   "linger.ms": 0})
        group = {"group.id": "samsa-registry-reader", "enable.auto.commit": False,
                 "enable.partition.eof": False, "fetch.wait.max.ms": 50}
        self._consumer = Consumer({**self._base, **group})
        self._wm = Consumer({**self._base, **group})
        self._consumer.assign([TopicPartition(self.topic, 0, 0)])
        self._thread = threading.Thread(target=self._run, name="registry-reader", daemon=True)
        self._thread.start()
        self.sync()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        for c in (self._consumer, self._wm):
            if c is not None:
                try:
                    c.close()
                except (KafkaException, RuntimeError):
                    pass
        if self._producer is not None:
            self._producer.flush(5)
            self._producer = None  # destroyed now, not whenever the server object goes

    def _ensure_topic(self) -> None:
        admin = AdminClient(self._base)
        try:
            create_compacted_topic(admin, self.topic, 1, self.replication_factor,
                                   timeout_s=self.timeout_s)
        except KafkaException as e:
            raise errors.store_error(f"cannot create {self.topic}: {e}") from None

    # ---- reading ------------------------------------------------------------------------
    def _run(self) -> None:
        c = self._consumer
        assert c is not None
        while not self._stop.is_set():
            try:
                msgs = c.consume(500, 0.1)
            except (KafkaException, RuntimeError) as e:
                log.warning("reading %s: %s", self.topic, e)
                time.sleep(0.2)
                continue
            for m in msgs:
                merr = m.error()
                if merr is not None:
                    if merr.code() != KafkaError._PARTITION_EOF:
                        log.warning("reading %s: %s", self.topic, merr)
                    continue
                off = m.offset() or 0
                try:
                    self.state.apply(off, m.key(), m.value())
                except Exception:  # a record we cannot apply must not stop the reader
                    log.exception("skipping %s record at offset %d", self.topic, off)
                self.read_upto = max(self.read_upto, off + 1)
            if not msgs:
                try:
                    pos = c.position([TopicPartition(self.topic, 0)])[0].offset
                except (KafkaException, RuntimeError):
                    continue
                if pos is not None and pos > self.read_upto:
                    with self.state.changed:
                        self.read_upto = pos
                        self.state.changed.notify_all()

    def end_offset(self) -> int:
        """The topic's log end (kafka_util.watermark: robust to a leader change)."""
        assert self._wm is not None
        with self._wm_lock:
            try:
                return watermark(self._wm, TopicPartition(self.topic, 0), self.timeout_s)[1]
            except KafkaException as e:
                raise errors.store_timeout(f"cannot read the end of {self.topic}: {e}") from None

    def wait_read(self, upto: int) -> None:
        with self.state.changed:
            ok = self.state.changed.wait_for(lambda: self.read_upto >= upto, self.timeout_s)
        if not ok:
            raise errors.store_timeout(f"reading {self.topic} up to offset {upto}")

    def sync(self) -> None:
        """Wait until every record in the log right now is applied."""
        self.wait_read(self.end_offset())

    # ---- writing ------------------------------------------------------------------------
    def write(self, records: list[tuple[bytes, bytes | None]]) -> None:
        """Append records in order (acks=all, idempotent) and wait until they are applied."""
        p = self._producer
        assert p is not None
        results: list[object] = []

        def done(err: KafkaError | None, msg: object) -> None:
            results.append(err if err is not None else msg)

        for k, v in records:
            p.produce(self.topic, key=k, value=v, partition=0, on_delivery=done)
        remaining = p.flush(self.timeout_s)
        if remaining or len(results) != len(records):
            raise errors.store_timeout(f"writing to {self.topic}")
        last = -1
        for r in results:
            if isinstance(r, KafkaError):
                raise errors.store_error(f"writing to {self.topic}: {r.str()}")
            last = max(last, r.offset())  # type: ignore[attr-defined]
        self.wait_read(last + 1)
