"""The fault proxy with plain sockets (127.0.0.1 only): pass, drop, delay, one-way black hole,
heal, bounded buffers and a clean close."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from samsa.cluster.channel import dial_address
from samsa.testing.faultproxy import FaultProxy, Link


class EchoServer:
    """Echoes every byte back; counts what it received."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.address = ("127.0.0.1", self.sock.getsockname()[1])
        self.received = 0
        self.lock = threading.Lock()
        self.stop = False
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        self.sock.settimeout(0.2)
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    def _echo(self, conn: socket.socket) -> None:
        with conn:
            while True:
                try:
                    data = conn.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                with self.lock:
                    self.received += len(data)
                try:
                    conn.sendall(data)
                except OSError:
                    return

    def close(self) -> None:
        self.stop = True
        self.sock.close()


@pytest.fixture
def echo() -> Iterator[EchoServer]:
    e = EchoServer()
    yield e
    e.close()


@pytest.fixture
def link(echo: EchoServer) -> Iterator[Link]:
    with FaultProxy(max_chunks=4, chunk_size=4096) as proxy:
        yield proxy.add_link("a->b", [echo.address])


def dial(link: Link, echo: EchoServer, timeout: float = 2.0) -> socket.socket:
    s = socket.create_connection(link.listen_address(echo.address), timeout=timeout)
    s.settimeout(timeout)
    return s


def roundtrip(s: socket.socket, data: bytes) -> bytes:
    s.sendall(data)
    got = b""
    while len(got) < len(data):
        chunk = s.recv(65536)
        if not chunk:
            break
        got += chunk
    return got


def refused(address: tuple[str, int]) -> bool:
    """True if a connection to `address` is reset at once (during connect or at the first
    read), as the proxy does for a dropped link or a target that is down."""
    try:
        s = socket.create_connection(address, timeout=2)
    except ConnectionError:
        return True
    with s:
        s.settimeout(2)
        return broken(s)


def broken(s: socket.socket) -> bool:
    """True if the connection is closed or reset (a read gives EOF or an error)."""
    try:
        s.sendall(b"x")
        return s.recv(10) == b""
    except OSError:
        return True


def test_pass_forwards_both_directions(link: Link, echo: EchoServer) -> None:
    with dial(link, echo) as s:
        payload = bytes(range(256)) * 2000  # more than the proxy buffers at once
        assert roundtrip(s, payload) == payload
    assert link.stats.forwarded["forward"] == len(payload)


def test_drop_closes_connections_and_refuses_new_ones(link: Link, echo: EchoServer) -> None:
    s = dial(link, echo)
    assert roundtrip(s, b"hello") == b"hello"
    link.drop()
    assert broken(s)
    s.close()
    assert refused(link.listen_address(echo.address))  # accepted, then reset at once
    assert link.stats.refused >= 1
    link.heal()
    with dial(link, echo) as s3:
        assert roundtrip(s3, b"again") == b"again"


def test_delay_holds_bytes_back_and_keeps_order(link: Link, echo: EchoServer) -> None:
    link.delay(400)
    with dial(link, echo) as s:
        s.sendall(b"first")
        s.settimeout(0.15)
        with pytest.raises(TimeoutError):
            s.recv(10)  # not here yet: the delay holds it back
        s.settimeout(5)
        got = b""
        s.sendall(b"second")
        while len(got) < 11:
            got += s.recv(100)
        assert got == b"firstsecond"
    link.delay(0)
    with dial(link, echo) as s:
        assert roundtrip(s, b"quick") == b"quick"


def test_blackhole_one_direction(link: Link, echo: EchoServer) -> None:
    """forward black-holed: the target never sees the bytes; backward black-holed: it sees them,
    the dialer gets no answer. heal() closes the connections that lost bytes."""
    with dial(link, echo) as s:
        assert roundtrip(s, b"warm") == b"warm"
        before = echo.received
        link.blackhole("forward")
        s.sendall(b"lost")
        s.settimeout(0.3)
        with pytest.raises(TimeoutError):
            s.recv(10)
        assert echo.received == before
        assert link.stats.discarded["forward"] == 4
        link.heal()
        assert broken(s)  # its stream lost bytes: closed at heal
    link.blackhole("backward")
    with dial(link, echo) as s:
        before = echo.received
        s.sendall(b"seen")
        deadline = time.monotonic() + 5
        while echo.received < before + 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert echo.received == before + 4  # the target got it ...
        s.settimeout(0.3)
        with pytest.raises(TimeoutError):
            s.recv(10)  # ... its answer vanished
    link.heal()
    with dial(link, echo) as s:
        assert roundtrip(s, b"healed") == b"healed"


def test_bounded_buffers_apply_backpressure(echo: EchoServer) -> None:
    """A dialer that never reads: the proxy stops reading once its buffers are full, so the
    sender blocks instead of the proxy growing."""
    with FaultProxy(max_chunks=2, chunk_size=4096) as proxy:
        link = proxy.add_link("a->b", [echo.address])
        s = dial(link, echo, timeout=0.5)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sent = 0
        with pytest.raises(TimeoutError):
            for _ in range(10_000):  # bounded: 640 MB at most, far more than any buffer
                s.sendall(b"z" * 65536)
                sent += 65536
        assert sent < 64 * 1024 * 1024  # socket buffers + 2 chunks per direction, not everything
        s.close()


def test_target_down_looks_like_a_refusal(echo: EchoServer) -> None:
    with FaultProxy() as proxy:
        dead = socket.create_server(("127.0.0.1", 0))
        address = ("127.0.0.1", dead.getsockname()[1])
        dead.close()
        link = proxy.add_link("a->dead", [address])
        assert refused(link.listen_address(address))
        assert link.stats.failed == 1


def test_close_is_clean(echo: EchoServer) -> None:
    proxy = FaultProxy().start()
    link = proxy.add_link("a->b", [echo.address])
    s = dial(link, echo)
    assert roundtrip(s, b"x") == b"x"
    thread = proxy._thread
    proxy.close()
    assert thread is not None and not thread.is_alive()
    assert broken(s)
    s.close()
    with pytest.raises(OSError):
        socket.create_connection(link.listen_address(echo.address), timeout=1).close()


def test_routes_env_maps_dialed_addresses(monkeypatch: pytest.MonkeyPatch) -> None:
    from samsa.cluster import channel

    channel._test_routes.cache_clear()
    monkeypatch.setenv("SAMSA_TEST_ROUTES", '{"127.0.0.1:9092": "127.0.0.1:40001"}')
    try:
        assert dial_address("127.0.0.1", 9092) == ("127.0.0.1", 40001)
        assert dial_address("127.0.0.1", 9093) == ("127.0.0.1", 9093)
    finally:
        channel._test_routes.cache_clear()
