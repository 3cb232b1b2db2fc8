"""Framing abuse: length prefixes out of range, truncated frames, frames dribbled byte by byte.

A frame whose length is outside [8, socket.request.max.bytes] must close the connection at once
(Kafka's InvalidReceiveException) without the broker allocating the announced size; a
self-consistent but truncated request is answered or closed promptly, never left hanging; a valid
request is answered however the bytes are split across TCP segments.
"""

from __future__ import annotations

import random
import struct
import time

import pytest

from samsa.testing import SamsaBroker

from ._support import (
    DATA_TOPIC,
    Health,
    api_versions_request,
    connect,
    correlation_of,
    fetch_request,
    metadata_request,
    outcome,
    produce_request,
    read_answer,
    rss_mb,
)

pytestmark = pytest.mark.timeout(240)

MAX_REQUEST = 104857600  # socket.request.max.bytes default


def _batch() -> bytes:
    from samsa.protocol.records import encode_batch
    return encode_batch([(b"k", b"v" * 20, [], int(time.time() * 1000))])


def test_bad_length_prefixes_close_the_connection(fuzz_broker: SamsaBroker, health: Health) -> None:
    failures = []
    sizes = [-1, -2, -(2**31), 0, 1, 4, 7, MAX_REQUEST + 1, 2**31 - 1, 2**30]
    before = rss_mb(health.pid)
    for size in sizes:
        s = connect(fuzz_broker.bootstrap)
        # the length, then a plausible header: nothing the broker reads may make it wait for more
        s.sendall(struct.pack(">i", size) + struct.pack(">hhi", 18, 3, 1))
        got = outcome(s, 5)
        s.close()
        if got != "closed":
            failures.append(f"length {size}: {got} (frame {struct.pack('>i', size).hex()}...)")
    assert not failures, failures
    # nothing was allocated for the announced sizes
    assert rss_mb(health.pid) < before + 50
    health.check("bad length prefixes")


def test_length_at_the_limit_is_not_preallocated(fuzz_broker: SamsaBroker, health: Health) -> None:
    """100 connections each announcing a frame of exactly socket.request.max.bytes and sending only
    its header: the broker must not reserve 100 x 100 MB (it buffers what arrives)."""
    conns = []
    for i in range(100):
        s = connect(fuzz_broker.bootstrap)
        s.sendall(struct.pack(">ihhi", MAX_REQUEST, 18, 3, i))
        conns.append(s)
    time.sleep(0.5)
    health.alive("max-size announcements")
    assert rss_mb(health.pid) < health.baseline_mb + 100  # type: ignore[operator]
    health.check("max-size announcements held", recovered=False)
    for s in conns:
        s.close()
    health.check("max-size announcements closed")


def _cut(frame_bytes: bytes, n: int) -> bytes:
    """The first n payload bytes, re-framed with a length prefix that says n."""
    return struct.pack(">i", n) + frame_bytes[4 : 4 + n]


def test_truncated_requests_are_answered_or_closed(fuzz_broker: SamsaBroker, health: Health,
                                                   rng: random.Random) -> None:
    """Every cut of four valid requests (ApiVersions, Metadata, Fetch, Produce) sent as a complete,
    shorter frame: the broker answers or closes at once; it never waits for bytes the frame's
    length says are not coming."""
    reqs = {
        "ApiVersions v3": api_versions_request(),
        "Metadata v12": metadata_request(DATA_TOPIC),
        "Fetch v11": fetch_request(DATA_TOPIC),
        "Produce v9": produce_request(DATA_TOPIC, _batch()),
    }
    failures = []
    for name, full in reqs.items():
        n_payload = len(full) - 4
        cuts = list(range(8, n_payload))
        if len(cuts) > 60:  # bound the count: every header cut, then a seeded sample
            cuts = list(range(8, 30)) + sorted(rng.sample(cuts[22:], 38))
        for n in cuts:
            s = connect(fuzz_broker.bootstrap)
            data = _cut(full, n)
            s.sendall(data)
            got = outcome(s, 5)
            s.close()
            if got == "silent":
                failures.append(f"{name} cut to {n}: no answer, no close; frame {data.hex()}")
    assert not failures, "\n".join(failures[:10])
    health.check("truncated requests")


def test_frame_cut_off_by_disconnect(fuzz_broker: SamsaBroker, health: Health,
                                     rng: random.Random) -> None:
    """Frames whose sender disconnects part way (length says more is coming)."""
    full = produce_request(DATA_TOPIC, _batch())
    for _ in range(50):
        s = connect(fuzz_broker.bootstrap)
        s.sendall(full[: rng.randrange(1, len(full))])
        s.close()
    health.check("frames cut by disconnect")


def test_requests_sent_byte_by_byte(fuzz_broker: SamsaBroker, health: Health) -> None:
    """Three pipelined requests dribbled one byte per send (TCP_NODELAY): all answered, in order."""
    reqs = [api_versions_request(1), metadata_request(DATA_TOPIC, 2), fetch_request(DATA_TOPIC, 3)]
    s = connect(fuzz_broker.bootstrap)
    for b in b"".join(reqs):
        s.sendall(bytes((b,)))
        time.sleep(0.001)
    corrs = []
    for _ in reqs:
        ans = read_answer(s, 10)
        assert ans is not None, "broker closed a byte-by-byte connection"
        corrs.append(correlation_of(ans))
    s.close()
    assert corrs == [1, 2, 3]
    health.check("byte by byte")


def test_requests_split_at_every_boundary(fuzz_broker: SamsaBroker, health: Health) -> None:
    """One request split in two writes at every position, with a pause between: always answered."""
    req = metadata_request(DATA_TOPIC, 9)
    s = connect(fuzz_broker.bootstrap)
    for i in range(1, len(req)):
        s.sendall(req[:i])
        time.sleep(0.002)
        s.sendall(req[i:])
        ans = read_answer(s, 10)
        assert ans is not None and correlation_of(ans) == 9, f"split at {i}"
    s.close()
    health.check("split frames")


def test_many_frames_in_one_write(fuzz_broker: SamsaBroker, health: Health) -> None:
    """500 pipelined requests in one write: 500 answers in order."""
    data = b"".join(api_versions_request(i) for i in range(500))
    s = connect(fuzz_broker.bootstrap)
    s.sendall(data)
    corrs = []
    for _ in range(500):
        ans = read_answer(s, 10)
        assert ans is not None
        corrs.append(correlation_of(ans))
    s.close()
    assert corrs == list(range(500))
    health.check("500 pipelined frames")


def test_configured_request_limit_is_exact() -> None:
    """With socket.request.max.bytes=65536: a request of exactly 65,536 bytes is served, one byte
    more closes the connection (the limit counts the frame without its 4-byte length)."""
    from samsa.testing import SamsaBroker as Broker

    from ._support import frame

    with Broker(overrides={"socket.request.max.bytes": "65536"}) as b:
        base = metadata_request("x", 5)[4:]
        # pad with trailing bytes (ignored after the body) up to the exact size
        exact = frame(base + b"\x00" * (65536 - len(base)))
        over = frame(base + b"\x00" * (65537 - len(base)))
        s = connect(b.bootstrap)
        s.sendall(exact)
        ans = read_answer(s, 10)
        assert ans is not None and correlation_of(ans) == 5
        s.sendall(over[:64])  # the length prefix alone must be enough to refuse it
        assert outcome(s, 5) == "closed"
        s.close()
        assert b.proc is not None and b.proc.poll() is None
        assert "Traceback" not in b.log_text()
