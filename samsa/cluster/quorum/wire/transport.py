"""A sketch of an asyncio driver: one RaftNode over TCP with the wire mapping, state in memory.

Not the broker's driver (no disk: `persist` and `flush` are the caller's callables, called in the
core's order before any message of the same output leaves). It shows the pieces a real one needs:
a listener answering requests on the connection they came in on, one outgoing connection per peer
(requests numbered and paired by the `Correlator`; a broken one fails what is in flight with
RequestFailed), and a loop that steps the node on every inbound message and at its timer.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import Callable, Coroutine
from typing import Any

from samsa.cluster.quorum import messages as m
from samsa.cluster.quorum.node import RaftNode
from samsa.cluster.quorum.state import QuorumStateRecord
from samsa.cluster.quorum.wire.correlator import Correlator
from samsa.cluster.quorum.wire.errors import WireError
from samsa.cluster.quorum.wire.frames import FETCH_MAX_BYTES, api_key_of, decode_request, encode_response

MAX_FRAME = FETCH_MAX_BYTES + (1 << 16)  # a Fetch answer's records plus its fields
_SIZE = struct.Struct(">i")


def sender_of(req: m.Request) -> int:
    """The node a KRaft request comes from, as its fields name it (the wire has no sender id)."""
    if isinstance(req, m.BeginQuorumEpochRequest | m.EndQuorumEpochRequest):
        return req.leader_id
    return req.replica_id


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    """One size-prefixed frame; WireError for a size outside 0..MAX_FRAME."""
    (size,) = _SIZE.unpack(await reader.readexactly(4))
    if not 0 <= size <= MAX_FRAME:
        raise WireError(f"frame size {size} outside 0..{MAX_FRAME}")
    return await reader.readexactly(size)


class QuorumPeer:
    """Runs `node` at `listen` (host, port), talking to `peers` {node id: (host, port)}."""

    def __init__(
        self,
        node: RaftNode,
        peers: dict[int, tuple[str, int]],
        persist: Callable[[QuorumStateRecord], None],
        flush: Callable[[], None],
    ) -> None:
        self.node = node
        self.peers = peers
        self.persist = persist
        self.flush = flush
        self.correlator = Correlator(node.node_id)
        self.inbound: asyncio.Queue[m.Message] = asyncio.Queue()
        self._answer_to: dict[tuple[int, int], tuple[asyncio.StreamWriter, int]] = {}
        self._links: dict[int, asyncio.StreamWriter] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._server: asyncio.Server | None = None
        self.rejected = 0  # malformed frames seen (their connections were closed)

    def _now_ms(self) -> int:
        return int(asyncio.get_running_loop().time() * 1000)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def listen(self, host: str, port: int) -> int:
        """Accept peers' requests; returns the bound port (`port` 0 picks one)."""
        self._server = await asyncio.start_server(self._serve, host, port)
        return int(self._server.sockets[0].getsockname()[1])

    def run(self) -> None:
        """Start stepping the node (once every peer's address is in `peers`)."""
        self._spawn(self._run())

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for w in self._links.values():
            w.close()
        for t in list(self._tasks):
            t.cancel()
        for t in list(self._tasks):
            with contextlib.suppress(BaseException):
                await t

    # ---- the node's loop
    async def _run(self) -> None:
        out = self.node.step(self._now_ms())
        while True:
            out.apply(self.persist, self.flush, self._send)
            timeout = max(0.0, (out.next_timer_ms - self._now_ms()) / 1000)
            batch: list[m.Message] = []
            with contextlib.suppress(TimeoutError):
                batch.append(await asyncio.wait_for(self.inbound.get(), min(timeout, 3600.0)))
            while not self.inbound.empty():
                batch.append(self.inbound.get_nowait())
            out = self.node.step(self._now_ms(), batch)

    def _send(self, msg: m.Message) -> None:
        body = msg.body
        if isinstance(body, m.RequestFailed | m.DescribeQuorumRequest | m.DescribeQuorumResponse):
            return
        if isinstance(body, m.Request):
            frame = self.correlator.request_frame(msg.dst, body)
            self._spawn(self._request(msg.dst, frame))
            return
        slot = self._answer_to.pop((msg.dst, api_key_of(body)), None)
        if slot is not None and not slot[0].is_closing():
            slot[0].write(self._sized(encode_response(body, slot[1])))

    @staticmethod
    def _sized(frame: bytes) -> bytes:
        return _SIZE.pack(len(frame)) + frame

    # ---- outgoing requests: one connection per peer, its answers read by a task
    async def _request(self, dst: int, frame: bytes) -> None:
        writer = self._links.get(dst)
        if writer is None or writer.is_closing():
            host, port = self.peers[dst]
            try:
                reader, writer = await asyncio.open_connection(host, port)
            except OSError:
                self._fail(dst)
                return
            self._links[dst] = writer
            self._spawn(self._read_answers(dst, reader, writer))
        writer.write(self._sized(frame))

    async def _read_answers(
        self, dst: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        try:
            while True:
                msg = self.correlator.response_message(dst, await read_frame(reader))
                if msg is not None:
                    self.inbound.put_nowait(msg)
        except WireError:
            self.rejected += 1
        except (OSError, asyncio.IncompleteReadError):
            pass
        writer.close()
        if self._links.get(dst) is writer:
            del self._links[dst]
        self._fail(dst)

    def _fail(self, dst: int) -> None:
        for msg in self.correlator.failed(dst):
            self.inbound.put_nowait(msg)

    # ---- incoming requests
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                frame = await read_frame(reader)
                corr, req = decode_request(frame)
                if isinstance(req, m.DescribeQuorumRequest):
                    writer.write(self._sized(encode_response(self.node.describe(), corr)))
                    continue
                src = sender_of(req)
                self._answer_to[(src, api_key_of(req))] = (writer, corr)
                self.inbound.put_nowait(m.Message(src, self.node.node_id, req))
        except WireError:
            self.rejected += 1  # Kafka closes the connection on a request it cannot parse
        except (OSError, asyncio.IncompleteReadError):
            pass
        writer.close()
