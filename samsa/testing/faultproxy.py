"""A TCP fault proxy for tests: links between nodes that pass, drop, delay or black-hole traffic.

    proxy = FaultProxy().start()
    link = proxy.add_link("1->2", [("127.0.0.1", 9092), ("127.0.0.1", 9093)])
    link.listen_address(("127.0.0.1", 9092))   # where node 1 must dial instead of 9092
    link.drop(); link.heal(); link.delay(200); link.blackhole("forward")
    proxy.close()

The proxy runs its own asyncio loop in a daemon thread so tests stay synchronous: every control
call returns once the loop has applied it (after `drop()` the link's connections are closed).
One `Link` owns one listener per target (a free port on 127.0.0.1); all of a link's connections
share its state. "forward" is dialer -> target (requests), "backward" target -> dialer (answers).

- pass: bytes are copied as they come (optionally `delay_ms` later, order kept).
- drop: existing connections are closed and new ones accepted and closed at once (RST), which a
  dialer sees as a refused or reset connection.
- black-hole a direction: bytes are read and discarded. A connection that lost bytes is broken
  (its stream is cut mid-frame), so `heal()` closes every connection that was black-holed; the
  dialer reconnects, as it would after a real partition outlived its TCP timeouts.

Buffers are bounded (`max_chunks` chunks of `chunk_size` bytes per direction): a slow or delayed
side fills them and then the proxy stops reading, which is TCP back-pressure for the sender.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from collections.abc import Coroutine, Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

Direction = Literal["forward", "backward"]
DIRECTIONS: tuple[Direction, ...] = ("forward", "backward")
Address = tuple[str, int]
T = TypeVar("T")

_LINGER_RST = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() sends RST


@dataclass
class LinkState:
    """What a link does to its traffic now."""

    dropped: bool = False
    delay_ms: int = 0
    blackholed: set[str] = field(default_factory=set)  # of DIRECTIONS

    def describe(self) -> str:
        if self.dropped:
            return "drop"
        parts = [f"blackhole {d}" for d in DIRECTIONS if d in self.blackholed]
        if self.delay_ms:
            parts.append(f"delay {self.delay_ms} ms")
        return ", ".join(parts) or "pass"


@dataclass
class LinkStats:
    accepted: int = 0  # connections forwarded to the target
    refused: int = 0  # connections closed at accept because the link was dropped
    failed: int = 0  # connections whose target could not be reached
    closed_by_fault: int = 0  # connections closed by drop() or by heal() after a black hole
    forwarded: dict[str, int] = field(default_factory=lambda: dict.fromkeys(DIRECTIONS, 0))
    discarded: dict[str, int] = field(default_factory=lambda: dict.fromkeys(DIRECTIONS, 0))


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with RST (no orderly FIN): the peer sees the connection broken, as after a fault."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RST)
    writer.close()


class _Conn:
    """One proxied connection: the accepted side (dialer) and the side dialed to the target."""

    def __init__(self, link: Link, down_r: asyncio.StreamReader, down_w: asyncio.StreamWriter,
                 up_r: asyncio.StreamReader, up_w: asyncio.StreamWriter) -> None:
        self.link = link
        self.ends = {"forward": (down_r, up_w), "backward": (up_r, down_w)}
        self.writers = (down_w, up_w)
        self.tainted = False  # lost bytes to a black hole: closed at heal
        self.tasks: list[asyncio.Task[None]] = []
        self.closed = False

    def start(self) -> None:
        for d in DIRECTIONS:
            queue: asyncio.Queue[tuple[float, bytes] | None] = asyncio.Queue(self.link.max_chunks)
            reader, writer = self.ends[d]
            self.tasks.append(asyncio.create_task(self._read(d, reader, queue)))
            self.tasks.append(asyncio.create_task(self._write(d, writer, queue)))

    async def _read(self, d: Direction, reader: asyncio.StreamReader,
                    queue: asyncio.Queue[tuple[float, bytes] | None]) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                data = await reader.read(self.link.chunk_size)
                if not data:
                    break
                state = self.link.state
                if d in state.blackholed:
                    self.tainted = True
                    self.link.stats.discarded[d] += len(data)
                    continue
                await queue.put((loop.time() + state.delay_ms / 1000, data))
        except (OSError, asyncio.IncompleteReadError):
            pass
        await queue.put(None)  # EOF after what is queued (a cancelled task never gets here)

    async def _write(self, d: Direction, writer: asyncio.StreamWriter,
                     queue: asyncio.Queue[tuple[float, bytes] | None]) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                item = await queue.get()
                if item is None:
                    break
                due, data = item
                wait = due - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                if d in self.link.state.blackholed:
                    self.tainted = True
                    self.link.stats.discarded[d] += len(data)
                    continue
                writer.write(data)
                await writer.drain()
                self.link.stats.forwarded[d] += len(data)
            if writer.can_write_eof():
                writer.write_eof()  # half-close: the other direction may still be talking
        except (OSError, RuntimeError):
            self.close(reset=True)
            return
        if all(t.done() or t is asyncio.current_task() for t in self.tasks[1::2]):
            self.close(reset=False)  # both directions ended

    def close(self, reset: bool) -> None:
        if self.closed:
            return
        self.closed = True
        self.link.conns.discard(self)
        for w in self.writers:
            _reset(w) if reset else w.close()
        current = asyncio.current_task()
        for t in self.tasks:
            if t is not current:
                t.cancel()


class Link:
    """One ordered link (e.g. node 1 dialing node 2): its listeners, connections and state.
    The control methods are called from any thread; they block until the proxy applied them."""

    def __init__(self, proxy: FaultProxy, name: str, max_chunks: int, chunk_size: int) -> None:
        self.proxy = proxy
        self.name = name
        self.max_chunks = max_chunks
        self.chunk_size = chunk_size
        self.state = LinkState()
        self.stats = LinkStats()
        self.conns: set[_Conn] = set()
        self.routes: dict[Address, Address] = {}  # target -> the proxy's listening address
        self._servers: list[asyncio.Server] = []

    def __repr__(self) -> str:
        return f"<Link {self.name}: {self.state.describe()}, {len(self.conns)} connections>"

    def listen_address(self, target: Address) -> Address:
        return self.routes[target]

    # ---- controls (any thread) ------------------------------------------------------------------
    def heal(self) -> None:
        """Back to pass with no delay; connections that lost bytes to a black hole are closed."""
        self.proxy._call(self._apply(dropped=False, delay_ms=0, blackholed=set()))

    pass_ = heal

    def drop(self) -> None:
        self.proxy._call(self._apply(dropped=True))

    def delay(self, ms: int) -> None:
        """Every byte read from now on is forwarded `ms` later (order kept); 0 = no delay."""
        if ms < 0:
            raise ValueError("a delay is at least 0 ms")
        self.proxy._call(self._apply(delay_ms=ms))

    def blackhole(self, direction: Direction) -> None:
        """Bytes in `direction` are accepted and discarded (the other direction still flows)."""
        if direction not in DIRECTIONS:
            raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
        self.proxy._call(self._apply(blackholed=self.state.blackholed | {direction}))

    @property
    def connections(self) -> int:
        return len(self.conns)

    # ---- on the proxy's loop ---------------------------------------------------------------------
    async def _apply(self, *, dropped: bool | None = None, delay_ms: int | None = None,
                     blackholed: set[str] | None = None) -> None:
        new = LinkState(self.state.dropped if dropped is None else dropped,
                        self.state.delay_ms if delay_ms is None else delay_ms,
                        set(self.state.blackholed if blackholed is None else blackholed))
        self.state = new
        for conn in list(self.conns):
            if new.dropped or (conn.tainted and not new.blackholed):
                self.stats.closed_by_fault += 1
                conn.close(reset=True)
            elif new.blackholed:
                conn.tainted = True  # bytes may be lost from now on

    async def _listen(self, target: Address) -> Address:
        async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await self._accept(target, reader, writer)

        server = await asyncio.start_server(accept, self.proxy.host, 0)
        self._servers.append(server)
        port = server.sockets[0].getsockname()[1]
        self.routes[target] = (self.proxy.host, int(port))
        return self.routes[target]

    async def _accept(self, target: Address, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:
        if self.state.dropped:
            self.stats.refused += 1
            _reset(writer)
            return
        try:
            up_r, up_w = await asyncio.wait_for(asyncio.open_connection(*target), 5.0)
        except (OSError, TimeoutError):
            self.stats.failed += 1
            _reset(writer)  # the target is down: the dialer sees what it would see directly
            return
        if self.state.dropped:  # dropped while we were dialing
            self.stats.refused += 1
            _reset(writer)
            _reset(up_w)
            return
        conn = _Conn(self, reader, writer, up_r, up_w)
        if self.state.blackholed:
            conn.tainted = True
        self.conns.add(conn)
        self.stats.accepted += 1
        conn.start()

    async def _close(self) -> None:
        for server in self._servers:
            server.close()
        for conn in list(self.conns):
            conn.close(reset=True)
        for server in self._servers:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 2.0)
        self._servers.clear()


class FaultProxy:
    """The proxy's loop thread and its links."""

    def __init__(self, host: str = "127.0.0.1", max_chunks: int = 16,
                 chunk_size: int = 65536) -> None:
        self.host = host
        self.max_chunks = max_chunks
        self.chunk_size = chunk_size
        self.links: dict[str, Link] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> FaultProxy:
        if self._thread is not None:
            return self
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.close()

        self._thread = threading.Thread(target=run, name="samsa-fault-proxy", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("the fault proxy's loop did not start")
        return self

    def _call(self, coro: Coroutine[Any, Any, T], timeout: float = 10.0) -> T:
        if self._loop is None or not self._loop.is_running():
            coro.close()
            raise RuntimeError("the fault proxy is not running")
        fut: Future[T] = asyncio.run_coroutine_threadsafe(coro, self._loop)
        return fut.result(timeout)

    def add_link(self, name: str, targets: Iterable[Address]) -> Link:
        """A link with one listener per target; `link.routes` maps each target to its listener."""
        if name in self.links:
            raise ValueError(f"link {name!r} exists")
        link = Link(self, name, self.max_chunks, self.chunk_size)
        for target in targets:
            self._call(link._listen((target[0], int(target[1]))))
        self.links[name] = link
        return link

    def heal(self) -> None:
        for link in self.links.values():
            link.heal()

    def close(self) -> None:
        """Close every listener and connection, stop the loop and join its thread."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        if loop.is_running():
            async def close_all() -> None:
                for link in self.links.values():
                    await link._close()
                tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)

            with contextlib.suppress(Exception):
                self._call(close_all(), timeout=15.0)
            loop.call_soon_threadsafe(loop.stop)
        thread.join(15)
        self._loop = None
        self._thread = None

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
