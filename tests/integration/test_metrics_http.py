"""The admin HTTP listener: /metrics with Kafka's JMX-exporter names (exact counts after a known
workload, request histograms, consumer lag as kafka-exporter names it), /health/*, and clean
answers to garbage paths and methods."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

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
    # the earlier produce/consume workload shows up per request type, each time as a histogram
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
