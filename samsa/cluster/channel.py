"""Node-to-node Kafka protocol connections: a broker forwarding a request to the active controller,
registering and heartbeating, or asking another node anything.

One `NodeChannel` per remote node: it connects on first use and again after a failure, numbers its
own requests (many in flight on one connection, responses paired by correlation id), and turns
every failure into a `ChannelError`: a refused connection, a timeout, a connection lost with
requests in flight (they all fail), or a response that does not decode.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import ssl
import struct
import time
from dataclasses import is_dataclass
from functools import cache
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from samsa.cluster import node_security
from samsa.cluster.node_security import NodeAuthError, NodeSecurity, open_node_connection
from samsa.protocol.codec import Chunks, build

log = logging.getLogger("samsa.cluster.channel")

_SIZE = struct.Struct(">i")
_CORR = struct.Struct(">i")
MAX_RESPONSE_BYTES = 100 * 1024 * 1024  # larger than any response a node asks another for


ROUTES_ENV = "SAMSA_TEST_ROUTES"


@cache
def _test_routes() -> dict[str, tuple[str, int]]:
    raw = os.environ.get(ROUTES_ENV, "")
    if not raw:
        return {}
    out = {}
    for src, dst in json.loads(raw).items():
        host, _, port = str(dst).rpartition(":")
        out[str(src)] = (host, int(port))
    return out


def dial_address(host: str, port: int) -> tuple[str, int]:
    """Where to connect for `host:port`. A test hook: SAMSA_TEST_ROUTES (JSON {"host:port":
    "host:port"}) sends a node's connections to other nodes through a fault proxy; unset, the
    address itself."""
    return _test_routes().get(f"{host}:{port}", (host, port))


class ChannelError(Exception):
    """A request that got no usable response; the message says which node and why."""


class ChannelAuthError(ChannelError):
    """The peer refused this node's identity (SASL credentials, TLS certificate), or this node
    refused the peer's certificate: a configuration problem, logged as an error."""


AUTH_LOG_EVERY_S = 30.0  # an authentication failure is logged at most this often per channel
# KIP-368: how long new requests wait for the answers in flight before a connection whose SASL
# session nears its end re-authenticates in place; answers due later (a long-polling request)
# finish on it while new requests go on a new connection.
REAUTH_DRAIN_S = 1.0


@cache
def _request_codec(key: int, version: int) -> tuple[type, type, Any, Any]:
    req = load_request_schema(key, version)
    hdr = req.__header_schema__
    return req, hdr, entity_writer(req), entity_writer(hdr)


@cache
def _response_codec(key: int, version: int) -> tuple[Any, Any]:
    resp = load_response_schema(key, version)
    return entity_reader(resp.__header_schema__), entity_reader(resp)


class _Connection:
    """One TCP connection and the requests waiting on it."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.pending: dict[int, asyncio.Future[bytes]] = {}
        self.closed = False
        self.retiring = False  # replaced (SASL session end): closes once nothing is pending
        self.task: asyncio.Task[None] | None = None

    def fail_all(self, error: ChannelError) -> None:
        self.closed = True
        for fut in self.pending.values():
            if not fut.done():
                fut.set_exception(error)
        self.pending.clear()
        self.writer.close()


class NodeChannel:
    """Requests to one node at `host:port` (its controller or inter-broker listener)."""

    def __init__(self, host: str, port: int, client_id: str = "samsa-node",
                 timeout_s: float = 30.0, security: NodeSecurity | None = None) -> None:
        """`security`: TLS / SASL of the listener dialled (samsa.cluster.node_security;
        None is PLAINTEXT)."""
        self.host = host
        self.port = port
        self.client_id = client_id
        self.timeout_s = timeout_s
        self.security = security
        self._auth_logged = -1e9
        self._conn: _Connection | None = None
        self._connecting = asyncio.Lock()
        self._next_corr = 0
        self._closed = False

    def __repr__(self) -> str:
        return f"NodeChannel({self.host}:{self.port})"

    @property
    def connected(self) -> bool:
        return self._conn is not None and not self._conn.closed

    async def request(self, api_key: int, version: int, body: Any,
                      timeout_s: float | None = None) -> Any:
        """Send one request (`body` a dict of kio field names, or the kio request object) and
        return the decoded kio response object."""
        return await self._request(api_key, version, body, timeout_s)

    async def _request(self, api_key: int, version: int, body: Any, timeout_s: float | None,
                       on: _Connection | None = None) -> Any:
        req_cls, hdr_cls, write_body, write_hdr = _request_codec(api_key, version)
        obj = body if is_dataclass(body) else build(req_cls, body)
        out = Chunks()
        write_hdr(out, hdr_cls(request_api_key=api_key, request_api_version=version,
                               correlation_id=0, client_id=self.client_id))
        write_body(out, obj)
        frame = await self._roundtrip(b"".join(out), timeout_s, on)
        read_hdr, read_body = _response_codec(api_key, version)
        try:
            _, n = read_hdr(frame, 0)
            resp, _ = read_body(frame, n)
        except Exception as e:  # kio raises KeyError, ValueError, struct.error, ... on bad bytes
            raise ChannelError(f"{self}: undecodable response to api {api_key} v{version}: "
                               f"{type(e).__name__}: {e}") from None
        return resp

    async def forward(self, frame: bytes, timeout_s: float | None = None) -> bytes:
        """Send a complete request frame (header included, no size prefix) as it is and return the
        response frame (no size prefix) with the caller's correlation id. The request must be one
        that is answered (not Produce with acks=0)."""
        if len(frame) < 8:
            raise ChannelError(f"{self}: a request frame has at least 8 header bytes, "
                               f"got {len(frame)}")
        caller_corr = frame[4:8]
        response = await self._roundtrip(frame, timeout_s)
        return caller_corr + response[4:]

    async def _roundtrip(self, frame: bytes, timeout_s: float | None,
                         on: _Connection | None = None) -> bytes:
        """Send `frame` under a correlation id of our own (on the channel's connection, or on
        `on`: the re-authentication's); the response frame, still carrying it."""
        timeout = self.timeout_s if timeout_s is None else timeout_s
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        conn = on if on is not None else await self._connection(timeout)
        corr = self._next_corr
        self._next_corr = (self._next_corr + 1) & 0x7FFFFFFF
        fut: asyncio.Future[bytes] = loop.create_future()
        conn.pending[corr] = fut
        if conn.closed:  # lost between connecting and now: fail_all has run already
            conn.pending.pop(corr, None)
            raise ChannelError(f"{self}: connection lost")
        data = bytearray(_SIZE.pack(len(frame)))
        data += frame
        data[8:12] = _CORR.pack(corr)  # after size, api key and api version
        try:
            try:
                conn.writer.write(bytes(data))
            except (RuntimeError, OSError) as e:
                # uvloop raises on a transport a reset already closed, before the read loop
                # has seen it: fail the connection (and `fut`) now
                conn.fail_all(ChannelError(f"{self}: connection lost: {e}"))
            with contextlib.suppress(ConnectionError):
                # a broken pipe also ends the read loop, which fails `fut`
                await asyncio.wait_for(conn.writer.drain(), max(0.0, deadline - loop.time()))
            return await asyncio.wait_for(fut, max(0.0, deadline - loop.time()))
        except TimeoutError:
            raise ChannelError(f"{self}: no response within {timeout:g} s") from None
        finally:
            conn.pending.pop(corr, None)

    async def _connection(self, timeout: float) -> _Connection:
        if self._closed:
            raise ChannelError(f"{self} is closed")
        conn = self._conn
        if conn is not None and not conn.closed and not node_security.expired(conn.writer):
            return conn
        async with self._connecting:  # (re-authentication holds it: new requests wait)
            conn = self._conn
            if conn is not None and not conn.closed:
                if not node_security.expired(conn.writer):
                    return conn
                if await self._reauthenticate(conn, timeout):
                    return conn
            try:
                reader, writer = await open_node_connection(
                    self.host, self.port, self.security, timeout, self.client_id, dial_address)
            except NodeAuthError as e:
                self._log_auth_failure(str(e))
                raise ChannelAuthError(f"{self}: failed authentication: {e}") from None
            except TimeoutError:
                raise ChannelError(f"{self}: connection not established within {timeout:g} s") \
                    from None
            except OSError as e:
                raise ChannelError(f"{self}: cannot connect: {e.strerror or e}") from None
            conn = _Connection(reader, writer)
            conn.task = asyncio.get_running_loop().create_task(self._read_loop(conn))
            self._conn = conn
            return conn

    async def _reauthenticate(self, conn: _Connection, timeout: float) -> bool:
        """KIP-368, as Kafka's nodes: the connection's SASL session nears its end, so once the
        requests in flight are answered (nothing new is sent meanwhile) SaslHandshake and
        SaslAuthenticate run again on it. False when that cannot be: the caller opens a new
        connection (a refusal is logged as an authentication failure)."""
        assert self.security is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        drained = loop.time() + min(timeout, REAUTH_DRAIN_S)
        while conn.pending and not conn.closed and loop.time() < drained:
            await asyncio.sleep(0.005)  # bounded: the answers in flight
        if conn.pending and not conn.closed:  # answers due later: they finish on this one
            self._retire(conn)
            return False

        async def call(key: int, version: int, body: dict[str, Any]) -> Any:
            try:
                return await self._request(key, version, body,
                                           max(0.0, deadline - loop.time()), conn)
            except ChannelError as e:
                raise ConnectionError(str(e)) from None

        why = "connection lost"
        if not conn.pending and not conn.closed:
            try:
                node_security.session_started(conn.writer, await node_security.sasl_session(
                    call, self.security))
                return not conn.closed
            except NodeAuthError as e:
                why = f"re-authentication failed: {e}"
                self._log_auth_failure(why)
            except OSError as e:
                why = f"re-authentication failed: {e}"
        if self._conn is conn:
            self._conn = None
        conn.fail_all(ChannelError(f"{self}: {why}"))
        return False

    def _retire(self, conn: _Connection) -> None:
        """New requests go on a new connection; this one closes once its answers are in."""
        if self._conn is conn:
            self._conn = None
        conn.retiring = True
        if not conn.pending:
            conn.fail_all(ChannelError(f"{self}: SASL session renewed"))

    def _log_auth_failure(self, why: str) -> None:
        now = time.monotonic()
        if now - self._auth_logged >= AUTH_LOG_EVERY_S:
            self._auth_logged = now
            sec = self.security.describe() if self.security is not None else "PLAINTEXT"
            log.error("Connection to node %s:%d (%s) failed authentication due to: %s",
                      self.host, self.port, sec, why)

    async def _read_loop(self, conn: _Connection) -> None:
        why = "connection closed by the peer"
        try:
            while True:
                (size,) = _SIZE.unpack(await conn.reader.readexactly(4))
                if not 4 <= size <= MAX_RESPONSE_BYTES:
                    why = f"response size {size} outside 4..{MAX_RESPONSE_BYTES}"
                    break
                frame = await conn.reader.readexactly(size)
                (corr,) = _CORR.unpack_from(frame, 0)
                fut = conn.pending.pop(corr, None)
                if fut is not None and not fut.done():
                    fut.set_result(frame)
                if conn.retiring and not conn.pending:
                    why = "SASL session renewed"
                    break
                # else: the answer to a request that timed out or was cancelled
        except asyncio.IncompleteReadError:
            pass
        except ssl.SSLError as e:  # TLS 1.3: a peer refusing our certificate says so here
            why = f"TLS: the peer refused the connection: {e.reason or e}"
            self._log_auth_failure(why)
        except OSError as e:
            why = f"connection lost: {e.strerror or e}"
        except asyncio.CancelledError:
            why = "channel closed"
        except Exception as e:  # never leave requests waiting on a dead reader
            why = f"connection dropped: {type(e).__name__}: {e}"
        finally:
            conn.fail_all(ChannelError(f"{self}: {why}"))

    async def close(self) -> None:
        """Close the connection; requests in flight fail with ChannelError."""
        self._closed = True
        conn, self._conn = self._conn, None
        if conn is None:
            return
        conn.fail_all(ChannelError(f"{self}: channel closed"))
        if conn.task is not None:
            conn.task.cancel()
            with contextlib.suppress(BaseException):
                await conn.task


class ChannelPool:
    """One NodeChannel per node id; an address change replaces the node's channel."""

    def __init__(self, client_id: str = "samsa-node", timeout_s: float = 30.0,
                 security: NodeSecurity | None = None) -> None:
        self.client_id = client_id
        self.timeout_s = timeout_s
        self.security = security
        self._channels: dict[int, NodeChannel] = {}
        self._retired: set[asyncio.Task[None]] = set()

    def set_address(self, node_id: int, host: str, port: int) -> NodeChannel:
        ch = self._channels.get(node_id)
        if ch is not None and (ch.host, ch.port) == (host, port):
            return ch
        if ch is not None:
            task = asyncio.get_running_loop().create_task(ch.close())
            self._retired.add(task)
            task.add_done_callback(self._retired.discard)
        ch = NodeChannel(host, port, self.client_id, self.timeout_s, self.security)
        self._channels[node_id] = ch
        return ch

    def get(self, node_id: int) -> NodeChannel:
        ch = self._channels.get(node_id)
        if ch is None:
            raise ChannelError(f"no address known for node {node_id}")
        return ch

    def __contains__(self, node_id: int) -> bool:
        return node_id in self._channels

    async def request(self, node_id: int, api_key: int, version: int, body: Any,
                      timeout_s: float | None = None) -> Any:
        return await self.get(node_id).request(api_key, version, body, timeout_s)

    async def forward(self, node_id: int, frame: bytes, timeout_s: float | None = None) -> bytes:
        return await self.get(node_id).forward(frame, timeout_s)

    async def remove(self, node_id: int) -> None:
        ch = self._channels.pop(node_id, None)
        if ch is not None:
            await ch.close()

    async def close(self) -> None:
        channels, self._channels = list(self._channels.values()), {}
        for ch in channels:
            await ch.close()
        for task in list(self._retired):
            with contextlib.suppress(BaseException):
                await task
