"""Error handling of a task's record pipeline (KIP-298): retries with back-off for retriable
failures (`errors.retry.timeout`, `errors.retry.delay.max.ms`), then either fail the task
(`errors.tolerance=none`) or skip the record (`all`), reporting it to the log
(`errors.log.enable`) and, for sinks, a dead letter queue topic with the `__connect.errors.*`
context headers."""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol, TypeVar

from ..errors import ConnectException, RetriableException

log = logging.getLogger("samsa.connect.errors")
T = TypeVar("T")
RETRY_START_MS = 300


class Stage(StrEnum):
    KEY_CONVERTER = "KEY_CONVERTER"
    VALUE_CONVERTER = "VALUE_CONVERTER"
    HEADER_CONVERTER = "HEADER_CONVERTER"
    TRANSFORMATION = "TRANSFORMATION"
    TASK_PUT = "TASK_PUT"
    TASK_POLL = "TASK_POLL"
    KAFKA_PRODUCE = "KAFKA_PRODUCE"
    KAFKA_CONSUME = "KAFKA_CONSUME"


@dataclass
class Consumed:
    """The raw record a sink task consumed, as the DLQ needs it."""

    topic: str
    partition: int
    offset: int
    timestamp: int | None
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


@dataclass
class Failure:
    stage: Stage
    executing_class: str
    error: BaseException
    consumed: Consumed | None = None
    source_record: Any = None


class ErrorReporter(Protocol):
    def report(self, failure: Failure) -> None: ...

    def close(self) -> None: ...


class ToleranceExceeded(ConnectException):
    """errors.tolerance=none (or retries ran out): the task fails with this."""


class _Failed:
    def __repr__(self) -> str:
        return "FAILED"


FAILED: Any = _Failed()


class RetryWithToleranceOperator:
    def __init__(self, retry_timeout_ms: int, retry_delay_max_ms: int, tolerate_all: bool,
                 reporters: list[ErrorReporter], stopping: threading.Event) -> None:
        self.retry_timeout_ms = retry_timeout_ms
        self.retry_delay_max_ms = retry_delay_max_ms
        self.tolerate_all = tolerate_all
        self.reporters = reporters
        self.stopping = stopping
        self.failed_records = 0
        self.skipped_records = 0

    @classmethod
    def from_config(cls, cfg: dict[str, Any], reporters: list[ErrorReporter],
                    stopping: threading.Event) -> RetryWithToleranceOperator:
        return cls(int(cfg.get("errors.retry.timeout", 0)),
                   int(cfg.get("errors.retry.delay.max.ms", 60000)),
                   str(cfg.get("errors.tolerance", "none")) == "all", reporters, stopping)

    def execute(self, stage: Stage, executing_class: str, fn: Callable[[], T], *,
                consumed: Consumed | None = None, source_record: Any = None) -> T:
        """fn's result, or FAILED when the record is to be skipped (tolerance all). Raises
        ToleranceExceeded when it may not be skipped."""
        deadline = None if self.retry_timeout_ms < 0 else time.monotonic() + self.retry_timeout_ms / 1000
        delay_ms = RETRY_START_MS
        while True:
            try:
                return fn()
            except RetriableException as e:
                remaining = None if deadline is None else deadline - time.monotonic()
                if (remaining is not None and remaining <= 0) or self.stopping.is_set():
                    return self._fail(Failure(stage, executing_class, e, consumed, source_record))
                wait = min(delay_ms, self.retry_delay_max_ms) / 1000
                if remaining is not None:
                    wait = min(wait, remaining)
                log.debug("retrying %s after %s (%.2fs)", stage.value, e, wait)
                self.stopping.wait(wait)
                delay_ms *= 2
            except Exception as e:  # any other failure of a converter/transform: tolerated?
                return self._fail(Failure(stage, executing_class, e, consumed, source_record))

    def _fail(self, failure: Failure) -> Any:
        self.failed_records += 1
        for r in self.reporters:
            try:
                r.report(failure)
            except Exception:  # a reporter's failure must not hide the record's
                log.exception("error reporter failed")
        if not self.tolerate_all:
            raise ToleranceExceeded("Tolerance exceeded in error handler") from failure.error
        self.skipped_records += 1
        return FAILED


def describe(failure: Failure, include_message: bool) -> str:
    where = ""
    c = failure.consumed
    if c is not None:
        where = (f", where consumed record is {{topic='{c.topic}', partition={c.partition}, "
                 f"offset={c.offset}, timestamp={c.timestamp}}}")
        if include_message:
            where += f" with key {c.key!r} and value {c.value!r}"
    elif failure.source_record is not None:
        r = failure.source_record
        where = f", where source record is {{topic='{getattr(r, 'topic', None)}'}}"
        if include_message:
            where += f": {r!r}"
    return (f"Error encountered in task. Executing stage '{failure.stage.value}' with class "
            f"'{failure.executing_class}'{where}.")


class LogReporter:
    """errors.log.enable: one ERROR line per failed operation (with the record when
    errors.log.include.messages)."""

    def __init__(self, task: str, include_messages: bool) -> None:
        self.task = task
        self.include_messages = include_messages

    def report(self, failure: Failure) -> None:
        log.error("%s: %s", self.task, describe(failure, self.include_messages),
                  exc_info=failure.error)

    def close(self) -> None:
        pass


HEADER_PREFIX = "__connect.errors."


def context_headers(failure: Failure, connector: str, task: int) -> list[tuple[str, bytes]]:
    """KIP-298's DLQ headers, in Kafka's names."""
    c = failure.consumed
    err = failure.error
    out: list[tuple[str, str]] = []
    if c is not None:
        out += [("topic", c.topic), ("partition", str(c.partition)), ("offset", str(c.offset))]
    out += [("connector.name", connector), ("task.id", str(task)), ("stage", failure.stage.value),
            ("class.name", failure.executing_class),
            ("exception.class.name", f"{type(err).__module__}.{type(err).__qualname__}"),
            ("exception.message", str(err)),
            ("exception.stacktrace", "".join(traceback.format_exception(err)))]
    return [(HEADER_PREFIX + k, v.encode()) for k, v in out]


class DeadLetterQueueReporter:
    """Sends the consumed record's original bytes to the DLQ topic (sink connectors only)."""

    def __init__(self, producer: Any, topic: str, connector: str, task: int,
                 context_headers_enabled: bool) -> None:
        self.producer = producer
        self.topic = topic
        self.connector = connector
        self.task = task
        self.context_headers_enabled = context_headers_enabled
        self.errors: list[str] = []

    def report(self, failure: Failure) -> None:
        c = failure.consumed
        if c is None:
            return
        headers: list[tuple[str, bytes | None]] = list(c.headers)
        if self.context_headers_enabled:
            headers += context_headers(failure, self.connector, self.task)

        def done(err: Any, _msg: Any) -> None:
            if err is not None:
                self.errors.append(str(err))
                log.error("could not write to dead letter queue %s: %s", self.topic, err)

        self.producer.produce(self.topic, key=c.key, value=c.value, headers=headers,
                              on_delivery=done)
        self.producer.poll(0)

    def flush(self, timeout_s: float) -> int:
        """Wait for the DLQ writes; returns how many are still not acknowledged."""
        return int(self.producer.flush(timeout_s))

    def close(self) -> None:
        self.producer.flush(10)


class _Skipped(Exception):
    pass


def run_chain(operator: RetryWithToleranceOperator, chain: Any, record: Any, *,
              consumed: Consumed | None = None) -> Any:
    """The record through the transform chain with each stage under the operator (so a failure
    names the transform's class, as Kafka's DLQ headers do): the result, None when a transform
    dropped it, or FAILED when a failing stage was tolerated."""

    def runner(call: Callable[[], Any], class_name: str) -> Any:
        result = operator.execute(Stage.TRANSFORMATION, class_name, call, consumed=consumed,
                                  source_record=None if consumed is not None else record)
        if result is FAILED:
            raise _Skipped
        return result

    try:
        return chain.apply(record, runner)
    except _Skipped:
        return FAILED
