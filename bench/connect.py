"""Kafka Connect throughput and REST latency (issue 15), on a standalone worker and a Samsa broker.

    PYTHONPATH=. .venv/bin/python bench/connect.py [--lines 200000] [--out FILE]

No Kafka Connect (JVM) can run on this machine, so the reference in the same run is the raw
client doing the same job without Connect: confluent-kafka producing the file's lines
(linger.ms 5, acks=all, idempotent — what the source task's producer uses) and consuming them
back. Ratios are Connect / raw client.

- file -> topic: FileStreamSource (1 task, batch.size 2000, StringConverter) from a file of
  `--lines` lines (~60 bytes each): time from the connector's creation to the topic's end offset
  reaching the line count (Connect) vs time to produce and flush them (raw).
- topic -> file: FileStreamSink (1 task) of that topic: time from creation until the file has
  every line (Connect) vs a consumer reading them all (raw).
- REST latency: GET /connectors/{name}/status and PUT .../config/validate, 200 sequential calls
  each, p50/p99.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cluster_common import load_line, percentile, run_header, write_report  # noqa: E402

from samsa.testing import SamsaBroker  # noqa: E402
from samsa.testing.connect import ConnectWorker  # noqa: E402


def end_offset(bootstrap: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-wm", "log_level": 3})
    try:
        md = c.list_topics(topic, timeout=5)
        if topic not in md.topics or md.topics[topic].error is not None:
            return 0
        return sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1]
                   for p in md.topics[topic].partitions)
    finally:
        c.close()


def wait_offset(bootstrap: str, topic: str, n: int, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while end_offset(bootstrap, topic) < n:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{topic} never reached {n} records")
        time.sleep(0.05)


def count_lines(path: Path) -> int:
    if not path.exists():
        return 0
    with path.open("rb") as f:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))


def raw_produce(bootstrap: str, topic: str, lines: list[bytes]) -> float:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all",
                  "enable.idempotence": True, "log_level": 3})
    t0 = time.perf_counter()
    for line in lines:
        while True:
            try:
                p.produce(topic, value=line)
                break
            except BufferError:
                p.poll(0.01)
    p.flush(120)
    return time.perf_counter() - t0


def raw_consume(bootstrap: str, topic: str, n: int) -> float:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"raw-{time.monotonic_ns()}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False, "log_level": 3})
    c.subscribe([topic])
    got = 0
    t0 = time.perf_counter()
    while got < n:
        got += sum(1 for m in c.consume(1000, 1.0) if m.error() is None)
    elapsed = time.perf_counter() - t0
    c.close()
    return elapsed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=200_000)
    ap.add_argument("--rest-calls", type=int, default=200)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "connect-latest.md"))
    args = ap.parse_args()
    n = args.lines
    lines = [f"{i:09d} the quick brown fox jumps over the lazy dog {i % 97:02d}".encode()
             for i in range(n)]
    report = run_header("Kafka Connect: file source/sink throughput and REST latency",
                        f"PYTHONPATH=. .venv/bin/python bench/connect.py --lines {n}")
    report = [line.replace("No Kafka broker can run on this machine: absolute figures against "
                           "the issue's goals.", "No Kafka Connect (JVM) can run here: the "
                           "reference is the raw client doing the same job.") for line in report]
    with tempfile.TemporaryDirectory(prefix="samsa-bench-connect-") as tmp:
        d = Path(tmp)
        src, out = d / "in.txt", d / "out.txt"
        src.write_bytes(b"".join(x + b"\n" for x in lines))
        with SamsaBroker(d / "broker") as b:
            raw_p = raw_produce(b.bootstrap, "raw-lines", lines)
            raw_c = raw_consume(b.bootstrap, "raw-lines", n)
            with ConnectWorker(b.bootstrap, d, props={"offset.flush.interval.ms": "10000"}) as w:
                t0 = time.perf_counter()
                r = w.create("bench-source", {"connector.class": "FileStreamSource",
                                              "topic": "connect-lines", "file": str(src),
                                              "batch.size": "2000"})
                assert r.status_code == 201, r.text
                wait_offset(b.bootstrap, "connect-lines", n)
                conn_p = time.perf_counter() - t0
                t0 = time.perf_counter()
                r = w.create("bench-sink", {"connector.class": "FileStreamSink",
                                            "topics": "connect-lines", "file": str(out)})
                assert r.status_code == 201, r.text
                deadline = time.monotonic() + 600
                while count_lines(out) < n and time.monotonic() < deadline:
                    time.sleep(0.05)
                conn_c = time.perf_counter() - t0
                got = count_lines(out)
                status_ms, validate_ms = [], []
                body = {"connector.class": "FileStreamSource", "topic": "x", "file": str(src)}
                for _ in range(args.rest_calls):
                    t = time.perf_counter()
                    assert w.http.get("/connectors/bench-source/status").status_code == 200
                    status_ms.append((time.perf_counter() - t) * 1000)
                    t = time.perf_counter()
                    assert w.http.put("/connector-plugins/FileStreamSource/config/validate",
                                      json=body).status_code == 200
                    validate_ms.append((time.perf_counter() - t) * 1000)
    report += [
        f"{n:,} lines of ~60 bytes; one task each; Connect includes the connector's start.", "",
        "| | Connect (records/s) | raw client (records/s) | Connect / raw |",
        "|---|---:|---:|---:|",
        f"| file → topic (FileStreamSource, 1 task) | {n / conn_p:,.0f} | {n / raw_p:,.0f} | "
        f"{raw_p / conn_p:.2f}× |",
        f"| topic → file (FileStreamSink, 1 task) | {n / conn_c:,.0f} | {n / raw_c:,.0f} | "
        f"{raw_c / conn_c:.2f}× |",
        "", f"Sink file lines at the end: {got:,} (want {n:,}).", "",
        "| REST call (sequential, one client) | p50 ms | p99 ms |", "|---|---:|---:|",
        f"| GET /connectors/{{name}}/status | {percentile(status_ms, 50):.1f} | "
        f"{percentile(status_ms, 99):.1f} |",
        f"| PUT /connector-plugins/{{plugin}}/config/validate | {percentile(validate_ms, 50):.1f} | "
        f"{percentile(validate_ms, 99):.1f} |",
        "", load_line(), ""]
    write_report(args.out, "\n".join(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
