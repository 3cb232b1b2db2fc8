"""Exactly-once into PostgreSQL across crashes: 100,000 records (upserts and tombstones over 10,000
keys, 3 partitions) while the Connect worker is kill -9'd 5 times mid-load. Two sinks read the
same topic in the same worker: an upsert sink (record_key, delete.enabled) whose table must equal
the final state per key, and a keyless insert sink (tombstones filtered out by an SMT) where a row
written twice or never would show in the count and the content."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from jdbc_sink_helpers import JDBC, JSON, envelope, field, query, stored_progress, struct, wait_for

from samsa.testing import SamsaBroker
from samsa.testing.connect import ConnectWorker
from samsa.testing.postgres import PostgresServer

pytestmark = pytest.mark.timeout(300)

TOTAL = 100_000
KEYS = 10_000
KILLS = 5
TOPIC = "jdbc-kill"
KEY = {"type": "int64", "optional": False}
VALUE = struct(field("seq", "int64"), field("name", "string"), field("amount", "double", True))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SamsaBroker]:
    with SamsaBroker(tmp_path_factory.mktemp("broker")) as b:
        yield b


def write_props(path: Path, props: dict[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


def produce_all(bootstrap: str) -> tuple[dict[int, tuple[int, str, float | None]], set[int]]:
    """The records, and what they leave behind: final row per key, and every non-tombstone seq."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 3, 1)])[TOPIC].result(30)
    rng = random.Random(16)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
                  "queue.buffering.max.messages": 200_000, "compression.type": "lz4"})
    final: dict[int, tuple[int, str, float | None]] = {}
    written: set[int] = set()
    for seq in range(TOTAL):
        key = rng.randrange(KEYS)
        if key in final and rng.random() < 0.12:
            p.produce(TOPIC, key=envelope(KEY, key), value=None)
            del final[key]
        else:
            amount = None if seq % 7 == 0 else seq / 8
            p.produce(TOPIC, key=envelope(KEY, key),
                      value=envelope(VALUE, {"seq": seq, "name": f"k{key}-s{seq}", "amount": amount}))
            final[key] = (seq, f"k{key}-s{seq}", amount)
            written.add(seq)
        if seq % 20_000 == 0:
            p.poll(0)
    assert p.flush(60) == 0
    return final, written


@pytest.mark.slow
def test_exactly_once_across_five_kill9(broker: SamsaBroker, postgres_server: PostgresServer,
                                        tmp_path: Path) -> None:
    dsn = postgres_server.create_database("jdbc_kill")
    url = postgres_server.jdbc_url("jdbc_kill")
    final, written = produce_all(broker.bootstrap)
    common = {"connector.class": JDBC, "tasks.max": "1", "topics": TOPIC, "connection.url": url,
              "connection.user": "postgres", "auto.create": "true", "batch.size": "5000",
              "key.converter": JSON, "key.converter.schemas.enable": "true",
              "value.converter": JSON, "value.converter.schemas.enable": "true"}
    files = [
        write_props(tmp_path / "upsert.properties", {
            **common, "name": "kill-upsert", "insert.mode": "upsert", "pk.mode": "record_key",
            "pk.fields": "id", "delete.enabled": "true", "table.name.format": "kill_state"}),
        write_props(tmp_path / "insert.properties", {
            **common, "name": "kill-insert", "insert.mode": "insert", "pk.mode": "none",
            "table.name.format": "kill_log", "transforms": "dropTombstones",
            "transforms.dropTombstones.type": "org.apache.kafka.connect.transforms.Filter",
            "transforms.dropTombstones.predicate": "isTombstone", "predicates": "isTombstone",
            "predicates.isTombstone.type":
                "org.apache.kafka.connect.transforms.predicates.RecordIsTombstone"}),
    ]
    names = ("kill-upsert", "kill-insert")

    def progress() -> int:
        return sum(stored_progress(dsn, n) for n in names)

    w = ConnectWorker(broker.bootstrap, tmp_path, connector_files=files)
    kills_mid_load = 0
    try:
        w.start()
        for _ in range(KILLS):
            base = progress()
            # kill once this run has written a few batches: mid-load, mid-transaction at random
            wait_for(lambda b=base: progress() >= b + 6000, 90, "the sinks to make progress",  # type: ignore[misc]
                     w.log_tail)
            time.sleep(random.random() * 0.3)
            w.kill()
            if progress() < 2 * TOTAL:
                kills_mid_load += 1
            w.start()
        wait_for(lambda: progress() >= 2 * TOTAL, 150, "both sinks to store every offset",
                 lambda: f"{[stored_progress(dsn, n) for n in names]}\n{w.log_tail()}")
    finally:
        w.stop()
        w.http.close()
    assert kills_mid_load == KILLS
    rows = query(dsn, "SELECT id, seq, name, amount FROM kill_state")
    assert len(rows) == len(final)
    assert {r[0]: (r[1], r[2], r[3]) for r in rows} == final
    log = query(dsn, "SELECT seq, name, amount FROM kill_log")
    assert len(log) == len(written)  # no duplicate, no gap
    assert {r[0] for r in log} == written
    stored = query(dsn, 'SELECT connector, topic, "partition", next_offset FROM '
                        '__samsa_connect_offsets ORDER BY 1, 3')
    assert [r[:3] for r in stored] == [(n, TOPIC, p) for n in sorted(names) for p in range(3)]
