"""Listeners and connections: size-prefixed frames, pipelined requests, responses in request order.

A connection reads frames bounded by socket.request.max.bytes; every request is dispatched at once
(so a long-polling fetch does not block later requests' processing), but responses are written in
the order the requests arrived, as Kafka clients require.

Back-pressure (Kafka's channel muting, adapted to pipelining): a connection is not read while
  - responses wait to be written because the socket does not drain (a client that does not read),
  - queued.max.requests.per.connection of its requests are unanswered, or
  - queued.max.requests requests are unanswered over the whole broker (long-polling fetches and
    group joins, parked waiting for data or other members with no memory but a tiny request, do
    not count: they would otherwise stall the clients that complete them).
Responses go through an outbox that is pumped only while the transport's buffer is below its
high-water mark, so a client that never reads holds at most about one high-water mark of response
bytes plus one file chunk in the broker, whatever it asked for.

Fetch responses carry file slices (storage.file_slice) for their record data. A slice of at least
SENDFILE_MIN bytes is sent with os.sendfile straight to the socket when the transport's buffer is
empty (everything before it is already in the kernel, so order holds); what the socket does not take
stays a slice in the outbox and is pread in chunks of at most FILE_CHUNK bytes as the socket drains.
Every slice is released once written or dropped (closed connection, failed request).

Reading (a BufferedProtocol, see RecvBuffers): the transport writes received bytes straight into
the connection's buffers: small frames into a small per-connection scratch buffer, a frame larger
than that straight into a pooled buffer of its size, copied once into the `bytes` the handlers
get. Over TLS this lets the event loop decrypt straight into those buffers instead of allocating
a 256 KiB bytes object per TLS record and joining them; in both protocols it saves the copies and
fresh (page-faulting) allocations of growing one bytearray per frame.
"""
from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import os
import struct
import time
from collections import deque
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from samsa.metrics.names import request_name
from samsa.metrics.timing import RequestTiming
from samsa.protocol import apis
from samsa.protocol.codec import decode_request, encode_response
from samsa.protocol.error_responses import UNKNOWN_SERVER_ERROR, error_response
from samsa.protocol.fetch_response import FetchChunks
from samsa.security.principal import ANONYMOUS, KafkaPrincipal
from samsa.security.quotas import Timed, charge_request, charge_time
from samsa.storage.file_slice import FileSlice

from . import fault_inject

if TYPE_CHECKING:
    from samsa.security.sasl.authenticator import SaslSession

    from .broker import Broker
    from .handlers import ListenerSpec

log = logging.getLogger("samsa.server")
_HDR = struct.Struct(">ihhi")
# Measured on loopback TCP (2-core VM): below ~64 KiB one pread + writev costs less CPU than an
# extra send + sendfile; from 64 KiB on sendfile wins (~25 % at 128–256 KiB, ~5 % at 1 MiB) and
# skips the copy into user space.
SENDFILE_MIN = 64 * 1024
# File data is read into memory at most this much at a time, and only while the socket drains.
FILE_CHUNK = 256 * 1024
# Transport write buffer high-water mark: above it the outbox stops being pumped and the
# connection stops being read.
WRITE_HIGH_WATER = 256 * 1024
# Per-connection receive scratch: small frames (and the start of big ones) land here. One TLS record
# at most is 16 KiB, so reads over TLS fill it in whole records.
RECV_SCRATCH = 16 * 1024

Response = list[bytes] | FetchChunks


def release_slices(chunks: Response | None) -> None:
    """Unpin the file slices of a response that is not (or no longer) going to be written."""
    if isinstance(chunks, FetchChunks):
        for c in chunks:
            if isinstance(c, FileSlice):
                c.release()


def _release_result(fut: asyncio.Future[Response | None]) -> None:
    if fut.cancelled():
        return
    exc = fut.exception()
    if exc is not None:
        log.warning("request failed after its connection closed: %r", exc)
        return
    release_slices(fut.result())


class RequestContext:
    __slots__ = ("api_key", "version", "correlation_id", "client_id", "conn", "frame", "counted",
                 "throttle_ms")

    def __init__(self, api_key: int, version: int, correlation_id: int, client_id: str | None,
                 conn: KafkaConnection, frame: bytes = b"") -> None:
        self.api_key = api_key
        self.version = version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self.conn = conn
        self.frame = frame  # the request as received (header included): forwarding, Raft RPCs
        self.counted = False  # counted in queued.max.requests until answered or parked
        self.throttle_ms = 0  # client quotas: throttle_time_ms, then the channel is muted

    def park(self) -> None:
        """The request now waits on other connections' requests (an acks=all produce waiting
        for followers' fetches, Kafka's purgatory): it stops counting towards
        queued.max.requests, or enough of them would stop the broker from reading the very
        requests that complete them."""
        park = getattr(self.conn, "uncount", None)
        if park is not None:
            park(self)


def unsupported_api_versions(correlation_id: int,
                             advertised: dict[int, tuple[int, int]] | None = None) -> list[bytes]:
    """ApiVersions answer for a version we do not know: v0 body + v0 header, error 35 and our ranges
    (the client then retries with a version from the list)."""
    keys = sorted((advertised or apis.ADVERTISED).items())
    body = struct.pack(">ihi", correlation_id, 35, len(keys))
    body += b"".join(struct.pack(">hhh", k, lo, hi) for k, (lo, hi) in keys)
    return [struct.pack(">i", len(body)), body]


# Requests that wait on other clients or on time (long-poll fetches, group joins waiting for the
# other members) hold a small request and no response data while they wait: counting them towards
# queued.max.requests would let parked requests stop the broker from reading the very requests
# that complete them.
_PARKED_APIS = frozenset({apis.FETCH, apis.JOIN_GROUP, apis.SYNC_GROUP})


class Unanswerable(Exception):
    """A failed request that gets no error response (acks=0 produce, or the error response
    itself failed): the connection closes, as Kafka's does. Already logged."""


class _SliceCursor:
    """The unsent rest of a file slice in a connection's outbox."""

    __slots__ = ("slice", "sent")

    def __init__(self, sl: FileSlice) -> None:
        self.slice = sl
        self.sent = 0

    @property
    def remaining(self) -> int:
        return self.slice.length - self.sent


OutItem = bytes | bytearray | memoryview | _SliceCursor


class RecvBuffers:
    """Receive buffers for frames larger than a connection's scratch buffer, reused across
    connections (one pool per broker, used on its event loop only). Fresh large buffers cost page
    faults on every frame; a returned buffer is kept only while the pool holds less than
    KEEP_BYTES, and buffers above MAX_POOLED are never kept, so an idle broker holds at most
    KEEP_BYTES here. A new buffer is sized by the bytes received so far, not by the size the
    frame announces, and grows as the rest arrives: announcing a huge frame reserves nothing."""

    MIN_SIZE = 64 * 1024
    MAX_POOLED = 8 * 1024 * 1024
    KEEP_BYTES = 16 * 1024 * 1024

    def __init__(self) -> None:
        self.free: list[bytearray] = []
        self.kept = 0

    def take(self, size: int, received: int) -> bytearray:
        """A pooled buffer of at least `size` bytes, else a new one for about twice `received`."""
        for i, b in enumerate(self.free):
            if len(b) >= size:
                del self.free[i]
                self.kept -= len(b)
                return b
        return bytearray(self.next_size(size, received))

    def next_size(self, size: int, have: int) -> int:
        """Twice `have` (at least MIN_SIZE, a power of two so buffers are reused), at most what
        the frame needs."""
        want = max(self.MIN_SIZE, 1 << (2 * have - 1).bit_length() if have else 0)
        full = 1 << (size - 1).bit_length() if size <= self.MAX_POOLED else size
        return min(want, full)

    def grow(self, buf: bytearray, size: int, filled: int) -> bytearray:
        """A larger buffer holding buf's first `filled` bytes (a new one: the transport may still
        hold a view of the old)."""
        new = bytearray(self.next_size(size, len(buf)))
        new[:filled] = memoryview(buf)[:filled]
        self.give(buf)
        return new

    def give(self, buf: bytearray) -> None:
        n = len(buf)
        if n > self.MAX_POOLED or self.kept + n > self.KEEP_BYTES:
            return
        self.free.append(buf)
        self.kept += n


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(self, broker: Broker, spec: ListenerSpec | None = None,
                 listener_name: str | None = None) -> None:
        from .handlers import BROKER_SPEC

        self.broker = broker
        self.listener_name = listener_name
        self.spec = spec or BROKER_SPEC
        self.handlers = self.spec.handlers
        self.supported = self.spec.supported
        self.limits: NetworkLimits = broker.network_limits
        self.max_request = self.limits.max_request
        # Receiving: bytes [rstart, rend) of `rbuf` are received and not yet framed; a frame
        # too big for rbuf is received into `big` (from the broker's RecvBuffers) up to big_size.
        self.rbuf = bytearray()  # allocated on first read
        self.rstart = 0
        self.rend = 0
        self.big: bytearray | None = None
        self.big_size = 0
        self.big_filled = 0
        self.recv_pool = self.limits.recv_buffers
        self.transport: asyncio.Transport | None = None
        self.pending: deque[asyncio.Future[Response | None]] = deque()
        self.outbox: deque[OutItem] = deque()
        self.closed = False
        self.write_paused = False
        self.read_paused = False
        self.counted = 0  # requests of this connection counted in limits.in_flight
        self.peer_ip = ""
        self.fetch_sessions: dict[int, Any] = {}
        # Who this connection is (TLS client certificate or SASL replace it) and how it came in.
        self.principal: KafkaPrincipal = ANONYMOUS
        self.security_protocol = "PLAINTEXT"
        self.sasl: SaslSession | None = None  # on a SASL listener: its authentication state
        self.min_request = 8  # 0 while SASL raw tokens (SaslHandshake v0) are read
        self.tls: Any = None  # the listener's samsa.security.ssl_context.ListenerTls, if TLS
        self.sock_fd = -1  # for sendfile; -1 when the transport is not a plain socket (TLS)
        self._batching = False  # inside data_received: pump once at the end
        # client quotas (KIP-219): the channel is not read until muted_until (loop time)
        self.muted_until = 0.0
        self._mute_timer: asyncio.TimerHandle | None = None
        # Fetch handlers in flight (their coroutines): stopped when the connection goes
        self.fetches: dict[asyncio.Future[Response | None], Any] = {}
        # metrics (ops-metrics, samsa/metrics): when the last bytes arrived (request queue time)
        self.received_at = 0.0

    # ---- asyncio.Protocol --------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.peer_ip = peer[0] if isinstance(peer, tuple) and peer else ""
        refused = self.limits.admit(self)
        if refused:
            log.info("closing connection from %s: %s", self.peer_ip or "?", refused)
            self.closed = True
            transport.close()
            return
        if self.tls is not None and self.security_protocol == "SSL" and not self._tls_principal():
            return
        self.broker.connections.add(self)
        self.broker.metrics.listener(self.listener_name).created += 1  # ops-metrics
        transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)  # type: ignore[attr-defined]
        sasl_listener = getattr(self.broker, "sasl_listeners", {}).get(self.listener_name)
        if sasl_listener is not None:
            from samsa.security.sasl.authenticator import SaslSession

            self.sasl = SaslSession(self, sasl_listener)
        sock = transport.get_extra_info("socket")
        if sock is not None and transport.get_extra_info("sslcontext") is None:
            try:
                self.sock_fd = sock.fileno()
            except (OSError, RuntimeError):
                self.sock_fd = -1

    def _tls_principal(self) -> bool:
        """SSL listeners: the principal of the client certificate (ssl.principal.mapping.rules);
        a certificate no rule maps fails the connection, as in Kafka."""
        assert self.transport is not None
        try:
            self.principal = self.tls.principal(self.transport.get_extra_info("ssl_object"))
        except ValueError as e:
            log.info("closing connection from %s: %s", self.peer_ip or "?", e)
            self.limits.leave(self)
            self.closed = True
            self.transport.close()
            return False
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        was_admitted = self in self.broker.connections
        self.closed = True
        self.broker.connections.discard(self)
        if was_admitted:
            self.limits.leave(self)
            self.broker.metrics.listener(self.listener_name).closed += 1  # ops-metrics
        # In-flight handlers run to completion (a half-done controller or coordinator operation
        # must never be cut off); their responses are dropped, their file slices released.
        for fut in self.pending:
            fut.add_done_callback(_release_result)
        self.pending.clear()
        # ...except a Fetch parked waiting for data: nothing will read its answer, and on an idle
        # partition it would otherwise hold its task until max_wait ends (a client that parks
        # fetches and reconnects would pile them up). A fetch not yet started finds the
        # connection closed and returns at once.
        fetches, self.fetches = self.fetches, {}
        for fut, coro in fetches.items():
            if inspect.getcoroutinestate(coro) == inspect.CORO_SUSPENDED:
                fut.cancel()
        self._drop_outbox()
        self.rbuf = bytearray()
        self.rstart = self.rend = 0
        if self.big is not None:
            self.recv_pool.give(self.big)
            self.big = None
        if self._mute_timer is not None:
            self._mute_timer.cancel()
            self._mute_timer = None

    def pause_writing(self) -> None:
        self.write_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self.write_paused = False
        self._pump()
        self._update_reading()

    def _update_reading(self) -> None:
        if self.transport is None or self.closed:
            return
        want_pause = (self.write_paused or bool(self.outbox) or self.muted_until > 0
                      or len(self.pending) >= self.limits.per_connection
                      or self.limits.saturated())
        if want_pause and self.limits.saturated():
            self.limits.waiting.add(self)
        if want_pause and not self.read_paused:
            self.transport.pause_reading()
            self.read_paused = True
        elif not want_pause and self.read_paused:
            self.read_paused = False
            self.transport.resume_reading()
            if self.rend > self.rstart or (self.big is not None
                                            and self.big_filled == self.big_size):
                self._batched(self._process)

    def mute_for(self, ms: int) -> None:
        """A quota violation: stop reading this connection for `ms` (Kafka mutes the channel
        once the throttled response is sent; KIP-219 clients back off by themselves too)."""
        if ms <= 0 or self.closed or self.spec.controller:
            return  # never a broker's own channel to the controller (forwarded requests)
        loop = asyncio.get_running_loop()
        until = loop.time() + ms / 1000
        if until <= self.muted_until:
            return
        self.muted_until = until
        if self._mute_timer is not None:
            self._mute_timer.cancel()
        self._mute_timer = loop.call_at(until, self._unmute)
        self._update_reading()

    def _unmute(self) -> None:
        self.muted_until = 0.0
        self._mute_timer = None
        self._update_reading()

    def get_buffer(self, sizehint: int) -> memoryview:
        """Where the transport writes the next bytes: the rest of a big frame's buffer, else the
        free end of the scratch buffer (never empty)."""
        if self.big is not None:
            if self.big_filled == len(self.big):
                self.big = self.recv_pool.grow(self.big, self.big_size, self.big_filled)
            return memoryview(self.big)[self.big_filled : self.big_size]
        if len(self.rbuf) - self.rend < 64:
            self._compact()
            if len(self.rbuf) - self.rend < 64:  # full of unframed bytes (reading paused)
                self.rbuf.extend(bytes(max(RECV_SCRATCH, len(self.rbuf))))
        return memoryview(self.rbuf)[self.rend :]

    def buffer_updated(self, nbytes: int) -> None:
        if self.big is not None:
            self.big_filled += nbytes
            if self.big_filled < self.big_size:
                return
        else:
            self.rend += nbytes
        self.received_at = time.perf_counter()  # ops-metrics: request queue time starts
        self._batched(self._process)

    def bytes_expected(self) -> int:
        """How many more bytes the request being received needs (0 between requests): a TLS
        transport waits for that much before waking up (samsa/net/tls_transport.py)."""
        if self.big is not None:
            return self.big_size - self.big_filled
        avail = self.rend - self.rstart
        if avail < 4:
            return 0
        (size,) = struct.unpack_from(">i", self.rbuf, self.rstart)
        return max(0, 4 + size - avail)

    def data_received(self, data: bytes | memoryview) -> None:
        """For transports that do not support buffered reading, and a TLS record opened aside
        (samsa/net/tls_transport.py): the same path, through a copy."""
        n = len(data)
        while n and not self.closed:
            buf = self.get_buffer(n)
            k = min(len(buf), n)
            buf[:k] = data[len(data) - n : len(data) - n + k]
            buf.release()  # before buffer_updated: growing the buffer needs no view on it
            n -= k
            self.buffer_updated(k)

    def _compact(self) -> None:
        """Move the unframed bytes to the front of the scratch buffer (allocated on first use)."""
        if not self.rbuf:
            self.rbuf = bytearray(RECV_SCRATCH)
        if self.rstart:
            left = self.rend - self.rstart
            self.rbuf[:left] = self.rbuf[self.rstart : self.rend]
            self.rstart, self.rend = 0, left

    def _batched(self, work: Any) -> None:
        """Run work; responses it answers at once (e.g. several pipelined produce requests) leave
        in one write instead of one syscall each."""
        if self._batching:
            work()
            return
        self._batching = True
        try:
            work()
        finally:
            self._batching = False
            self._pump()
            self._update_reading()

    def _process(self) -> None:
        while not self.closed and not self.read_paused:
            big = self.big
            if big is not None:
                if self.big_filled < self.big_size:
                    return
                frame = bytes(memoryview(big)[: self.big_size])
                self.big = None
                self.recv_pool.give(big)
            else:
                start = self.rstart
                avail = self.rend - start
                if avail < 4:
                    return
                (size,) = struct.unpack_from(">i", self.rbuf, start)
                if size < self.min_request or size > self.max_request:
                    log.warning("closing connection: request size %d outside [8, %d]",
                                size, self.max_request)
                    self.close()
                    return
                if avail < 4 + size:
                    if 4 + size > len(self.rbuf):  # receive the rest straight into its own buffer
                        got = avail - 4
                        big = self.recv_pool.take(size, got)
                        big[:got] = memoryview(self.rbuf)[start + 4 : self.rend]
                        self.big, self.big_size, self.big_filled = big, size, got
                        self.rstart = self.rend = 0
                    return
                frame = bytes(memoryview(self.rbuf)[start + 4 : start + 4 + size])
                self.rstart = start + 4 + size
                if self.rstart == self.rend:
                    self.rstart = self.rend = 0
            self._handle(frame)
            if len(self.pending) >= self.limits.per_connection or self.limits.saturated():
                self._update_reading()

    def close(self) -> None:
        if self.transport is not None and not self.closed:
            self._pump()  # answers to the requests before the bad one still go out
            self._drop_outbox()
            self.transport.close()
        self.closed = True

    # ---- dispatch ----------------------------------------------------------------------
    def _handle(self, frame: bytes) -> None:
        if self.sasl is not None and self.sasl.intercept(frame):
            return  # a SASL exchange (or a request refused before authentication)
        key, version, corr = struct.unpack_from(">hhi", frame, 0)
        rng = self.supported.get(key)
        if rng is None or not rng[0] <= version <= rng[1]:
            if key == apis.API_VERSIONS:
                self._respond_in_order(unsupported_api_versions(corr, self.spec.advertised))
                return
            log.info("closing connection: unsupported api key %d version %d", key, version)
            self.close()
            return
        try:
            header, body = decode_request(key, version, frame)
        except Exception as e:  # malformed request: Kafka closes the connection
            log.info("closing connection: cannot decode api %d v%d: %s", key, version, e)
            self.close()
            return
        ctx = RequestContext(key, version, corr, header.client_id, self, frame)
        handler = self.handlers[key]
        if fault_inject.FAULTS:  # test-only hook, off unless SAMSA_FAULT_INJECT is set
            handler = fault_inject.wrap(key, handler)
        quotas = self.broker.quotas
        charged = quotas.active and not self.spec.controller and charge_request(
            quotas, ctx, len(frame) + 4)
        started = time.perf_counter()
        try:
            result = handler(self.broker, ctx, body)
        except Exception as exc:  # Kafka answers with the API's error response, and goes on
            RequestTiming(self.broker.metrics, key, version, body, self.received_at,
                          started).done()
            self._answer_failure(ctx, body, exc)
            return
        timing = RequestTiming(self.broker.metrics, key, version, body, self.received_at,
                               started)  # ops-metrics: per request, not per record
        if charged:
            charge_time(quotas, ctx, time.perf_counter() - started)
        if isinstance(result, Awaitable):
            fut = asyncio.ensure_future(
                self._finish(ctx, Timed(result) if charged else result, body))
            if key == apis.FETCH and inspect.iscoroutine(result):
                self.fetches[fut] = result
                fut.add_done_callback(self._fetch_done)
            if key not in _PARKED_APIS:
                self.limits.in_flight += 1
                self.counted += 1
                ctx.counted = True
                fut.add_done_callback(functools.partial(self._answered, ctx))
            self._enqueue(fut)
            fut.add_done_callback(timing.done)
        elif result is None:
            timing.done()
            if ctx.throttle_ms:
                self.mute_for(ctx.throttle_ms)
            return  # acks=0 produce: no response at all
        else:
            if ctx.throttle_ms and isinstance(result, dict) and "throttle_time" in result:
                result["throttle_time"] = ctx.throttle_ms
            try:
                chunks = result if isinstance(result, list) else \
                    encode_response(key, version, corr, result)
            except Exception as exc:  # a handler bug: answered like a failed handler
                timing.done()
                self._answer_failure(ctx, body, exc)
                return
            self._respond_in_order(chunks)
            timing.done()
            if ctx.throttle_ms:
                self.mute_for(ctx.throttle_ms)

    def _respond_in_order(self, chunks: Response) -> None:
        """Answer now, or behind the earlier requests still in flight (order is the protocol)."""
        if self.pending:
            done: asyncio.Future[Response | None] = asyncio.get_running_loop().create_future()
            done.set_result(chunks)
            self._enqueue(done)
        else:
            self._respond_now(chunks)

    def _fetch_done(self, fut: asyncio.Future[Response | None]) -> None:
        self.fetches.pop(fut, None)

    def _answered(self, ctx: RequestContext, _fut: object) -> None:
        self.uncount(ctx)

    def uncount(self, ctx: RequestContext) -> None:
        """`ctx` no longer counts towards the queued-request limits (answered, or parked)."""
        if ctx.counted:
            ctx.counted = False
            self.counted -= 1
            self.limits.done_one()

    async def _finish(self, ctx: RequestContext, aw: Awaitable[Any], body: Any) -> Response | None:
        try:
            result = await aw
        except Exception as exc:
            return self._error_chunks(ctx, body, exc)  # Unanswerable: closed in _drain_pending
        if isinstance(aw, Timed):  # a request quota applies: the coroutine's own time
            charge_time(self.broker.quotas, ctx, aw.spent)
        if ctx.throttle_ms:
            self.mute_for(ctx.throttle_ms)
            if isinstance(result, dict) and "throttle_time" in result:
                result["throttle_time"] = ctx.throttle_ms
        if result is None:
            return None
        if isinstance(result, list):
            return result  # pre-encoded
        try:
            return encode_response(ctx.api_key, ctx.version, ctx.correlation_id, result)
        except Exception as exc:  # a handler bug: answered like a failed handler
            return self._error_chunks(ctx, body, exc)

    # ---- failed requests: Kafka's RequestHandlerHelper.handleError --------------------------
    def _answer_failure(self, ctx: RequestContext, body: Any, exc: Exception) -> None:
        """A handler raised synchronously: answer in order with the error response, or close."""
        try:
            chunks = self._error_chunks(ctx, body, exc)
        except Unanswerable:
            self.close()
            return
        self._respond_in_order(chunks)

    def _error_chunks(self, ctx: RequestContext, body: Any, exc: Exception) -> list[bytes]:
        """Log the failure (once, with its stack), count it, and encode the API's error
        response (UNKNOWN_SERVER_ERROR wherever the request names something). Raises
        Unanswerable when there is none to send: the connection must close instead."""
        key, version = ctx.api_key, ctx.version
        self.broker.metrics.request_error(_metric_name(key, body), "UNKNOWN_SERVER_ERROR")
        try:
            answer = error_response(key, version, body, UNKNOWN_SERVER_ERROR)
            if answer is None:  # acks=0 produce: Kafka closes the connection
                _FAILURES.log(key, version, exc, "closing the connection (no response to send)")
                raise Unanswerable
            if ctx.throttle_ms:
                answer["throttle_time"] = ctx.throttle_ms
                self.mute_for(ctx.throttle_ms)
            chunks = encode_response(key, version, ctx.correlation_id, answer)
        except Unanswerable:
            raise
        except Exception as e2:  # never let an error answer take more than this connection
            _FAILURES.log(key, version, exc, f"closing the connection (no error response: {e2!r})")
            raise Unanswerable from e2
        _FAILURES.log(key, version, exc, "answered UNKNOWN_SERVER_ERROR")
        return chunks

    def _enqueue(self, fut: asyncio.Future[Response | None]) -> None:
        self.pending.append(fut)
        fut.add_done_callback(self._drain)

    def _drain(self, _f: object = None) -> None:
        if self.closed:
            return
        self._batched(self._drain_pending)

    def _drain_pending(self) -> None:
        while self.pending and self.pending[0].done():
            f = self.pending.popleft()
            if f.cancelled():
                continue
            exc = f.exception()
            if exc is not None:
                if not isinstance(exc, Unanswerable):  # else logged when it failed
                    log.error("request failed: %r", exc, exc_info=exc)
                self.close()
                return
            chunks = f.result()
            if chunks:
                self._respond_now(chunks)

    # ---- output ------------------------------------------------------------------------
    def _respond_now(self, chunks: Response) -> None:
        if self.transport is None or self.closed:
            release_slices(chunks)
            return
        out = self.outbox
        for c in chunks:
            if isinstance(c, bytes | bytearray | memoryview):
                if c:
                    out.append(c)
            elif isinstance(c, FileSlice):
                if c.length:
                    out.append(_SliceCursor(c))
                else:
                    c.release()
            else:
                release_slices(chunks)
                raise TypeError(f"unexpected response chunk {c!r}")
        if not self._batching:
            self._pump()
            self._update_reading()

    def _pump(self) -> None:
        """Move outbox items to the transport while its buffer is below the high-water mark: bytes
        coalesced into writelines calls, large slices with sendfile when nothing is queued before
        them, the rest of a slice pread one FILE_CHUNK at a time."""
        tr = self.transport
        out = self.outbox
        if tr is None or not out:
            return
        run: list[Any] = []
        try:
            while out and not self.write_paused and not tr.is_closing():
                item = out[0]
                if not isinstance(item, _SliceCursor):
                    run.append(item)
                    out.popleft()
                    continue
                sl = item.slice
                if item.remaining >= SENDFILE_MIN and self.sock_fd >= 0:
                    if run:
                        tr.writelines(run)
                        run = []
                        if self.write_paused:
                            break
                    # is_closing: once the transport closes, its fd may be closed and reused
                    if tr.get_write_buffer_size() == 0 and not tr.is_closing():
                        item.sent += self._sendfile(sl, item.sent)
                if item.remaining:
                    n = min(item.remaining, FILE_CHUNK)
                    data = os.pread(sl.fd, n, sl.position + item.sent)
                    if len(data) < n:
                        raise EOFError(f"{sl!r} reaches past the end of its file")
                    item.sent += n
                    run.append(data)
                    tr.writelines(run)
                    run = []
                if not item.remaining:
                    sl.release()
                    out.popleft()
            if run:
                tr.writelines(run)
        except (OSError, EOFError, ValueError, RuntimeError) as e:
            # part of a frame may be out already: the connection cannot continue
            log.warning("closing connection: writing a fetch response failed: %r", e)
            self._drop_outbox()
            tr.close()
            self.closed = True

    def _drop_outbox(self) -> None:
        while self.outbox:
            item = self.outbox.popleft()
            if isinstance(item, _SliceCursor):
                item.slice.release()

    def _sendfile(self, sl: FileSlice, skip: int) -> int:
        """Send the slice from `skip` with os.sendfile until done or the socket would block."""
        sent = 0
        want = sl.length - skip
        while sent < want:
            try:
                n = os.sendfile(self.sock_fd, sl.fd, sl.position + skip + sent, want - sent)
            except BlockingIOError:
                break
            if n == 0:
                raise EOFError(f"{sl!r} reaches past the end of its file")
            sent += n
        return sent


class _FailureLog:
    """Failed handlers are logged at ERROR with their stack, but each (api, exception type) at
    most once per STACK_EVERY seconds: a client retrying a failing request in a tight loop
    (kafka-python retries ListOffsets' UNKNOWN_SERVER_ERROR at once) must not flood the log.
    Failures in between are one line each at DEBUG and counted in the next ERROR line."""

    STACK_EVERY = 10.0

    def __init__(self) -> None:
        self.last: dict[tuple[int, type], tuple[float | None, int]] = {}  # -> (logged at, skipped)

    def log(self, api_key: int, version: int, exc: Exception, outcome: str) -> None:
        k = (api_key, type(exc))
        now = time.monotonic()
        at, skipped = self.last.get(k, (None, 0))
        if at is not None and now - at < self.STACK_EVERY:
            self.last[k] = (at, skipped + 1)
            log.debug("handler for api %d v%d failed again; %s: %r", api_key, version, outcome,
                      exc)
            return
        if len(self.last) > 1024:  # bounded: one entry per api key and exception type
            self.last.clear()
        self.last[k] = (now, 0)
        more = f" ({skipped} more such failures since the last report)" if skipped else ""
        log.error("handler for api %d v%d failed; %s%s", api_key, version, outcome, more,
                  exc_info=exc)


_FAILURES = _FailureLog()


def _metric_name(api_key: int, body: Any) -> str:
    if api_key == apis.FETCH:
        rs = getattr(body, "replica_state", None)
        replica = rs.replica_id if rs is not None else getattr(body, "replica_id", -1)
        return request_name(api_key, follower=replica >= 0)
    return request_name(api_key)


class NetworkLimits:
    """Broker-wide connection and in-flight request accounting (one per broker)."""

    def __init__(self, max_request: int, queued_max: int, per_connection: int,
                 max_connections: int, max_per_ip: int) -> None:
        self.max_request = max_request
        self.queued_max = max(queued_max, 1)
        self.per_connection = max(per_connection, 1)
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.in_flight = 0
        self.connections = 0
        self.per_ip: dict[str, int] = {}
        self.waiting: set[KafkaConnection] = set()  # muted because the broker was saturated
        self.recv_buffers = RecvBuffers()  # big frames' receive buffers, shared by connections

    def admit(self, conn: KafkaConnection) -> str | None:
        """None if the new connection may stay, else why it is closed."""
        if self.connections >= self.max_connections:
            return f"max.connections ({self.max_connections}) reached"
        ip = conn.peer_ip
        if self.per_ip.get(ip, 0) >= self.max_per_ip:
            return f"max.connections.per.ip ({self.max_per_ip}) reached for {ip}"
        self.connections += 1
        self.per_ip[ip] = self.per_ip.get(ip, 0) + 1
        return None

    def leave(self, conn: KafkaConnection) -> None:
        self.connections -= 1
        n = self.per_ip.get(conn.peer_ip, 0) - 1
        if n > 0:
            self.per_ip[conn.peer_ip] = n
        else:
            self.per_ip.pop(conn.peer_ip, None)
        self.waiting.discard(conn)

    def saturated(self) -> bool:
        return self.in_flight >= self.queued_max

    def done_one(self) -> None:
        self.in_flight -= 1
        if self.waiting and not self.saturated():
            waiting, self.waiting = self.waiting, set()
            for c in waiting:
                c._update_reading()
