"""Bad input gets Kafka's answer: an error code or a closed connection, never a crash or a hang;
other connections keep working and stored data is not damaged."""

from __future__ import annotations

import os
import random
import struct

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.protocol.records import encode_batch
from samsa.testing import SamsaBroker
from tests.wire import Wire

pytestmark = pytest.mark.timeout(120)


def _produce_body(topic: str, records: bytes, acks: int = -1) -> dict:
    return {"transactional_id": None, "acks": acks, "timeout": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}]}


def _error_of(resp) -> int:  # type: ignore[no-untyped-def]
    return int(resp.responses[0].partition_responses[0].error_code)


@pytest.fixture(scope="module")
def topic(samsa_broker: SamsaBroker) -> str:
    a = AdminClient({"bootstrap.servers": samsa_broker.bootstrap})
    a.create_topics([NewTopic("bad-input", 1, 1)])["bad-input"].result(10)
    p = Producer({"bootstrap.servers": samsa_broker.bootstrap})
    for i in range(100):
        p.produce("bad-input", key=str(i).encode(), value=b"good")
    assert p.flush(10) == 0
    return "bad-input"


def _all_good(bootstrap: str, topic: str) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "x", "enable.auto.commit": False,
                  "check.crcs": True})
    c.assign([TopicPartition(topic, 0, 0)])
    out = []
    hw = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    while len(out) < hw:
        msgs = c.consume(500, 5)
        assert msgs, "consumer stalled"
        for m in msgs:
            assert m.error() is None, m.error()
            out.append(m.key())
    c.close()
    return out


def test_api_versions_with_unknown_version_answers_error_35(samsa_broker: SamsaBroker) -> None:
    w = Wire(samsa_broker.bootstrap)
    # ApiVersions v99: header v1 (api key, version, correlation id, client id)
    body = struct.pack(">hhih", 18, 99, 7, 1) + b"x"
    w.send_raw(struct.pack(">i", len(body)) + body)
    frame = w.recv_frame()
    corr, err, n = struct.unpack_from(">ihi", frame, 0)
    assert (corr, err) == (7, 35) and n > 5
    keys = {struct.unpack_from(">h", frame, 10 + 6 * i)[0] for i in range(n)}
    assert {0, 1, 3, 18} <= keys


@pytest.mark.parametrize("frame", [
    struct.pack(">i", 2**31 - 1) + b"\x00" * 10,       # huge length prefix
    struct.pack(">i", -5),                             # negative size
    struct.pack(">i", 3) + b"abc",                     # too short for a header
    struct.pack(">ihhih", 10, 999, 0, 1, -1),          # unknown api key
    struct.pack(">ihhih", 10, 3, 99, 1, -1),           # known api, unsupported version
    struct.pack(">i", 10) + struct.pack(">hhi", 3, 12, 1) + b"\xff\xff",  # garbage body
])
def test_malformed_frames_close_the_connection(samsa_broker: SamsaBroker, frame: bytes,
                                               topic: str) -> None:
    w = Wire(samsa_broker.bootstrap)
    w.send_raw(frame)
    assert w.is_closed(), "broker kept a connection open after a malformed frame"
    w.close()
    assert len(_all_good(samsa_broker.bootstrap, topic)) >= 100


def test_pipelined_requests_are_answered_before_a_bad_frame_closes(samsa_broker: SamsaBroker,
                                                                    topic: str) -> None:
    """Several frames in one TCP segment: the good ones ahead of the bad one are answered (in
    order), then the connection closes."""
    w = Wire(samsa_broker.bootstrap)
    good = [w.encode(18, 3, {"client_software_name": "t", "client_software_version": "1"})
            for _ in range(3)]
    bad = struct.pack(">ihhih", 10, 999, 0, 1, -1)
    w.send_raw(b"".join(good) + bad)
    corrs = [struct.unpack_from(">i", w.recv_frame(), 0)[0] for _ in good]
    assert corrs == sorted(corrs) and len(set(corrs)) == 3
    assert w.is_closed(), "broker kept a connection open after a malformed frame"
    w.close()
    assert len(_all_good(samsa_broker.bootstrap, topic)) >= 100


def test_random_garbage_never_hurts_the_broker(samsa_broker: SamsaBroker, topic: str) -> None:
    rnd = random.Random(1234)
    for _ in range(60):
        w = Wire(samsa_broker.bootstrap, timeout=5)
        size = rnd.randint(8, 300)
        payload = bytes(rnd.getrandbits(8) for _ in range(size))
        # half the time a plausible header, so decoding gets past the API lookup
        if rnd.random() < 0.5:
            key = rnd.choice([0, 1, 2, 3, 18, 19, 32])
            payload = struct.pack(">hhi", key, rnd.randint(0, 12), 1) + payload
        try:
            w.send_raw(struct.pack(">i", len(payload)) + payload)
            w.is_closed(timeout=0.1)
        except OSError:
            pass
        w.close()
    ok = Wire(samsa_broker.bootstrap)
    assert ok.request(18, 3, {"client_software_name": "t", "client_software_version": "1"}) \
        .error_code == 0
    assert _all_good(samsa_broker.bootstrap, topic)[:100] == [str(i).encode() for i in range(100)]


def test_truncated_frame_then_disconnect(samsa_broker: SamsaBroker, topic: str) -> None:
    w = Wire(samsa_broker.bootstrap)
    w.send_raw(struct.pack(">i", 1000) + b"\x00" * 100)
    w.close()
    assert len(_all_good(samsa_broker.bootstrap, topic)) >= 100


def _corrupt_variants() -> list[tuple[str, bytes, int]]:
    good = encode_batch([(b"k", b"v" * 50, [], 1_700_000_000_000 + i) for i in range(5)])
    bad_crc = bytearray(good)
    bad_crc[-3] ^= 0x55
    long_len = bytearray(good)
    struct.pack_into(">i", long_len, 8, len(good) + 100)
    magic1 = bytearray(good)
    magic1[16] = 1
    return [
        ("bad crc", bytes(bad_crc), 2),
        ("length beyond data", bytes(long_len), 2),
        ("two batches", good + good, 87),
        ("old magic", bytes(magic1), 87),
        ("truncated header", good[:30], 2),
        ("empty", b"", 2),
    ]


@pytest.mark.parametrize("name,records,code", _corrupt_variants(), ids=lambda v: str(v)[:20])
def test_corrupt_batches_get_kafka_error_codes(samsa_broker: SamsaBroker, topic: str, name: str,
                                               records: bytes, code: int) -> None:
    w = Wire(samsa_broker.bootstrap)
    before = Consumer({"bootstrap.servers": samsa_broker.bootstrap, "group.id": "x"}) \
        .get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    resp = w.request(0, 9, _produce_body(topic, records))
    assert _error_of(resp) == code, name
    # the connection stays usable and nothing was appended
    resp2 = w.request(0, 9, _produce_body(topic, encode_batch([(b"ok", b"1", [], 1_700_000_000_000)])))
    assert _error_of(resp2) == 0
    assert resp2.responses[0].partition_responses[0].base_offset == before


def test_produce_errors_for_unknown_topic_acks_and_size(samsa_broker: SamsaBroker,
                                                        topic: str) -> None:
    w = Wire(samsa_broker.bootstrap)
    rec = encode_batch([(b"k", b"v", [], 1_700_000_000_000)])
    assert _error_of(w.request(0, 9, _produce_body("no-such-topic", rec))) == 3
    assert _error_of(w.request(0, 9, _produce_body(topic, rec, acks=5))) == 21
    big = encode_batch([(b"k", os.urandom(2_000_000), [], 1_700_000_000_000)])
    assert _error_of(w.request(0, 9, _produce_body(topic, big))) == 10  # MESSAGE_TOO_LARGE
    future = encode_batch([(b"k", b"v", [], 2**62)])
    assert _error_of(w.request(0, 9, _produce_body(topic, future))) == 32  # INVALID_TIMESTAMP


def test_fetch_out_of_range_and_unknown_topic(samsa_broker: SamsaBroker, topic: str) -> None:
    w = Wire(samsa_broker.bootstrap)
    body = {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "isolation_level": 0,
            "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "fetch_offset": 10**9, "partition_max_bytes": 1 << 20}]},
                {"topic": "nope", "partitions": [
                    {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]}
    resp = w.request(1, 11, body)
    codes = [p.error_code for t in resp.responses for p in t.partitions]
    assert [int(c) for c in codes] == [1, 3]
