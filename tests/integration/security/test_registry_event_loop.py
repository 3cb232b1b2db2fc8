"""The embedded schema registry shares the broker's event loop: a compatibility check or lookup
of a big schema (its cost is the client's choice) runs on a thread, so Kafka requests keep being
answered while it computes; a body nested too deeply is a 400, not an internal error."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from samsa.testing import SamsaBroker, free_port
from samsa.testing.registry import wait_http
from tests.wire import Wire

pytestmark = pytest.mark.timeout(180)
CT = {"Content-Type": "application/vnd.schemaregistry.v1+json"}
FIELDS = 8000


def _schema(defaults_from: int) -> str:
    return json.dumps({"type": "record", "name": "R", "fields": [
        {"name": f"f{i}", "type": "long", **({"default": 0} if i >= defaults_from else {})}
        for i in range(FIELDS)]})


@pytest.fixture(scope="module")
def stack() -> Iterator[tuple[SamsaBroker, str]]:
    rport = free_port()
    with SamsaBroker(overrides={"schema.registry.enable": "true",
                                "schema.registry.listeners": f"http://127.0.0.1:{rport}"}) as b:
        url = f"http://127.0.0.1:{rport}"
        wait_http(url, 30)
        r = httpx.post(url + "/subjects/big/versions", content=json.dumps({"schema": _schema(FIELDS)}),
                       headers=CT, timeout=120)
        assert r.status_code == 200
        yield b, url


def test_kafka_requests_are_served_during_a_big_compatibility_check(
        stack: tuple[SamsaBroker, str]) -> None:
    """Kafka requests sent while the check runs are answered throughout it: no gap between two
    answers comes near the check's own duration (on the event loop, one gap was most of it).
    A relation between two measured durations, no fixed time bound."""
    broker, url = stack
    done = threading.Event()
    result: list[httpx.Response] = []
    body = json.dumps({"schema": _schema(FIELDS - 10)})

    def check() -> None:
        try:
            result.append(httpx.post(url + "/compatibility/subjects/big/versions/latest",
                                     content=body, headers=CT, timeout=120))
        finally:
            done.set()

    w = Wire(broker.bootstrap, timeout=60)
    t = threading.Thread(target=check)
    answers: list[float] = []
    try:
        start = time.monotonic()
        t.start()
        for _ in range(100_000):
            if done.is_set():
                break
            assert w.request(18, 3, {"client_software_name": "t",
                                     "client_software_version": "1"}).error_code == 0
            answers.append(time.monotonic())
        t.join(120)
        end = time.monotonic()
    finally:
        w.close()
    assert result and result[0].status_code == 200 and result[0].json() == {"is_compatible": True}
    marks = [start, *answers]
    longest_gap = max(b - a for a, b in zip(marks, marks[1:], strict=False)) if answers else end - start
    assert longest_gap < (end - start) / 3


def test_deeply_nested_body_is_a_bad_request(stack: tuple[SamsaBroker, str]) -> None:
    _, url = stack
    r = httpx.post(url + "/subjects/big", content="[" * 100_000 + "]" * 100_000, headers=CT,
                   timeout=60)
    assert r.status_code == 400 and "Internal" not in r.text
