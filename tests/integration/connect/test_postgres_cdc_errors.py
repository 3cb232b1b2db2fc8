"""What a CDC user must see when something is wrong: a missing publication with autocreate
disabled, a dropped slot the stored offsets depend on, unknown user, an unsupported plugin; and
what must not fail: the database going down and coming back (the task reconnects, loses
nothing)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from samsa.testing import SamsaBroker
from samsa.testing.connect import ConnectWorker
from samsa.testing.postgres import PostgresServer
from tests.postgres_cdc_util import cdc_config, read_topic, sql, wait_for, wait_slot_active


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SamsaBroker]:
    with SamsaBroker(tmp_path_factory.mktemp("broker")) as b:
        yield b


@pytest.fixture(scope="module")
def worker(broker: SamsaBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectWorker]:
    with ConnectWorker(broker.bootstrap, tmp_path_factory.mktemp("worker")) as w:
        yield w


def failed_trace(worker: ConnectWorker, name: str) -> str:
    st = worker.wait_state(name, "RUNNING", tasks=0, timeout=30)
    del st
    status = wait_for(lambda: (s := worker.status(name))["tasks"] and
                      s["tasks"][0]["state"] == "FAILED" and s, timeout=30)
    return str(status["tasks"][0]["trace"])


def test_missing_publication_with_autocreate_disabled_fails_clearly(
        postgres_server: PostgresServer, worker: ConnectWorker) -> None:
    pg, db = postgres_server, "cdc_nopub"
    pg.create_database(db)
    sql(pg, db, "CREATE TABLE t (id int PRIMARY KEY)")
    assert worker.create("nopub", cdc_config(pg, db, "nopub", **{
        "publication.autocreate.mode": "disabled"})).status_code == 201
    trace = failed_trace(worker, "nopub")
    assert "Publication 'pub_nopub' does not exist" in trace
    assert "publication.autocreate.mode" in trace
    worker.http.delete("/connectors/nopub")


def test_dropped_slot_with_snapshot_never_fails_clearly(
        postgres_server: PostgresServer, broker: SamsaBroker, worker: ConnectWorker) -> None:
    pg, db = postgres_server, "cdc_dropslot"
    pg.create_database(db)
    sql(pg, db, "CREATE TABLE t (id int PRIMARY KEY)")
    assert worker.create("drop", cdc_config(pg, db, "drop", **{
        "snapshot.mode": "never", "slot.drop.on.stop": "false"})).status_code == 201
    worker.wait_state("drop", "RUNNING", tasks=1)
    wait_slot_active(pg, db, "slot_drop")
    sql(pg, db, "INSERT INTO t VALUES (1)")
    assert len(read_topic(broker.bootstrap, "drop.public.t", min_count=1)) == 1
    time.sleep(1.5)  # the worker flushes offsets every second
    assert worker.http.put("/connectors/drop/stop").status_code in (202, 204)
    wait_for(lambda: not sql(pg, db, "SELECT 1 FROM pg_replication_slots WHERE active AND "
                                     "slot_name = 'slot_drop'"))
    sql(pg, db, "SELECT pg_drop_replication_slot('slot_drop')")
    assert worker.http.put("/connectors/drop/resume").status_code == 202
    trace = failed_trace(worker, "drop")
    assert "Replication slot 'slot_drop' does not exist" in trace
    assert "changes since then are gone" in trace
    # snapshot.mode=when_needed recovers: a new slot and a new snapshot of the table
    sql(pg, db, "INSERT INTO t VALUES (2)")
    cfg = cdc_config(pg, db, "drop", **{"snapshot.mode": "when_needed"})
    assert worker.http.put("/connectors/drop/config", json=cfg).status_code in (200, 201)
    worker.wait_state("drop", "RUNNING", tasks=1)
    got = read_topic(broker.bootstrap, "drop.public.t", min_count=3)
    assert [(k["payload"]["id"], v["payload"]["op"]) for k, v in got][:3] == \
        [(1, "c"), (1, "r"), (2, "r")]
    worker.http.delete("/connectors/drop")


def test_unknown_user_fails_and_wrong_plugin_is_refused(
        postgres_server: PostgresServer, worker: ConnectWorker) -> None:
    pg, db = postgres_server, "cdc_baduser"
    pg.create_database(db)
    assert worker.create("baduser", cdc_config(pg, db, "baduser", **{
        "database.user": "nosuchuser"})).status_code == 201
    trace = failed_trace(worker, "baduser")
    assert 'role "nosuchuser" does not exist' in trace
    worker.http.delete("/connectors/baduser")
    r = worker.create("badplugin", cdc_config(pg, db, "badplugin", **{
        "plugin.name": "decoderbufs"}))
    assert r.status_code == 400
    assert "pgoutput" in r.text


def test_database_down_and_back_reconnects_without_loss(broker: SamsaBroker,
                                                        worker: ConnectWorker) -> None:
    with PostgresServer() as pg:
        db = "cdc_down"
        pg.create_database(db)
        sql(pg, db, "CREATE TABLE t (id int PRIMARY KEY)", "INSERT INTO t VALUES (1)")
        assert worker.create("down", cdc_config(pg, db, "down")).status_code == 201
        worker.wait_state("down", "RUNNING", tasks=1)
        wait_slot_active(pg, db, "slot_down")
        sql(pg, db, "INSERT INTO t VALUES (2)")
        assert len(read_topic(broker.bootstrap, "down.public.t", min_count=2)) == 2
        pg.kill()
        time.sleep(1.0)
        pg.start()
        sql(pg, db, "INSERT INTO t VALUES (3)", "DELETE FROM t WHERE id = 1")
        got = read_topic(broker.bootstrap, "down.public.t", min_count=5, timeout=60)
        ops = [(k["payload"]["id"], v["payload"]["op"] if v else None) for k, v in got]
        # at-least-once across the outage: every change is there, in order
        assert [o for o in ops if o[1] != "r" or o[0] == 1][:1] == [(1, "r")]
        assert ops[-3:] == [(3, "c"), (1, "d"), (1, None)]
        assert {(2, "c")} <= set(ops)
        assert worker.status("down")["tasks"][0]["state"] == "RUNNING"
        worker.http.delete("/connectors/down")
