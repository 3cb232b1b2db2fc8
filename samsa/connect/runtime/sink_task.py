"""Running a sink task: consume the connector's topics in the group `connect-<name>`, convert
and transform each record, hand batches to `put`, and commit the consumer offsets that
`pre_commit` (by default after `flush`) says are safely written — never before. Records that fail
conversion or transformation go to the log / dead letter queue when errors.tolerance=all."""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message
from confluent_kafka import TopicPartition as KafkaTP

from ..api import ErrantRecordReporter, SinkTask, TopicPartition
from ..data import Headers, SinkRecord, TimestampType
from ..errors import ConnectException, RetriableException
from .status import ConnectorTaskId, TargetState
from .tolerance import FAILED, Consumed, Failure, RetryWithToleranceOperator, Stage, run_chain
from .worker_task import Converters, StatusListener, WorkerTask

log = logging.getLogger("samsa.connect.sink")
MAX_POLL_RECORDS = 500
POLL_TIMEOUT_S = 0.5
REPORT_FLUSH_TIMEOUT_S = 30.0
_TS_TYPES = {0: TimestampType.NO_TIMESTAMP_TYPE, 1: TimestampType.CREATE_TIME,
             2: TimestampType.LOG_APPEND_TIME}


@dataclass
class SinkTaskSettings:
    connector: str
    consumer_config: dict[str, Any]
    topics: list[str]
    topics_regex: str
    commit_interval_s: float
    max_poll_records: int = MAX_POLL_RECORDS


class _Reporter:
    """The ErrantRecordReporter a sink task gets: a record it could not write goes to the log /
    dead letter queue like a conversion failure (KIP-610). Synchronous: the DLQ write is acknowledged
    before `report` returns (its Future is already done), so a sink that commits its own offsets
    right after reporting (rows + offsets in one database transaction) cannot lose the DLQ copy in a
    crash between the two."""

    def __init__(self, runner: WorkerSinkTask) -> None:
        self.runner = runner

    def report(self, record: SinkRecord, error: Exception) -> Future[None]:
        raw = self.runner.raw.get((record.original_topic, record.original_kafka_partition,
                                   record.original_kafka_offset))
        done: Future[None] = Future()
        reporters = self.runner.operator.reporters
        errors_before = [len(getattr(r, "errors", ())) for r in reporters]
        try:
            self.runner.operator._fail(Failure(Stage.TASK_PUT, type(self.runner.sink_task).__name__,
                                               error, raw))
            for r, before in zip(reporters, errors_before, strict=True):
                flush = getattr(r, "flush", None)
                if flush is None:
                    continue
                if flush(REPORT_FLUSH_TIMEOUT_S):
                    raise ConnectException("dead letter queue write not acknowledged within "
                                           f"{REPORT_FLUSH_TIMEOUT_S:.0f} s")
                errors = getattr(r, "errors", [])
                if len(errors) > before:
                    raise ConnectException(f"dead letter queue write failed: {errors[-1]}")
        except BaseException as e:
            done.set_exception(e)
            raise
        done.set_result(None)
        return done


class WorkerSinkTask(WorkerTask):
    def __init__(self, task_id: ConnectorTaskId, task: SinkTask, task_props: dict[str, str],
                 target_state: TargetState, listener: StatusListener, converters: Converters,
                 chain: Any, operator: RetryWithToleranceOperator, settings: SinkTaskSettings,
                 reporter_enabled: bool) -> None:
        super().__init__(task_id, task, task_props, target_state, listener)
        self.sink_task = task
        self.converters = converters
        self.chain = chain
        self.operator = operator
        self.operator.stopping = self.stopping
        self.settings = settings
        self.consumer: Consumer | None = None
        self.current: dict[TopicPartition, int] = {}  # next offset to hand to put, per partition
        self.committed: dict[TopicPartition, int] = {}
        self._assignment: set[TopicPartition] = set()
        self._paused_by_task: set[TopicPartition] = set()
        self._seek: dict[TopicPartition, int] = {}
        self._timeout_ms = 0
        self._commit_requested = False
        self._last_commit = time.monotonic()
        self._reporter = _Reporter(self) if reporter_enabled else None
        self.raw: dict[tuple[str | None, int | None, int | None], Consumed] = {}
        self._pending: list[SinkRecord] | None = None  # a batch put must be retried with
        self._lock = threading.Lock()

    # ---- SinkTaskContext ---------------------------------------------------------------------
    @property
    def configs(self) -> dict[str, str]:
        return dict(self.task_props)

    def offset(self, offsets: dict[TopicPartition, int]) -> None:
        self._seek.update(offsets)

    def timeout(self, timeout_ms: int) -> None:
        self._timeout_ms = int(timeout_ms)

    def assignment(self) -> set[TopicPartition]:
        return set(self._assignment)

    def pause(self, *partitions: TopicPartition) -> None:
        self._paused_by_task.update(partitions)
        if self.consumer is not None:
            self.consumer.pause([KafkaTP(p.topic, p.partition) for p in partitions])

    def resume(self, *partitions: TopicPartition) -> None:
        self._paused_by_task.difference_update(partitions)
        if self.consumer is not None and not self.paused:
            self.consumer.resume([KafkaTP(p.topic, p.partition) for p in partitions])

    def request_commit(self) -> None:
        self._commit_requested = True

    def errant_record_reporter(self) -> ErrantRecordReporter | None:
        return self._reporter

    # ---- life cycle ----------------------------------------------------------------------------
    def initialize(self) -> None:
        cfg = dict(self.settings.consumer_config)
        self.consumer = Consumer(cfg)
        topics = list(self.settings.topics) if self.settings.topics else \
            ["^" + self.settings.topics_regex.lstrip("^")]
        self.consumer.subscribe(topics, on_assign=self._on_assign, on_revoke=self._on_revoke,
                                on_lost=self._on_lost)
        self.sink_task.initialize(self)

    def _on_assign(self, consumer: Consumer, partitions: list[KafkaTP]) -> None:
        tps = [TopicPartition(p.topic, p.partition) for p in partitions]
        self._assignment.update(tps)
        for tp in tps:
            self.current.pop(tp, None)
        try:
            self.sink_task.open(tps)
        except Exception as e:  # the task fails on its next loop
            self.failed = e
        self._assign_with_seeks(consumer, partitions)
        if self.paused:
            consumer.pause(partitions)

    def _assign_with_seeks(self, consumer: Consumer, partitions: list[KafkaTP]) -> None:
        """Offsets open() asked for (context.offset) become the new partitions' start positions
        right in the assignment, as Kafka rewinds before the first record is delivered; a seek on
        the next loop turn would come after this poll's records from the committed offsets."""
        starts: list[KafkaTP] = []
        for p in partitions:
            tp = TopicPartition(p.topic, p.partition)
            off = self._seek.pop(tp, None)
            if off is not None:
                self.current[tp] = off
            starts.append(KafkaTP(p.topic, p.partition) if off is None else
                          KafkaTP(p.topic, p.partition, off))
        if len(starts) == 0:
            return
        # Assigning here replaces the client's own assign after the callback.
        strategy = str(self.settings.consumer_config.get("partition.assignment.strategy", ""))
        if "cooperative" in strategy:
            consumer.incremental_assign(starts)
        else:
            consumer.assign(starts)

    def _on_revoke(self, consumer: Consumer, partitions: list[KafkaTP]) -> None:
        tps = [TopicPartition(p.topic, p.partition) for p in partitions]
        if self.failed is None and tps:
            self.commit_offsets(only=set(tps))
        self._close_partitions(tps)

    def _on_lost(self, consumer: Consumer, partitions: list[KafkaTP]) -> None:
        self._close_partitions([TopicPartition(p.topic, p.partition) for p in partitions])

    def _close_partitions(self, tps: list[TopicPartition]) -> None:
        try:
            self.sink_task.close(tps)
        except Exception:
            log.exception("%s: close(partitions) failed", self.id)
        for tp in tps:
            self._assignment.discard(tp)
            self.current.pop(tp, None)
            self.committed.pop(tp, None)
        if self._pending is not None:
            self._pending = [r for r in self._pending
                             if TopicPartition(r.topic, r.kafka_partition or 0) not in tps]

    def execute(self) -> None:
        assert self.consumer is not None
        consumer_paused = False
        while not self.stopping.is_set():
            if self.failed is not None:
                raise self.failed
            if self.paused != consumer_paused:
                parts = [KafkaTP(p.topic, p.partition) for p in self._assignment]
                if self.paused:
                    self.consumer.pause(parts)
                else:
                    self.consumer.resume([p for p in parts if TopicPartition(p.topic, p.partition)
                                          not in self._paused_by_task])
                consumer_paused = self.paused
            self._apply_seeks()
            if self._pending is not None and not self.paused:
                self._deliver(self._pending)
            else:
                msgs = self.consumer.consume(self.settings.max_poll_records, POLL_TIMEOUT_S)
                if msgs and not self.stopping.is_set():
                    batch = self._convert_batch(msgs)
                    self._deliver(batch)
            if self._commit_requested or \
                    time.monotonic() - self._last_commit >= self.settings.commit_interval_s:
                self._commit_requested = False
                self.commit_offsets()
        if self.failed is None and self._pending is None:
            self.commit_offsets()

    def _apply_seeks(self) -> None:
        if not self._seek or self.consumer is None:
            return
        seeks, self._seek = self._seek, {}
        for tp, off in seeks.items():
            if tp in self._assignment:
                try:
                    self.consumer.seek(KafkaTP(tp.topic, tp.partition, off))
                    self.current[tp] = off
                except KafkaException as e:
                    log.warning("%s: cannot seek %s to %d: %s", self.id, tp, off, e)

    # ---- converting and delivering ------------------------------------------------------------
    def _convert_batch(self, msgs: list[Message]) -> list[SinkRecord]:
        out: list[SinkRecord] = []
        self.raw.clear()
        for m in msgs:
            err = m.error()
            if err is not None:
                if err.code() in (KafkaError._PARTITION_EOF,):
                    continue
                if err.fatal() or not err.retriable():
                    log.warning("%s: consume error: %s", self.id, err)
                continue
            topic, partition, offset = str(m.topic()), int(m.partition() or 0), int(m.offset() or 0)
            tp = TopicPartition(topic, partition)
            self.saw_topic(topic)
            self.current[tp] = offset + 1  # a skipped record still moves the position
            ts_type, ts = m.timestamp()
            raw = Consumed(topic, partition, offset, ts if ts_type else None, m.key(), m.value(),
                           _header_list(m.headers()))
            self.raw[(topic, partition, offset)] = raw
            record = self._convert(raw, _TS_TYPES.get(ts_type, TimestampType.NO_TIMESTAMP_TYPE))
            if record is None:
                continue
            if self.chain is not None:
                transformed = run_chain(self.operator, self.chain, record, consumed=raw)
                if transformed is FAILED or transformed is None:
                    continue
                record = transformed
            out.append(record)
        return out

    def _convert(self, raw: Consumed, ts_type: TimestampType) -> SinkRecord | None:
        op = self.operator
        key = op.execute(Stage.KEY_CONVERTER, type(self.converters.key).__name__,
                         lambda: self.converters.key.to_connect_data(raw.topic, raw.key), consumed=raw)
        if key is FAILED:
            return None
        value = op.execute(Stage.VALUE_CONVERTER, type(self.converters.value).__name__,
                           lambda: self.converters.value.to_connect_data(raw.topic, raw.value),
                           consumed=raw)
        if value is FAILED:
            return None
        headers = op.execute(Stage.HEADER_CONVERTER, type(self.converters.header).__name__,
                             lambda: self._headers(raw), consumed=raw)
        if headers is FAILED:
            return None
        return SinkRecord(raw.topic, raw.partition, key.schema, key.value, value.schema, value.value,
                          raw.timestamp, headers, kafka_offset=raw.offset, timestamp_type=ts_type)

    def _headers(self, raw: Consumed) -> Headers:
        h = Headers()
        for k, v in raw.headers:
            sv = self.converters.header.to_connect_header(raw.topic, k, v)
            h.add(k, sv.value, sv.schema)
        return h

    def _deliver(self, batch: list[SinkRecord]) -> None:
        if not batch:
            self._pending = None
            return
        try:
            self.sink_task.put(batch)
        except RetriableException as e:
            # keep the batch, stop fetching, retry after the task's timeout (Kafka's behaviour)
            log.info("%s: put() asked for a retry: %s", self.id, e)
            self._pending = batch
            wait = (self._timeout_ms or 0) / 1000
            self._timeout_ms = 0
            if self.consumer is not None:
                self.consumer.pause([KafkaTP(p.topic, p.partition) for p in self._assignment])
            self.stopping.wait(wait if wait > 0 else 0.1)
            return
        if self._pending is not None and self.consumer is not None and not self.paused:
            self.consumer.resume([KafkaTP(p.topic, p.partition) for p in self._assignment
                                  if p not in self._paused_by_task])
        self._pending = None

    # ---- committing -----------------------------------------------------------------------------
    def commit_offsets(self, only: set[TopicPartition] | None = None) -> None:
        """Ask the task which offsets are safe (pre_commit, by default flush) and commit those."""
        self._last_commit = time.monotonic()
        if self.consumer is None:
            return
        current = {tp: off for tp, off in self.current.items()
                   if tp in self._assignment and (only is None or tp in only)}
        if self._pending is not None:  # never commit past a batch put still has to take
            for r in self._pending:
                tp = TopicPartition(r.original_topic or r.topic,
                                    r.original_kafka_partition or 0)
                first = r.original_kafka_offset or 0
                if tp in current:
                    current[tp] = min(current[tp], first)
        if not current:
            return
        try:
            safe = self.sink_task.pre_commit(dict(current))
        except Exception as e:
            log.error("%s: flush/pre_commit failed, offsets not committed: %s", self.id, e)
            return
        todo = {tp: off for tp, off in (safe or {}).items()
                if tp in self._assignment and self.committed.get(tp) != off}
        if not todo:
            return
        try:
            self.consumer.commit(offsets=[KafkaTP(tp.topic, tp.partition, off)
                                          for tp, off in todo.items()], asynchronous=False)
            self.committed.update(todo)
        except KafkaException as e:
            log.warning("%s: committing offsets failed (retried next time): %s", self.id, e)

    def close(self) -> None:
        try:
            if self.consumer is not None:
                if self._assignment:
                    self._close_partitions(sorted(self._assignment))
                self.consumer.close()
        finally:
            for c in (self.converters.key, self.converters.value, self.converters.header):
                c.close()
            if self.chain is not None:
                self.chain.close()
            for r in self.operator.reporters:
                r.close()
            try:  # in the task's own thread, after its last put (Kafka's WorkerSinkTask.close)
                self.sink_task.stop()
            except Exception:
                log.exception("%s: stop() failed", self.id)


def _header_list(headers: Any) -> list[tuple[str, bytes | None]]:
    if not headers:
        return []
    items = headers.items() if isinstance(headers, dict) else headers
    return [(str(k), v.encode() if isinstance(v, str) else v) for k, v in items]
