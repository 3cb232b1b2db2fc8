"""A standalone Connect worker process against a real broker: file source -> topic -> file sink,
resumed after kill -9 from the offsets file; failing tasks reported with their trace while the
worker keeps serving; poisoned records routed to a dead letter queue with KIP-298 headers."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from samsa.testing import SamsaBroker
from samsa.testing.connect import ConnectWorker

PLUGINS = str(Path(__file__).resolve().parents[2] / "connect_plugins")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory):
    with SamsaBroker(tmp_path_factory.mktemp("broker")) as b:
        yield b


def lines_of(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def wait_lines(path: Path, want: set[str], timeout: float = 60.0) -> list[str]:
    deadline = time.monotonic() + timeout
    got: list[str] = []
    while time.monotonic() < deadline:
        got = lines_of(path)
        if want <= set(got):
            return got
        time.sleep(0.2)
    missing = sorted(want - set(got))
    raise AssertionError(f"{len(missing)} lines never arrived, e.g. {missing[:5]}")


def write_props(path: Path, props: dict[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


@pytest.mark.slow
def test_file_round_trip_survives_kill9(broker: SamsaBroker, tmp_path: Path) -> None:
    src, out = tmp_path / "in.txt", tmp_path / "out.txt"
    first = [f"line-{i}" for i in range(2000)]
    src.write_text("".join(x + "\n" for x in first))
    topic = "file-round-trip"
    files = [write_props(tmp_path / "source.properties",
                         {"name": "local-file-source", "tasks.max": "1", "topic": topic,
                          "connector.class": "FileStreamSource", "file": str(src)}),
             write_props(tmp_path / "sink.properties",
                         {"name": "local-file-sink", "tasks.max": "1", "topics": topic,
                          "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
                          "file": str(out)})]
    w = ConnectWorker(broker.bootstrap, tmp_path, connector_files=files,
                      props={"offset.flush.interval.ms": "500"})
    with w:
        w.wait_state("local-file-source")
        w.wait_state("local-file-sink")
        wait_lines(out, set(first))
        time.sleep(1.5)  # let a source offset flush happen, so the restart resumes mid-file
        w.kill()
        second = [f"line-{i}" for i in range(2000, 4000)]
        with src.open("a") as f:
            f.write("".join(x + "\n" for x in second))
        w.start()
        got = wait_lines(out, set(first) | set(second))
    # at-least-once: nothing lost; a resumed source repeats at most what was after its last
    # flushed offset, never the whole file
    assert set(got) == set(first) | set(second)
    assert len(got) < 2 * len(first) + len(second)
    # Kafka's offsets file format (a Java-serialized map of key bytes -> value bytes)
    offsets = (tmp_path / "worker.offsets").read_bytes()
    assert offsets.startswith(b"\xac\xed") and b'"position":' in offsets


@pytest.mark.slow
def test_failing_task_has_trace_and_worker_keeps_running(broker: SamsaBroker, tmp_path: Path) -> None:
    with ConnectWorker(broker.bootstrap, tmp_path, props={"plugin.path": PLUGINS}) as w:
        resp = w.create("fails", {"connector.class": "samsa_test_plugins.FailingSourceConnector",
                                  "topic": "failing-out", "fail.after": "2"})
        assert resp.status_code == 201, resp.text
        deadline = time.monotonic() + 30
        task = {}
        while time.monotonic() < deadline:
            st = w.status("fails")
            if st["tasks"] and st["tasks"][0]["state"] == "FAILED":
                task = st["tasks"][0]
                break
            time.sleep(0.2)
        assert task, w.log_tail()
        assert "the source system is on fire" in task["trace"]
        assert st["connector"]["state"] == "RUNNING"
        # the worker still serves, and other connectors still run
        assert w.http.get("/").status_code == 200
        assert w.create("fine", {"connector.class": "FileStreamSource", "topic": "fine-out",
                                 "file": str(tmp_path / "empty.txt")}).status_code == 201
        w.wait_state("fine")
        # a restart runs the task again: two more records, then it fails again
        assert count_records(broker.bootstrap, "failing-out", 2) == 2
        assert w.http.post("/connectors/fails/tasks/0/restart").status_code == 204
        assert count_records(broker.bootstrap, "failing-out", 4) == 4
        assert w.status("fails")["tasks"][0]["state"] == "FAILED"


@pytest.mark.slow
def test_failed_task_restarts_itself_when_enabled(broker: SamsaBroker, tmp_path: Path) -> None:
    """errors.restart.enable (a Samsa extension): a FAILED task is restarted with back-off
    without anyone asking; each run writes two records before failing again."""
    with ConnectWorker(broker.bootstrap, tmp_path, props={"plugin.path": PLUGINS}) as w:
        resp = w.create("phoenix", {"connector.class": "FailingSourceConnector",
                                    "topic": "phoenix-out", "fail.after": "2",
                                    "errors.restart.enable": "true",
                                    "errors.restart.max.backoff.ms": "1000"})
        assert resp.status_code == 201, resp.text
        assert count_records(broker.bootstrap, "phoenix-out", 6, timeout=60) >= 6
    with ConnectWorker(broker.bootstrap, tmp_path, props={"plugin.path": PLUGINS},
                       name="w2") as w:  # off by default: one run only
        assert w.create("once", {"connector.class": "FailingSourceConnector",
                                 "topic": "once-out", "fail.after": "2"}).status_code == 201
        assert count_records(broker.bootstrap, "once-out", 4, timeout=8) == 2


def count_records(bootstrap: str, topic: str, want: int, timeout: float = 30.0) -> int:
    """Records in the topic, read until `want` arrived or the timeout passed (and a little more,
    so that more than `want` would be seen)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"count-{time.monotonic_ns()}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    n = 0
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        msgs = c.consume(100, 0.3)
        n += sum(1 for m in msgs if m.error() is None)
        if n >= want and not msgs:
            break
    c.close()
    return n


@pytest.mark.slow
def test_poisoned_records_go_to_dlq_with_context_headers(broker: SamsaBroker, tmp_path: Path) -> None:
    topic, dlq, out = "dlq-in", "dlq-out", tmp_path / "good.txt"
    p = Producer({"bootstrap.servers": broker.bootstrap})
    good = [json.dumps({"n": i}) for i in range(5)]
    poison = [b"{not json", b"\xff\xfe"]
    for i, v in enumerate(good):
        p.produce(topic, value=v.encode())
        if i < len(poison):
            p.produce(topic, key=b"bad", value=poison[i])
    p.flush(10)
    with ConnectWorker(broker.bootstrap, tmp_path) as w:
        resp = w.create("dlq-sink", {
            "connector.class": "FileStreamSink", "topics": topic, "file": str(out),
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "false",
            "errors.tolerance": "all", "errors.log.enable": "true",
            "errors.deadletterqueue.topic.name": dlq,
            "errors.deadletterqueue.topic.replication.factor": "1",
            "errors.deadletterqueue.context.headers.enable": "true"})
        assert resp.status_code == 201, resp.text
        w.wait_state("dlq-sink")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(lines_of(out)) < len(good):
            time.sleep(0.2)
        assert len(lines_of(out)) == len(good), w.log_tail()
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "dlq-check",
                      "auto.offset.reset": "earliest"})
        c.subscribe([dlq])
        got = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(got) < len(poison):
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m)
        c.close()
        assert w.status("dlq-sink")["tasks"][0]["state"] == "RUNNING"
    assert sorted(m.value() for m in got) == sorted(poison)
    for m in got:
        headers = dict(m.headers() or [])
        assert m.key() == b"bad"
        assert headers["__connect.errors.topic"] == topic.encode()
        assert headers["__connect.errors.stage"] == b"VALUE_CONVERTER"
        assert headers["__connect.errors.connector.name"] == b"dlq-sink"
        assert int(headers["__connect.errors.offset"]) >= 0
        assert headers["__connect.errors.exception.message"]


@pytest.mark.slow
def test_sink_retriable_put_is_redelivered(broker: SamsaBroker, tmp_path: Path) -> None:
    """A RetriableException from put keeps the batch and hands it again after the task's
    timeout: every record written exactly once, the task RUNNING throughout."""
    topic, out = "flaky-in", tmp_path / "flaky.txt"
    p = Producer({"bootstrap.servers": broker.bootstrap})
    values = [f"v{i}" for i in range(300)]
    for v in values:
        p.produce(topic, value=v.encode())
    p.flush(10)
    with ConnectWorker(broker.bootstrap, tmp_path, props={"plugin.path": PLUGINS}) as w:
        assert w.create("flaky", {"connector.class": "FlakySinkConnector", "topics": topic,
                                  "file": str(out)}).status_code == 201
        got = wait_lines(out, set(values))
        assert w.status("flaky")["tasks"][0]["state"] == "RUNNING"
        assert "retry" not in w.status("flaky")["tasks"][0]
    assert sorted(got) == sorted(values)


def test_offsets_set_in_open_apply_before_any_record_is_delivered(broker: SamsaBroker,
                                                                 tmp_path: Path) -> None:
    """context.offset() called from open() (a sink resuming from offsets kept in its target) takes
    effect before put() sees a record: no record below the requested offset is ever delivered."""
    topic, out = "rewind-in", tmp_path / "rewind.txt"
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(200):
        p.produce(topic, value=f"v{i}".encode(), partition=0)
    p.flush(10)
    with ConnectWorker(broker.bootstrap, tmp_path, props={"plugin.path": PLUGINS}) as w:
        assert w.create("rewind", {"connector.class": "RewindingSinkConnector", "topics": topic,
                                   "file": str(out), "start.offset": "150"}).status_code == 201
        wanted = {f"0 {i}" for i in range(150, 200)}
        got = wait_lines(out, wanted)
    assert sorted(got, key=lambda line: int(line.split()[1])) == \
        sorted(wanted, key=lambda line: int(line.split()[1]))


def test_invalid_config_is_refused_with_per_field_errors(broker: SamsaBroker, tmp_path: Path) -> None:
    with ConnectWorker(broker.bootstrap, tmp_path) as w:
        resp = w.create("bad", {"connector.class": "FileStreamSource", "tasks.max": "zero"})
        assert resp.status_code == 400
        body = resp.json()
        assert body["error_code"] == 400 and "tasks.max" in body["message"]
        v = w.http.put("/connector-plugins/FileStreamSource/config/validate",
                       json={"connector.class": "FileStreamSource", "tasks.max": "zero"}).json()
        by_name = {c["value"]["name"]: c["value"] for c in v["configs"]}
        assert v["error_count"] >= 2
        assert by_name["tasks.max"]["errors"] and by_name["topic"]["errors"]
        # an unknown plugin, and a body that is not JSON: Kafka's codes, the worker unharmed
        resp = w.create("nope", {"connector.class": "com.example.NoSuchConnector"})
        assert resp.status_code == 400
        assert "com.example.NoSuchConnector" in resp.json()["message"]
        resp = w.http.post("/connectors", content=b'{"name": "x", "config": {',
                           headers={"Content-Type": "application/json"})
        assert resp.status_code == 500 and resp.json()["error_code"] == 500
        assert w.http.get("/connectors").json() == []
