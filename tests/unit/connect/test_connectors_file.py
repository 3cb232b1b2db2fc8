"""FileStreamSource/Sink connectors driven directly, with in-test contexts (no runtime, no broker)."""

from __future__ import annotations

import io
import os
import sys
import threading
from pathlib import Path

import pytest
from connectors_ctx import DictOffsetReader, poll_until, sink_context, started_source

from samsa.connect.api import ExactlyOnceSupport, TopicPartition
from samsa.connect.connectors.file_sink import FileStreamSinkConnector, FileStreamSinkTask
from samsa.connect.connectors.file_source import FileStreamSourceConnector, FileStreamSourceTask
from samsa.connect.data import INT32_SCHEMA, STRING_SCHEMA, SinkRecord, Struct, struct_schema
from samsa.connect.errors import ConfigException, ConnectException


def _source(path: Path | None, reader: DictOffsetReader | None = None,
            **extra: str) -> tuple[FileStreamSourceTask, DictOffsetReader]:
    props = {"topic": "lines", **extra}
    if path is not None:
        props["file"] = str(path)
    task = FileStreamSourceTask()
    task.poll_wait_s = 0.01
    ctx = started_source(task, props, reader)
    return task, ctx.reader


def test_lines_become_string_records_with_byte_offsets(tmp_path: Path) -> None:
    f = tmp_path / "in.txt"
    f.write_bytes("one\nzwei\r\ndrei ß\rvier\n".encode())
    task, _ = _source(f)
    records = poll_until(task, 4)
    assert [r.value for r in records] == ["one", "zwei", "drei ß", "vier"]
    assert all(r.value_schema == STRING_SCHEMA and r.topic == "lines" for r in records)
    assert all(r.source_partition == {"filename": str(f)} for r in records)
    # position: bytes through the end of each line (ß is two bytes; \r\n counts both)
    assert [r.source_offset for r in records] == [
        {"position": 4}, {"position": 10}, {"position": 18}, {"position": 23}]
    assert records[-1].source_offset == {"position": f.stat().st_size}
    assert task.poll() is None  # nothing new: waits briefly, returns None
    task.stop()


def test_partial_last_line_waits_for_its_end(tmp_path: Path) -> None:
    f = tmp_path / "in.txt"
    f.write_bytes(b"done\nhalf")
    task, _ = _source(f)
    records = poll_until(task, 1)
    assert [r.value for r in records] == ["done"]
    assert task.poll() is None
    with f.open("ab") as out:
        out.write(b"-line\r")  # a trailing \r may still become \r\n: not a line yet
    assert task.poll() is None
    with f.open("ab") as out:
        out.write(b"\nnext\n")
    records = poll_until(task, 2)
    assert [r.value for r in records] == ["half-line", "next"]
    assert records[0].source_offset == {"position": len(b"done\nhalf-line\r\n")}
    task.stop()


def test_resumes_from_stored_offset(tmp_path: Path) -> None:
    f = tmp_path / "in.txt"
    f.write_bytes(b"a\nbb\nccc\n")
    first, reader = _source(f)
    got = poll_until(first, 3)
    reader.commit(got[:2])  # only the first two were committed before the "crash"
    first.stop()
    with f.open("ab") as out:
        out.write(b"dddd\n")
    second, _ = _source(f, reader)
    again = poll_until(second, 2)
    assert [r.value for r in again] == ["ccc", "dddd"]
    assert again[-1].source_offset == {"position": f.stat().st_size}
    second.stop()


def test_offset_of_another_file_is_ignored(tmp_path: Path) -> None:
    f = tmp_path / "in.txt"
    f.write_bytes(b"x\ny\n")
    reader = DictOffsetReader()
    reader.put({"filename": str(tmp_path / "other.txt")}, {"position": 2})
    task, _ = _source(f, reader)
    assert [r.value for r in poll_until(task, 2)] == ["x", "y"]
    task.stop()


def test_stored_offset_of_wrong_type_fails_the_task(tmp_path: Path) -> None:
    f = tmp_path / "in.txt"
    f.write_bytes(b"x\n")
    reader = DictOffsetReader()
    reader.put({"filename": str(f)}, {"position": "2"})
    task, _ = _source(f, reader)
    with pytest.raises(ConnectException, match="incorrect type"):
        task.poll()


def test_batch_size_bounds_each_poll(tmp_path: Path) -> None:
    f = tmp_path / "in.txt"
    f.write_bytes(b"".join(b"line-%d\n" % i for i in range(10)))
    task, _ = _source(f, **{"batch.size": "4"})
    sizes = [len(task.poll() or []) for _ in range(3)]
    assert sizes == [4, 4, 2]
    task.stop()


def test_default_batch_size_is_kafkas() -> None:
    key = FileStreamSourceConnector().config().keys["batch.size"]
    assert key.default == 2000


def test_missing_file_is_waited_for(tmp_path: Path) -> None:
    f = tmp_path / "later.txt"
    task, _ = _source(f)
    task.missing_wait_s = 0.01
    assert task.poll() is None  # no file yet: waits (stop-aware) and returns None
    assert task.poll() is None
    f.write_bytes(b"arrived\n")
    assert [r.value for r in poll_until(task, 1)] == ["arrived"]
    task.stop()


def test_stop_ends_a_waiting_poll(tmp_path: Path) -> None:
    f = tmp_path / "in.txt"
    f.write_bytes(b"")
    task, _ = _source(f)
    task.poll_wait_s = 30.0
    result: list[object] = []
    poller = threading.Thread(target=lambda: result.append(task.poll()))
    poller.start()
    task.stop()
    poller.join(timeout=10)
    assert not poller.is_alive() and result == [None]
    assert task.poll() is None  # stopped tasks stay quiet


def test_reads_stdin_when_no_file(monkeypatch: pytest.MonkeyPatch) -> None:
    rfd, wfd = os.pipe()
    stdin = os.fdopen(rfd, "rb")
    monkeypatch.setattr(sys, "stdin", stdin)
    try:
        os.write(wfd, b"from\nstdin\npart")
        task, _ = _source(None)
        records = poll_until(task, 2)
        assert [r.value for r in records] == ["from", "stdin"]
        # Kafka's task tracks no offsets for stdin: partition and position are null
        assert records[0].source_partition == {"filename": None}
        assert records[0].source_offset == {"position": None}
        task.stop()
    finally:
        os.close(wfd)
        stdin.close()


def test_no_file_and_no_stdin_fails_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", None)
    with pytest.raises(ConnectException, match="standard input"):
        _source(None)


def test_source_connector_config_and_tasks(tmp_path: Path) -> None:
    c = FileStreamSourceConnector()
    values = c.validate({"file": "x"})
    assert values["topic"].errors  # required
    values = c.validate({"topic": " ", "batch.size": "lots"})
    assert values["topic"].errors and values["batch.size"].errors
    assert not any(v.errors for v in c.validate({"topic": "t"}).values())
    with pytest.raises(ConfigException):
        c.start({"file": "x"})
    c.start({"file": str(tmp_path / "f"), "topic": "t", "tasks.max": "5"})
    configs = c.task_configs(5)
    assert len(configs) == 1 and configs[0]["topic"] == "t"  # one reader per file
    assert c.task_class() is FileStreamSourceTask
    assert {"file", "topic", "batch.size"} <= set(c.config().names())
    assert all(k.documentation for k in c.config().keys.values())
    assert c.version()


def test_exactly_once_support_only_for_files() -> None:
    c = FileStreamSourceConnector()
    assert c.exactly_once_support({"topic": "t", "file": "/tmp/x"}) is ExactlyOnceSupport.SUPPORTED
    assert c.exactly_once_support({"topic": "t"}) is ExactlyOnceSupport.UNSUPPORTED
    assert c.exactly_once_support({"topic": "t", "file": ""}) is ExactlyOnceSupport.UNSUPPORTED


def _part(name: str = "/tmp/x") -> tuple[tuple[str, object], ...]:
    return (("filename", name),)


@pytest.mark.parametrize(("offsets", "error"), [
    ({_part(): {"pos": 1}}, "contain the key 'position'"),
    ({_part(): {"position": "7"}}, "Long value"),
    ({_part(): {"position": 1.5}}, "Long value"),
    ({_part(): {"position": True}}, "Long value"),
    ({_part(): {"position": -1}}, "non-negative"),
    ({(("file", "/tmp/x"),): {"position": 1}}, "contain the key 'filename'"),
])
def test_alter_offsets_rejects_bad_offsets(offsets: dict, error: str) -> None:
    with pytest.raises(ConnectException, match=error):
        FileStreamSourceConnector().alter_offsets({"topic": "t", "file": "/tmp/x"}, offsets)


def test_alter_offsets_accepts_positions_and_tombstones() -> None:
    c = FileStreamSourceConnector()
    props = {"topic": "t", "file": "/tmp/x"}
    assert c.alter_offsets(props, {_part(): {"position": 0}, _part("/old"): None,
                                   (("junk", 1),): None}) is True
    with pytest.raises(ConnectException, match="stdin"):
        c.alter_offsets({"topic": "t"}, {_part(): {"position": 3}})


# ---- sink ----------------------------------------------------------------------------------
def _sink_record(value: object, offset: int = 0) -> SinkRecord:
    return SinkRecord("t", 0, None, None, None, value, kafka_offset=offset)


def test_sink_appends_values_as_lines(tmp_path: Path) -> None:
    f = tmp_path / "out.txt"
    f.write_text("existing\n")
    task = FileStreamSinkTask()
    task.initialize(sink_context({"file": str(f)}))
    task.start({"file": str(f)})
    schema = struct_schema([("a", INT32_SCHEMA), ("b", STRING_SCHEMA)])
    task.put([_sink_record("plain"), _sink_record(None), _sink_record(42), _sink_record(True),
              _sink_record(Struct(schema, {"a": 1, "b": "x"})), _sink_record([1, 2])])
    task.flush({TopicPartition("t", 0): 6})
    assert f.read_text().splitlines() == [
        "existing", "plain", "null", "42", "true", "Struct{a=1,b=x}", "[1, 2]"]
    task.put([_sink_record("after")])
    task.stop()  # closing flushes what put wrote
    assert f.read_text().splitlines()[-1] == "after"


def test_sink_flush_makes_data_visible(tmp_path: Path) -> None:
    f = tmp_path / "out.txt"
    task = FileStreamSinkTask()
    task.start({"file": str(f)})
    task.put([_sink_record(f"v{i}") for i in range(3)])
    task.pre_commit({TopicPartition("t", 0): 3})  # the runtime's commit path flushes
    assert f.read_text() == "v0\nv1\nv2\n"
    task.stop()


def test_sink_writes_stdout_without_file(capsys: pytest.CaptureFixture[str]) -> None:
    task = FileStreamSinkTask()
    task.start({})
    task.put([_sink_record("to-stdout")])
    task.flush({})
    task.stop()
    assert capsys.readouterr().out == "to-stdout\n"


def test_sink_to_given_stream() -> None:
    out = io.StringIO()
    task = FileStreamSinkTask(out)
    task.start({})
    task.put([_sink_record("a"), _sink_record("b")])
    assert out.getvalue() == "a\nb\n"


def test_sink_unwritable_file_fails_start(tmp_path: Path) -> None:
    task = FileStreamSinkTask()
    with pytest.raises(ConnectException, match="Couldn't find or create file"):
        task.start({"file": str(tmp_path / "no" / "such" / "dir" / "f")})


def test_sink_connector_tasks_and_config() -> None:
    c = FileStreamSinkConnector()
    c.start({"file": "/tmp/out", "topics": "a,b", "name": "s"})
    assert c.task_configs(3) == [{"file": "/tmp/out"}] * 3  # Kafka: tasks.max copies
    c.start({"topics": "a"})
    assert c.task_configs(1) == [{}]
    assert c.config().names() == ["file"]
    assert not c.config().keys["file"].required
    assert c.alter_offsets({}, {TopicPartition("a", 0): 5}) is True
    assert c.task_class() is FileStreamSinkTask
