"""Helpers of the PostgreSQL CDC tests: connector configs, reading a topic's Debezium events
(JsonConverter with schemas), replaying change topics into a table model, slot positions."""

from __future__ import annotations

import json
import time
from typing import Any

import psycopg
from confluent_kafka import Consumer, TopicPartition

from samsa.testing.postgres import PostgresServer

JSON = "org.apache.kafka.connect.json.JsonConverter"


def cdc_config(pg: PostgresServer, db: str, prefix: str, **extra: Any) -> dict[str, str]:
    cfg = {"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
           "database.hostname": pg.host, "database.port": str(pg.port),
           "database.user": pg.user, "database.dbname": db, "topic.prefix": prefix,
           "plugin.name": "pgoutput", "slot.name": f"slot_{prefix}",
           "publication.name": f"pub_{prefix}", "poll.interval.ms": "100",
           "retriable.restart.connector.wait.ms": "500", "slot.drop.on.stop": "true",
           "key.converter": JSON, "value.converter": JSON,
           "key.converter.schemas.enable": "true", "value.converter.schemas.enable": "true"}
    cfg.update({k: str(v) for k, v in extra.items()})
    return cfg


def sql(pg: PostgresServer, db: str, *statements: str, params: Any = None) -> list[Any]:
    out: list[Any] = []
    with psycopg.connect(pg.dsn(db), autocommit=True) as conn:
        for s in statements:
            cur = conn.execute(s, params)
            if cur.description:
                out.extend(cur.fetchall())
    return out


def read_topic(bootstrap: str, topic: str, *, min_count: int = 0, timeout: float = 30.0,
               isolation: str = "read_committed",
               stop_at: int | None = None) -> list[tuple[Any, Any]]:
    """Every record of partition 0 as (key, value) JSON (None for null), waiting until at least
    `min_count` arrived and then none for a second (bounded by `timeout`), or `stop_at` did."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"cdc-read-{time.time_ns()}",
                  "enable.auto.commit": False, "isolation.level": isolation,
                  "auto.offset.reset": "earliest"})
    out: list[tuple[Any, Any]] = []
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + timeout
        idle_since = time.monotonic()
        while time.monotonic() < deadline:
            msgs = c.consume(5000, 0.5)
            got = False
            for m in msgs:
                if m.error():
                    continue
                got = True
                k, v = m.key(), m.value()
                out.append((json.loads(k) if k else None, json.loads(v) if v else None))
            if stop_at is not None and len(out) >= stop_at:
                break
            if got:
                idle_since = time.monotonic()
            if len(out) >= min_count and time.monotonic() - idle_since > 1.0:
                break
    finally:
        c.close()
    return out


def wait_for(predicate: Any, timeout: float = 30.0, interval: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise TimeoutError(f"condition not met in {timeout}s (last: {last!r})")


def confirmed_lsn(pg: PostgresServer, db: str, slot: str) -> int | None:
    rows = sql(pg, db, f"SELECT confirmed_flush_lsn FROM pg_replication_slots "
                       f"WHERE slot_name = '{slot}'")
    if not rows or rows[0][0] is None:
        return None
    hi, lo = str(rows[0][0]).split("/")
    return (int(hi, 16) << 32) | int(lo, 16)


def wait_slot_active(pg: PostgresServer, db: str, *slots: str, timeout: float = 30.0) -> None:
    """Until each slot exists and a walsender holds it: changes from now on are captured."""
    names = ", ".join(f"'{s}'" for s in slots)
    try:
        wait_for(lambda: len(sql(pg, db, f"SELECT 1 FROM pg_replication_slots WHERE slot_name "
                                         f"IN ({names}) AND active")) == len(slots),
                 timeout=timeout)
    except TimeoutError as e:
        activity = sql(pg, db, "SELECT pid, datname, state, backend_xid, backend_xmin, "
                               "wait_event, left(query, 80) FROM pg_stat_activity")
        raise TimeoutError(f"{e}; sessions: {activity}") from e
