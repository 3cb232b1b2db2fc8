"""`samsa serve --connect`: a distributed Connect worker inside the broker process, reachable on
its REST listener, storing its state in the broker's own connect-* topics."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from confluent_kafka.admin import AdminClient

from samsa.testing import SamsaBroker, free_port


@pytest.mark.slow
def test_broker_with_embedded_connect_worker(tmp_path: Path) -> None:
    port = free_port()
    src = tmp_path / "in.txt"
    src.write_text("".join(f"row-{i}\n" for i in range(100)))
    with SamsaBroker(tmp_path / "b", overrides={"connect.enable": "true",
                                               "connect.listeners": f"http://127.0.0.1:{port}",
                                               "connect.worker.offset.flush.interval.ms": "500"}) \
            as b, httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if http.get("/health").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        assert http.get("/").json()["kafka_cluster_id"]
        r = http.post("/connectors", json={"name": "embedded-src", "config": {
            "connector.class": "FileStreamSource", "topic": "embedded-rows", "file": str(src)}})
        assert r.status_code == 201, r.text
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            st = http.get("/connectors/embedded-src/status").json()
            if st.get("tasks") and st["tasks"][0]["state"] == "RUNNING":
                break
            time.sleep(0.2)
        assert st["tasks"][0]["state"] == "RUNNING", st
        # the source's topic is auto-created by its first produce, which may follow RUNNING
        want = {"connect-configs", "connect-offsets", "connect-status", "embedded-rows"}
        deadline = time.monotonic() + 30
        topics = set(admin.list_topics(timeout=10).topics)
        while not want <= topics and time.monotonic() < deadline:
            time.sleep(0.2)
            topics = set(admin.list_topics(timeout=10).topics)
        assert want <= topics
        offsets = {}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            offsets = http.get("/connectors/embedded-src/offsets").json()
            if offsets.get("offsets"):
                break
            time.sleep(0.3)
        assert offsets["offsets"][0]["partition"] == {"filename": str(src)}
        assert offsets["offsets"][0]["offset"]["position"] > 0
