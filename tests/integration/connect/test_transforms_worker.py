"""Transforms and predicates in a real standalone worker against a real broker: a file source's
lines are routed by RegexRouter, get a header from InsertHeader, and pass a Filter whose negated
predicate keeps them; a bad transform config is refused at creation with per-key errors."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer

from samsa.testing import SamsaBroker
from samsa.testing.connect import ConnectWorker

pytest.importorskip("samsa.connect.converters")  # the worker's String converters

T = "org.apache.kafka.connect.transforms."


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory):
    with SamsaBroker(tmp_path_factory.mktemp("broker")) as b:
        yield b


def consume(bootstrap: str, topic: str, want: int, timeout: float = 30.0) -> list:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"smt-{time.monotonic_ns()}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got: list = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and len(got) < want:
        got += [m for m in c.consume(100, 0.3) if m.error() is None]
    c.close()
    return got


def test_transform_chain_in_a_worker(broker: SamsaBroker, tmp_path: Path) -> None:
    src = tmp_path / "in.txt"
    lines = [f"line-{i}" for i in range(20)]
    src.write_text("".join(x + "\n" for x in lines))
    with ConnectWorker(broker.bootstrap, tmp_path) as w:
        resp = w.create("smt-src", {
            "connector.class": "FileStreamSource", "topic": "lines-a", "file": str(src),
            "transforms": "route,hdr,keep",
            "transforms.route.type": T + "RegexRouter",
            "transforms.route.regex": "lines-(.*)", "transforms.route.replacement": "routed-$1",
            "transforms.hdr.type": T + "InsertHeader",
            "transforms.hdr.header": "origin", "transforms.hdr.value.literal": "file",
            # drops what is NOT routed: nothing, since every record was routed before
            "transforms.keep.type": T + "Filter", "transforms.keep.predicate": "routed",
            "transforms.keep.negate": "true",
            "predicates": "routed",
            "predicates.routed.type": T + "predicates.TopicNameMatches",
            "predicates.routed.pattern": "routed-.*"})
        assert resp.status_code == 201, resp.text
        w.wait_state("smt-src")
        got = consume(broker.bootstrap, "routed-a", len(lines))
        assert sorted(m.value().decode() for m in got) == sorted(lines), w.log_tail()
        for m in got:
            assert m.topic() == "routed-a"
            assert ("origin", b"file") in list(m.headers() or [])

        bad = w.create("smt-bad", {
            "connector.class": "FileStreamSource", "topic": "x", "file": str(src),
            "transforms": "route", "transforms.route.type": T + "RegexRouter",
            "transforms.route.regex": "(.*)"})
        assert bad.status_code == 400
        assert "transforms.route.replacement" in bad.json()["message"]
