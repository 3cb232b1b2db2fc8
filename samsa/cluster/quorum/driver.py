"""The asyncio driver of the Raft core: one RaftNode over real disk and TCP.

One task steps the node (on every inbound message, proposal, or its timer) and applies each
Output in the core's order: persist the quorum-state record and flush the log (in a thread, so an
fsync never blocks the event loop; the node is not stepped meanwhile), then send, then deliver what
the high watermark committed to the state machine, then snapshot when enough was committed.

Outbound requests go on one connection per peer voter (correlated by `Correlator`); a broken
connection fails what was in flight (RequestFailed to the core), reconnects back off from
`controller.quorum.retry.backoff.ms`, and a request unanswered for
`controller.quorum.request.timeout.ms` drops the connection. Inbound requests come through
`handle_request` (the broker's CONTROLLER listener, or `serve` for a standalone listener).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import ssl
import struct
import time
from collections.abc import Callable, Coroutine
from dataclasses import replace
from pathlib import Path
from typing import Any

from samsa.cluster.channel import REAUTH_DRAIN_S, dial_address
from samsa.cluster.node_security import (
    NodeAuthError,
    NodeSecurity,
    expired,
    open_node_connection,
    request_frame,
    sasl_session,
    session_started,
)
from samsa.cluster.quorum import messages as m
from samsa.cluster.quorum.config import QuorumConfig, VoterEndpoint
from samsa.cluster.quorum.disk.log import FileRaftLog
from samsa.cluster.quorum.disk.state_file import FileQuorumStateStore
from samsa.cluster.quorum.log import Entry, OffsetAndEpoch
from samsa.cluster.quorum.node import NotLeaderError, Output, RaftNode
from samsa.cluster.quorum.state import Resigned
from samsa.cluster.quorum.wire.correlator import Correlator
from samsa.cluster.quorum.wire.errors import WireError
from samsa.cluster.quorum.wire.frames import api_key_of, decode_request, encode_response, sized
from samsa.cluster.quorum.wire.transport import read_frame, sender_of

log = logging.getLogger(__name__)

PARTITION_DIR = "__cluster_metadata-0"
RESIGN_WAIT_S = 1.0  # stop(resign=True) waits this long at most for EndQuorumEpoch answers
MAX_RECONNECT_BACKOFF_MS = 1000
DELIVER_CHUNK = 1024
_CORR = struct.Struct(">i")
CLUSTER_AUTHORIZATION_FAILED = 31

__all__ = ["PARTITION_DIR", "NotLeaderError", "QuorumDriver", "WireError"]


def _ignore_leader_change(leader_id: int | None, epoch: int) -> None:
    return None


class _Link:
    """The outgoing connection to one peer voter."""

    def __init__(self) -> None:
        self.writer: asyncio.StreamWriter | None = None
        self.task: asyncio.Task[None] | None = None  # connecting, then reading answers
        self.queued: list[bytes] = []  # frames waiting for the connection
        self.inflight: set[int] = set()  # correlation ids written and not answered
        self.backoff_ms = 0
        self.retry_at = 0.0  # loop time before which no connection attempt is made
        self.reauth: asyncio.Task[None] | None = None  # KIP-368 re-authentication running
        self.sasl: dict[int, asyncio.Future[bytes]] = {}  # its answers, by (negative) corr id


class QuorumDriver:
    """Runs the `__cluster_metadata` quorum member `node_id` (a voter, or an observer when it is
    not in `voters`) with its log and quorum-state in `directory/__cluster_metadata-0`."""

    def __init__(
        self,
        node_id: int,
        voters: dict[int, VoterEndpoint],
        directory: Path,
        config: QuorumConfig,
        cluster_id: str,
        *,
        on_commit: Callable[[list[tuple[int, Entry]]], None],
        on_snapshot: Callable[[OffsetAndEpoch, bytes], None],
        take_snapshot: Callable[[], bytes],
        on_leader_change: Callable[[int | None, int], None] = _ignore_leader_change,
        snapshot_bytes: int = 20971520,
        security: NodeSecurity | None = None,
    ) -> None:
        self.node_id = node_id
        self.voters = dict(voters)
        self.directory = Path(directory)
        self.config = config
        self.cluster_id = cluster_id
        self._cluster_id_warned: dict[int, float] = {}
        self._auth_warned: dict[int, float] = {}
        self.security: NodeSecurity | None = security  # how voters' listeners are dialled
        self._on_commit = on_commit
        self._on_snapshot = on_snapshot
        self._take_snapshot = take_snapshot
        self._on_leader_change = on_leader_change
        self.snapshot_bytes = snapshot_bytes
        self._node: RaftNode | None = None
        self._log: FileRaftLog | None = None
        self._store: FileQuorumStateStore | None = None
        self._correlator = Correlator(node_id)
        self._links: dict[int, _Link] = {}
        self._inbound: list[m.Message] = []
        self._proposals: list[tuple[list[bytes], asyncio.Future[int]]] = []
        self._waiting: list[tuple[int, int, asyncio.Future[int]]] = []  # (offset, epoch, future)
        self._answers: dict[tuple[int, int], tuple[int, asyncio.Future[bytes | None]]] = {}
        self._wake = asyncio.Event()
        self._resign = False
        self._running = False
        self._stopped = False
        self._task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._timers: set[asyncio.TimerHandle] = set()
        self._servers: list[asyncio.Server] = []
        self._served: set[asyncio.StreamWriter] = set()  # connections `serve` accepted
        self._disk_job: asyncio.Future[None] | None = None
        self._delivered = 0  # next offset to hand to on_commit
        self._hw = 0  # the high watermark as applied (after its output's flush)
        self._since_snapshot = 0  # bytes committed since the last snapshot
        self._snapshot_seen: OffsetAndEpoch | None = None
        self._leader_seen: tuple[int | None, int] | None = None
        self.error: BaseException | None = None  # why the driver stopped on its own, if it did

    # ------------------------------------------------------------------ state
    @property
    def node(self) -> RaftNode:
        if self._node is None:
            raise RuntimeError("the quorum driver is not started")
        return self._node

    @property
    def leader_id(self) -> int | None:
        return self._node.leader_id if self._node else None

    @property
    def epoch(self) -> int:
        return self._node.epoch if self._node else 0

    @property
    def delivered_offset(self) -> int:
        """The next offset on_commit will deliver: everything below was applied (control
        records included, though not delivered)."""
        return self._delivered

    @property
    def is_leader(self) -> bool:
        return self._node is not None and self._node.leader_id == self.node_id

    @property
    def high_watermark(self) -> int:
        return self._hw

    def describe(self) -> m.DescribeQuorumResponse:
        """DescribeQuorum as this node answers it, with wall-clock timestamps."""
        if self._node is None:
            # asked on a listener that opened before the log was read: no leader known yet
            return m.DescribeQuorumResponse(m.NOT_LEADER_OR_FOLLOWER, m.NO_LEADER, 0, -1)
        d = self._node.describe()
        shift = int(time.time() * 1000) - self._now_ms()

        def wall(rs: m.ReplicaState) -> m.ReplicaState:
            return replace(
                rs,
                last_fetch_timestamp=rs.last_fetch_timestamp + shift if rs.last_fetch_timestamp >= 0 else -1,
                last_caught_up_timestamp=(
                    rs.last_caught_up_timestamp + shift if rs.last_caught_up_timestamp >= 0 else -1
                ),
            )

        return replace(
            d,
            current_voters=tuple(map(wall, d.current_voters)),
            observers=tuple(map(wall, d.observers)),
        )

    @staticmethod
    def _now_ms() -> int:
        return int(asyncio.get_running_loop().time() * 1000)

    # ------------------------------------------------------------------ life cycle
    async def start(self) -> None:
        """Open the log (recovery runs in a thread), hand its snapshot to on_snapshot, run."""
        part = self.directory / PARTITION_DIR

        def open_disk() -> tuple[FileRaftLog, FileQuorumStateStore]:
            # FileRaftLog creates the directory durably (parent fsynced): a bare mkdir here would
            # let a power loss take the directory, and the committed metadata with it
            return FileRaftLog(part), FileQuorumStateStore(part, self.voters)

        rlog, store = await asyncio.to_thread(open_disk)
        persisted = await asyncio.to_thread(store.read)
        self._log, self._store = rlog, store
        self._node = RaftNode(
            self.node_id, self.voters, self.config, persisted, rlog,
            random.Random(), self._now_ms(), self.cluster_id,
        )
        sid = rlog.snapshot_id
        self._delivered = self._hw = rlog.start_offset
        if sid is not None:
            data = await asyncio.to_thread(rlog.read_snapshot, sid)
            if data is None:
                raise RuntimeError(f"{part}: snapshot {sid} is listed but unreadable")
            self._snapshot_seen = sid
            self._on_snapshot(sid, data)
        self._running = True
        self._task = asyncio.create_task(self._run(), name=f"raft-{self.node_id}")

    async def stop(self, resign: bool = True) -> None:
        """Stop; a leader first resigns (EndQuorumEpoch) and waits up to RESIGN_WAIT_S for the
        voters' answers. `resign=False` just cuts everything, like a crash."""
        if self._stopped:
            return
        self._stopped = True
        if resign and self._task is not None and not self._task.done():
            self._resign = True
            self._wake.set()
            deadline = time.monotonic() + RESIGN_WAIT_S
            while time.monotonic() < deadline and not self._task.done():
                s = self._node.state if self._node else None
                if not self._resign and not (isinstance(s, Resigned) and s.unacked):
                    break
                await asyncio.sleep(0.01)
        self._running = False
        for srv in self._servers:
            srv.close()
        for w in list(self._served):
            w.close()
        tasks = [t for t in [self._task, *self._tasks] if t is not None]
        for t in tasks:
            t.cancel()
        for h in self._timers:
            h.cancel()
        for link in self._links.values():
            if link.writer is not None:
                link.writer.close()
        for t in tasks:
            with contextlib.suppress(BaseException):
                await t
        if self._disk_job is not None:  # a thread cannot be cancelled: let its fsync finish
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(self._disk_job), 10)
        for srv in self._servers:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(srv.wait_closed(), 1)
        self._servers.clear()
        self._links.clear()
        self._release_waiters()

    def _release_waiters(self) -> None:
        node = self._node
        err = NotLeaderError(node.leader_id if node else None, node.epoch if node else 0)
        for _, fut in self._proposals:
            if not fut.done():
                fut.set_exception(err)
        for _, _, fut in self._waiting:
            if not fut.done():
                fut.set_exception(err)
        for _, afut in self._answers.values():
            if not afut.done():
                afut.set_result(None)
        self._proposals.clear()
        self._waiting.clear()
        self._answers.clear()

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # ------------------------------------------------------------------ proposals
    async def propose(self, records: list[bytes]) -> int:
        """Append `records` as the leader; returns the offset of the last once it is committed
        and on_commit has delivered it. NotLeaderError when not (or no longer) the leader."""
        if not self._running or not self.is_leader:
            raise NotLeaderError(self.leader_id, self.epoch)
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._proposals.append((list(records), fut))
        self._wake.set()
        return await fut

    # ------------------------------------------------------------------ the node's loop
    async def _run(self) -> None:
        node = self.node
        try:
            while True:
                now = self._now_ms()
                for records, fut in self._proposals:
                    if fut.done():
                        continue
                    try:
                        self._waiting.append((node.propose(records), node.epoch, fut))
                    except NotLeaderError as e:
                        fut.set_exception(e)
                self._proposals.clear()
                if self._resign:
                    out = node.resign(now)
                    self._resign = False
                    self._wake.set()  # inbound messages wait for the next step
                else:
                    batch, self._inbound = self._inbound, []
                    out = node.step(now, batch)
                await self._apply(out)
                delay = (out.next_timer_ms - self._now_ms()) / 1000
                if delay > 0 and not self._wake.is_set():
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), min(delay, 3600.0))
                self._wake.clear()
        except asyncio.CancelledError:
            raise
        except Exception as e:
            # a disk error (or a bug): stop serving rather than run on with unknown durable state
            log.exception("quorum driver of node %d failed; it stops", self.node_id)
            self.error = e
            self._running = False
            self._release_waiters()
            raise

    async def _disk(self, fn: Callable[[], None]) -> None:
        self._disk_job = asyncio.ensure_future(asyncio.to_thread(fn))
        try:
            await asyncio.shield(self._disk_job)
        finally:
            if self._disk_job.done():
                self._disk_job = None

    async def _apply(self, out: Output) -> None:
        """Persist, flush, send, commit: nothing leaves before what it depends on is durable."""
        store, rlog = self._store, self._log
        assert store is not None and rlog is not None
        rec = out.persist
        if rec is not None or out.flush_log:

            def durable() -> None:
                if rec is not None:
                    store.write(rec)
                if out.flush_log:
                    rlog.flush()

            await self._disk(durable)
        for msg in out.messages:
            self._send(msg)
        sid = rlog.snapshot_id
        if sid is not None and sid != self._snapshot_seen:
            self._snapshot_seen = sid  # installed from the leader (FetchSnapshot)
            if sid.offset > self._delivered:
                data = rlog.read_snapshot(sid)
                if data is not None:
                    self._on_snapshot(sid, data)
                    self._delivered = sid.offset
                    self._since_snapshot = 0
        if out.high_watermark is not None:
            self._hw = out.high_watermark
            self._deliver()
            await self._maybe_snapshot()
        node = self.node
        if self._waiting and not (node.leader_id == self.node_id):
            err = NotLeaderError(node.leader_id, node.epoch)
            for _, _, fut in self._waiting:
                if not fut.done():
                    fut.set_exception(err)
            self._waiting.clear()
        elif self._waiting:
            keep = []
            for off, ep, fut in self._waiting:
                if ep != node.epoch:
                    if not fut.done():
                        fut.set_exception(NotLeaderError(node.leader_id, node.epoch))
                else:
                    keep.append((off, ep, fut))
            self._waiting = keep
        seen = (node.leader_id, node.epoch)
        if seen != self._leader_seen:
            self._leader_seen = seen
            try:
                self._on_leader_change(*seen)
            except Exception:
                log.exception("on_leader_change failed")

    def _deliver(self) -> None:
        rlog = self._log
        assert rlog is not None
        while self._delivered < self._hw:
            start = self._delivered
            entries = rlog.read(start, min(DELIVER_CHUNK, self._hw - start))
            if not entries:
                break
            self._delivered = start + len(entries)
            self._since_snapshot += sum(len(e.data) for e in entries)
            batch = [(start + i, e) for i, e in enumerate(entries) if not e.control]
            if batch:
                try:
                    self._on_commit(batch)
                except Exception:
                    log.exception("on_commit failed at offsets %d..%d", start, self._delivered - 1)
        done = [w for w in self._waiting if w[0] < self._delivered]
        if done:
            self._waiting = [w for w in self._waiting if w[0] >= self._delivered]
            for off, _, fut in done:
                if not fut.done():
                    fut.set_result(off)

    async def _maybe_snapshot(self) -> None:
        rlog = self._log
        assert rlog is not None
        end = self._delivered
        if self._since_snapshot <= self.snapshot_bytes or end <= rlog.start_offset:
            return
        data = self._take_snapshot()
        sid = OffsetAndEpoch(end, rlog.read(end - 1, 1)[0].epoch)
        await self._disk(lambda: rlog.take_snapshot(sid, data))
        self._snapshot_seen = sid
        self._since_snapshot = 0

    # ------------------------------------------------------------------ outbound
    def _send(self, msg: m.Message) -> None:
        body = msg.body
        if isinstance(body, m.RequestFailed | m.DescribeQuorumRequest | m.DescribeQuorumResponse):
            return
        if isinstance(body, m.Request):
            frame = self._correlator.request_frame(msg.dst, body)
            if msg.dst not in self.voters or msg.dst == self.node_id:
                self._fail(msg.dst)
                return
            self._link_send(msg.dst, frame)
            return
        slot = self._answers.pop((msg.dst, api_key_of(body)), None)
        if slot is not None and not slot[1].done():
            slot[1].set_result(encode_response(body, slot[0]))

    def _link_send(self, dst: int, frame: bytes) -> None:
        link = self._links.setdefault(dst, _Link())
        if link.writer is not None and not link.writer.is_closing() and (
                link.reauth is not None or expired(link.writer)):
            # KIP-368: the SASL session nears its end: requests wait while the connection
            # re-authenticates in place, as Kafka's nodes do
            if link.reauth is None:
                link.reauth = self._spawn(self._reauthenticate(dst, link, link.writer))
            link.queued.append(frame)
            return
        if link.writer is not None and not link.writer.is_closing():
            self._write(dst, link, link.writer, frame)
            return
        if link.task is None or link.task.done():
            if asyncio.get_running_loop().time() < link.retry_at:
                self._fail(dst)  # backing off: the core hears at once that the peer is down
                return
            link.task = self._spawn(self._connect(dst, link))
        link.queued.append(frame)

    def _write(self, dst: int, link: _Link, writer: asyncio.StreamWriter, frame: bytes) -> None:
        (corr,) = _CORR.unpack_from(frame, 4)
        link.inflight.add(corr)
        try:
            writer.write(sized(frame))
        except (RuntimeError, OSError):
            # uvloop raises on a transport a reset already closed: the reader ends on it and
            # fails what was in flight
            writer.close()
            return
        loop = asyncio.get_running_loop()

        def timed_out() -> None:
            self._timers.discard(handle)
            if corr in link.inflight and link.writer is writer:
                writer.close()  # the reader sees it and fails what was in flight

        handle = loop.call_later(self.config.request_timeout_ms / 1000, timed_out)
        self._timers.add(handle)

    async def _reauthenticate(self, dst: int, link: _Link, writer: asyncio.StreamWriter) -> None:
        """SaslHandshake + SaslAuthenticate on the open connection once its requests in flight
        are answered; then the queued requests go out on it. On failure the connection closes
        (what waits fails, the core retries on a new one)."""
        loop = asyncio.get_running_loop()
        timeout = self.config.request_timeout_ms / 1000
        deadline = loop.time() + timeout
        drained = loop.time() + min(timeout, REAUTH_DRAIN_S)
        assert self.security is not None
        next_corr = -1

        async def call(key: int, version: int, body: dict[str, Any]) -> Any:
            nonlocal next_corr
            corr, next_corr = next_corr, next_corr - 1  # never one of the correlator's
            frame, read_hdr, read_body = request_frame(key, version, corr,
                                                       f"samsa-raft-{self.node_id}", body)
            fut: asyncio.Future[bytes] = loop.create_future()
            link.sasl[corr] = fut
            writer.write(frame)
            await writer.drain()
            try:
                data = await asyncio.wait_for(fut, max(0.0, deadline - loop.time()))
            except TimeoutError:
                raise ConnectionError("no answer during re-authentication") from None
            _, n = read_hdr(data, 0)
            return read_body(data, n)[0]

        ok = False
        try:
            while link.inflight and link.writer is writer and loop.time() < drained:
                await asyncio.sleep(0.005)  # bounded: the answers in flight (else: closed)
            if link.writer is writer and not link.inflight and not writer.is_closing():
                session_started(writer, await sasl_session(call, self.security))
                ok = True
        except NodeAuthError as e:
            self._auth_failed(dst, f"re-authentication: {e}")
        except OSError:
            pass  # the connection went: closed below
        finally:
            link.reauth = None
            for fut in link.sasl.values():
                fut.cancel()
            link.sasl.clear()
            if ok and link.writer is writer and not writer.is_closing():
                queued, link.queued = link.queued, []
                for frame in queued:
                    self._write(dst, link, writer, frame)
            else:
                writer.close()  # the reader ends on it and fails what was queued

    async def _connect(self, dst: int, link: _Link) -> None:
        loop = asyncio.get_running_loop()
        ep = self.voters[dst]
        try:
            reader, writer = await open_node_connection(
                ep.host, ep.port, self.security, self.config.request_timeout_ms / 1000,
                f"samsa-raft-{self.node_id}", dial_address)
        except (OSError, TimeoutError, NodeAuthError) as e:
            if isinstance(e, NodeAuthError):
                self._auth_failed(dst, str(e))
            link.backoff_ms = min(
                MAX_RECONNECT_BACKOFF_MS, max(self.config.retry_backoff_ms, 2 * link.backoff_ms, 1)
            )
            link.retry_at = loop.time() + link.backoff_ms / 1000
            link.queued.clear()
            self._fail(dst)
            return
        link.backoff_ms = 0
        link.writer = writer
        queued, link.queued = link.queued, []
        for frame in queued:
            self._write(dst, link, writer, frame)
        try:
            while True:
                frame = await read_frame(reader)
                if len(frame) >= 4:
                    (corr,) = _CORR.unpack_from(frame, 0)
                    fut = link.sasl.pop(corr, None)
                    if fut is not None:  # an answer during re-authentication
                        if not fut.done():
                            fut.set_result(frame)
                        continue
                    link.inflight.discard(corr)
                resp = self._correlator.response_message(dst, frame)
                if resp is not None:
                    self._check_cluster_id(dst, resp)
                    self._inbound.append(resp)
                    self._wake.set()
        except WireError as e:
            log.warning("quorum: malformed answer from node %d, reconnecting: %s", dst, e)
        except ssl.SSLError as e:  # TLS 1.3: a peer refusing our certificate says so here
            self._auth_failed(dst, f"TLS: the peer refused the connection: {e.reason or e}")
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            if link.writer is writer:
                link.writer = None
            link.inflight.clear()
            link.queued.clear()  # _fail below fails them too
            link.retry_at = loop.time() + self.config.retry_backoff_ms / 1000
        self._fail(dst)

    def _auth_failed(self, dst: int, why: str) -> None:
        """This node cannot authenticate to voter `dst` (or is not authorized there): it can
        never reach the quorum that way, so say so (once a minute per peer)."""
        now = asyncio.get_running_loop().time()
        if now - self._auth_warned.get(dst, -1e9) >= 60.0:
            self._auth_warned[dst] = now
            ep = self.voters[dst]
            sec = self.security.describe() if self.security is not None else "PLAINTEXT"
            log.error("quorum: Connection to node %d (%s:%d, %s) failed authentication due "
                      "to: %s", dst, ep.host, ep.port, sec, why)

    def _check_cluster_id(self, dst: int, resp: m.Message) -> None:
        """A voter of another cluster answers INCONSISTENT_CLUSTER_ID: the node can never join, so
        say so (once a minute per peer) instead of waiting silently."""
        code = getattr(resp.body, "error_code", None)
        if code == CLUSTER_AUTHORIZATION_FAILED:
            self._auth_failed(dst, "CLUSTER_AUTHORIZATION_FAILED: this node's principal lacks "
                                   "CLUSTER_ACTION on the cluster (make it a super user)")
            return
        if code != m.INCONSISTENT_CLUSTER_ID:
            return
        now = asyncio.get_running_loop().time()
        if now - self._cluster_id_warned.get(dst, -1e9) >= 60.0:
            self._cluster_id_warned[dst] = now
            log.error("quorum: node %d answered INCONSISTENT_CLUSTER_ID: this node's cluster id %s "
                      "(meta.properties) is not the quorum's; format its storage with the "
                      "cluster's id", dst, self.cluster_id)

    def _fail(self, dst: int) -> None:
        failed = self._correlator.failed(dst)
        if failed:
            self._inbound.extend(failed)
            self._wake.set()

    # ------------------------------------------------------------------ inbound
    async def handle_request(self, frame: bytes) -> bytes | None:
        """Answer one Raft RPC request frame (header included, no size prefix). None when the
        core will not answer it (superseded, or stopping): close that connection. Malformed
        frames raise WireError."""
        corr, req = decode_request(frame)
        if isinstance(req, m.DescribeQuorumRequest):
            return encode_response(self.describe(), corr)
        if not self._running:
            return None
        src = sender_of(req)
        key = (src, api_key_of(req))
        fut: asyncio.Future[bytes | None] = asyncio.get_running_loop().create_future()
        old = self._answers.pop(key, None)
        if old is not None and not old[1].done():
            old[1].set_result(None)
        self._answers[key] = (corr, fut)
        self._inbound.append(m.Message(src, self.node_id, req))
        self._wake.set()
        return await fut

    async def serve(self, host: str, port: int) -> int:
        """A minimal listener of size-prefixed Raft RPC frames (what the broker's CONTROLLER
        listener does otherwise); returns the bound port (`port` 0 picks one)."""
        srv = await asyncio.start_server(self._serve_conn, host, port)
        self._servers.append(srv)
        return int(srv.sockets[0].getsockname()[1])

    async def _serve_conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

        async def answer(frame: bytes) -> None:
            try:
                resp = await self.handle_request(frame)
            except WireError:
                resp = None
            if resp is None:
                writer.close()
            elif not writer.is_closing():
                writer.write(sized(resp))

        self._served.add(writer)
        try:
            while not writer.is_closing():
                frame = await read_frame(reader)
                self._spawn(answer(frame))  # answers may go out of order: correlation ids pair them
        except (WireError, OSError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # a cancelled connection handler ends quietly (asyncio logs cancelled ones)
        finally:
            self._served.discard(writer)
            writer.close()
