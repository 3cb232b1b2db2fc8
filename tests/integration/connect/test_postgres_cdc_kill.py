"""100,000 changes (multi-row inserts, updates, deletes, in multi-row transactions) captured by
the CDC source while its distributed worker (exactly.once.source.support=enabled) is kill -9'd
five times: a read_committed consumer replaying the change topic rebuilds a table equal to
PostgreSQL's, no change event appears twice, none is missing, and the slot's confirmed LSN keeps
advancing across the restarts. Before that, one more kill lands in the middle of the initial
snapshot: the snapshot is taken again (from a new slot) and nothing is lost."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from confluent_kafka import Consumer, TopicPartition

from samsa.testing import SamsaBroker
from samsa.testing.connect import ConnectWorker
from samsa.testing.postgres import PostgresServer
from tests.postgres_cdc_util import cdc_config, confirmed_lsn, read_topic, sql, wait_for

TOTAL = 100_000
ROUNDS = 25
KILLS = 5
SNAPSHOT_ROWS = 30_000


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SamsaBroker]:
    with SamsaBroker(tmp_path_factory.mktemp("broker")) as b:
        yield b


class Load(threading.Thread):
    """ROUNDS rounds of three transactions each: a multi-row INSERT (one WAL record per page:
    many events at one LSN), an UPDATE of a slice and a DELETE of a slice; counts the changes."""

    def __init__(self, dsn: str, pause_s: float) -> None:
        super().__init__(daemon=True)
        self.dsn = dsn
        self.pause_s = pause_s
        self.changes = 0
        self.error: BaseException | None = None
        self.last_commit_lsn = 0

    def run(self) -> None:
        try:
            per_round = TOTAL // ROUNDS
            inserts, updates = per_round // 2, per_round * 3 // 10
            deletes = per_round - inserts - updates
            with psycopg.connect(self.dsn) as conn:
                next_id = 1_000
                for r in range(ROUNDS):
                    with conn.transaction():
                        cur = conn.execute(
                            "INSERT INTO items SELECT g, %s::int, md5(g::text) "
                            "FROM generate_series(%s::int, %s::int) g", (r, next_id, next_id + inserts - 1))
                        self.changes += cur.rowcount
                    first = next_id
                    next_id += inserts
                    with conn.transaction():
                        cur = conn.execute("UPDATE items SET val = val + 1000, note = 'u' "
                                           "WHERE id >= %s AND id < %s",
                                           (first, first + updates))
                        self.changes += cur.rowcount
                    with conn.transaction():
                        cur = conn.execute("DELETE FROM items WHERE id >= %s AND id < %s",
                                           (first + inserts - deletes, first + inserts))
                        self.changes += cur.rowcount
                    time.sleep(self.pause_s)
        except BaseException as e:  # reported by the test
            self.error = e


def end_offset(bootstrap: str, topic: str) -> int:
    """The topic's end offset for a read_committed reader (transaction markers included), 0
    while it is missing."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "cdc-kill-wm",
                  "isolation.level": "read_committed", "log_level": 0})
    try:
        md = c.list_topics(topic, timeout=5)
        if topic not in md.topics or md.topics[topic].error is not None:
            return 0
        return int(c.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)[1])
    except Exception:
        return 0
    finally:
        c.close()


def replay(records: list[tuple[Any, Any]]) -> tuple[dict[int, tuple[int, str]], Counter[Any]]:
    table: dict[int, tuple[int, str]] = {}
    seen: Counter[Any] = Counter()
    for key, value in records:
        if value is None:
            continue  # tombstone
        src = value["source"]
        seen[(src["txId"], src["lsn"], key["id"], value["op"])] += 1
        if value["op"] in ("c", "r", "u"):
            row = value["after"]
            table[row["id"]] = (row["val"], row["note"])
        elif value["op"] == "d":
            table.pop(value["before"]["id"], None)
    return table, seen


@pytest.mark.slow
def test_100k_changes_through_five_worker_kills_exactly_once(
        postgres_server: PostgresServer, broker: SamsaBroker, tmp_path: Path) -> None:
    pg, db, prefix = postgres_server, "cdc_kill", "kill"
    pg.create_database(db)
    sql(pg, db, "CREATE TABLE items (id int PRIMARY KEY, val int NOT NULL, note text)",
        f"INSERT INTO items SELECT g, 0, 'snap' FROM generate_series(-{SNAPSHOT_ROWS}, -1) g")
    worker = ConnectWorker(broker.bootstrap, tmp_path, distributed=True, group_id="cdckill",
                           props={"exactly.once.source.support": "enabled",
                                  "offset.flush.interval.ms": "500"})
    worker.start()
    try:
        cfg = cdc_config(pg, db, prefix, **{"key.converter.schemas.enable": "false",
                                            "value.converter.schemas.enable": "false",
                                            "exactly.once.support": "required",
                                            "max.batch.size": "4000"})
        r = worker.create("cdc", cfg)
        assert r.status_code == 201, r.text
        worker.wait_state("cdc", "RUNNING", tasks=1, timeout=90)
        slot = f"slot_{prefix}"
        topic = f"{prefix}.public.items"
        # kill -9 as soon as the first snapshot batch is committed: mid-snapshot
        snapshot_seen = wait_for(lambda: end_offset(broker.bootstrap, topic), timeout=60,
                                 interval=0.05)
        worker.kill()
        worker.start()
        worker.wait_state("cdc", "RUNNING", tasks=1, timeout=90)
        # the redone snapshot completes before the load starts (changes made while a snapshot
        # is redone are folded into it, not emitted as events)
        wait_for(lambda: end_offset(broker.bootstrap, topic) >= snapshot_seen + SNAPSHOT_ROWS,
                 timeout=90, interval=0.5)
        wait_for(lambda: confirmed_lsn(pg, db, slot) is not None)
        load = Load(pg.dsn(db), pause_s=1.0)
        load.start()
        positions = [confirmed_lsn(pg, db, slot) or 0]
        for _ in range(KILLS):
            time.sleep(4.0)
            worker.kill()
            positions.append(confirmed_lsn(pg, db, slot) or 0)
            worker.start()
            worker.wait_state("cdc", "RUNNING", tasks=1, timeout=90)
        load.join(120)
        assert not load.is_alive() and load.error is None, load.error
        assert load.changes == TOTAL
        final_lsn = int(sql(pg, db, "SELECT pg_current_wal_lsn() - '0/0'")[0][0])
        wait_for(lambda: (confirmed_lsn(pg, db, slot) or 0) >= final_lsn - 4096 and
                 (confirmed_lsn(pg, db, slot) or 0) > positions[-1], timeout=90, interval=0.5)
        positions.append(confirmed_lsn(pg, db, slot) or 0)
        expected = {row[0]: (row[1], row[2]) for row in
                    sql(pg, db, "SELECT id, val, note FROM items")}
        records = read_topic(broker.bootstrap, topic, min_count=SNAPSHOT_ROWS + TOTAL, timeout=90)
    finally:
        worker.stop()
    # the slot's confirmed position only moves forward, and did move while the worker bounced
    assert positions == sorted(positions), positions
    assert positions[-1] > positions[0]
    assert snapshot_seen < SNAPSHOT_ROWS  # the kill did land inside the snapshot
    table, seen = replay(records)
    dups = {k: n for k, n in seen.items() if n > 1 and k[3] != "r"}
    assert not dups, f"{len(dups)} change events repeated, e.g. {list(dups.items())[:3]}"
    changes = [k for k in seen if k[3] != "r"]
    assert len(changes) == TOTAL, (len(changes), TOTAL)
    # the interrupted snapshot's rows were read again: snapshots are at-least-once
    reads = [k for k in seen if k[3] == "r"]
    assert len({k[2] for k in reads}) == SNAPSHOT_ROWS
    assert sum(seen[k] for k in reads) > SNAPSHOT_ROWS
    tombstones = sum(1 for _, v in records if v is None)
    assert tombstones == sum(1 for k in seen if k[3] == "d")
    assert table == expected
