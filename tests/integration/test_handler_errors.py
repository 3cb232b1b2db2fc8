"""A failing handler is answered with the API's error response; the connection keeps serving.

Kafka answers a request whose handler throws with getErrorResponse (UNKNOWN_SERVER_ERROR, -1, on
every topic/partition/resource the request named) and keeps the connection; only acks=0 produce,
which has no response, closes it. The broker here runs with the test-only hook
SAMSA_FAULT_INJECT: Produce (0) and ListOffsets (2) handlers raise at once, CreatePartitions (37)
returns an awaitable that raises (the path of handlers that wait).
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator

import httpx
import kafka
import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kafka.admin import KafkaAdminClient
from kafka.admin import NewPartitions as KpNewPartitions
from kio.index import load_response_schema
from kio.serial import entity_reader
from prometheus_client.parser import text_string_to_metric_families

from samsa.protocol import apis
from samsa.testing import SamsaBroker
from tests.wire import Wire

TOPIC = "faulty"


@pytest.fixture(scope="module")
def broker() -> Iterator[SamsaBroker]:
    with SamsaBroker(env={"SAMSA_FAULT_INJECT": "0,2,37:async"}) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(15)
        yield b


def _scrape(b: SamsaBroker) -> list:
    assert b.admin_url
    r = httpx.get(b.admin_url + "/metrics", timeout=30)
    assert r.status_code == 200
    return [s for fam in text_string_to_metric_families(r.text) for s in fam.samples]


def _errors(b: SamsaBroker) -> dict[str, float]:
    """kafka_network_requestmetrics_errors_total per request name (UNKNOWN_SERVER_ERROR)."""
    out: dict[str, float] = {}
    for s in _scrape(b):
        if s.name == "kafka_network_requestmetrics_errors_total":
            assert s.labels["error"] == "UNKNOWN_SERVER_ERROR"
            out[s.labels["request"]] = s.value
    return out


def _closed_connections(b: SamsaBroker) -> float:
    return sum(s.value for s in _scrape(b)
               if s.name == "kafka_server_socket_server_metrics_connection_close_total")


def _decode(key: int, version: int, frame: bytes) -> tuple[int, object]:
    cls = load_response_schema(key, version)
    hdr, n = entity_reader(cls.__header_schema__)(frame, 0)
    return hdr.correlation_id, entity_reader(cls)(frame, n)[0]


LIST_OFFSETS = {"replica_id": -1, "topics": [
    {"name": TOPIC, "partitions": [{"partition_index": 0, "timestamp": -1}]}]}
METADATA = {"topics": [{"name": TOPIC}]}
CREATE_PARTITIONS = {"topics": [{"name": TOPIC, "count": 3}], "timeout": 5000}


def test_raw_requests_get_errors_in_order_on_one_connection(broker: SamsaBroker) -> None:
    before = _errors(broker)
    w = Wire(broker.bootstrap)
    try:
        # synchronous failure, then the same connection serves the next request
        resp = w.request(apis.LIST_OFFSETS, 7, LIST_OFFSETS)
        [t] = resp.topics
        assert t.name == TOPIC
        assert [(p.partition_index, p.error_code, p.offset) for p in t.partitions] == [(0, -1, -1)]
        meta = w.request(apis.METADATA, 12, METADATA)
        assert [(t.name, t.error_code) for t in meta.topics] == [(TOPIC, 0)]
        # pipelined: a failing awaitable, a failing call and good requests between them answer
        # in request order
        order = [(apis.CREATE_PARTITIONS, 3, CREATE_PARTITIONS), (apis.METADATA, 12, METADATA),
                 (apis.LIST_OFFSETS, 7, LIST_OFFSETS), (apis.METADATA, 12, METADATA)]
        frames = [w.encode(k, v, body) for k, v, body in order]
        first = w.corr - len(order) + 1
        w.send_raw(b"".join(frames))
        got = [_decode(k, v, w.recv_frame()) for k, v, _ in order]
        assert [corr for corr, _ in got] == list(range(first, first + len(order)))
        created, m1, lo, m2 = (r for _, r in got)
        assert [(r.name, r.error_code) for r in created.results] == [(TOPIC, -1)]
        assert lo.topics[0].partitions[0].error_code == -1
        assert m1.topics[0].error_code == 0 and m2.topics[0].error_code == 0
        assert not w.is_closed(timeout=0.5)
    finally:
        w.close()
    after = _errors(broker)
    assert after.get("ListOffsets", 0) - before.get("ListOffsets", 0) == 2
    assert after.get("CreatePartitions", 0) - before.get("CreatePartitions", 0) == 1


def test_acks0_produce_failure_closes_the_connection_as_kafka_does(broker: SamsaBroker) -> None:
    w = Wire(broker.bootstrap)
    try:
        w.send_raw(w.encode(apis.PRODUCE, 9, {"acks": 0, "timeout": 1000, "topic_data": [
            {"name": TOPIC, "partition_data": [{"index": 0, "records": b""}]}]}))
        assert w.is_closed(timeout=10)
    finally:
        w.close()
    # the broker is up and serves new connections
    w = Wire(broker.bootstrap)
    try:
        meta = w.request(apis.METADATA, 12, METADATA)
        assert meta.topics[0].error_code == 0
    finally:
        w.close()


def test_confluent_kafka_clients_see_unknown_server_error(broker: SamsaBroker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert TOPIC in admin.list_topics(timeout=10).topics
    closed = _closed_connections(broker)
    with pytest.raises(KafkaException) as err:
        admin.create_partitions([NewPartitions(TOPIC, 3)])[TOPIC].result(15)
    assert err.value.args[0].code() == KafkaError.UNKNOWN  # -1: "Unknown broker error"
    assert TOPIC in admin.list_topics(timeout=10).topics  # the client carries on
    assert _closed_connections(broker) == closed  # on the connections it had

    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g-faulty"})
    try:
        with pytest.raises(KafkaException) as err:
            c.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)
        assert err.value.args[0].code() == KafkaError.UNKNOWN
        assert TOPIC in c.list_topics(timeout=10).topics
    finally:
        c.close()

    # librdkafka 2.x fails the message with UNKNOWN (not retried, not fatal) for plain and
    # idempotent producers alike; the producer stays usable
    for idempotent in (False, True):
        before = _errors(broker).get("Produce", 0)
        p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": idempotent,
                      "message.timeout.ms": 10000})
        reports: list[KafkaError | None] = []
        p.produce(TOPIC, b"v", on_delivery=lambda e, _m, out=reports: out.append(e))
        assert p.flush(15) == 0
        [e] = reports
        assert e is not None and e.code() == KafkaError.UNKNOWN
        assert not e.fatal()
        assert TOPIC in p.list_topics(timeout=10).topics
        assert _errors(broker)["Produce"] - before == 1


def test_kafka_python_clients_see_unknown_error(broker: SamsaBroker) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        with pytest.raises(kafka.errors.UnknownError):
            admin.create_partitions({TOPIC: KpNewPartitions(4)})
        assert TOPIC in admin.list_topics()
    finally:
        admin.close()
    p = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap, request_timeout_ms=5000)
    try:
        with pytest.raises(kafka.errors.UnknownError):
            p.send(TOPIC, b"v").get(15)
        assert p.partitions_for(TOPIC) == {0}
    finally:
        p.close(5)


def test_broker_still_up(broker: SamsaBroker) -> None:
    assert broker.proc is not None and broker.proc.poll() is None
    with socket.create_connection(("127.0.0.1", broker.port), timeout=5) as s:
        s.sendall(struct.pack(">ihhi", 10, apis.API_VERSIONS, 0, 5) + b"\x00\x00")
        s.settimeout(5)
        assert len(s.recv(4)) == 4
