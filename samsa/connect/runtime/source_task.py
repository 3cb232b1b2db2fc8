"""Running a source task: poll the connector's task, transform and convert each record, produce
it, and commit source offsets only for records Samsa acknowledged (at-least-once), or — with
exactly.once.source.support=enabled — write records and offsets in one transaction (KIP-618),
the transactional id fencing any zombie instance of the same task."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Protocol

from confluent_kafka import KafkaError, KafkaException, Producer

from ..api import RecordMetadata, SourceRecord, SourceTask, TransactionContext
from ..data import Headers
from .status import ConnectorTaskId, TargetState
from .tolerance import FAILED, RetryWithToleranceOperator, Stage, ToleranceExceeded, run_chain
from .worker_task import Converters, StatusListener, WorkerTask

log = logging.getLogger("samsa.connect.source")
PRODUCE_QUEUE_WAIT_S = 0.05
_PURGED = (KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT)


class OffsetWriter(Protocol):
    """Buffers a connector's source offsets and writes them on flush (the store's
    OffsetStorageWriter)."""

    def offset(self, partition: dict[str, Any], offset: dict[str, Any] | None) -> None: ...

    def begin_flush(self) -> bool: ...

    def do_flush(self, timeout_s: float) -> None: ...

    def cancel_flush(self) -> None: ...


class TransactionalOffsets(Protocol):
    """For exactly-once: where and how source offsets go into the offsets topic, so they can be
    produced in the task's own transaction."""

    topic: str

    def offset_record(self, connector: str, partition: dict[str, Any],
                      offset: dict[str, Any] | None) -> tuple[bytes, bytes | None]: ...

    def offset_partition(self, key: bytes) -> int: ...


@dataclass
class SourceTaskSettings:
    connector: str
    producer_config: dict[str, Any]
    flush_interval_s: float
    flush_timeout_s: float
    exactly_once: bool = False
    transaction_boundary: str = "poll"
    transaction_interval_s: float = 60.0
    transactional_offsets: TransactionalOffsets | None = None


class _TxnContext:
    """transaction.boundary=connector: the task says where transactions end."""

    def __init__(self) -> None:
        self.commit_after: SourceRecord | None = None
        self.abort_after: SourceRecord | None = None
        self.commit_now = False
        self.abort_now = False

    def commit_transaction(self, record: SourceRecord | None = None) -> None:
        if record is None:
            self.commit_now = True
        else:
            self.commit_after = record

    def abort_transaction(self, record: SourceRecord | None = None) -> None:
        if record is None:
            self.abort_now = True
        else:
            self.abort_after = record


class WorkerSourceTask(WorkerTask):
    def __init__(self, task_id: ConnectorTaskId, task: SourceTask, task_props: dict[str, str],
                 target_state: TargetState, listener: StatusListener, converters: Converters,
                 chain: Any, operator: RetryWithToleranceOperator, offsets: OffsetWriter,
                 offset_reader: Any, settings: SourceTaskSettings) -> None:
        super().__init__(task_id, task, task_props, target_state, listener)
        self.source_task = task
        self.converters = converters
        self.chain = chain
        self.operator = operator
        self.operator.stopping = self.stopping
        self.offsets = offsets
        self.offset_reader = offset_reader
        self.settings = settings
        self.producer: Producer | None = None
        self._send_errors: list[KafkaError] = []
        self._outstanding = 0
        self._lock = threading.Lock()
        self._last_flush = time.monotonic()
        self._txn_ctx = _TxnContext() if settings.transaction_boundary == "connector" else None
        self._in_txn = False
        self._txn_offsets: dict[Any, tuple[dict[str, Any], dict[str, Any] | None]] = {}
        self._txn_started = time.monotonic()

    # ---- context handed to the task ------------------------------------------------------
    @property
    def configs(self) -> dict[str, str]:
        return dict(self.task_props)

    @property
    def offset_storage_reader(self) -> Any:
        return self.offset_reader

    def transaction_context(self) -> TransactionContext | None:
        return self._txn_ctx

    # ---- life cycle ---------------------------------------------------------------------------
    def initialize(self) -> None:
        cfg = dict(self.settings.producer_config)
        if self.settings.exactly_once:
            cfg["transactional.id"] = cfg.get("transactional.id") or \
                f"{self.settings.connector}-{self.id.task}"
        self.producer = Producer(cfg)
        if self.settings.exactly_once:
            # fences any older producer with this transactional id: a zombie of this task
            self.producer.init_transactions(30)
        self.source_task.initialize(self)

    def execute(self) -> None:
        assert self.producer is not None
        while not self.stopping.is_set():
            if self.paused:
                self._commit_boundary(force=True)
                if not self.await_paused():
                    break
                continue
            records = self.source_task.poll()
            self._raise_send_errors()
            if records:
                self._send(records)
            self.producer.poll(0)
            if self.settings.exactly_once:
                self._commit_boundary(force=False)
            elif time.monotonic() - self._last_flush >= self.settings.flush_interval_s:
                self.commit_offsets()
        if self.settings.exactly_once:
            self._commit_boundary(force=True)
        else:
            self.commit_offsets()

    def stop(self) -> None:
        super().stop()
        try:
            self.source_task.stop()
        except Exception:
            log.exception("%s: stop() failed", self.id)

    def close(self) -> None:
        try:
            if self.producer is not None:
                if self._in_txn:
                    try:
                        self.producer.abort_transaction(10)
                    except KafkaException as e:
                        log.warning("%s: abort on close: %s", self.id, e)
                self.producer.flush(self.settings.flush_timeout_s)
        finally:
            for c in (self.converters.key, self.converters.value, self.converters.header):
                c.close()
            if self.chain is not None:
                self.chain.close()

    # ---- sending ----------------------------------------------------------------------------
    def _convert(self, record: SourceRecord) -> tuple[Any, Any, Any] | None:
        op = self.operator
        topic = record.topic
        key = op.execute(Stage.KEY_CONVERTER, type(self.converters.key).__name__,
                         lambda: self.converters.key.from_connect_data(
                             topic, record.key_schema, record.key, record.headers),
                         source_record=record)
        if key is FAILED:
            return None
        value = op.execute(Stage.VALUE_CONVERTER, type(self.converters.value).__name__,
                           lambda: self.converters.value.from_connect_data(
                               topic, record.value_schema, record.value, record.headers),
                           source_record=record)
        if value is FAILED:
            return None
        headers = op.execute(Stage.HEADER_CONVERTER, type(self.converters.header).__name__,
                             lambda: self._headers(topic, record.headers), source_record=record)
        if headers is FAILED:
            return None
        return key, value, headers

    def _headers(self, topic: str, headers: Headers) -> list[tuple[str, bytes | None]]:
        return [(h.key, self.converters.header.from_connect_header(topic, h.key, h.schema, h.value))
                for h in headers]

    def _send(self, records: list[SourceRecord]) -> None:
        assert self.producer is not None
        for record in records:
            self._begin_txn()
            transformed = record
            if self.chain is not None:
                transformed = run_chain(self.operator, self.chain, record)
            if transformed is FAILED or transformed is None:
                self._record_offset(record)
                self._commit_record(record, None)
                self._txn_record_done(record)
                continue
            converted = self._convert(transformed)
            if converted is None:
                self._record_offset(record)
                self._commit_record(record, None)
                self._txn_record_done(record)
                continue
            key, value, headers = converted
            self._produce(record, transformed, key, value, headers)
            self._record_offset(record)
            self._txn_record_done(record)

    def _produce(self, original: SourceRecord, record: SourceRecord, key: Any, value: Any,
                 headers: Any) -> None:
        assert self.producer is not None
        kwargs: dict[str, Any] = {"key": key, "value": value, "headers": headers or None,
                                  "on_delivery": self._delivered(original)}
        if record.kafka_partition is not None:
            kwargs["partition"] = record.kafka_partition
        if record.timestamp is not None:
            kwargs["timestamp"] = int(record.timestamp)
        with self._lock:
            self._outstanding += 1
        while True:
            try:
                self.producer.produce(record.topic, **kwargs)
                return
            except BufferError:  # the local queue is full: serve callbacks and retry
                self.producer.poll(PRODUCE_QUEUE_WAIT_S)
            except KafkaException as e:
                with self._lock:
                    self._outstanding -= 1
                self.operator.execute(Stage.KAFKA_PRODUCE, "Producer", _raiser(e),
                                      source_record=record)
                return

    def _delivered(self, record: SourceRecord) -> Any:
        def done(err: KafkaError | None, msg: Any) -> None:
            with self._lock:
                self._outstanding -= 1
            if err is not None:
                if err.code() in _PURGED:  # our own abort_transaction dropped it
                    return
                self._send_errors.append(err)
                return
            self.saw_topic(msg.topic())
            self._commit_record(record, RecordMetadata(msg.topic(), msg.partition(), msg.offset(),
                                                       msg.timestamp()[1]))
        return done

    def _commit_record(self, record: SourceRecord, meta: RecordMetadata | None) -> None:
        try:
            self.source_task.commit_record(record, meta)
        except Exception:
            log.exception("%s: commit_record failed", self.id)

    def _raise_send_errors(self) -> None:
        if not self._send_errors:
            return
        err = self._send_errors[0]
        self._send_errors.clear()
        if self.operator.tolerate_all and not self.settings.exactly_once:
            log.error("%s: a record could not be sent and is skipped (errors.tolerance=all): %s",
                      self.id, err.str())
            return
        raise KafkaException(err)

    def _record_offset(self, record: SourceRecord) -> None:
        if record.source_partition is None:
            return
        if self.settings.exactly_once:
            key = _freeze(record.source_partition)
            self._txn_offsets[key] = (record.source_partition, record.source_offset)
        else:
            self.offsets.offset(record.source_partition, record.source_offset)

    # ---- at-least-once offset commits -------------------------------------------------------
    def commit_offsets(self) -> bool:
        """Flush the producer, then write the offsets of everything sent (Kafka's
        WorkerSourceTask.commitOffsets before KIP-618's per-record tracking)."""
        assert self.producer is not None
        self._last_flush = time.monotonic()
        if not self.offsets.begin_flush():
            self._commit_task()
            return True
        remaining = self.producer.flush(self.settings.flush_timeout_s)
        if remaining or self._outstanding > 0 or self._send_errors:
            log.warning("%s: %d records not acknowledged within offset.flush.timeout.ms; offsets "
                        "kept for the next commit", self.id, max(remaining, self._outstanding))
            self.offsets.cancel_flush()
            self._raise_send_errors()
            return False
        try:
            self.offsets.do_flush(self.settings.flush_timeout_s)
        except Exception as e:
            log.error("%s: committing offsets failed: %s", self.id, e)
            self.offsets.cancel_flush()
            return False
        self._commit_task()
        return True

    def _commit_task(self) -> None:
        try:
            self.source_task.commit()
        except Exception:
            log.exception("%s: commit() failed", self.id)

    # ---- exactly-once transactions ------------------------------------------------------
    def _begin_txn(self) -> None:
        if not self.settings.exactly_once or self._in_txn:
            return
        assert self.producer is not None
        self.producer.begin_transaction()
        self._in_txn = True
        self._txn_started = time.monotonic()

    def _txn_record_done(self, record: SourceRecord) -> None:
        ctx = self._txn_ctx
        if ctx is None:
            return
        if ctx.abort_after is record:
            ctx.abort_after = None
            self._abort_txn()
        elif ctx.commit_after is record:
            ctx.commit_after = None
            self._commit_txn()

    def _commit_boundary(self, force: bool) -> None:
        if not self.settings.exactly_once or not self._in_txn:
            return
        boundary = self.settings.transaction_boundary
        ctx = self._txn_ctx
        if ctx is not None and ctx.abort_now:
            ctx.abort_now = False
            self._abort_txn()
            return
        due = force or boundary == "poll" or \
            (boundary == "interval" and
             time.monotonic() - self._txn_started >= self.settings.transaction_interval_s) or \
            (ctx is not None and ctx.commit_now)
        if ctx is not None:
            ctx.commit_now = False
        if due:
            self._commit_txn()

    def _commit_txn(self) -> None:
        assert self.producer is not None and self.settings.transactional_offsets is not None
        store = self.settings.transactional_offsets
        for partition, offset in self._txn_offsets.values():
            k, v = store.offset_record(self.settings.connector, partition, offset)
            self.producer.produce(store.topic, key=k, value=v, partition=store.offset_partition(k))
        try:
            self.producer.commit_transaction(max(self.settings.flush_timeout_s, 30))
        except KafkaException as e:
            self._in_txn = False
            self._txn_offsets.clear()
            raise ToleranceExceeded(f"committing the transaction failed: {e}") from e
        self._raise_send_errors()
        self._in_txn = False
        self._txn_offsets.clear()
        self._commit_task()

    def _abort_txn(self) -> None:
        assert self.producer is not None
        self.producer.abort_transaction(30)
        self._in_txn = False
        self._txn_offsets.clear()


def _raiser(e: Exception) -> Any:
    def fn() -> Any:
        raise e
    return fn


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value
