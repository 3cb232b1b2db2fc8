"""The pipeline's Kafka Connect side: a standalone worker process (`samsa connect standalone`)
running the Snowflake-shaped sink with the seeds' connector JSON, `snowflake.url.name` pointing at
the local warehouse, and a wait until the sink has consumed the topic to its end."""

from __future__ import annotations

import getpass
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from confluent_kafka import Consumer, TopicPartition

from .events import PARTITIONS, TOPIC
from .warehouse import RAW_TABLE

CONNECTOR = "snowflake-sink"
GROUP = f"connect-{CONNECTOR}"  # Kafka Connect's sink group: connect-<connector name>


def sink_config(warehouse_url: str) -> dict[str, str]:
    """The seeds' connector JSON (004: snowflake-sink), with the local warehouse for the account,
    Protobuf through the registry (the events' format) instead of Avro, and Snowpipe Streaming
    (Snowflake's exactly-once ingestion, offset tokens; flushes down to 1 s) instead of Snowpipe
    (at least 10 s, the seeds' 60 s)."""
    user = "SVC_KAFKA_CONNECTOR"  # recorded only, for DuckDB
    if warehouse_url.startswith(("postgresql:", "postgres:")):
        user = urlsplit(warehouse_url).username or getpass.getuser()  # libpq's default role
    return {
        "connector.class": "com.snowflake.kafka.connector.SnowflakeSinkConnector",
        "tasks.max": "1",
        "topics": TOPIC,
        "snowflake.url.name": warehouse_url,
        "snowflake.user.name": user,
        "snowflake.private.key": "...",
        "snowflake.database.name": "STREAMING",
        "snowflake.schema.name": "PUBLIC",
        "snowflake.role.name": "KAFKA_CONNECTOR_ROLE",
        "snowflake.ingestion.method": "SNOWPIPE_STREAMING",
        "snowflake.topic2table.map": f"{TOPIC}:{RAW_TABLE}",
        "buffer.count.records": "10000",
        "buffer.flush.time": "1",
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "io.confluent.connect.protobuf.ProtobufConverter",
    }


class ConnectProcess:
    """`samsa connect standalone` as a child process with one connector file. The registry's URL
    is the worker's (the seeds' connector JSON names none; the connector's converters inherit it)."""

    def __init__(self, bootstrap: str, registry_url: str, work_dir: Path, port: int,
                 connector: dict[str, str], registry_props: dict[str, str] | None = None) -> None:
        self.dir = work_dir
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.log_path = work_dir / "connect.log"
        props = {"bootstrap.servers": bootstrap, "listeners": self.url,
                 "offset.storage.file.filename": str(work_dir / "connect.offsets"),
                 "offset.flush.interval.ms": "1000",
                 "key.converter": "org.apache.kafka.connect.storage.StringConverter",
                 "value.converter": "org.apache.kafka.connect.storage.StringConverter",
                 "key.converter.schema.registry.url": registry_url,
                 "value.converter.schema.registry.url": registry_url}
        for k, v in (registry_props or {}).items():  # basic.auth.*, schema.registry.ssl.*
            props[f"key.converter.{k}"] = props[f"value.converter.{k}"] = v
        (work_dir / "connect-worker.properties").write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (work_dir / f"{CONNECTOR}.json").write_text(json.dumps({"name": CONNECTOR, "config": connector},
                                                                 indent=2))
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.t0 = time.monotonic()
        env = {k: v for k, v in os.environ.items() if not k.startswith("SAMSA_")}
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "samsa.cli.main", "connect", "standalone",
                 str(self.dir / "connect-worker.properties"), str(self.dir / f"{CONNECTOR}.json")],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                start_new_session=True)

    def wait_running(self, timeout: float = 60.0) -> float:
        """Until the connector's task is RUNNING; the seconds since start()."""
        assert self.proc is not None
        t0 = self.t0
        last: Any = None
        while time.monotonic() - t0 < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the Connect worker exited with code {self.proc.returncode}:\n"
                                   f"{self.tail()}")
            last = self.status()
            if last is not None:
                states = [last["connector"]["state"]] + [t["state"] for t in last.get("tasks", [])]
                if "FAILED" in states:
                    raise RuntimeError(f"the sink failed: {json.dumps(last)[:2000]}\n{self.tail()}")
                if len(states) > 1 and set(states) == {"RUNNING"}:
                    return time.monotonic() - t0
            time.sleep(0.2)
        raise RuntimeError(f"the sink was not RUNNING within {timeout:.0f} s: {last}\n{self.tail()}")

    def status(self) -> dict[str, Any] | None:
        try:
            with urllib.request.urlopen(f"{self.url}/connectors/{CONNECTOR}/status", timeout=5) as r:
                doc: dict[str, Any] = json.loads(r.read())
                return doc
        except (urllib.error.URLError, OSError, ValueError):
            return None

    def failure(self) -> str | None:
        """The connector's or a task's trace when one FAILED."""
        st = self.status()
        if st is None:
            return None
        for part in [st["connector"], *st.get("tasks", [])]:
            if part.get("state") == "FAILED":
                return str(part.get("trace") or "FAILED")
        return None

    def tail(self, n: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-n:] if self.log_path.exists() else ""

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM (the worker stops its tasks: the warehouse file is released), SIGKILL if stuck."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


def committed(bs: str) -> dict[int, int]:
    """The sink group's committed offsets on order-events (-1: none yet)."""
    c = Consumer({"bootstrap.servers": bs, "group.id": GROUP, "enable.auto.commit": False})
    try:
        tps = c.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=10)
        return {tp.partition: tp.offset for tp in tps}
    finally:
        c.close()


def wait_caught_up(bs: str, ends: dict[int, int], worker: ConnectProcess, timeout: float) -> dict[int, int]:
    """Until the sink's committed offsets reach `ends` (the worker commits what the sink's
    pre_commit says is safely in the warehouse); the last committed offsets either way."""
    deadline = time.monotonic() + timeout
    got = committed(bs)
    while any(got.get(p, -1) < e for p, e in ends.items() if e > 0) and time.monotonic() < deadline:
        trace = worker.failure()
        if trace is not None:
            raise RuntimeError(f"the sink task FAILED:\n{trace[-2000:]}")
        time.sleep(0.5)
        got = committed(bs)
    return got
