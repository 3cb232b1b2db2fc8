"""VerifiableSource/Sink connectors driven directly, with in-test contexts."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from connectors_ctx import DictOffsetReader, poll_until, sink_context, started_source

from samsa.connect.api import RecordMetadata, TopicPartition
from samsa.connect.connectors.verifiable import (
    COMPLETE_VALUE_SCHEMA,
    VerifiableSinkConnector,
    VerifiableSinkTask,
    VerifiableSourceConnector,
    VerifiableSourceTask,
)
from samsa.connect.data import INT32_SCHEMA, INT64_SCHEMA, SinkRecord, validate_value
from samsa.connect.errors import ConfigException


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _source_task(props: dict[str, str], reader: DictOffsetReader | None = None,
                 ) -> tuple[VerifiableSourceTask, DictOffsetReader]:
    task = VerifiableSourceTask()
    ctx = started_source(task, props, reader)
    return task, ctx.reader


def _task_props(tmp_path: Path, task_id: int = 0, **extra: str) -> dict[str, str]:
    c = VerifiableSourceConnector()
    c.start({"name": "verify", "topic": "seq", "throughput": "-1",
             "file": str(tmp_path / "report.jsonl"), **extra})
    return c.task_configs(task_id + 1)[task_id]


def test_seqnos_continue_after_the_committed_offset(tmp_path: Path) -> None:
    props = _task_props(tmp_path, task_id=1)
    task, reader = _source_task(props)
    first = poll_until(task, 5)
    assert [r.value for r in first] == [0, 1, 2, 3, 4]
    assert all(r.key == 1 and r.key_schema == INT32_SCHEMA and r.value_schema == INT64_SCHEMA
               for r in first)
    assert first[0].source_partition == {"id": 1}
    assert [r.source_offset for r in first] == [{"seqno": n} for n in range(5)]
    reader.commit(first[:3])  # seqnos 0..2 committed; 3 and 4 were lost with the worker
    task.stop()
    again, _ = _source_task(props, reader)
    assert [r.value for r in poll_until(again, 3)] == [3, 4, 5]
    again.stop()
    report = _lines(tmp_path / "report.jsonl")
    assert [d["seqno"] for d in report] == [0, 1, 2, 3, 4, 3, 4, 5]
    assert report[0] == {"name": "verify", "task": 1, "topic": "seq",
                         "time_ms": report[0]["time_ms"], "seqno": 0}


def test_tasks_have_their_own_partitions(tmp_path: Path) -> None:
    reader = DictOffsetReader()
    reader.put({"id": 0}, {"seqno": 9})
    t0, _ = _source_task(_task_props(tmp_path, 0), reader)
    t1, _ = _source_task(_task_props(tmp_path, 1), reader)
    assert t0.poll()[0].value == 10  # type: ignore[index]
    assert t1.poll()[0].value == 0  # type: ignore[index]


def test_complete_record_data_is_a_valid_struct(tmp_path: Path) -> None:
    task, _ = _source_task(_task_props(tmp_path, **{"complete.record.data": "true"}))
    records = poll_until(task, 3)
    for n, r in enumerate(records):
        assert r.value_schema == COMPLETE_VALUE_SCHEMA
        validate_value(r.value_schema, r.value)
        assert r.value.get("seqno") == n and r.value.get("task") == 0
        assert r.value.get("name") == "verify" and r.value.get("topic") == "seq"


def test_commit_record_is_reported(tmp_path: Path) -> None:
    task, _ = _source_task(_task_props(tmp_path))
    record = task.poll()[0]  # type: ignore[index]
    task.commit_record(record, RecordMetadata("seq", 0, 17))
    task.stop()
    report = _lines(tmp_path / "report.jsonl")
    assert report[-1]["committed"] is True and report[-1]["seqno"] == 0


def test_throughput_zero_produces_nothing_until_stopped(tmp_path: Path) -> None:
    task, _ = _source_task(_task_props(tmp_path, throughput="0"))
    result: list[object] = []
    poller = threading.Thread(target=lambda: result.append(task.poll()))
    poller.start()
    task.stop()
    poller.join(timeout=10)
    assert not poller.is_alive() and result == [None]


def test_throughput_limits_rate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]
    monkeypatch.setattr("samsa.connect.connectors.verifiable.time.monotonic", lambda: clock[0])
    task, _ = _source_task(_task_props(tmp_path, throughput="4"))
    waits: list[float] = []

    def fake_wait(seconds: float) -> bool:  # records the pause instead of sleeping
        waits.append(seconds)
        clock[0] += seconds
        return False

    monkeypatch.setattr(task._stopper, "wait", fake_wait)
    records = poll_until(task, 5)
    assert [r.value for r in records] == [0, 1, 2, 3, 4]
    # 4 per second: record n is due n/4 s after the start; the first one at once
    assert waits == pytest.approx([0.25] * 4)
    assert clock[0] == pytest.approx(1001.0)


def test_source_connector_config() -> None:
    c = VerifiableSourceConnector()
    values = c.validate({"topic": "t"})
    assert values["throughput"].errors
    values = c.validate({"topic": "t", "throughput": "fast"})
    assert values["throughput"].errors
    assert not any(v.errors for v in c.validate({"topic": "t", "throughput": "10"}).values())
    with pytest.raises(ConfigException):
        c.start({"throughput": "10"})
    c.start({"topic": "t", "throughput": "10", "name": "n"})
    configs = c.task_configs(3)
    assert [cfg["id"] for cfg in configs] == ["0", "1", "2"]
    assert all(cfg["topic"] == "t" and cfg["name"] == "n" for cfg in configs)
    assert all(k.documentation for k in c.config().keys.values())


def test_sink_reports_and_flushes(tmp_path: Path) -> None:
    report = tmp_path / "sink.jsonl"
    c = VerifiableSinkConnector()
    c.start({"name": "vsink", "topics": "seq", "file": str(report)})
    props = c.task_configs(2)[1]
    task = VerifiableSinkTask()
    task.initialize(sink_context(props))
    task.start(props)
    task.put([SinkRecord("seq", 0, INT32_SCHEMA, 3, INT64_SCHEMA, n, kafka_offset=100 + n)
              for n in range(2)])
    task.flush({TopicPartition("seq", 0): 102})
    task.flush({TopicPartition("seq", 0): 102})  # nothing new: nothing reported
    task.stop()
    lines = _lines(report)
    assert len(lines) == 4 and task.count == 2
    got, flushed = lines[:2], lines[2:]
    assert [(d["task"], d["sinkTask"], d["seqno"], d["offset"], d["name"], d["topic"])
            for d in got] == [(3, 1, 0, 100, "vsink", "seq"), (3, 1, 1, 101, "vsink", "seq")]
    assert all(d["flushed"] is True for d in flushed)
    assert [d["seqno"] for d in flushed] == [0, 1]


def test_sink_prints_to_stdout_without_file(capsys: pytest.CaptureFixture[str]) -> None:
    task = VerifiableSinkTask()
    task.start({"id": "0", "name": "n"})
    task.put([SinkRecord("seq", 0, INT32_SCHEMA, 0, INT64_SCHEMA, 7, kafka_offset=1)])
    task.stop()
    assert json.loads(capsys.readouterr().out)["seqno"] == 7
