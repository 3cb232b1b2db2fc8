"""The admin HTTP listener: /metrics with Kafka's JMX-exporter names (exact counts after a known
workload, request histograms, consumer lag as kafka-exporter names it), /health/*, and clean
answers to garbage paths and methods."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from samsa.testing import SamsaBroker
from tests.wire import Wire

N = 500


@pytest.fixture(scope="module")
def broker() -> Iterator[SamsaBroker]:
    with SamsaBroker() as b:
        _wait_ready(b)
        yield b


def _wait_ready(b: SamsaBroker) -> None:
    assert b.admin_url
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(b.admin_url + "/health/ready", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise AssertionError("the broker never became ready")


def scrape(b: SamsaBroker) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of a scrape, parsed by prometheus-client's own parser."""
    r = httpx.get(b.admin_url + "/metrics", timeout=30)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    out = {}
    for fam in text_string_to_metric_families(r.text):
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(samples: dict, name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


def _create(b: SamsaBroker, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)


def test_counters_equal_the_workload(broker: SamsaBroker) -> None:
    topic = "metrics-exact"
    _create(broker, topic)
    before = scrape(broker)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20,
                  "compression.type": "none"})
    for i in range(N):
        p.produce(topic, key=b"k%d" % (i % 7), value=b"value-%d" % i)
    assert p.flush(20) == 0
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "metrics-g",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got = 0
    deadline = time.monotonic() + 30
    while got < N and time.monotonic() < deadline:
        for m in c.consume(100, 0.5):
            assert m.error() is None
            got += 1
    assert got == N
    c.close()
    after = scrape(broker)
    assert value(after, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == N
    size = value(after, "kafka_log_log_size", topic=topic, partition="0")
    assert size > 0
    # batches are stored as received (no recompression): bytes in = the log's size
    assert value(after, "kafka_server_brokertopicmetrics_bytesin_total", topic=topic) == size
    # one consumer read the partition once from offset 0: bytes out = the log's size
    assert value(after, "kafka_server_brokertopicmetrics_bytesout_total", topic=topic) == size
    assert value(after, "kafka_log_log_logendoffset", topic=topic, partition="0") == N
    assert value(after, "kafka_server_brokertopicmetrics_failedproducerequests_total",
                 topic=topic) == 0
    assert value(after, "kafka_server_brokertopicmetrics_totalfetchrequests_total",
                 topic=topic) >= 1
    # the all-topics counter moved by exactly this workload
    delta = (value(after, "kafka_server_brokertopicmetrics_messagesin_total")
             - value(before, "kafka_server_brokertopicmetrics_messagesin_total"))
    assert delta == N
    assert value(after, "kafka_server_replicamanager_leadercount") >= 1
    assert value(after, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert value(after, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    assert value(after, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert value(after, "process_open_fds") > 0
    assert value(after, "process_resident_memory_bytes") > 0


def test_request_counts_are_exact_and_histograms_name_the_types(broker: SamsaBroker) -> None:
    topic = "metrics-requests"
    _create(broker, topic)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    p.produce(topic, value=b"one")
    assert p.flush(20) == 0
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "metrics-req"})
    c.assign([TopicPartition(topic, 0, 0)])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not c.consume(1, 0.5):
        pass
    c.close()
    before = scrape(broker)
    w = Wire(broker.bootstrap)
    try:
        for _ in range(3):
            w.request(18, 3, {"client_software_name": "t", "client_software_version": "1"})
        for _ in range(2):
            w.request(3, 12, {"topics": [], "allow_auto_topic_creation": False,
                              "include_topic_authorized_operations": False})
    finally:
        w.close()
    after = scrape(broker)

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - before.get((name, frozenset(labels.items())), 0)

    assert delta("kafka_network_requestmetrics_requests_total", request="ApiVersions",
                 version="3") == 3
    assert delta("kafka_network_requestmetrics_requests_total", request="Metadata",
                 version="12") == 2
    assert delta("kafka_network_requestmetrics_totaltimems_count", request="ApiVersions") == 3
    # the produce/consume above shows up per request type, each time as a histogram
    for request in ("Produce", "Fetch", "FetchConsumer", "Metadata", "ApiVersions"):
        for t in ("totaltimems", "localtimems", "remotetimems", "requestqueuetimems"):
            count = value(after, f"kafka_network_requestmetrics_{t}_count", request=request)
            assert count >= 1, (request, t)
            assert value(after, f"kafka_network_requestmetrics_{t}_bucket", request=request,
                         le="+Inf") == count


def test_consumer_lag_equals_the_true_lag(broker: SamsaBroker) -> None:
    topic = "metrics-lag"
    _create(broker, topic)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(300):
        p.produce(topic, value=b"%d" % i)
    assert p.flush(20) == 0
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "lag-g",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, 0, 123)], asynchronous=False)
    committed = c.committed([TopicPartition(topic, 0)], 10)[0].offset
    _low, high = c.get_watermark_offsets(TopicPartition(topic, 0), 10)
    c.close()
    samples = scrape(broker)
    labels = {"consumergroup": "lag-g", "topic": topic, "partition": "0"}
    assert value(samples, "kafka_consumergroup_lag", **labels) == high - committed == 177
    assert value(samples, "kafka_consumergroup_current_offset", **labels) == 123
    assert value(samples, "kafka_consumergroup_lag_sum", consumergroup="lag-g", topic=topic) == 177
    assert value(samples, "kafka_topic_partition_current_offset", topic=topic,
                 partition="0") == high
    assert value(samples, "kafka_coordinator_group_groupmetadatamanager_numgroups") >= 1


def test_health_endpoints(broker: SamsaBroker) -> None:
    live = httpx.get(broker.admin_url + "/health/live")
    assert live.status_code == 200 and live.json() == {"status": "UP"}
    ready = httpx.get(broker.admin_url + "/health/ready")
    assert ready.status_code == 200 and ready.json() == {"status": "UP"}
    assert httpx.head(broker.admin_url + "/metrics").status_code == 200


@pytest.mark.parametrize("path", ["/metricsx", "/metrics/extra", "/health", "/health/nope",
                                  "/%00", "/..%2f..%2fetc%2fpasswd", "/" + "a" * 8000,
                                  "/health/live/../../x"])
def test_garbage_paths_are_404(broker: SamsaBroker, path: str) -> None:
    r = httpx.get(broker.admin_url + path)
    assert r.status_code == 404
    assert "Traceback" not in r.text


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
@pytest.mark.parametrize("path", ["/metrics", "/health/live", "/health/ready"])
def test_bad_methods_are_405(broker: SamsaBroker, method: str, path: str) -> None:
    r = httpx.request(method, broker.admin_url + path, content=b"x" * 100)
    assert r.status_code == 405
    assert "Traceback" not in r.text


def test_non_http_bytes_do_not_hurt_the_broker(broker: SamsaBroker) -> None:
    host, port = broker.admin_url.removeprefix("http://").rsplit(":", 1)
    for junk in (b"\x00\x01\x02garbage\r\n\r\n", b"GET " + b"/" * 70000 + b" HTTP/1.1\r\n\r\n",
                 b"BREW /coffee HTCPCP/1.0\r\n\r\n"):
        with socket.create_connection((host, int(port)), timeout=10) as s:
            s.sendall(junk)
            s.shutdown(socket.SHUT_WR)
            answer = b""
            while chunk := s.recv(65536):
                answer += chunk
            assert b"Traceback" not in answer
            assert answer == b"" or answer.startswith(b"HTTP/1.1 4")
    assert httpx.get(broker.admin_url + "/health/live").status_code == 200
    w = Wire(broker.bootstrap)
    try:
        assert w.request(18, 3, {"client_software_name": "t",
                                 "client_software_version": "1"}).error_code == 0
    finally:
        w.close()


def dashboard_metrics() -> set[str]:
    """Metric names the Grafana dashboard in docs/ queries."""
    import json
    import re
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "samsa-overview.json"
    dash = json.loads(path.read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    assert len(exprs) >= 20
    return {m for e in exprs for m in re.findall(r"\b((?:kafka|process)_[a-z_]+)\b", e)}


def test_the_grafana_dashboard_queries_served_metrics(broker: SamsaBroker) -> None:
    """Every family is served (with HELP/TYPE) even before it has samples."""
    import re

    r = httpx.get(broker.admin_url + "/metrics", timeout=30)
    families = {fam.name for fam in text_string_to_metric_families(r.text)}
    wanted = {m for m in dashboard_metrics()
              if not m.startswith(("kafka_schema_registry_", "kafka_connect_"))}
    assert len(wanted) >= 20
    missing = {m for m in wanted
               if m not in families and re.sub(r"_(bucket|sum|count|total)$", "", m) not in families}
    assert missing == set()


def test_serve_prints_the_admin_listener(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    from samsa.testing import free_port, terminate

    port, admin = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAMSA_")}
    proc = subprocess.Popen([sys.executable, "-m", "samsa.cli.main", "serve", "--listeners",
                             f"PLAINTEXT://127.0.0.1:{port}", "--log-dirs", str(tmp_path / "d"),
                             "--override", f"admin.http.listeners=http://127.0.0.1:{admin}"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    try:
        assert proc.stdout is not None
        lines = []
        for _ in range(20):  # the broker prints a few lines at start-up
            line = proc.stdout.readline().decode()
            lines.append(line)
            if "admin HTTP listener" in line or not line:
                break
        assert f"samsa: admin HTTP listener on http://127.0.0.1:{admin} " in lines[-1], lines
        assert httpx.get(f"http://127.0.0.1:{admin}/health/ready").status_code == 200
    finally:
        terminate(proc)


def test_scrapes_answer_while_the_broker_is_loaded(broker: SamsaBroker) -> None:
    """Producers keep the broker busy while /metrics and /health are asked for: every scrape
    answers and parses, and the broker's count of the workload is exact afterwards."""
    import threading

    topic = "metrics-load"
    _create(broker, topic)
    stop = threading.Event()
    sent = [0, 0]

    def produce(slot: int) -> None:
        p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 2})
        n = 0
        while not stop.is_set() and n < 200_000:
            try:
                p.produce(topic, value=b"x" * 100)
                n += 1
            except BufferError:
                p.poll(0.05)
        assert p.flush(30) == 0
        sent[slot] = n

    threads = [threading.Thread(target=produce, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    try:
        for _ in range(10):
            assert httpx.get(broker.admin_url + "/health/ready", timeout=10).status_code == 200
            scrape(broker)
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    assert sum(sent) > 0
    after = scrape(broker)
    assert value(after, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == sum(sent)
