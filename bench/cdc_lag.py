"""PostgreSQL CDC source: lag (commit in PostgreSQL -> record readable in Samsa) and changes/s.

    PYTHONPATH=. .venv/bin/python bench/cdc_lag.py [--lag-txns 2000] [--rate 200] [--rows 100000]

Starts a PostgreSQL server (Debian's binaries), a Samsa broker and a standalone Connect worker
running io.debezium.connector.postgresql.PostgresConnector (1 task, JsonConverter with schemas,
Debezium's default shape; producer.override.linger.ms=1, poll.interval.ms=100). One warm-up
change first creates the topic. A consumer (read_committed, fetch.wait.max.ms 10, polling one
message at a time) reads the change topic on its own thread and stamps each record on arrival.

- lag: `--lag-txns` single-row INSERT transactions paced at `--rate`/s; per change, the time from
  the client's COMMIT returning to the consumer receiving the event; p50/p99/max.
- throughput: `--rows` rows inserted in transactions of 1,000 rows as fast as PostgreSQL takes
  them; changes/s from the first COMMIT to the last event received.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

import psycopg
from confluent_kafka import Consumer, TopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from samsa.testing import SamsaBroker  # noqa: E402
from samsa.testing.connect import ConnectWorker  # noqa: E402
from samsa.testing.postgres import PostgresServer  # noqa: E402

JSON = "org.apache.kafka.connect.json.JsonConverter"


class Reader(threading.Thread):
    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "cdc-bench",
                                  "isolation.level": "read_committed", "fetch.wait.max.ms": 10,
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                  "log_level": 0})
        self.consumer.assign([TopicPartition(topic, 0, 0)])
        self.arrived: dict[int, float] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            m = self.consumer.poll(0.05)  # returns at the first message (consume(n) would wait)
            if m is None or m.error() or m.value() is None:
                continue
            now = time.time()
            after = json.loads(m.value())["payload"]["after"]
            if after is not None:
                self.arrived[after["id"]] = now
        self.consumer.close()

    def wait(self, ids: range, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(i in self.arrived for i in (ids[0], ids[-1])) and \
                    sum(1 for i in ids if i in self.arrived) == len(ids):
                return
            time.sleep(0.2)
        raise TimeoutError(f"only {sum(1 for i in ids if i in self.arrived)} of {len(ids)} arrived")


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lag-txns", type=int, default=2000)
    ap.add_argument("--rate", type=float, default=200.0)
    ap.add_argument("--rows", type=int, default=100_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="cdc-bench-") as tmp, PostgresServer() as pg, \
            SamsaBroker(Path(tmp) / "broker") as broker, \
            ConnectWorker(broker.bootstrap, Path(tmp) / "worker") as worker:
        db = "bench"
        pg.create_database(db)
        with psycopg.connect(pg.dsn(db), autocommit=True) as conn:
            conn.execute("CREATE TABLE events (id int PRIMARY KEY, amount numeric(10,2), "
                         "note text, at timestamptz DEFAULT now())")
        r = worker.create("cdc", {
            "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "database.hostname": pg.host, "database.port": str(pg.port),
            "database.user": pg.user, "database.dbname": db, "topic.prefix": "bench",
            "snapshot.mode": "never", "poll.interval.ms": "100", "slot.drop.on.stop": "true",
            "key.converter": JSON, "value.converter": JSON,
            "producer.override.linger.ms": "1"})
        assert r.status_code == 201, r.text
        worker.wait_state("cdc", "RUNNING", tasks=1)
        deadline = time.monotonic() + 30
        with psycopg.connect(pg.dsn(db), autocommit=True) as conn:
            while not conn.execute("SELECT 1 FROM pg_replication_slots WHERE active").fetchone():
                if time.monotonic() > deadline:
                    raise TimeoutError("slot not active")
                time.sleep(0.1)
        reader = Reader(broker.bootstrap, "bench.public.events")
        reader.start()
        committed: dict[int, float] = {}
        with psycopg.connect(pg.dsn(db), autocommit=True) as conn:
            # warm-up: the first event creates the topic and the clients' metadata
            conn.execute("INSERT INTO events (id, amount, note) VALUES (-1, 0, 'warm-up')")
            reader.wait(range(-1, 0), 60)
            gap = 1.0 / args.rate
            t0 = time.monotonic()
            for i in range(args.lag_txns):
                target = t0 + i * gap
                if (delay := target - time.monotonic()) > 0:
                    time.sleep(delay)
                conn.execute("INSERT INTO events (id, amount, note) VALUES (%s, 1.50, 'x')", (i,))
                committed[i] = time.time()
        ids = range(args.lag_txns)
        reader.wait(ids, 120)
        lags = [(reader.arrived[i] - committed[i]) * 1000 for i in ids]
        print(f"CDC lag ({args.lag_txns} single-row txns at {args.rate:.0f}/s): "
              f"p50 {pct(lags, 50):.1f} ms, p99 {pct(lags, 99):.1f} ms, max {max(lags):.1f} ms",
              flush=True)
        base = args.lag_txns
        with psycopg.connect(pg.dsn(db)) as conn:
            start = time.time()
            for lo in range(base, base + args.rows, 1000):
                hi = min(lo + 1000, base + args.rows)
                with conn.transaction():
                    conn.execute("INSERT INTO events (id, amount, note) SELECT g, g %% 1000, "
                                 "md5(g::text) FROM generate_series(%s::int, %s::int) g",
                                 (lo, hi - 1))
            insert_s = time.time() - start
        rows = range(base, base + args.rows)
        reader.wait(rows, 600)
        last = max(reader.arrived[i] for i in rows)
        reader.stop.set()
        reader.join(10)
        total_s = last - start
        print(f"CDC throughput: {args.rows} rows in txns of 1000: {args.rows / total_s:,.0f} "
              f"changes/s (PostgreSQL took {insert_s:.1f} s to insert them; last event "
              f"{total_s:.1f} s after the first commit)")


if __name__ == "__main__":
    main()
