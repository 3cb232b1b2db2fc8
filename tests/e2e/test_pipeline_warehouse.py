"""The Spark job's exactly-once warehouse writer (samsa.pipeline.warehouse) on real DuckDB files and
a real PostgreSQL: a replayed batch id is skipped, values are absolute (upserts), a second writer
cannot record a batch twice, and an outage of PostgreSQL is retried through. No Spark needed."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("duckdb")
pytest.importorskip("psycopg")

from samsa.connect.connectors.sql import open_database  # noqa: E402
from samsa.pipeline import warehouse as wh  # noqa: E402
from samsa.testing.postgres import PostgresServer  # noqa: E402

W0, W1 = 1_795_536_000_000, 1_795_536_060_000


@pytest.fixture(params=["duckdb", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "duckdb":
        return f"duckdb:{tmp_path / 'w.duckdb'}"
    pg: PostgresServer = request.getfixturevalue("postgres_server")
    return pg.create_database(f"pipeline_wh_{int(time.time() * 1000) % 10**9}")


def test_replayed_batch_is_skipped_and_values_are_absolute(url: str) -> None:
    w = wh.BatchWriter(url)
    try:
        r0 = w.write("q1", 0, [(W0, W1, "P-001", 2, 3, 300), (W0, W1, "P-002", 1, 1, 50)])
        # batch 1 carries the window's new absolute value, not an increment
        r1 = w.write("q1", 1, [(W0, W1, "P-001", 5, 9, 900)])
        # a crash before Spark's commit log: batch 1 re-runs with the same rows -> skipped
        replay = w.write("q1", 1, [(W0, W1, "P-001", 5, 9, 900)])
    finally:
        w.close()
    assert (r0.skipped, r1.skipped, replay.skipped) == (False, False, True)
    with open_database(url) as db:
        assert wh.read_revenue(db) == {(W0, "P-001"): (5, 9, 900), (W0, "P-002"): (1, 1, 50)}
        assert wh.batches_committed(db) == 2


def test_a_second_writer_cannot_record_the_same_batch(postgres_server: PostgresServer) -> None:
    """A zombie driver and its replacement race for batch 7: while the other one's transaction
    holding batch 7 is open, this writer's insert of the batch record waits, then fails on the
    primary key when the other commits, and its rows roll back with it."""
    import psycopg

    from samsa.connect.errors import ConnectException

    url = postgres_server.create_database("pipeline_wh_race")
    w = wh.BatchWriter(url)
    other = psycopg.connect(url)
    try:
        other.execute(f"INSERT INTO {wh.BATCHES} VALUES ('q2', 7, 1, now())")  # open transaction
        errors: list[BaseException] = []

        def write() -> None:
            try:
                w.write("q2", 7, [(W0, W1, "P-003", 99, 99, 9900)])
            except BaseException as e:
                errors.append(e)

        t = threading.Thread(target=write)
        t.start()
        time.sleep(1.0)
        assert t.is_alive()  # waiting for the other transaction's batch row
        other.commit()
        t.join(30)
        assert not t.is_alive()
    finally:
        other.close()
        w.close()
    assert len(errors) == 1 and isinstance(errors[0], ConnectException), errors
    with open_database(url) as db:
        assert (W0, "P-003") not in wh.read_revenue(db)
        assert wh.batches_committed(db) == 1


def test_postgres_outage_is_retried(postgres_server: PostgresServer) -> None:
    url = postgres_server.create_database("pipeline_wh_outage")
    w = wh.BatchWriter(url)
    try:
        w.write("q3", 0, [(W0, W1, "P-004", 1, 2, 20)])
        postgres_server.kill()
        threading.Timer(3.0, postgres_server.start).start()
        res = w.write("q3", 1, [(W0, W1, "P-004", 2, 4, 40)])  # retried until the server is back
    finally:
        w.close()
    assert not res.skipped
    with open_database(url) as db:
        assert wh.read_revenue(db)[(W0, "P-004")] == (2, 4, 40)
        assert wh.batches_committed(db) == 2
