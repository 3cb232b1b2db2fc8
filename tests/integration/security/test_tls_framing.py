"""Request framing over TLS and PLAINTEXT with the broker's buffered reads (server.RecvBuffers).

The broker receives small frames into a per-connection scratch buffer and frames larger than it
into pooled buffers that grow as bytes arrive. These tests send pipelined requests of both kinds
cut at random points (so frame boundaries, length prefixes and TLS records fall anywhere, and one
read may end one frame and start the next) and check every answer, in order, and the records.
"""

from __future__ import annotations

import os
import random
import socket
import struct
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.index import load_response_schema
from kio.serial import entity_reader

from samsa.protocol.records import encode_batch
from samsa.testing import SamsaBroker, free_port
from samsa.testing.tls import TlsFiles, ssl_listener_overrides
from tests.fuzz._support import api_versions_request, metadata_request, produce_request

pytestmark = [pytest.mark.timeout(180)]

BIG = 8 * 1024 * 1024


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return TlsFiles.create(tmp_path_factory.mktemp("tls-framing"))


@pytest.fixture(scope="module")
def broker(tls: TlsFiles, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[tuple[SamsaBroker, dict[str, int]]]:
    plain = free_port()
    overrides, ssl_port = ssl_listener_overrides(tls, plain)
    overrides["listeners"] = f"SSL://127.0.0.1:{ssl_port},PLAINTEXT://127.0.0.1:{plain}"
    data = Path(tmp_path_factory.mktemp("tls-framing-data"))
    with SamsaBroker(data, port=plain, overrides=overrides) as b:
        yield b, {"PLAINTEXT": plain, "SSL": ssl_port}


def _connect(proto: str, port: int, tls: TlsFiles) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    if proto == "SSL":
        s = tls.ssl_context().wrap_socket(s, server_hostname="127.0.0.1")
    return s


def _recv_exact(s: socket.socket, n: int) -> bytes:
    parts, got = [], 0
    while got < n:
        chunk = s.recv(min(n - got, 1 << 20))
        if not chunk:
            raise ConnectionError("connection closed by the broker")
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def _answer(s: socket.socket) -> bytes:
    (n,) = struct.unpack(">i", _recv_exact(s, 4))
    return _recv_exact(s, n)


def _produce_answer(frame: bytes) -> tuple[int, int]:
    """(error code, base offset) of a Produce v9 answer for one partition."""
    cls = load_response_schema(0, 9)
    _, n = entity_reader(cls.__header_schema__)(frame, 0)
    resp, _ = entity_reader(cls)(frame, n)
    part = resp.responses[0].partition_responses[0]
    return int(part.error_code), int(part.base_offset)


def _pieces(data: bytes, rng: random.Random) -> Iterator[bytes]:
    """`data` cut at random points: many tiny pieces and some up to 96 KiB."""
    pos = 0
    while pos < len(data):
        n = rng.choice((1, 2, 3, 5, rng.randint(6, 600), rng.randint(600, 96 * 1024)))
        yield data[pos : pos + n]
        pos += n


@pytest.mark.parametrize("proto", ["PLAINTEXT", "SSL"])
def test_split_pipelined_small_and_big_frames_are_all_answered_in_order(
        broker: tuple[SamsaBroker, dict[str, int]], tls: TlsFiles, proto: str) -> None:
    b, ports = broker
    topic = f"framing-{proto.lower()}-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={"max.message.bytes": str(BIG)})])[
        topic].result(30)
    rng = random.Random(f"tls-framing-{proto}")
    now = int(time.time() * 1000)
    # values above the 16 KiB scratch buffer, one far above the pool's first 64 KiB buffer, and
    # a repeat of the first size (served from the pool)
    values = [os.urandom(n) for n in (20_000, 300_000, 2_500_000, 300_000)]
    reqs = [api_versions_request(1)]
    corr = 1
    for v in values:
        corr += 1
        reqs.append(produce_request(topic, encode_batch([(b"k", v, [], now)]), corr, acks=1))
        corr += 1
        reqs.append(metadata_request(topic, corr))
    s = _connect(proto, ports[proto], tls)
    try:
        for piece in _pieces(b"".join(reqs), rng):
            s.sendall(piece)
        answers = [_answer(s) for _ in reqs]
    finally:
        s.close()
    assert [struct.unpack_from(">i", a)[0] for a in answers] == list(range(1, corr + 1))
    produced = [_produce_answer(a) for a in answers[1::2]]
    assert produced == [(0, i) for i in range(len(values))]
    sec = tls.confluent() if proto == "SSL" else {}
    c = Consumer({"bootstrap.servers": f"127.0.0.1:{ports[proto]}", "group.id": topic,
                  "auto.offset.reset": "earliest", "fetch.max.bytes": BIG * 2,
                  "max.partition.fetch.bytes": BIG, **sec})
    try:
        c.subscribe([topic])
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < len(values) and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is not None and m.error() is None:
                got.append(m.value())
    finally:
        c.close()
    assert got == values


@pytest.mark.parametrize("proto", ["PLAINTEXT", "SSL"])
def test_a_big_frame_cut_short_by_a_closed_connection_leaves_the_broker_serving(
        broker: tuple[SamsaBroker, dict[str, int]], tls: TlsFiles, proto: str) -> None:
    """A client that announces 3 MB, sends half and goes away: its pooled buffer is given back
    and the next client's frames on the same listener are still answered."""
    b, ports = broker
    s = _connect(proto, ports[proto], tls)
    s.sendall(struct.pack(">ihhi", 3_000_000, 0, 9, 7) + os.urandom(1_500_000))
    s.close()
    s = _connect(proto, ports[proto], tls)
    try:
        s.sendall(api_versions_request(42))
        assert struct.unpack_from(">i", _answer(s))[0] == 42
    finally:
        s.close()
    assert b.proc is not None and b.proc.poll() is None


def test_recv_buffers_size_by_what_arrived_and_keep_a_bounded_pool() -> None:
    from samsa.broker.server import RecvBuffers

    pool = RecvBuffers()
    # an announced 100 MB frame with 10 KB arrived gets the smallest buffer, not 100 MB
    first = pool.take(100 * 1024 * 1024, 10_000)
    assert len(first) == RecvBuffers.MIN_SIZE
    first[:5] = b"hello"
    grown = pool.grow(first, 100 * 1024 * 1024, 5)
    assert len(grown) == 2 * RecvBuffers.MIN_SIZE and grown[:5] == b"hello"
    # never larger than the frame needs (rounded to a power of two while poolable)
    assert len(pool.take(70_000, 60_000)) == 128 * 1024
    # given-back buffers are reused for frames they fit, up to KEEP_BYTES in all
    pool.give(bytearray(1 << 20))
    reused = pool.take(1_000_000, 10_000)
    assert len(reused) == 1 << 20 and all(len(b) < 1 << 20 for b in pool.free)
    for _ in range(100):
        pool.give(bytearray(RecvBuffers.MAX_POOLED))
    assert pool.kept <= RecvBuffers.KEEP_BYTES
    pool.give(bytearray(RecvBuffers.MAX_POOLED + 1))
    assert pool.kept <= RecvBuffers.KEEP_BYTES
