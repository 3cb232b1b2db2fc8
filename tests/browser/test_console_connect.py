"""The console's connector pages against a real Connect worker (a FileStreamSource): create from
JSON, status and tasks, pause/resume/restart, offsets, delete; bad JSON is a clear page."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from samsa.console.context import ConsoleContext
from samsa.testing import SamsaBroker
from samsa.testing.connect import ConnectWorker

from .consoleserver import ConsoleServer

FILE_SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, Path]]:
    work = tmp_path_factory.mktemp("connect")
    with SamsaBroker(work / "broker", overrides={"admin.http.listeners": ""}) as b, \
            ConnectWorker(b.bootstrap, work / "worker", props={"offset.flush.interval.ms": "300"}) as w, \
            ConsoleServer(ConsoleContext(b.bootstrap, connect_url=w.url)) as c, \
            httpx.Client(base_url=c.url, timeout=30) as client:
        yield client, work


def _state(client: httpx.Client, name: str, want: str, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    page = ""
    while time.monotonic() < deadline:
        page = client.get(f"/connect/{name}").text
        if f"State <b>{want}</b>" in page:
            return page
        time.sleep(0.3)
    raise AssertionError(f"{name} never {want}: {page[-1500:]}")


def test_connector_lifecycle(console: tuple[httpx.Client, Path]) -> None:
    client, work = console
    src = work / "lines.txt"
    src.write_text("one\ntwo\n")
    assert "no connectors" in client.get("/connect").text
    body = {"name": "files", "config": {"connector.class": FILE_SOURCE, "file": str(src),
                                        "topic": "file-lines", "tasks.max": "1"}}
    r = client.post("/connect", data={"json": json.dumps(body)})
    assert r.status_code == 303 and r.headers["location"].startswith("/connect/files")
    page = _state(client, "files", "RUNNING")
    assert "file-lines" in page and "<h2>Offsets</h2>" in page
    assert "files" in client.get("/connect").text
    for action, state in (("pause", "PAUSED"), ("resume", "RUNNING"), ("restart", "RUNNING")):
        r = client.post(f"/connect/files/{action}")
        assert r.status_code == 303, r.text[-500:]
        _state(client, "files", state)
    # the records reached the topic: the console's own browser shows them
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and "two" not in client.get(
            "/topics/file-lines/messages?mode=beginning").text:
        time.sleep(0.3)
    assert "two" in client.get("/topics/file-lines/messages?mode=beginning").text
    r = client.post("/connect/files/delete")
    assert r.status_code == 303
    assert "no connectors" in client.get("/connect").text


def test_bad_connector_input(console: tuple[httpx.Client, Path]) -> None:
    client, _ = console
    for text, words in (("{not json", "not valid JSON"), ('{"name": "x"}', "expected"),
                        ('{"name": "x", "config": {"connector.class": "NoSuch"}}', "Connect refused")):
        r = client.post("/connect", data={"json": text})
        assert r.status_code == 400 and words in r.text and "Traceback" not in r.text, r.text[-600:]
    r = client.get("/connect/nope")
    assert r.status_code == 404 and "Traceback" not in r.text
    r = client.post("/connect/nope/explode")
    assert r.status_code == 404
