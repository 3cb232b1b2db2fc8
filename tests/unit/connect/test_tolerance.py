"""Error tolerance of the record pipeline (KIP-298): retries, skip vs fail, reporters, and the DLQ
context headers."""

from __future__ import annotations

import threading

import pytest

from samsa.connect.errors import DataException, RetriableException
from samsa.connect.runtime.tolerance import (
    FAILED,
    Consumed,
    DeadLetterQueueReporter,
    Failure,
    RetryWithToleranceOperator,
    Stage,
    ToleranceExceeded,
    context_headers,
)


class Collect:
    def __init__(self) -> None:
        self.failures: list[Failure] = []

    def report(self, failure: Failure) -> None:
        self.failures.append(failure)

    def close(self) -> None:
        pass


def op(tolerate_all: bool, timeout_ms: int = 0, reporters: list | None = None) -> \
        RetryWithToleranceOperator:
    return RetryWithToleranceOperator(timeout_ms, 10, tolerate_all, reporters or [], threading.Event())


def test_success_passes_the_value_through() -> None:
    assert op(False).execute(Stage.VALUE_CONVERTER, "C", lambda: 42) == 42


def test_tolerance_none_fails_and_reports_first() -> None:
    seen = Collect()
    o = op(False, reporters=[seen])

    def bad() -> None:
        raise DataException("not json")

    with pytest.raises(ToleranceExceeded) as info:
        o.execute(Stage.VALUE_CONVERTER, "JsonConverter", bad)
    assert isinstance(info.value.__cause__, DataException)
    assert [f.stage for f in seen.failures] == [Stage.VALUE_CONVERTER]
    assert o.failed_records == 1 and o.skipped_records == 0


def test_tolerance_all_skips_the_record() -> None:
    seen = Collect()
    o = op(True, reporters=[seen])

    def bad() -> None:
        raise ValueError("boom")

    assert o.execute(Stage.TRANSFORMATION, "Chain", bad) is FAILED
    assert o.skipped_records == 1 and len(seen.failures) == 1


def test_retriable_errors_are_retried_until_they_pass() -> None:
    calls = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise RetriableException("try again")
        return "ok"

    assert op(False, timeout_ms=5000).execute(Stage.KAFKA_PRODUCE, "P", flaky) == "ok"
    assert len(calls) == 3


def test_retries_stop_at_the_timeout() -> None:
    calls = []

    def always() -> None:
        calls.append(1)
        raise RetriableException("still down")

    o = op(True, timeout_ms=50)
    assert o.execute(Stage.KAFKA_PRODUCE, "P", always) is FAILED
    assert len(calls) >= 2  # retried at least once before giving up


def test_no_retry_without_a_timeout() -> None:
    calls = []

    def always() -> None:
        calls.append(1)
        raise RetriableException("down")

    assert op(True, timeout_ms=0).execute(Stage.KAFKA_PRODUCE, "P", always) is FAILED
    assert len(calls) == 1


def test_dlq_headers_name_the_record_and_the_error() -> None:
    consumed = Consumed("orders", 3, 17, 1000, b"k", b"v", [])
    try:
        raise DataException("bad payload")
    except DataException as e:
        failure = Failure(Stage.VALUE_CONVERTER, "org.example.Conv", e, consumed)
    headers = dict(context_headers(failure, "sink-a", 2))
    assert headers["__connect.errors.topic"] == b"orders"
    assert headers["__connect.errors.partition"] == b"3"
    assert headers["__connect.errors.offset"] == b"17"
    assert headers["__connect.errors.connector.name"] == b"sink-a"
    assert headers["__connect.errors.task.id"] == b"2"
    assert headers["__connect.errors.stage"] == b"VALUE_CONVERTER"
    assert headers["__connect.errors.class.name"] == b"org.example.Conv"
    assert headers["__connect.errors.exception.class.name"].endswith(b"DataException")
    assert headers["__connect.errors.exception.message"] == b"bad payload"
    assert b"Traceback" in headers["__connect.errors.exception.stacktrace"]


class FakeProducer:
    """Records what the reporter would send (the DLQ's real producer is covered by the
    integration tests)."""

    def __init__(self) -> None:
        self.sent: list[dict] = []

    def produce(self, topic: str, **kw: object) -> None:
        self.sent.append({"topic": topic, **kw})

    def poll(self, _t: float) -> int:
        return 0

    def flush(self, _t: float) -> int:
        return 0


def test_dlq_reporter_sends_original_bytes_with_or_without_context() -> None:
    consumed = Consumed("orders", 0, 5, None, b"key", b"\xff\xfe", [("h", b"1")])
    failure = Failure(Stage.VALUE_CONVERTER, "C", DataException("x"), consumed)
    for with_ctx in (False, True):
        p = FakeProducer()
        DeadLetterQueueReporter(p, "dlq", "c", 0, with_ctx).report(failure)
        sent = p.sent[0]
        assert sent["topic"] == "dlq" and sent["key"] == b"key" and sent["value"] == b"\xff\xfe"
        names = [h for h, _ in sent["headers"]]
        assert names[0] == "h"
        assert ("__connect.errors.stage" in names) is with_ctx


def test_a_failing_transform_is_named_and_skipped_under_tolerance_all() -> None:
    from samsa.connect.data import STRING_SCHEMA, SinkRecord, Struct, struct_schema
    from samsa.connect.plugins import Plugins
    from samsa.connect.runtime.tolerance import run_chain
    from samsa.connect.transforms.chain import TransformationChain

    chain = TransformationChain.from_config({
        "transforms": "hoist,pick",
        "transforms.hoist.type": "org.apache.kafka.connect.transforms.HoistField$Value",
        "transforms.hoist.field": "inner",
        "transforms.pick.type": "org.apache.kafka.connect.transforms.ExtractField$Value",
        "transforms.pick.field": "missing"}, Plugins())
    schema = struct_schema([("a", STRING_SCHEMA)])
    record = SinkRecord("t", 0, None, None, schema, Struct(schema, {"a": "x"}), kafka_offset=1)
    seen = Collect()
    consumed = Consumed("t", 0, 1, None, None, b"{}", [])
    assert run_chain(op(True, reporters=[seen]), chain, record, consumed=consumed) is FAILED
    assert [f.executing_class for f in seen.failures] == \
        ["org.apache.kafka.connect.transforms.ExtractField$Value"]
    with pytest.raises(ToleranceExceeded):
        run_chain(op(False), chain, record, consumed=consumed)
