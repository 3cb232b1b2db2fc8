"""Listeners and connections: size-prefixed frames, pipelined requests, responses in request order.

A connection reads frames bounded by socket.request.max.bytes; every request is dispatched at once
(so a long-polling fetch does not block later requests' processing), but responses are written in
the order the requests arrived, as Kafka clients require. Reading pauses while too many responses
are pending or the socket's write buffer is full (backpressure).

Fetch responses carry file slices (storage.file_slice) for their record data. A slice of at least
SENDFILE_MIN bytes is sent with os.sendfile straight to the socket when the transport's buffer is
empty (everything before it is already in the kernel, so order holds); when the socket would block,
or the buffer is not empty, the rest is pread and handed to the transport like any other bytes.
Smaller slices are pread and coalesced with the surrounding bytes into one writelines call.
Every slice is released once written or dropped (closed connection, failed request).
"""

from __future__ import annotations

import asyncio
import logging
import os
import struct
from collections import deque
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from samsa.protocol import apis
from samsa.protocol.codec import decode_request, encode_response
from samsa.protocol.fetch_response import FetchChunks
from samsa.storage.file_slice import FileSlice

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger("samsa.server")
_HDR = struct.Struct(">ihhi")
_MAX_PENDING = 256
# Measured on loopback TCP (2-core VM): below ~64 KiB one pread + writev costs less CPU than an
# extra send + sendfile; from 64 KiB on sendfile wins (~25 % at 128–256 KiB, ~5 % at 1 MiB) and
# skips the copy into user space.
SENDFILE_MIN = 64 * 1024

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
    keys = sorted(apis.ADVERTISED.items())
    body = struct.pack(">ihi", correlation_id, 35, len(keys))
    body += b"".join(struct.pack(">hhh", k, lo, hi) for k, (lo, hi) in keys)
    return [struct.pack(">i", len(body)), body]


class KafkaConnection(asyncio.Protocol):
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.max_request = broker.config.get_int("socket.request.max.bytes")
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None
        self.pending: deque[asyncio.Future[Response | None]] = deque()
        self.closed = False
        self.write_paused = False
        self.read_paused = False
        self.fetch_sessions: dict[int, Any] = {}
        self.sock_fd = -1  # for sendfile; -1 when the transport is not a plain socket (TLS)
        self._out: list[bytes] | None = None  # responses held for one write (data_received)

    # ---- asyncio.Protocol --------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.broker.connections.add(self)
        sock = transport.get_extra_info("socket")
        if sock is not None and transport.get_extra_info("sslcontext") is None:
            try:
                self.sock_fd = sock.fileno()
            except (OSError, RuntimeError):
                self.sock_fd = -1

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.broker.connections.discard(self)
        # In-flight handlers run to completion (a half-done controller or coordinator operation
        # must never be cut off); their responses are dropped, their file slices released.
        for fut in self.pending:
            fut.add_done_callback(_release_result)
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
        # Responses answered while this read's frames are processed (e.g. several pipelined
        # produce requests) leave in one write instead of one syscall each.
        self._out = []
        try:
            self._process()
        finally:
            out, self._out = self._out, None
            if out and self.transport is not None and not self.closed:
                self.transport.writelines(out)

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
        if self.transport is not None and not self.closed:
            if self._out:  # answers to the requests before the bad one still go out
                self.transport.writelines(self._out)
                self._out.clear()
            self.transport.close()
        self.closed = True

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
                done: asyncio.Future[Response | None] = asyncio.get_running_loop().create_future()
                done.set_result(chunks)
                self._enqueue(done)
            else:
                self._respond_now(chunks)

    async def _finish(self, ctx: RequestContext, aw: Awaitable[Any]) -> Response | None:
        result = await aw
        if result is None:
            return None
        if isinstance(result, list):
            return result  # pre-encoded
        return encode_response(ctx.api_key, ctx.version, ctx.correlation_id, result)

    def _enqueue(self, fut: asyncio.Future[Response | None]) -> None:
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

    def _respond_now(self, chunks: Response) -> None:
        tr = self.transport
        if tr is None or self.closed:
            release_slices(chunks)
            return
        out = self._out
        if out is not None and not isinstance(chunks, FetchChunks):
            out.extend(chunks)
            return
        if out:  # keep the order: what is held goes first
            tr.writelines(out)
            out.clear()
        if isinstance(chunks, FetchChunks):
            self._write_with_slices(tr, chunks)
        else:
            tr.writelines(chunks)

    def _write_with_slices(self, tr: asyncio.Transport, chunks: FetchChunks) -> None:
        """Write chunks in order: bytes (and small slices, pread) coalesced into writelines calls,
        large slices with sendfile when nothing is queued before them."""
        run: list[bytes] = []
        try:
            for c in chunks:
                if isinstance(c, bytes):
                    run.append(c)
                    continue
                if not isinstance(c, FileSlice):
                    raise TypeError(f"unexpected response chunk {c!r}")
                if c.length >= SENDFILE_MIN and self.sock_fd >= 0:
                    if run:
                        tr.writelines(run)
                        run = []
                    # is_closing: once the transport closes, its fd may be closed and reused
                    if tr.get_write_buffer_size() == 0 and not tr.is_closing():
                        sent = self._sendfile(c)
                        if sent < c.length:
                            run.append(c.read(sent))
                    else:
                        run.append(c.read())
                else:
                    run.append(c.read())
                c.release()
            if run:
                tr.writelines(run)
        except (OSError, EOFError, ValueError, TypeError, RuntimeError) as e:
            # part of the frame may be out already: the connection cannot continue
            log.warning("closing connection: writing a fetch response failed: %r", e)
            self.close()
        finally:
            release_slices(chunks)

    def _sendfile(self, sl: FileSlice) -> int:
        """Send the slice with os.sendfile until done or the socket would block; bytes sent."""
        sent = 0
        while sent < sl.length:
            try:
                n = os.sendfile(self.sock_fd, sl.fd, sl.position + sent, sl.length - sent)
            except BlockingIOError:
                break
            if n == 0:
                raise EOFError(f"{sl!r} reaches past the end of its file")
            sent += n
        return sent
