"""The sink task's ErrantRecordReporter is synchronous: when `report()` returns, the dead letter
queue holds the record. Sinks that commit their own offsets (JDBC, warehouse) commit right after
reporting, so an unacknowledged DLQ write would be lost by a crash between the two."""

from __future__ import annotations

import threading
import uuid
from types import SimpleNamespace

import pytest
from confluent_kafka import Consumer, Producer

from samsa.connect.data import SinkRecord
from samsa.connect.errors import ConnectException, DataException
from samsa.connect.runtime.sink_task import _Reporter
from samsa.connect.runtime.tolerance import Consumed, DeadLetterQueueReporter, RetryWithToleranceOperator
from samsa.testing import SamsaBroker, free_port


def _runner(producer: Producer, topic: str) -> SimpleNamespace:
    dlq = DeadLetterQueueReporter(producer, topic, "conn", 0, context_headers_enabled=True)
    operator = RetryWithToleranceOperator(0, 10, True, [dlq], threading.Event())
    raw = {("orders", 0, 7): Consumed("orders", 0, 7, None, b"k", b"bad-row", [])}
    return SimpleNamespace(raw=raw, operator=operator, sink_task=object())


def _record() -> SinkRecord:
    return SinkRecord("orders", 0, None, b"k", None, b"bad-row", kafka_offset=7)


def test_report_returns_after_the_dlq_acknowledged_the_record(samsa_broker: SamsaBroker) -> None:
    topic = f"dlq-{uuid.uuid4().hex[:8]}"
    # A long linger: without the reporter's own flush the record would still sit in the queue.
    producer = Producer({"bootstrap.servers": samsa_broker.bootstrap, "linger.ms": 5000})
    future = _Reporter(_runner(producer, topic)).report(_record(), DataException("does not fit"))  # type: ignore[arg-type]
    assert future.done() and future.exception() is None
    assert len(producer) == 0
    consumer = Consumer({"bootstrap.servers": samsa_broker.bootstrap, "group.id": topic,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    try:
        msg = None
        for _ in range(40):
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                break
        assert msg is not None and msg.value() == b"bad-row"
        headers = dict(msg.headers() or [])
        assert headers["__connect.errors.stage"] == b"TASK_PUT"
    finally:
        consumer.close()


def test_report_fails_when_the_dlq_cannot_be_written() -> None:
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{free_port()}", "message.timeout.ms": 1000})
    with pytest.raises(ConnectException):
        _Reporter(_runner(producer, "dlq")).report(_record(), DataException("x"))  # type: ignore[arg-type]
