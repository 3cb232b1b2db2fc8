"""A distributed worker's membership in its Connect group (Kafka's WorkerGroupMember and
WorkerCoordinator): find the group coordinator, join with protocol type "connect", run the
incremental cooperative assignor when elected leader, sync, heartbeat, rejoin when the group or
the herder asks, and leave on close.

Everything runs on one asyncio loop (the herder's own, in its own thread if it likes): call
`await member.poll(timeout_s)` in the herder's loop, or `await member.run_forever()` /
`member.start()` as a task. The herder's callbacks run on that loop between requests and must
be short: `on_revoked` (stop these now; the member rejoins right after) and `on_assigned` (the
whole assignment this worker runs from now on, or a failed one: CONFIG_MISMATCH means read the
config topic to `assignment.config_offset`; the member rejoins shortly after by itself).

Like Kafka's worker, a member that cannot reach a coordinator for a heartbeat interval revokes
everything it runs (KAFKA-9184): by then the group may have given its work to others.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from samsa.cluster.channel import ChannelError, NodeChannel

from ..status import ConnectorTaskId
from .assignor import DEFAULT_MAX_DELAY_MS, AssignorState, GroupAssignment, assign
from .protocol import (
    COMPATIBLE,
    PROTOCOL_TYPE,
    PROTOCOL_VERSIONS,
    SESSIONED,
    Assignment,
    ConnectProtocolError,
    WorkerState,
    decode_assignment,
    decode_metadata,
    encode_assignment,
    join_protocols,
)

log = logging.getLogger(__name__)

FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 10, 11, 12, 13, 14
FIND_COORDINATOR_V, JOIN_GROUP_V, HEARTBEAT_V, LEAVE_GROUP_V, SYNC_GROUP_V = 4, 9, 4, 5, 5

# Kafka error codes the member reacts to
NONE = 0
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
ILLEGAL_GENERATION = 22
UNKNOWN_MEMBER_ID = 25
REBALANCE_IN_PROGRESS = 27
MEMBER_ID_REQUIRED = 79
FENCED_INSTANCE_ID = 82
_COORDINATOR_ERRORS = {COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR}
_STALE_MEMBER = {UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID}


class GroupListener(Protocol):
    """What the member asks of the herder (all called on the member's loop)."""

    def metadata(self) -> tuple[str, int]:
        """(this worker's REST url, the config topic offset it has read up to)."""
        ...

    def config_snapshot(self) -> tuple[int, Mapping[str, int]]:
        """Leader only: (config offset, {connector: task count}) to assign from."""
        ...

    def on_revoked(self, connectors: Sequence[str], tasks: Sequence[ConnectorTaskId]) -> None:
        ...

    def on_assigned(self, assignment: Assignment, generation: int) -> None:
        ...


class GroupMemberError(Exception):
    """The group refused this member for good (bad session timeout, protocol mismatch, ...)."""


@dataclass(frozen=True)
class MemberConfig:
    """The worker configs that shape group membership (Kafka's names and defaults)."""

    group_id: str
    bootstrap_servers: str = "localhost:9092"
    session_timeout_ms: int = 10_000
    rebalance_timeout_ms: int = 60_000
    heartbeat_interval_ms: int = 3_000
    scheduled_rebalance_max_delay_ms: int = DEFAULT_MAX_DELAY_MS
    connect_protocol: str = SESSIONED
    request_timeout_ms: int = 40_000
    retry_backoff_ms: int = 100
    client_id: str = "samsa-connect"
    security: Any = None  # NodeSecurity of the worker's top-level security settings (None: PLAINTEXT)

    @classmethod
    def from_worker_config(cls, config: Any, group_id: str | None = None) -> MemberConfig:
        """From a distributed worker's config: a WorkerConfig (typed values) or a mapping of
        properties (`group.id`, `bootstrap.servers`, `session.timeout.ms`, ...)."""
        def val(key: str, default: Any) -> Any:
            try:
                v = config.get(key)
            except Exception:  # a ConfigDef without that key
                v = None
            return default if v is None else v

        servers = val("bootstrap.servers", "localhost:9092")
        if isinstance(servers, list | tuple):
            servers = ",".join(str(x) for x in servers)
        protocol = str(val("connect.protocol", SESSIONED))
        if protocol == "eager":
            log.warning("connect.protocol=eager: Samsa workers rebalance cooperatively; "
                        "using %s", COMPATIBLE)
            protocol = COMPATIBLE
        return cls(group_id=str(group_id if group_id is not None else val("group.id", "")),
                   bootstrap_servers=str(servers),
                   session_timeout_ms=int(val("session.timeout.ms", 10_000)),
                   rebalance_timeout_ms=int(val("rebalance.timeout.ms", 60_000)),
                   heartbeat_interval_ms=int(val("heartbeat.interval.ms", 3_000)),
                   scheduled_rebalance_max_delay_ms=int(val("scheduled.rebalance.max.delay.ms",
                                                            DEFAULT_MAX_DELAY_MS)),
                   connect_protocol=protocol,
                   request_timeout_ms=int(val("request.timeout.ms", 40_000)),
                   retry_backoff_ms=int(val("retry.backoff.ms", 100)),
                   security=(config.node_security() if hasattr(config, "node_security")
                             else None),
                   client_id=str(val("client.id", "samsa-connect")))

    def servers(self) -> list[tuple[str, int]]:
        out = []
        for item in self.bootstrap_servers.split(","):
            item = item.strip()
            if "://" in item:
                item = item.split("://", 1)[1]
            host, _, port = item.rpartition(":")
            if not host or not port.isdigit():
                raise ValueError(f"bootstrap.servers entry {item!r} is not host:port")
            out.append((host.strip("[]"), int(port)))
        if not out:
            raise ValueError("bootstrap.servers is empty")
        return out


class _Rejoin(Exception):
    """Internal: the current join attempt ends; the loop starts over."""


class WorkerGroupMember:
    """One worker's membership in the Connect group `config.group_id`."""

    def __init__(self, config: MemberConfig, listener: GroupListener) -> None:
        self.config = config
        self.listener = listener
        self.member_id = ""
        self.generation = -1
        self.protocol: str | None = None
        self.leader_id: str | None = None
        self.assignment: Assignment | None = None  # everything this worker runs now
        self.leader_state: GroupAssignment | None = None  # the leader's view after its round
        self._member_urls: dict[str, str] = {}
        self._assignor_state: AssignorState | None = None
        self._last_completed_generation = -1
        self._servers = config.servers()
        self._coordinator: NodeChannel | None = None
        self._bootstrap: dict[tuple[str, int], NodeChannel] = {}
        self._rejoin_needed = True
        self._rejoin_at: float | None = None
        self._next_heartbeat = 0.0
        self._closed = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: int | None = None
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._runner: threading.Thread | None = None
        self._stop_requested: asyncio.Event | None = None
        self._leave_on_stop = True
        self.error: BaseException | None = None  # why a member run in its own thread ended

    @classmethod
    def from_worker_config(cls, config: Any, group_id: str | None,
                           listener: GroupListener) -> WorkerGroupMember:
        return cls(MemberConfig.from_worker_config(config, group_id), listener)

    def __repr__(self) -> str:
        return f"WorkerGroupMember({self.config.group_id}, {self.member_id or '-'}, " \
               f"gen {self.generation})"

    # ---- what the herder asks -----------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return bool(self.member_id) and self.leader_id == self.member_id

    @property
    def rejoin_needed(self) -> bool:
        """True until the member has (re)joined the current generation."""
        return self._rejoin_needed

    @property
    def leader_url(self) -> str | None:
        return self.assignment.leader_url if self.assignment is not None else None

    def owner_url(self, work: str | ConnectorTaskId) -> str | None:
        """Leader only, between rebalances: the url of the worker that runs `work`."""
        st = self.leader_state
        if st is None or self._rejoin_needed or not self.is_leader:
            return None
        owner = st.task_owners.get(work) if isinstance(work, ConnectorTaskId) \
            else st.connector_owners.get(work)
        return self._member_urls.get(owner) if owner is not None else None

    def request_rejoin(self) -> None:
        """Rejoin the group soon (configs changed). Safe from any thread."""
        loop = self._loop
        if loop is not None and not loop.is_closed() and threading.get_ident() != self._thread:
            loop.call_soon_threadsafe(self._set_rejoin)
        else:
            self._set_rejoin()

    def _set_rejoin(self) -> None:
        self._rejoin_needed = True
        if self._wake is not None:
            self._wake.set()

    # ---- driving ------------------------------------------------------------------------

    def start(self) -> asyncio.Task[None] | threading.Thread:
        """Run `run_forever`: as a task of the running loop when called on one, else on a loop
        of its own in a daemon thread (stop it with `stop()`)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            if self._runner is None:
                self._runner = threading.Thread(target=self._thread_main, daemon=True,
                                                name=f"connect-group-{self.config.group_id}")
                self._runner.start()
            return self._runner
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self.run_forever())
        return self._task

    def stop(self, leave: bool = True, timeout_s: float = 30.0) -> None:
        """Close a member that `start()` runs in its own thread, from any other thread."""
        runner = self._runner
        if runner is None:
            return
        self._leave_on_stop = leave
        deadline = time.monotonic() + timeout_s
        while self._stop_requested is None and runner.is_alive() and \
                time.monotonic() < deadline:
            time.sleep(0.01)  # the thread has not reached its loop yet
        stop = self._stop_requested
        loop = self._loop
        if stop is not None and loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(stop.set)
        runner.join(max(0.0, deadline - time.monotonic()))

    def _thread_main(self) -> None:
        try:
            asyncio.run(self._own_loop())
        except BaseException as e:  # noqa: BLE001 - the thread reports, never raises
            self.error = e
            log.exception("%r: the group member stopped", self)

    async def _own_loop(self) -> None:
        self._loop, self._thread = asyncio.get_running_loop(), threading.get_ident()
        self._stop_requested = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self.run_forever())
        stop_wait = asyncio.get_running_loop().create_task(self._stop_requested.wait())
        await asyncio.wait({self._task, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
        stop_wait.cancel()
        failed = self._task.exception() if self._task.done() and \
            not self._task.cancelled() else None
        await self.close(self._leave_on_stop)
        if failed is not None:
            raise failed

    async def run_forever(self) -> None:
        while not self._closed:
            await self.poll(3600.0)

    async def poll(self, timeout_s: float) -> None:
        """Do what the membership needs (find the coordinator, rejoin, heartbeat) and return
        after `timeout_s` or when the member is closed. Raises GroupMemberError when the group
        refuses this member for good."""
        loop = asyncio.get_running_loop()
        self._loop, self._thread = loop, threading.get_ident()
        if self._wake is None:
            self._wake = asyncio.Event()
        deadline = loop.time() + timeout_s
        while not self._closed:
            now = loop.time()
            try:
                if self._coordinator is None:
                    if not await self._find_coordinator(self.config.heartbeat_interval_ms / 1000):
                        self._revoke_all("coordinator unreachable for a heartbeat interval")
                        if loop.time() >= deadline:
                            return
                        continue
                if self._rejoin_at is not None and now >= self._rejoin_at:
                    self._rejoin_at, self._rejoin_needed = None, True
                if self._rejoin_needed:
                    await self._join_and_sync()
                    continue
                if now >= self._next_heartbeat:
                    await self._heartbeat()
                    continue
            except ChannelError as e:
                log.info("%r: coordinator lost: %s", self, e)
                await self._coordinator_lost()
                await asyncio.sleep(self.config.retry_backoff_ms / 1000)
                continue
            except _Rejoin:
                continue
            if now >= deadline:
                return
            until = min(deadline, self._next_heartbeat,
                        self._rejoin_at if self._rejoin_at is not None else deadline)
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), max(0.0, until - loop.time()))
            if loop.time() >= deadline and not self._rejoin_needed:
                return

    async def close(self, leave: bool = True) -> None:
        """Stop. With `leave`, tell the coordinator (LeaveGroup) so the group rebalances now;
        without it the coordinator notices after session.timeout.ms (a crash)."""
        self._closed = True
        if self._wake is not None:
            self._wake.set()
        task, self._task = self._task, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        if leave and self.member_id and self._coordinator is not None:
            body = {"group_id": self.config.group_id,
                    "members": [{"member_id": self.member_id, "group_instance_id": None,
                                 "reason": "the worker is shutting down"}]}
            try:
                await self._coordinator.request(LEAVE_GROUP, LEAVE_GROUP_V, body,
                                                timeout_s=self.config.request_timeout_ms / 1000)
            except ChannelError as e:
                log.info("%r: LeaveGroup failed: %s", self, e)
        channels = [self._coordinator, *self._bootstrap.values()]
        self._coordinator = None
        self._bootstrap.clear()
        for ch in channels:
            if ch is not None:
                await ch.close()

    # ---- steps --------------------------------------------------------------------------

    async def _find_coordinator(self, within_s: float) -> bool:
        """Ask the bootstrap servers, round robin with backoff, for up to `within_s`."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within_s
        i = 0
        while not self._closed:
            host, port = self._servers[i % len(self._servers)]
            i += 1
            ch = self._bootstrap.get((host, port))
            if ch is None:
                ch = self._bootstrap[(host, port)] = NodeChannel(
                    host, port, self.config.client_id, self.config.request_timeout_ms / 1000,
                    security=self.config.security)
            body = {"key_type": 0, "coordinator_keys": [self.config.group_id]}
            try:
                left = max(0.05, deadline - loop.time())
                resp = await ch.request(FIND_COORDINATOR, FIND_COORDINATOR_V, body,
                                        timeout_s=min(left, self.config.request_timeout_ms / 1000))
                c = resp.coordinators[0] if resp.coordinators else None
                if c is not None and int(c.error_code) == NONE:
                    self._coordinator = NodeChannel(c.host, int(c.port), self.config.client_id,
                                                    self.config.request_timeout_ms / 1000,
                                                    security=self.config.security)
                    log.debug("%r: coordinator is node %s at %s:%s", self, c.node_id, c.host,
                              c.port)
                    return True
                log.debug("%r: FindCoordinator: error %s", self,
                          None if c is None else int(c.error_code))
            except ChannelError as e:
                log.debug("%r: FindCoordinator via %s:%s failed: %s", self, host, port, e)
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(min(self.config.retry_backoff_ms / 1000,
                                    max(0.0, deadline - loop.time())))
        return False

    async def _coordinator_lost(self) -> None:
        ch, self._coordinator = self._coordinator, None
        if ch is not None:
            await ch.close()

    def _revoke_all(self, why: str) -> None:
        a = self.assignment
        if a is not None and not a.failed and (a.connectors or a.tasks):
            log.warning("%r: %s: revoking %d connectors and %d tasks", self, why,
                        len(a.connectors), len(a.tasks))
            self.listener.on_revoked(a.connectors, a.tasks)
        self.assignment = None
        self._rejoin_needed = True

    async def _join_and_sync(self) -> None:
        coord = self._coordinator
        assert coord is not None
        url, offset = self.listener.metadata()
        state = WorkerState(url, offset, self.assignment)
        body = {"group_id": self.config.group_id,
                "session_timeout": self.config.session_timeout_ms,
                "rebalance_timeout": self.config.rebalance_timeout_ms,
                "member_id": self.member_id, "group_instance_id": None,
                "protocol_type": PROTOCOL_TYPE,
                "protocols": [{"name": n, "metadata": m}
                              for n, m in join_protocols(state, self.config.connect_protocol)],
                "reason": None}
        join_timeout = max(self.config.request_timeout_ms,
                           self.config.rebalance_timeout_ms + 5000) / 1000
        resp = await coord.request(JOIN_GROUP, JOIN_GROUP_V, body, timeout_s=join_timeout)
        code = int(resp.error_code)
        if code != NONE:
            await self._join_error("JoinGroup", code, resp.member_id)
        self.member_id = resp.member_id
        self.generation = resp.generation_id
        self.protocol = resp.protocol_name
        self.leader_id = resp.leader
        version = PROTOCOL_VERSIONS.get(resp.protocol_name or "", -1)
        if version < 1:
            raise GroupMemberError(f"the group chose protocol {resp.protocol_name!r}, which "
                                   "this worker does not speak")
        assignments: list[dict[str, Any]] = []
        if resp.leader == resp.member_id:
            assignments = self._lead(resp.members, version)
        body = {"group_id": self.config.group_id, "generation_id": self.generation,
                "member_id": self.member_id, "group_instance_id": None,
                "protocol_type": PROTOCOL_TYPE, "protocol_name": resp.protocol_name,
                "assignments": assignments}
        sync = await coord.request(SYNC_GROUP, SYNC_GROUP_V, body, timeout_s=join_timeout)
        code = int(sync.error_code)
        if code != NONE:
            await self._join_error("SyncGroup", code, self.member_id)
        try:
            got = decode_assignment(sync.assignment)
        except ConnectProtocolError as e:
            log.warning("%r: undecodable assignment from the leader: %s", self, e)
            self._schedule_rejoin(self.config.retry_backoff_ms)
            self._rejoin_needed = False
            return
        self._rejoin_needed = False
        self._next_heartbeat = asyncio.get_running_loop().time() + \
            self.config.heartbeat_interval_ms / 1000
        self._on_join_complete(got)

    def _lead(self, members: Sequence[Any], version: int) -> list[dict[str, Any]]:
        states: dict[str, WorkerState] = {}
        for m in members:
            try:
                states[m.member_id] = decode_metadata(m.metadata)
            except ConnectProtocolError as e:
                log.warning("%r: member %s sent undecodable metadata (%s): treated as empty",
                            self, m.member_id, e)
                states[m.member_id] = WorkerState("", -1)
        offset, connectors = self.listener.config_snapshot()
        result = assign(self.member_id, states, offset, dict(connectors), self._assignor_state,
                        now_ms=int(time.monotonic() * 1000),
                        max_delay_ms=self.config.scheduled_rebalance_max_delay_ms,
                        version=version, generation=self.generation,
                        last_completed_generation=self._last_completed_generation)
        self._assignor_state = result.state
        self.leader_state = result
        self._member_urls = {m: s.url for m, s in states.items()}
        return [{"member_id": m, "assignment": encode_assignment(a)}
                for m, a in result.assignments.items()]

    async def _join_error(self, what: str, code: int, member_id: str) -> None:
        if code == MEMBER_ID_REQUIRED:
            self.member_id = member_id  # KIP-394: join again with the id the coordinator gave
            raise _Rejoin()
        if code == REBALANCE_IN_PROGRESS:
            await asyncio.sleep(self.config.retry_backoff_ms / 1000)  # never spin on it
            raise _Rejoin()
        if code in _STALE_MEMBER:
            log.info("%r: %s: error %d: rejoining as a new member", self, what, code)
            self.member_id, self.generation = "", -1
            raise _Rejoin()
        if code in _COORDINATOR_ERRORS:
            log.info("%r: %s: coordinator error %d", self, what, code)
            await self._coordinator_lost()
            await asyncio.sleep(self.config.retry_backoff_ms / 1000)
            raise _Rejoin()
        raise GroupMemberError(f"{what} for group {self.config.group_id!r} failed with "
                               f"error {code}")

    def _on_join_complete(self, got: Assignment) -> None:
        self._last_completed_generation = self.generation
        current = self.assignment
        if got.failed:
            keep_c = current.connectors if current is not None else ()
            keep_t = current.tasks if current is not None else ()
            self.assignment = replace(got, connectors=keep_c, tasks=keep_t)
            log.info("%r: assignment failed (error %d, config offset %d): rejoining", self,
                     got.error, got.config_offset)
            self.listener.on_assigned(self.assignment, self.generation)
            self._schedule_rejoin(self.config.retry_backoff_ms)
            return
        revoked_c, revoked_t = set(got.revoked_connectors), set(got.revoked_tasks)
        if revoked_c or revoked_t:
            self.listener.on_revoked(got.revoked_connectors, got.revoked_tasks)
        connectors = [c for c in (current.connectors if current else ()) if c not in revoked_c]
        tasks = [t for t in (current.tasks if current else ()) if t not in revoked_t]
        connectors += [c for c in got.connectors if c not in connectors]
        tasks += [t for t in got.tasks if t not in tasks]
        self.assignment = replace(got, connectors=tuple(connectors), tasks=tuple(tasks))
        log.info("%r: joined as %s; runs %d connectors and %d tasks (+%d/+%d, -%d/-%d), "
                 "delay %d ms", self, "leader" if self.is_leader else "follower",
                 len(connectors), len(tasks), len(got.connectors), len(got.tasks),
                 len(revoked_c), len(revoked_t), got.delay_ms)
        self.listener.on_assigned(self.assignment, self.generation)
        if revoked_c or revoked_t:
            self._rejoin_needed = True  # so the leader can give the revoked work out
        elif got.delay_ms > 0:
            self._schedule_rejoin(got.delay_ms)

    def _schedule_rejoin(self, delay_ms: int) -> None:
        at = asyncio.get_running_loop().time() + delay_ms / 1000
        if self._rejoin_at is None or at < self._rejoin_at:
            self._rejoin_at = at

    async def _heartbeat(self) -> None:
        coord = self._coordinator
        assert coord is not None
        body = {"group_id": self.config.group_id, "generation_id": self.generation,
                "member_id": self.member_id, "group_instance_id": None}
        loop = asyncio.get_running_loop()
        self._next_heartbeat = loop.time() + self.config.heartbeat_interval_ms / 1000
        resp = await coord.request(HEARTBEAT, HEARTBEAT_V, body,
                                   timeout_s=min(self.config.request_timeout_ms,
                                                 self.config.session_timeout_ms) / 1000)
        code = int(resp.error_code)
        if code == NONE:
            return
        if code == REBALANCE_IN_PROGRESS:
            log.info("%r: the group is rebalancing: rejoining", self)
            self._rejoin_needed = True
        elif code in _STALE_MEMBER:
            log.info("%r: heartbeat error %d: rejoining as a new member", self, code)
            self.member_id, self.generation = "", -1
            self._rejoin_needed = True
        elif code in _COORDINATOR_ERRORS:
            await self._coordinator_lost()
        else:
            log.warning("%r: heartbeat error %d", self, code)
