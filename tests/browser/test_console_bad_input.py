"""Bad input to the console (served by the broker's admin listener): garbage paths, huge and
negative offsets, unknown topics, partitions and groups, undecodable records, an unreachable
cluster and registry. Every answer is a page saying what is wrong, never a stack trace."""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.console.context import ConsoleContext
from samsa.testing import free_port

from .consoleserver import ConsoleServer

TOPIC = "bad-input"
PROTO = 'syntax = "proto3";\npackage t;\nmessage M { string name = 1; int64 n = 2; }\n'


@pytest.fixture(scope="module")
def http(stack: dict[str, Any]) -> Iterator[httpx.Client]:
    admin = AdminClient({"bootstrap.servers": stack["broker"].bootstrap})
    admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(15)
    with httpx.Client(base_url=stack["console"], timeout=30) as client:
        yield client


def _clear(r: httpx.Response, status: int, *words: str) -> str:
    """A console page (not a bare error), with this status, containing these words."""
    text = r.text
    assert r.status_code == status, (r.status_code, text[-600:])
    assert "Traceback" not in text and 'File "' not in text
    assert "<h1>" in text, text[:300]
    for w in words:
        assert w.lower() in text.lower(), (w, text[-800:])
    return text


@pytest.mark.parametrize("path", [
    "/no/such/page", "/topics/bad-input/messages/extra", "/%ff%fe", "/static/../app.py",
    "/" + "a" * 4000, "/topics/%00", "/groups/x/y/z",
])
def test_garbage_paths(http: httpx.Client, path: str) -> None:
    r = http.get(path)
    assert r.status_code == 404, r.status_code
    assert "Traceback" not in r.text


def test_wrong_method_is_a_page(http: httpx.Client) -> None:
    _clear(http.post("/groups", data={"x": "1"}), 405, "not supported")
    _clear(http.delete("/topics"), 405)


@pytest.mark.parametrize("query,status,words", [
    ("mode=offset&value=9223372036854775807", 200, ["past the end"]),
    ("mode=offset&value=99999999999999999999", 400, ["out of range"]),
    ("mode=offset&value=-5", 200, ["before the log start"]),
    ("mode=offset&value=abc", 400, ["whole number"]),
    ("mode=timestamp&value=not-a-time", 400, ["not a time"]),
    ("mode=timestamp&value=99999999999999", 200, []),
    ("mode=sideways", 400, ["unknown start"]),
    ("partition=99", 404, ["no partition 99"]),
    ("partition=-1", 404, ["no partition -1"]),
    ("limit=0", 400, ["limit must be"]),
    ("limit=100000000", 400, ["limit must be"]),
    ("positions=garbage", 400, ["bad positions"]),
    ("positions=0:99999999999,1:-3", 200, []),
])
def test_message_browser_bad_positions(http: httpx.Client, query: str, status: int,
                                       words: list[str]) -> None:
    _clear(http.get(f"/topics/{TOPIC}/messages?{query}"), status, *words)


@pytest.mark.parametrize("path", ["/topics/nope", "/topics/nope/messages", "/topics/nope/produce",
                                  "/topics/nope/tail", "/schemas/nope-value"])
def test_unknown_things(http: httpx.Client, path: str) -> None:
    _clear(http.get(path), 404, "nope")


def test_unknown_topic_is_not_created_by_looking(http: httpx.Client, stack: dict[str, Any]) -> None:
    http.get("/topics/ghost/messages")
    md = AdminClient({"bootstrap.servers": stack["broker"].bootstrap}).list_topics(timeout=10)
    assert "ghost" not in md.topics


def test_bad_forms(http: httpx.Client) -> None:
    _clear(http.post("/topics", data={"name": "bad name!", "partitions": "1"}), 400, "cannot create")
    _clear(http.post("/topics", data={"name": "x", "partitions": "lots"}), 400, "whole number")
    _clear(http.post("/topics", data={"name": "x", "configs": "novalue"}), 400, "key=value")
    _clear(http.post(f"/topics/{TOPIC}/config", data={"other": "no.such.config", "value": "1"}), 400,
           "no.such.config")
    _clear(http.post(f"/topics/{TOPIC}/delete", data={"confirm": "wrong"}), 400, "to confirm")
    _clear(http.post(f"/topics/{TOPIC}/partitions", data={"total": "1"}), 400, "cannot grow")
    _clear(http.post("/groups/g/reset", data={"topic": TOPIC, "strategy": "offset", "value": "x"}), 400,
           "whole number")
    _clear(http.post(f"/topics/{TOPIC}/produce?subject=nope-value", data={"raw": "{}"}), 404, "not found")
    _clear(http.post("/topics", content=b"\xff\xfe" * 10,
                     headers={"content-type": "application/x-www-form-urlencoded"}), 400)
    _clear(http.post("/connect", data={"json": '{"name": "c", "config": {}}'}), 404,
           "no kafka connect worker")
    # the topic survived the refused delete
    _clear(http.get(f"/topics/{TOPIC}"), 200, "partitions")


def test_forms_from_other_sites_are_refused(http: httpx.Client) -> None:
    evil = {"Origin": "http://evil.example"}
    _clear(http.post(f"/topics/{TOPIC}/delete", data={"confirm": TOPIC}, headers=evil), 403,
           "another site")
    _clear(http.post(f"/topics/{TOPIC}/delete", data={"confirm": TOPIC}, headers={"Origin": "null"}), 403)
    _clear(http.get(f"/topics/{TOPIC}"), 200, "partitions")  # still there
    same = {"Origin": str(http.base_url).rstrip("/")}
    _clear(http.post("/topics", data={"name": "same-origin", "partitions": "1"}, headers=same,
                     follow_redirects=True), 200, "created topic same-origin")


def test_undecodable_records_are_shown_not_fatal(http: httpx.Client, stack: dict[str, Any]) -> None:
    reg = httpx.post(stack["registry"] + "/subjects/undecodable-value/versions",
                     json={"schema": PROTO, "schemaType": "PROTOBUF"}, timeout=30)
    assert reg.status_code == 200, reg.text
    sid = reg.json()["id"]
    p = Producer({"bootstrap.servers": stack["broker"].bootstrap})
    values = [
        b"\x00" + struct.pack(">I", 987654) + b"payload",         # a schema id the registry lacks
        b"\x00" + struct.pack(">I", sid) + b"\x00\xff\xff\xff",    # Protobuf id, garbage message
        b"\x00" + struct.pack(">I", sid) + b"\x99",                # bad message-index varint
        b"\x00\x01",                                               # too short to be framed
        bytes(range(256)),                                         # binary, not UTF-8
        b'{"json": true}',
    ]
    for v in values:
        p.produce(TOPIC, value=v, partition=0)
    assert p.flush(15) == 0
    text = _clear(http.get(f"/topics/{TOPIC}/messages?mode=beginning&partition=0&limit=50"), 200,
                  "schema id 987654", "not decodable with schema id", "hex")
    assert text.count('<span class="kind') >= 2 * len(values)
    _clear(http.get(f"/topics/{TOPIC}/messages?mode=beginning&search=payload"), 200, "987654")


def test_live_tails_are_bounded_and_released(http: httpx.Client, standalone: ConsoleServer,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    import samsa.console.state as console_state

    monkeypatch.setattr(console_state, "MAX_TAILS", 2)
    state = standalone.app.state.console
    url = f"{standalone.url}/topics/{TOPIC}/tail"
    with httpx.Client(timeout=30) as client:
        streams = [client.stream("GET", url) for _ in range(2)]
        lines = []  # held: a dropped line iterator closes its response
        for s in streams:
            r = s.__enter__()
            assert r.status_code == 200
            lines.append(r.iter_lines())
            assert next(lines[-1]).startswith(": tail started")
        assert state.tails == 2
        _clear(client.get(url), 503, "maximum of live tails")
        for s in streams:
            s.__exit__(None, None, None)
    deadline = time.monotonic() + 15
    while state.tails and time.monotonic() < deadline:
        time.sleep(0.1)
    assert state.tails == 0  # closed streams give their consumers back


def test_unreachable_cluster_and_registry() -> None:
    dead = f"127.0.0.1:{free_port()}"
    ctx = ConsoleContext(dead, registry_url=f"http://{dead}", connect_url=f"http://{dead}")
    with ConsoleServer(ctx) as console, httpx.Client(base_url=console.url, timeout=60) as client:
        _clear(client.get("/"), 503, "cannot reach the cluster")
        _clear(client.get("/schemas"), 503, "unreachable")
        _clear(client.get("/connect"), 503, "unreachable")
