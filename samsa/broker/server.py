"""Listeners and connections: size-prefixed frames, pipelined requests, responses in request order.

A connection reads frames bounded by socket.request.max.bytes; every request is dispatched at once
(so a long-polling fetch does not block later requests' processing), but responses are written in
the order the requests arrived, as Kafka clients require. Reading pauses while too many responses
are pending or the socket's write buffer is full (backpressure).
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections import deque
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from samsa.protocol import apis
from samsa.protocol.codec import decode_request, encode_response

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger("samsa.server")
_HDR = struct.Struct(">ihhi")
_MAX_PENDING = 256


class RequestContext:
    __slots__ = ("api_key", "version", "correlation_id", "client_id", "conn")

    def __init__(self, api_key: int, version: int, correlation_id: int, client_id: str | None,
                 conn: KafkaConnection) -> None:
        self.api_key = api_key
        self.version = version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self.conn = conn


def unsupported_api_versions(correlation_id: int) -> list[bytes]:
    """ApiVersions answer for a version we do not know: v0 body + v0 header, error 35 and our ranges
    (the client then retries with a version from the list)."""
    keys = sorted(apis.SUPPORTED.items())
    body = struct.pack(">ihi", correlation_id, 35, len(keys))
    body += b"".join(struct.pack(">hhh", k, lo, hi) for k, (lo, hi) in keys)
    return [struct.pack(">i", len(body)), body]


class KafkaConnection(asyncio.Protocol):
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.max_request = broker.config.get_int("socket.request.max.bytes")
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None
        self.pending: deque[asyncio.Future[list[bytes] | None]] = deque()
        self.closed = False
        self.write_paused = False
        self.read_paused = False
        self.fetch_sessions: dict[int, Any] = {}

    # ---- asyncio.Protocol --------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.broker.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.broker.connections.discard(self)
        # In-flight handlers run to completion (a half-done controller or coordinator operation
        # must never be cut off); their responses are dropped.
        self.pending.clear()

    def pause_writing(self) -> None:
        self.write_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self.write_paused = False
        self._update_reading()

    def _update_reading(self) -> None:
        if self.transport is None or self.closed:
            return
        want_pause = self.write_paused or len(self.pending) >= _MAX_PENDING
        if want_pause and not self.read_paused:
            self.transport.pause_reading()
            self.read_paused = True
        elif not want_pause and self.read_paused:
            self.read_paused = False
            self.transport.resume_reading()
            if self.buf:
                self._process()

    def data_received(self, data: bytes) -> None:
        self.buf += data
        self._process()

    def _process(self) -> None:
        buf = self.buf
        while len(buf) >= 4 and not self.closed and not self.read_paused:
            (size,) = struct.unpack_from(">i", buf, 0)
            if size < 8 or size > self.max_request:
                log.warning("closing connection: request size %d outside [8, %d]",
                            size, self.max_request)
                self.close()
                return
            if len(buf) < 4 + size:
                return
            frame = bytes(buf[4 : 4 + size])
            del buf[: 4 + size]
            self._handle(frame)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    # ---- dispatch ----------------------------------------------------------------------
    def _handle(self, frame: bytes) -> None:
        key, version, corr = struct.unpack_from(">hhi", frame, 0)
        rng = apis.SUPPORTED.get(key)
        if rng is None or not rng[0] <= version <= rng[1]:
            if key == apis.API_VERSIONS:
                self._respond_now(unsupported_api_versions(corr))
                return
            log.info("closing connection: unsupported api key %d version %d", key, version)
            self.close()
            return
        try:
            header, body = decode_request(key, version, frame)
        except Exception as e:  # malformed request: Kafka closes the connection
            log.info("closing connection: cannot decode api %d v%d: %r", key, version, e)
            self.close()
            return
        ctx = RequestContext(key, version, corr, header.client_id, self)
        handler = self.broker.handlers[key]
        try:
            result = handler(self.broker, ctx, body)
        except Exception:
            log.exception("handler for api %d v%d failed", key, version)
            self.close()
            return
        if isinstance(result, Awaitable):
            fut = asyncio.ensure_future(self._finish(ctx, result))
            self._enqueue(fut)
        elif result is None:
            return  # acks=0 produce: no response at all
        else:
            chunks = result if isinstance(result, list) else \
                encode_response(key, version, corr, result)
            if self.pending:
                done: asyncio.Future[list[bytes] | None] = asyncio.get_running_loop().create_future()
                done.set_result(chunks)
                self._enqueue(done)
            else:
                self._respond_now(chunks)

    async def _finish(self, ctx: RequestContext, aw: Awaitable[Any]) -> list[bytes] | None:
        result = await aw
        if result is None:
            return None
        if isinstance(result, list):
            return result  # pre-encoded
        return encode_response(ctx.api_key, ctx.version, ctx.correlation_id, result)

    def _enqueue(self, fut: asyncio.Future[list[bytes] | None]) -> None:
        self.pending.append(fut)
        fut.add_done_callback(self._drain)
        self._update_reading()

    def _drain(self, _f: object = None) -> None:
        if self.closed:
            return
        while self.pending and self.pending[0].done():
            f = self.pending.popleft()
            if f.cancelled():
                continue
            exc = f.exception()
            if exc is not None:
                log.error("request failed: %r", exc, exc_info=exc)
                self.close()
                return
            chunks = f.result()
            if chunks:
                self._respond_now(chunks)
        self._update_reading()

    def _respond_now(self, chunks: list[bytes]) -> None:
        if self.transport is not None and not self.closed:
            self.transport.writelines(chunks)
