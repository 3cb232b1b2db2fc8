"""Connection abuse: many idle connections, slow writers, clients that never read, connect/close
storms. While the abusers are connected, a well-behaved client must keep working and the broker's
RSS must stay under RSS_ABUSE_BOUND_MB; once they leave, RSS comes back within
RSS_RECOVERY_SLACK_MB of the baseline and the broker holds no more descriptors than before
(+ a small slack) — nothing leaks per connection.
"""

from __future__ import annotations

import random
import socket
import struct
import threading
import time

import pytest

from samsa.testing import SamsaBroker

from ._support import (
    DATA_TOPIC,
    RSS_ABUSE_BOUND_MB,
    Health,
    api_versions_request,
    connect,
    correlation_of,
    fetch_request,
    metadata_request,
    open_sockets,
    raise_nofile,
    read_answer,
    rss_mb,
)

pytestmark = pytest.mark.timeout(300)

FD_SLACK = 20  # sockets the broker may keep beyond its baseline after the abusers leave


def _check_in_background(health: Health, label: str) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            health.check(label, recovered=False)
        except BaseException as e:  # noqa: BLE001 - handed to the test thread
            errors.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, errors


def test_two_thousand_idle_connections(fuzz_broker: SamsaBroker, health: Health) -> None:
    assert raise_nofile() >= 4200, "cannot raise RLIMIT_NOFILE for 2,000 connections"
    fds0 = open_sockets(health.pid)
    conns = []
    try:
        for i in range(2000):
            conns.append(connect(fuzz_broker.bootstrap, timeout=10))
            if i % 500 == 499:
                health.alive(f"{i + 1} idle connections")
        # the broker accepted them all (accept runs on the loop: wait for it to catch up)
        deadline = time.monotonic() + 20
        while open_sockets(health.pid) < 2000 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert open_sockets(health.pid) >= 2000
        rss = health.check("2,000 idle connections held", recovered=False)
        print(f"2,000 idle connections: broker RSS {rss:.0f} MB (baseline {health.baseline_mb:.0f})")
        # a few of the idle ones wake up and are served
        for s in conns[::400]:
            s.sendall(api_versions_request(42))
            ans = read_answer(s, 10)
            assert ans is not None and correlation_of(ans) == 42
    finally:
        for s in conns:
            s.close()
    deadline = time.monotonic() + 20
    while open_sockets(health.pid) > fds0 + FD_SLACK and time.monotonic() < deadline:
        time.sleep(0.2)
    assert open_sockets(health.pid) <= fds0 + FD_SLACK, "descriptors leaked after 2,000 connections"
    health.check("2,000 idle connections closed")


def test_slow_writers(fuzz_broker: SamsaBroker, health: Health) -> None:
    """20 clients each dribble two pipelined requests at one byte per 100 ms; meanwhile a real
    client is served; every slow request is answered, in order."""
    reqs = [api_versions_request(1) + metadata_request(DATA_TOPIC, 2) for _ in range(20)]
    conns = [connect(fuzz_broker.bootstrap, timeout=10) for _ in reqs]
    longest = max(len(r) for r in reqs)
    checker, errors = None, []
    for i in range(longest):
        for s, r in zip(conns, reqs, strict=True):
            if i < len(r):
                s.sendall(r[i : i + 1])
        if i == 10:
            checker, errors = _check_in_background(health, "during slow writers")
        time.sleep(0.1)
    for s in conns:
        corrs = []
        for _ in range(2):
            ans = read_answer(s, 10)
            assert ans is not None, "slow writer's connection closed"
            corrs.append(correlation_of(ans))
        assert corrs == [1, 2]
        s.close()
    assert checker is not None
    checker.join(60)
    assert not errors, errors
    health.check("slow writers")


def test_non_readers_do_not_grow_the_broker(fuzz_broker: SamsaBroker, health: Health) -> None:
    """4 clients pipeline up to 400 Fetch requests each (~800 KB of data per answer) and never
    read: the broker must stop reading from them (back-pressure) rather than buffer answers
    without bound. Its RSS stays under the bound, a real client keeps working."""
    conns = []
    for _ in range(4):
        s = connect(fuzz_broker.bootstrap, timeout=10)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.setblocking(False)
        conns.append(s)
    reqs = [fetch_request(DATA_TOPIC, i, max_bytes=8 << 20) for i in range(400)]
    pending = [b"".join(reqs) for _ in conns]
    sent = [0] * len(conns)
    peak = 0.0
    checker, errors = None, []
    over = False
    start = time.monotonic()
    try:
        while time.monotonic() - start < 25:
            progressed = False
            for i, s in enumerate(conns):
                if sent[i] < len(pending[i]):
                    try:
                        n = s.send(pending[i][sent[i] : sent[i] + 65536])
                        sent[i] += n
                        progressed = progressed or n > 0
                    except BlockingIOError:
                        pass
            peak = max(peak, rss_mb(health.pid))
            if peak > 2 * RSS_ABUSE_BOUND_MB:  # do not take the test machine down with us
                over = True
                break
            if checker is None and time.monotonic() - start > 3:
                checker, errors = _check_in_background(health, "during non-readers")
            if checker is not None and not checker.is_alive() and not progressed:
                break
            time.sleep(0.05)
        if checker is not None:
            checker.join(60)
        frac = sum(sent) / sum(len(p) for p in pending)
        print(f"non-readers: {frac:.0%} of the requests got in, peak broker RSS {peak:.0f} MB")
        assert not over and peak < RSS_ABUSE_BOUND_MB, \
            f"broker RSS reached {peak:.0f} MB with 4 non-reading clients (bound {RSS_ABUSE_BOUND_MB})"
        assert not errors, errors
    finally:
        for s in conns:
            s.close()
    health.check("non-readers gone")


def test_connect_close_storm(fuzz_broker: SamsaBroker, health: Health, rng: random.Random) -> None:
    """5,000 connections opened and closed: plainly, with a reset (SO_LINGER 0), after half a
    request, after a full request without reading the answer."""
    fds0 = open_sockets(health.pid)
    req = metadata_request(DATA_TOPIC, 3)
    for i in range(5000):
        s = connect(fuzz_broker.bootstrap, timeout=10)
        kind = rng.randrange(4)
        if kind == 1:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        elif kind == 2:
            s.sendall(req[: rng.randrange(1, len(req))])
        elif kind == 3:
            s.sendall(req)
        s.close()
        if i % 1000 == 999:
            health.alive(f"{i + 1} connect/close")
    deadline = time.monotonic() + 20
    while open_sockets(health.pid) > fds0 + FD_SLACK and time.monotonic() < deadline:
        time.sleep(0.2)
    assert open_sockets(health.pid) <= fds0 + FD_SLACK, "descriptors leaked after 5,000 connections"
    health.check("5,000 connect/close")


def test_many_non_readers_do_not_starve_others(fuzz_broker: SamsaBroker, health: Health) -> None:
    """500 clients each pipeline 4 Fetch requests and never read. Broker-wide request limits must
    not let them mute everyone else: a real client is still served within 10 s while they are
    connected, and RSS stays under the bound."""
    conns = []
    over = False
    try:
        for i in range(500):
            s = connect(fuzz_broker.bootstrap, timeout=10)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.sendall(b"".join(fetch_request(DATA_TOPIC, j, max_bytes=8 << 20) for j in range(4)))
            conns.append(s)
            if i % 50 == 49 and rss_mb(health.pid) > 2 * RSS_ABUSE_BOUND_MB:
                over = True  # do not take the test machine down with us
                break
        peak = 0.0
        for _ in range(10):  # let the broker work through the 2,000 requests
            time.sleep(0.5)
            peak = max(peak, rss_mb(health.pid))
        print(f"{len(conns)} non-readers: broker RSS {peak:.0f} MB")
        assert not over and peak < RSS_ABUSE_BOUND_MB, \
            f"broker RSS {peak:.0f} MB with {len(conns)} non-reading clients"
        health.check(f"{len(conns)} non-readers connected", recovered=False)
    finally:
        for s in conns:
            s.close()
    health.check("non-readers gone")


@pytest.mark.parametrize("setting", ["max.connections", "max.connections.per.ip"])
def test_connection_limits(setting: str) -> None:
    """With the limit at 50: the 51st connection is closed at once, the 50 held are served, and
    once some leave new connections are admitted again."""
    from samsa.testing import SamsaBroker as Broker

    with Broker(overrides={setting: "50"}) as b:
        held = [connect(b.bootstrap, timeout=10) for _ in range(50)]
        for s in held[:3]:  # admitted connections are served (and so were accepted before #51)
            s.sendall(api_versions_request(1))
            assert read_answer(s, 10) is not None
        extra = connect(b.bootstrap, timeout=10)
        extra.sendall(api_versions_request(2))
        assert read_answer(extra, 10) is None, f"connection 51 was served despite {setting}=50"
        extra.close()
        for s in held[:10]:
            s.close()
        time.sleep(0.5)  # the broker notices the closes
        again = connect(b.bootstrap, timeout=10)
        again.sendall(api_versions_request(3))
        ans = read_answer(again, 10)
        assert ans is not None and correlation_of(ans) == 3
        again.close()
        for s in held[10:]:
            s.close()
        assert b.proc is not None and b.proc.poll() is None
        assert "Traceback" not in b.log_text()


def test_descriptor_limit_reached_by_connections() -> None:
    """A broker under RLIMIT_NOFILE 256 with 400 connections coming in: the ones it accepted are
    served, the rest wait in the listen backlog (no crash, no Traceback), and once they leave new
    connections are served."""
    from samsa.testing import SamsaBroker as Broker

    with Broker(nofile=(256, 256)) as b:
        conns = [connect(b.bootstrap, timeout=10) for _ in range(400)]
        served = 0
        for s in conns[:150]:
            s.sendall(api_versions_request(1))
            ans = read_answer(s, 10)
            served += ans is not None
        assert served == 150
        assert b.proc is not None and b.proc.poll() is None
        for s in conns:
            s.close()
        time.sleep(1)
        again = connect(b.bootstrap, timeout=10)
        again.sendall(api_versions_request(5))
        ans = read_answer(again, 10)
        assert ans is not None and correlation_of(ans) == 5
        again.close()
        assert "Traceback" not in b.log_text()
