"""Registry and Connect metrics of `samsa serve` with the embedded schema registry and Connect
worker, read from the broker's /metrics."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from samsa.testing import SamsaBroker, free_port
from tests.cluster_util import wait_until


def scrape(url: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    text = httpx.get(url + "/metrics", timeout=10).text
    return {(s.name, frozenset(s.labels.items())): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


@pytest.mark.slow
def test_registry_and_connect_metrics(tmp_path: Path) -> None:
    rport, cport = free_port(), free_port()
    src = tmp_path / "in.txt"
    src.write_text("".join(f"row-{i}\n" for i in range(10)))
    with SamsaBroker(tmp_path / "b", overrides={
            "schema.registry.enable": "true",
            "schema.registry.listeners": f"http://127.0.0.1:{rport}",
            "connect.enable": "true", "connect.listeners": f"http://127.0.0.1:{cport}"}) as b:
        assert b.admin_url
        registry, connect = f"http://127.0.0.1:{rport}", f"http://127.0.0.1:{cport}"
        def up() -> bool:
            try:
                return httpx.get(connect + "/health", timeout=5).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until("the Connect worker", up, 90, 0.3)
        m = scrape(b.admin_url)
        assert m[("kafka_schema_registry_registered_count", frozenset())] == 0
        assert m[("kafka_schema_registry_master_slave_role", frozenset())] == 1
        assert m[("kafka_connect_worker_connector_count", frozenset())] == 0
        r = httpx.post(registry + "/subjects/metrics-value/versions", json={
            "schema": '{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}'})
        assert r.status_code == 200, r.text
        r = httpx.post(connect + "/connectors", timeout=30, json={"name": "metrics-src", "config": {
            "connector.class": "FileStreamSource", "topic": "metrics-rows", "file": str(src)}})
        assert r.status_code == 201, r.text
        running = {"connector": "metrics-src", "task": "0", "status": "running"}
        wait_until("the task running in the metrics", lambda: scrape(b.admin_url).get(
            ("kafka_connect_connector_status", frozenset(running.items()))) == 1, 60, 0.3)
        m = scrape(b.admin_url)
        assert m[("kafka_schema_registry_registered_count", frozenset())] == 1
        assert m[("kafka_schema_registry_schemas_created",
                  frozenset({"schema_type": "avro"}.items()))] == 1
        assert m[("kafka_connect_worker_connector_count", frozenset())] == 1
        assert m[("kafka_connect_worker_task_count", frozenset())] == 1
        from tests.integration.test_metrics_http import dashboard_metrics

        names = {name for name, _ in m}
        assert {d for d in dashboard_metrics()
                if d.startswith(("kafka_schema_registry_", "kafka_connect_"))} <= names
