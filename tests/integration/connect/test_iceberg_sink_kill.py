"""Exactly-once into Iceberg across crashes: a worker with two sink tasks (sharing one table,
committing concurrently) is kill -9'd five times while records load; the table ends with every
record exactly once, with its content, and the snapshot summary's offsets at the end."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from samsa.testing import SamsaBroker
from samsa.testing.connect import ConnectWorker
from tests.integration.connect.iceberg_helpers import (
    catalog_of,
    create_topic,
    produce,
    read_all,
    wait_rows,
)

pytestmark = pytest.mark.timeout(400)

WAVES, PER_WAVE = 6, 10_000


def row(i: int) -> dict[str, object]:
    return {"id": i, "name": f"n{i}", "amount": i * 0.5, "kind": f"k{i % 7}"}


def current_rows(catalog, name: str) -> int:  # type: ignore[no-untyped-def]
    try:
        table = catalog.load_table(name)
    except Exception:
        return 0
    return table.scan().to_arrow().num_rows if table.current_snapshot() else 0


@pytest.mark.slow
def test_exactly_once_across_five_kill9(samsa_broker: SamsaBroker, tmp_path: Path) -> None:
    topic, table_name, n = "ice-kill", "load.events", WAVES * PER_WAVE
    create_topic(samsa_broker.bootstrap, topic, 2)
    warehouse = tmp_path / "warehouse"
    connector = tmp_path / "iceberg-sink.json"
    connector.write_text(json.dumps({"name": "ice-kill-sink", "config": {
        "connector.class": "io.tabular.iceberg.connect.IcebergSinkConnector",
        "tasks.max": "2", "topics": topic,
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
        "iceberg.tables": table_name, "iceberg.tables.auto-create-enabled": "true",
        "iceberg.tables.default-partition-by": "kind",
        "iceberg.catalog.warehouse": str(warehouse),
        "iceberg.control.commit.interval-ms": "300"}}))
    worker = ConnectWorker(samsa_broker.bootstrap, tmp_path / "worker", connector_files=[connector],
                           props={"offset.flush.interval.ms": "200"})
    values = [json.dumps(row(i)).encode() for i in range(n)]
    catalog = None
    kills = 0
    try:
        worker.start()
        for wave in range(WAVES):
            chunk = values[wave * PER_WAVE:(wave + 1) * PER_WAVE]
            before = current_rows(catalog, table_name) if catalog is not None else 0
            produce(samsa_broker.bootstrap, topic, chunk, partitions=2)
            if wave == WAVES - 1:
                break
            # kill -9 once this wave has started landing (commits every 300 ms: mid-load)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                if catalog is None and (warehouse / "catalog.db").exists():
                    catalog = catalog_of(warehouse)
                if catalog is not None and current_rows(catalog, table_name) > before:
                    break
                time.sleep(0.1)
            else:
                raise AssertionError(f"no progress in wave {wave}\n{worker.log_tail()}")
            worker.kill()
            kills += 1
            worker.start()
        assert kills == 5
        assert catalog is not None
        table = wait_rows(catalog, table_name, n, timeout=120, log=worker.log_tail)
        time.sleep(2.0)  # later commits would only add duplicates: there must be none
        table = catalog.load_table(table_name)
        rows = read_all(table)
        ids = rows.column("id").to_pylist()
        assert len(ids) == n, f"{len(ids) - len(set(ids))} duplicates, {n - len(set(ids))} missing"
        assert sorted(ids) == list(range(n))
        got = sorted(rows.to_pylist(), key=lambda r: r["id"])
        assert got == [row(i) for i in range(n)]
        # each commit records its task's partitions; the newest record per partition is the end
        key = f"kafka.connect.offsets.{topic}.connect-ice-kill-sink"
        newest: dict[str, int] = {}
        for snap in sorted(table.snapshots(), key=lambda s: s.sequence_number or 0):
            props = snap.summary.additional_properties if snap.summary else {}
            newest.update(json.loads(props.get(key, "{}")))
        assert newest == {"0": n // 2, "1": n // 2}
        assert len(list(table.snapshots())) > WAVES  # many commits, interrupted five times
    finally:
        worker.stop()
        worker.http.close()
