"""The Debezium-compatible PostgreSQL CDC source against a real PostgreSQL (pgoutput logical
replication), a real broker and a real Connect worker process: Debezium's envelope and schemas
as JsonConverter writes them, snapshot + streaming, types, filters, transaction metadata,
heartbeats moving the slot, and the errors a user must see in /status."""

from __future__ import annotations

import base64
import decimal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from samsa.testing import SamsaBroker
from samsa.testing.connect import ConnectWorker
from samsa.testing.postgres import PostgresServer
from tests.postgres_cdc_util import cdc_config, confirmed_lsn, read_topic, sql, wait_for


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SamsaBroker]:
    with SamsaBroker(tmp_path_factory.mktemp("broker")) as b:
        yield b


@pytest.fixture(scope="module")
def worker(broker: SamsaBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectWorker]:
    with ConnectWorker(broker.bootstrap, tmp_path_factory.mktemp("worker")) as w:
        yield w


def payloads(records: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    return [(k["payload"] if k else None, v["payload"] if v else None) for k, v in records]


def test_envelope_snapshot_create_update_delete_tombstone(postgres_server: PostgresServer,
                                                          broker: SamsaBroker,
                                                          worker: ConnectWorker) -> None:
    pg, db = postgres_server, "cdc_envelope"
    pg.create_database(db)
    sql(pg, db, "CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL, note text)",
        "INSERT INTO customers VALUES (1, 'ann', 'first'), (2, 'bob', NULL)")
    r = worker.create("env", cdc_config(pg, db, "env"))
    assert r.status_code == 201, r.text
    worker.wait_state("env", "RUNNING", tasks=1)
    snap = read_topic(broker.bootstrap, "env.public.customers", min_count=2)
    assert len(snap) == 2
    (k1, v1), (k2, v2) = snap
    # Debezium's schema names and shapes, as JsonConverter writes them
    assert k1["schema"]["name"] == "env.public.customers.Key"
    assert k1["schema"]["fields"] == [{"type": "int32", "optional": False, "field": "id"}]
    assert v1["schema"]["name"] == "env.public.customers.Envelope"
    fields = {f["field"]: f for f in v1["schema"]["fields"]}
    assert list(fields)[:5] == ["before", "after", "source", "transaction", "op"]
    assert fields["before"]["name"] == "env.public.customers.Value"
    assert fields["before"]["optional"] is True
    assert fields["source"]["name"] == "io.debezium.connector.postgresql.Source"
    assert [f["field"] for f in fields["after"]["fields"]] == ["id", "name", "note"]
    assert {f["field"]: f["optional"] for f in fields["after"]["fields"]} == \
        {"id": False, "name": False, "note": True}
    p1, p2 = v1["payload"], v2["payload"]
    assert k1["payload"] == {"id": 1} and k2["payload"] == {"id": 2}
    assert p1["op"] == "r" and p1["before"] is None
    assert p1["after"] == {"id": 1, "name": "ann", "note": "first"}
    assert p1["source"]["snapshot"] == "true" and p2["source"]["snapshot"] == "last"
    assert p1["source"]["connector"] == "postgresql" and p1["source"]["name"] == "env"
    assert p1["source"]["db"] == db and p1["source"]["schema"] == "public"
    assert p1["source"]["table"] == "customers" and isinstance(p1["source"]["lsn"], int)
    assert isinstance(p1["ts_ms"], int)

    sql(pg, db, "INSERT INTO customers VALUES (3, 'cy', 'x')",
        "UPDATE customers SET name = 'ann2' WHERE id = 1",
        "DELETE FROM customers WHERE id = 2")
    got = payloads(read_topic(broker.bootstrap, "env.public.customers", min_count=6))
    assert len(got) == 6, got
    (kc, c), (ku, u), (kd, d), (kt, t) = got[2:]
    assert kc == {"id": 3} and c["op"] == "c" and c["after"] == {"id": 3, "name": "cy", "note": "x"}
    assert c["before"] is None and c["source"]["snapshot"] == "false"
    assert isinstance(c["source"]["txId"], int) and c["source"]["lsn"] >= p2["source"]["lsn"]
    assert ku == {"id": 1} and u["op"] == "u" and u["after"]["name"] == "ann2"
    assert u["before"] is None  # REPLICA IDENTITY DEFAULT: no old row image
    # delete: before holds the key (other required columns get Debezium's fallback values)
    assert kd == {"id": 2} and d["op"] == "d" and d["after"] is None
    assert d["before"] == {"id": 2, "name": "", "note": None}
    assert kt == {"id": 2} and t is None  # the tombstone

    # REPLICA IDENTITY FULL: updates and deletes carry the whole old row
    sql(pg, db, "ALTER TABLE customers REPLICA IDENTITY FULL",
        "UPDATE customers SET note = 'n' WHERE id = 3", "DELETE FROM customers WHERE id = 1")
    got = payloads(read_topic(broker.bootstrap, "env.public.customers", min_count=9))
    (_, u2), (_, d2), (_, t2) = got[6:9]
    assert u2["before"] == {"id": 3, "name": "cy", "note": "x"}
    assert u2["after"] == {"id": 3, "name": "cy", "note": "n"}
    assert d2["before"] == {"id": 1, "name": "ann2", "note": "first"} and t2 is None
    worker.http.delete("/connectors/env")
