"""The classic group coordinator: JoinGroup/SyncGroup/Heartbeat/LeaveGroup state machine, static
membership (KIP-345), member id on first join (KIP-394), committed offsets, and the records that
persist them in `__consumer_offsets` (rebuilt by replay at start).

Error codes and transitions follow Kafka's GroupCoordinator. Rebalances complete when every member
has rejoined or the rebalance timeout passes; an empty group waits
`group.initial.rebalance.delay.ms` (extended per new member, bounded by the rebalance timeout) so a
starting fleet lands in one generation.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from base64 import b64decode, b64encode
from typing import Any

from samsa.cluster.internal_topic import InternalTopic, ReplicationError
from samsa.coordinator.routing import append_error

from .assignors import ASSIGNORS, TP
from .consumer_group import (
    FENCED_MEMBER_EPOCH,
    UNSUPPORTED_ASSIGNOR,
    ConsumerGroup,
    ConsumerMember,
    HeartbeatError,
    new_member_id,
)
from .model import Group, GroupState, Member, OffsetEntry

log = logging.getLogger("samsa.groups")

NONE = 0
OFFSET_METADATA_TOO_LARGE = 12
COORDINATOR_NOT_AVAILABLE = 15
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
INVALID_GROUP_ID = 24
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
REBALANCE_IN_PROGRESS = 27
UNKNOWN_TOPIC_OR_PARTITION = 3
NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69
MEMBER_ID_REQUIRED = 79
FENCED_INSTANCE_ID = 82
GROUP_SUBSCRIBED_TO_TOPIC = 86
STALE_MEMBER_EPOCH = 113


class GroupError(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


class GroupConfig:
    def __init__(self, min_session_ms: int = 6000, max_session_ms: int = 1800000,
                 initial_delay_ms: int = 3000, metadata_max_bytes: int = 4096,
                 retention_ms: int = 7 * 86400 * 1000, retention_check_ms: int = 600000,
                 consumer_heartbeat_ms: int = 5000, consumer_session_ms: int = 45000) -> None:
        self.consumer_heartbeat_ms = consumer_heartbeat_ms
        self.consumer_session_ms = consumer_session_ms
        self.min_session_ms = min_session_ms
        self.max_session_ms = max_session_ms
        self.initial_delay_ms = initial_delay_ms
        self.metadata_max_bytes = metadata_max_bytes
        self.retention_ms = retention_ms
        self.retention_check_ms = retention_check_ms


def _now_ms() -> int:
    return int(time.time() * 1000)


class ConsumerProtocolMixin:
    """KIP-848 ConsumerGroupHeartbeat / ConsumerGroupDescribe, on the same coordinator (group
    ids share one namespace with classic groups, as in Kafka)."""

    groups: dict[str, Group]
    consumer_groups: dict[str, ConsumerGroup]
    topic: InternalTopic
    heartbeat_interval_ms: int
    consumer_session_ms: int

    def _partition_counts(self) -> dict[str, int]:
        return {n: t.count for n, t in self.topic.controller.image.topics.items()}

    def _topic_names(self) -> dict[uuid.UUID, str]:
        return {t.topic_id: n for n, t in self.topic.controller.image.topics.items()}

    def consumer_heartbeat(self, *, group_id: str, member_id: str, member_epoch: int,
                           instance_id: str | None, rack_id: str | None, rebalance_ms: int,
                           subscribed: list[str] | None, assignor: str | None,
                           owned: list[tuple[uuid.UUID, list[int]]] | None, client_id: str,
                           client_host: str, version: int) -> dict[str, Any]:
        if not group_id:
            raise HeartbeatError(INVALID_GROUP_ID, "The group id must not be empty.")
        if assignor is not None and assignor not in ASSIGNORS:
            raise HeartbeatError(UNSUPPORTED_ASSIGNOR, f"Unsupported assignor {assignor}.")
        classic = self.groups.get(group_id)
        if classic is not None and classic.members:
            raise HeartbeatError(INCONSISTENT_GROUP_PROTOCOL,
                                 f"Group {group_id} is a classic group with active members.")
        g = self.consumer_groups.setdefault(group_id, ConsumerGroup(group_id))
        counts = self._partition_counts()
        names = self._topic_names()
        if member_epoch in (-1, -2):  # leave (static members: -2 keeps nothing either here)
            g.remove(member_id, counts)
            if not g.members:
                self._consumer_group_empty(g)
            return {"error_code": 0, "member_id": member_id, "member_epoch": member_epoch,
                    "heartbeat_interval": self.heartbeat_interval_ms, "assignment": None}
        m = g.members.get(member_id) if member_id else None
        if member_epoch == 0:
            if m is None and instance_id is not None:
                old = next((x for x in g.members.values() if x.instance_id == instance_id), None)
                if old is not None:  # a static member came back: it takes over its assignment
                    old_id = old.member_id
                    g.members.pop(old_id)
                    old.member_id = member_id or new_member_id()
                    g.members[old.member_id] = old
                    g.target[old.member_id] = g.target.pop(old_id, set())
                    m = old
                    m.owned, m.last_sent = set(), None
            if m is None:
                m = ConsumerMember(member_id or new_member_id(), instance_id, rack_id, client_id,
                                   client_host, rebalance_ms)
                g.members[m.member_id] = m
                m.subscribed = sorted(subscribed or [])
                m.assignor = assignor
                g.bump(counts)
            elif m.instance_id is None or m.instance_id != instance_id:
                # a known dynamic member rejoining from scratch (e.g. after being fenced)
                m.owned, m.assigned, m.last_sent = set(), set(), None
        else:
            if m is None:
                raise HeartbeatError(UNKNOWN_MEMBER_ID,
                                     f"Member {member_id} is not a member of group {group_id}.")
            if member_epoch > m.epoch or member_epoch < m.epoch - 1:
                raise HeartbeatError(FENCED_MEMBER_EPOCH,
                                     f"Member epoch {member_epoch} does not match {m.epoch}.")
        m.last_heartbeat = time.monotonic()
        m.rebalance_timeout_ms = rebalance_ms
        if subscribed is not None and sorted(subscribed) != m.subscribed:
            m.subscribed = sorted(subscribed)
            g.bump(counts)
        if assignor is not None and assignor != m.assignor:
            m.assignor = assignor
            g.bump(counts)
        # partitions of subscribed topics changed (CreatePartitions, new topics): recompute
        if any(tp[1] >= counts.get(tp[0], 0) for tp in set().union(*g.target.values())) or \
                sum(counts.get(t, 0) for t in {t for x in g.members.values() for t in x.subscribed}) \
                != sum(len(s) for s in g.target.values()):
            g.bump(counts)
        if owned is not None:
            m.owned = {(names[tid], p) for tid, parts in owned if tid in names for p in parts}
        g.reconcile(m)
        resp: dict[str, Any] = {"error_code": 0, "member_id": m.member_id,
                                "member_epoch": m.epoch,
                                "heartbeat_interval": self.heartbeat_interval_ms,
                                "assignment": None}
        now = frozenset(m.assigned)
        if now != m.last_sent or member_epoch == 0:
            ids = {n: t.topic_id for n, t in self.topic.controller.image.topics.items()}
            by_topic: dict[str, list[int]] = {}
            for t, p in sorted(now):
                by_topic.setdefault(t, []).append(p)
            resp["assignment"] = {"topic_partitions": [
                {"topic_id": ids[t], "partitions": ps} for t, ps in by_topic.items() if t in ids]}
            m.last_sent = now
        return resp

    def _consumer_group_empty(self, g: ConsumerGroup) -> None:
        """An empty consumer group stays a consumer-type group (state Empty); its committed
        offsets live in the offsets holder in self.groups, which starts its retention clock."""
        og = self.groups.setdefault(g.group_id, Group(g.group_id))
        og.empty_since_ms = _now_ms()

    def expire_consumer_members(self) -> None:
        now = time.monotonic()
        for g in list(self.consumer_groups.values()):
            gone = [mid for mid, m in g.members.items()
                    if now - m.last_heartbeat > self.consumer_session_ms / 1000]
            for mid in gone:
                log.info("consumer group %s: member %s session expired", g.group_id, mid)
                g.remove(mid, self._partition_counts())
            if gone and not g.members:
                self._consumer_group_empty(g)

    def describe_consumer_group(self, group_id: str) -> dict[str, Any]:
        g = self.consumer_groups.get(group_id)
        if g is None:
            return {"error_code": GROUP_ID_NOT_FOUND,
                    "error_message": f"Group {group_id} not found.", "group_id": group_id,
                    "group_state": "Dead", "group_epoch": -1, "assignment_epoch": -1,
                    "assignor_name": "", "members": []}
        ids = {n: t.topic_id for n, t in self.topic.controller.image.topics.items()}

        def assignment(tps: set[TP]) -> dict[str, Any]:
            by: dict[str, list[int]] = {}
            for t, p in sorted(tps):
                by.setdefault(t, []).append(p)
            return {"topic_partitions": [{"topic_id": ids.get(t), "topic_name": t,
                                          "partitions": ps} for t, ps in by.items()]}

        return {"error_code": 0, "error_message": None, "group_id": group_id,
                "group_state": g.state, "group_epoch": g.group_epoch,
                "assignment_epoch": g.assignment_epoch, "assignor_name": g.assignor_name,
                "members": [{"member_id": m.member_id, "instance_id": m.instance_id,
                             "rack_id": m.rack_id, "member_epoch": m.epoch,
                             "client_id": m.client_id, "client_host": m.client_host,
                             "subscribed_topic_names": m.subscribed,
                             "subscribed_topic_regex": None,
                             "assignment": assignment(m.assigned),
                             "target_assignment": assignment(g.target.get(m.member_id, set())),
                             "member_type": 1}
                            for m in g.members.values()]}


class GroupCoordinator(ConsumerProtocolMixin):
    def __init__(self, topic: InternalTopic, config: GroupConfig,
                 partition_exists: Any) -> None:
        self.consumer_groups: dict[str, ConsumerGroup] = {}
        # transactional offsets waiting for their transaction's marker: pid -> (group, t, p) -> e
        self.pending_txn: dict[int, dict[tuple[str, str, int], OffsetEntry]] = {}
        self.heartbeat_interval_ms = config.consumer_heartbeat_ms
        self.consumer_session_ms = config.consumer_session_ms
        self.topic = topic
        self.config = config
        self.partition_exists = partition_exists  # (topic, partition) -> bool
        self.groups: dict[str, Group] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._write_lock = asyncio.Lock()
        self.loaded: set[int] = set()  # __consumer_offsets partitions replayed into memory

    # ---- lifecycle ---------------------------------------------------------------------
    def load(self, partitions: set[int] | None = None) -> None:
        """Rebuild groups and offsets by replaying the __consumer_offsets partitions this broker
        hosts (all of them at start, or the given ones when it gains them later)."""
        n = 0
        staged: dict[int, list[tuple[dict[str, Any], dict[str, Any] | None]]] = {}
        if partitions is None:
            partitions = {p for p in range(self.topic.count()) if self.topic.hosted(p)}
        self.loaded |= partitions
        for item in self.topic.replay(partitions):
            if item.marker is not None:  # a transaction ended: apply or drop its offsets
                for k, v in staged.pop(item.producer_id, []):
                    if item.marker == 1:
                        self._apply(k, v)
                continue
            if item.key is None:
                continue
            k = json.loads(item.key)
            v = None if item.value is None else json.loads(item.value)
            if item.transactional:
                staged.setdefault(item.producer_id, []).append((k, v))
            else:
                self._apply(k, v)
            n += 1
        for pid, recs in staged.items():  # still open: keep them pending
            for k, v in recs:
                if v is not None:
                    self.pending_txn.setdefault(pid, {})[(k["g"], k["topic"], k["p"])] = \
                        OffsetEntry(v["offset"], v.get("epoch", -1), v.get("meta", ""), v["ts"])
        now = time.monotonic()
        for g in self.groups.values():
            for m in g.members.values():
                m.last_heartbeat = now
        if n:
            log.info("loaded %d group records: %d groups", n, len(self.groups))

    def unload(self, partitions: set[int]) -> None:
        """This broker no longer leads these __consumer_offsets partitions: forget their groups
        (the new leader replays them), so a later return replays the log again."""
        self.loaded -= partitions
        of = self.topic.partition_of
        for gid in [g for g in self.groups if of(g) in partitions]:
            del self.groups[gid]
        for gid in [g for g in self.consumer_groups if of(g) in partitions]:
            del self.consumer_groups[gid]
        for pid in list(self.pending_txn):
            left = {k: v for k, v in self.pending_txn[pid].items() if of(k[0]) not in partitions}
            if left:
                self.pending_txn[pid] = left
            else:
                del self.pending_txn[pid]

    def start(self) -> None:
        self._tasks.append(asyncio.create_task(self._expiry_loop()))
        self._tasks.append(asyncio.create_task(self._offset_retention_loop()))

    def stop(self) -> None:
        for t in self._tasks:
            t.cancel()

    def _apply(self, key: dict[str, Any], value: dict[str, Any] | None) -> None:
        gid = key["g"]
        if key["t"] == "o":
            tp = (key["topic"], key["p"])
            if value is None:
                g = self.groups.get(gid)
                if g is not None:
                    g.offsets.pop(tp, None)
                return
            g = self.groups.get(gid)
            if g is None:
                # offsets alone do not say when the group became empty: as Kafka (no current
                # state timestamp), retention counts from each commit, not from this replay
                g = self.groups[gid] = Group(gid, empty_since_ms=0)
            g.offsets[tp] = OffsetEntry(value["offset"], value.get("epoch", -1),
                                        value.get("meta", ""), value["ts"], value.get("exp", -1))
        elif key["t"] == "g":
            if value is None:
                self.groups.pop(gid, None)
                return
            g = self.groups.setdefault(gid, Group(gid))
            g.generation = value["generation"]
            g.protocol_type = value.get("protocol_type")
            g.protocol = value.get("protocol")
            g.leader = value.get("leader")
            g.members = {}
            g.static_members = {}
            for m in value.get("members", []):
                mem = Member(m["id"], m.get("instance"), m.get("client_id", ""),
                             m.get("client_host", ""), m["session"], m["rebalance"],
                             g.protocol_type or "",
                             [(g.protocol or "", b64decode(m.get("subscription", "")))],
                             b64decode(m.get("assignment", "")))
                g.members[mem.member_id] = mem
                if mem.instance_id:
                    g.static_members[mem.instance_id] = mem.member_id
            g.state = GroupState.STABLE if g.members else GroupState.EMPTY
            if not g.members:
                g.empty_since_ms = value.get("ts", _now_ms())

    # ---- persistence -------------------------------------------------------------------
    def _group_key(self, gid: str) -> bytes:
        return json.dumps({"t": "g", "g": gid}).encode()

    def _group_value(self, g: Group) -> bytes:
        return json.dumps({
            "generation": g.generation, "protocol_type": g.protocol_type, "protocol": g.protocol,
            "leader": g.leader, "ts": _now_ms(),
            "members": [{"id": m.member_id, "instance": m.instance_id, "client_id": m.client_id,
                         "client_host": m.client_host, "session": m.session_timeout_ms,
                         "rebalance": m.rebalance_timeout_ms,
                         "subscription": b64encode(m.metadata_for(g.protocol)).decode(),
                         "assignment": b64encode(m.assignment).decode()}
                        for m in g.members.values()],
        }).encode()

    async def _store_group(self, g: Group) -> None:
        async with self._write_lock:
            await self.topic.append(self.topic.partition_of(g.group_id),
                                    [(self._group_key(g.group_id), self._group_value(g))])

    def _store_group_soon(self, g: Group) -> None:
        def done(t: asyncio.Task[None]) -> None:
            if not t.cancelled() and t.exception() is not None:
                log.error("storing group %s failed: %r", g.group_id, t.exception())

        asyncio.get_running_loop().create_task(self._store_group(g)).add_done_callback(done)

    # ---- join --------------------------------------------------------------------------
    def _validate_join(self, group_id: str, session_ms: int) -> None:
        if not group_id:
            raise GroupError(INVALID_GROUP_ID)
        if not self.config.min_session_ms <= session_ms <= self.config.max_session_ms:
            raise GroupError(INVALID_SESSION_TIMEOUT)

    async def join(self, *, group_id: str, member_id: str, instance_id: str | None,
                   client_id: str, client_host: str, session_ms: int, rebalance_ms: int,
                   protocol_type: str, protocols: list[tuple[str, bytes]],
                   require_known_member_id: bool, version: int) -> dict[str, Any]:
        try:
            self._validate_join(group_id, session_ms)
        except GroupError as e:
            return self._join_error(e.code, member_id)
        cg = self.consumer_groups.get(group_id)
        if cg is not None:
            if cg.members:
                return self._join_error(INCONSISTENT_GROUP_PROTOCOL, member_id)
            del self.consumer_groups[group_id]  # an empty consumer group converts to classic
        g = self.groups.get(group_id)
        if g is None:
            g = self.groups[group_id] = Group(group_id)
        if g.state == GroupState.DEAD:
            return self._join_error(COORDINATOR_NOT_AVAILABLE, member_id)
        if not protocols or (not g.is_empty and g.protocol_type not in (None, protocol_type)) \
                or not g.supports(protocols):
            return self._join_error(INCONSISTENT_GROUP_PROTOCOL, member_id)

        if not member_id:
            if instance_id is not None:
                return await self._join_static_unknown(g, instance_id, client_id, client_host,
                                                       session_ms, rebalance_ms, protocol_type,
                                                       protocols, version)
            new_id = f"{client_id}-{uuid.uuid4()}"
            if require_known_member_id:
                g.pending_members.add(new_id)
                return self._join_error(MEMBER_ID_REQUIRED, new_id)
            return await self._add_member_and_rebalance(g, new_id, None, client_id, client_host,
                                                        session_ms, rebalance_ms, protocol_type,
                                                        protocols, version)
        if member_id in g.pending_members:
            g.pending_members.discard(member_id)
            return await self._add_member_and_rebalance(g, member_id, instance_id, client_id,
                                                        client_host, session_ms, rebalance_ms,
                                                        protocol_type, protocols, version)
        m = g.members.get(member_id)
        if instance_id is not None and g.static_members.get(instance_id) not in (None, member_id):
            return self._join_error(FENCED_INSTANCE_ID, member_id)
        if m is None:
            return self._join_error(UNKNOWN_MEMBER_ID, member_id)
        m.session_timeout_ms, m.rebalance_timeout_ms = session_ms, rebalance_ms
        m.join_version = version
        if g.state == GroupState.PREPARING_REBALANCE:
            m.protocols = protocols
            return await self._await_join(g, m)
        if g.state == GroupState.COMPLETING_REBALANCE:
            if m.same_protocols(protocols):
                return self._join_response(g, m)
            m.protocols = protocols
            self._prepare_rebalance(g, f"{member_id} changed its metadata")
            return await self._await_join(g, m)
        if g.state == GroupState.STABLE:
            if m.member_id == g.leader or not m.same_protocols(protocols):
                m.protocols = protocols
                self._prepare_rebalance(g, f"{member_id} rejoined (leader or new metadata)")
                return await self._await_join(g, m)
            return self._join_response(g, m)
        # Empty with a known member cannot happen; treat as new
        return await self._await_join(g, m)

    async def _join_static_unknown(self, g: Group, instance_id: str, client_id: str,
                                   client_host: str, session_ms: int, rebalance_ms: int,
                                   protocol_type: str, protocols: list[tuple[str, bytes]],
                                   version: int) -> dict[str, Any]:
        new_id = f"{instance_id}-{uuid.uuid4()}"
        old_id = g.static_members.get(instance_id)
        if old_id is None or old_id not in g.members:
            return await self._add_member_and_rebalance(g, new_id, instance_id, client_id,
                                                        client_host, session_ms, rebalance_ms,
                                                        protocol_type, protocols, version)
        # a known static member restarted: take over its identity, fence the old member id
        old = g.members.pop(old_id)
        self._fence(old)
        m = Member(new_id, instance_id, client_id, client_host, session_ms, rebalance_ms,
                   protocol_type, protocols, old.assignment)
        m.join_version = version
        g.members[new_id] = m
        g.static_members[instance_id] = new_id
        if g.leader == old_id:
            g.leader = new_id
        if g.state == GroupState.STABLE and old.same_protocols(protocols):
            self._store_group_soon(g)
            resp = self._join_response(g, m)
            if g.leader == new_id and version >= 9:
                # KIP-345: the returning leader must not recompute the assignment
                resp["skip_assignment"] = True
                resp["members"] = self._member_list(g)
            return resp
        if g.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(g, f"static member {instance_id} rejoined with new metadata")
        return await self._await_join(g, m)

    async def _add_member_and_rebalance(self, g: Group, member_id: str, instance_id: str | None,
                                        client_id: str, client_host: str, session_ms: int,
                                        rebalance_ms: int, protocol_type: str,
                                        protocols: list[tuple[str, bytes]],
                                        version: int) -> dict[str, Any]:
        m = Member(member_id, instance_id, client_id, client_host, session_ms, rebalance_ms,
                   protocol_type, protocols)
        m.join_version = version
        if g.is_empty:
            g.protocol_type = protocol_type
        g.members[member_id] = m
        if instance_id is not None:
            g.static_members[instance_id] = member_id
        if g.state != GroupState.PREPARING_REBALANCE:
            self._prepare_rebalance(g, f"{member_id} joined")
        return await self._await_join(g, m)

    async def _await_join(self, g: Group, m: Member) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        if m.join_future is not None and not m.join_future.done():
            m.join_future.set_result(self._join_error(UNKNOWN_MEMBER_ID, m.member_id))
        fut: asyncio.Future[dict[str, Any]] = loop.create_future()
        m.join_future = fut
        self._maybe_complete_join(g)
        return await fut

    def _prepare_rebalance(self, g: Group, reason: str) -> None:
        log.info("group %s: preparing rebalance (generation %d): %s", g.group_id, g.generation,
                 reason)
        if g.state == GroupState.COMPLETING_REBALANCE:
            for m in g.members.values():
                if m.sync_future is not None and not m.sync_future.done():
                    m.sync_future.set_result({"error_code": REBALANCE_IN_PROGRESS})
        was_empty = g.state == GroupState.EMPTY
        g.state = GroupState.PREPARING_REBALANCE
        if g.rebalance_timer is not None:
            g.rebalance_timer.cancel()
        loop = asyncio.get_running_loop()
        if was_empty and self.config.initial_delay_ms > 0:
            g.initial_delay_active = True
            g.members_at_delay = len(g.members)
            g.rebalance_timer = loop.call_later(self.config.initial_delay_ms / 1000,
                                                self._initial_delay_done, g,
                                                self.config.initial_delay_ms)
        else:
            timeout = max((m.rebalance_timeout_ms for m in g.members.values()), default=0)
            g.rebalance_timer = loop.call_later(timeout / 1000, self._rebalance_timeout, g)

    def _initial_delay_done(self, g: Group, waited_ms: int) -> None:
        """Kafka's InitialDelayedJoin: while new members keep arriving, wait another delay, up to
        the rebalance timeout."""
        g.rebalance_timer = None
        if g.state != GroupState.PREPARING_REBALANCE:
            g.initial_delay_active = False
            return
        max_wait = max((m.rebalance_timeout_ms for m in g.members.values()), default=0)
        arrived_recently = g.members_at_delay != len(g.members)
        g.members_at_delay = len(g.members)
        delay = self.config.initial_delay_ms
        if arrived_recently and waited_ms + delay <= max_wait and waited_ms < max_wait:
            g.rebalance_timer = asyncio.get_running_loop().call_later(
                delay / 1000, self._initial_delay_done, g, waited_ms + delay)
            return
        g.initial_delay_active = False
        self._maybe_complete_join(g, force=True)

    def _rebalance_timeout(self, g: Group) -> None:
        g.rebalance_timer = None
        if g.state == GroupState.PREPARING_REBALANCE:
            self._maybe_complete_join(g, force=True)

    def _maybe_complete_join(self, g: Group, force: bool = False) -> None:
        if g.state != GroupState.PREPARING_REBALANCE or (g.initial_delay_active and not force):
            return
        waiting = [m for m in g.members.values()
                   if m.join_future is not None and not m.join_future.done()]
        if not force and len(waiting) < len(g.members):
            return
        if g.rebalance_timer is not None:
            g.rebalance_timer.cancel()
            g.rebalance_timer = None
        for m in list(g.members.values()):  # members that did not rejoin in time leave
            if m.join_future is None or m.join_future.done():
                self._remove_member(g, m)
        g.generation += 1
        if not g.members:
            g.state = GroupState.EMPTY
            g.protocol = None
            g.leader = None
            g.empty_since_ms = _now_ms()
            self._store_group_soon(g)
            log.info("group %s is empty at generation %d", g.group_id, g.generation)
            return
        g.protocol = g.select_protocol()
        if g.leader not in g.members:
            g.leader = next(iter(g.members))
        g.state = GroupState.COMPLETING_REBALANCE
        now = time.monotonic()
        log.info("group %s: generation %d with %d members, protocol %s", g.group_id,
                 g.generation, len(g.members), g.protocol)
        for m in g.members.values():
            m.last_heartbeat = now
            if m.join_future is not None and not m.join_future.done():
                m.join_future.set_result(self._join_response(g, m))
            m.join_future = None

    def _member_list(self, g: Group) -> list[dict[str, Any]]:
        return [{"member_id": x.member_id, "group_instance_id": x.instance_id,
                 "metadata": x.metadata_for(g.protocol)} for x in g.members.values()]

    def _join_response(self, g: Group, m: Member) -> dict[str, Any]:
        leader = m.member_id == g.leader
        return {"error_code": NONE, "generation_id": g.generation,
                "protocol_type": g.protocol_type, "protocol_name": g.protocol,
                "leader": g.leader or "", "skip_assignment": False, "member_id": m.member_id,
                "members": self._member_list(g) if leader else []}

    @staticmethod
    def _join_error(code: int, member_id: str) -> dict[str, Any]:
        return {"error_code": code, "generation_id": -1, "protocol_type": None,
                "protocol_name": None, "leader": "", "skip_assignment": False,
                "member_id": member_id, "members": []}

    def _fence(self, m: Member) -> None:
        for fut in (m.join_future, m.sync_future):
            if fut is not None and not fut.done():
                fut.set_result({"error_code": FENCED_INSTANCE_ID, "generation_id": -1,
                                "member_id": m.member_id, "leader": "", "members": [],
                                "assignment": b""})

    def _remove_member(self, g: Group, m: Member) -> None:
        g.members.pop(m.member_id, None)
        if m.instance_id is not None and g.static_members.get(m.instance_id) == m.member_id:
            del g.static_members[m.instance_id]
        for fut in (m.join_future, m.sync_future):
            if fut is not None and not fut.done():
                fut.set_result(self._join_error(UNKNOWN_MEMBER_ID, m.member_id))

    # ---- sync / heartbeat / leave ------------------------------------------------------
    def _check_member(self, g: Group | None, member_id: str, instance_id: str | None,
                      generation: int) -> tuple[Group, Member]:
        if g is None or g.state == GroupState.DEAD:
            raise GroupError(UNKNOWN_MEMBER_ID)
        if instance_id is not None and g.static_members.get(instance_id) not in (None, member_id):
            raise GroupError(FENCED_INSTANCE_ID)
        m = g.members.get(member_id)
        if m is None:
            raise GroupError(UNKNOWN_MEMBER_ID)
        if generation != g.generation:
            raise GroupError(ILLEGAL_GENERATION)
        return g, m

    async def sync(self, *, group_id: str, member_id: str, instance_id: str | None,
                   generation: int, protocol_type: str | None, protocol_name: str | None,
                   assignments: dict[str, bytes]) -> dict[str, Any]:
        g = self.groups.get(group_id)
        try:
            g, m = self._check_member(g, member_id, instance_id, generation)
        except GroupError as e:
            return {"error_code": e.code, "assignment": b""}
        if (protocol_type is not None and protocol_type != g.protocol_type) or \
                (protocol_name is not None and protocol_name != g.protocol):
            return {"error_code": INCONSISTENT_GROUP_PROTOCOL, "assignment": b""}
        if g.state == GroupState.PREPARING_REBALANCE:
            return {"error_code": REBALANCE_IN_PROGRESS, "assignment": b""}
        base = {"protocol_type": g.protocol_type, "protocol_name": g.protocol}
        if g.state == GroupState.STABLE:
            m.last_heartbeat = time.monotonic()
            return {**base, "error_code": NONE, "assignment": m.assignment}
        # CompletingRebalance
        m.last_heartbeat = time.monotonic()
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        m.sync_future = fut
        if member_id == g.leader:
            for mem in g.members.values():
                mem.assignment = assignments.get(mem.member_id, b"")
            gen = g.generation
            try:
                await self._store_group(g)
            except Exception as e:  # noqa: BLE001 - storage failure: make members rejoin
                log.error("group %s: storing assignment failed: %r", g.group_id, e)
                if g.generation == gen:
                    self._prepare_rebalance(g, "storing the assignment failed")
                return {"error_code": COORDINATOR_NOT_AVAILABLE, "assignment": b""}
            if g.generation == gen and g.state == GroupState.COMPLETING_REBALANCE:
                g.state = GroupState.STABLE
                for mem in g.members.values():
                    if mem.sync_future is not None and not mem.sync_future.done():
                        mem.sync_future.set_result({**base, "error_code": NONE,
                                                    "assignment": mem.assignment})
                    mem.sync_future = None
        return await fut

    def heartbeat(self, *, group_id: str, member_id: str, instance_id: str | None,
                  generation: int) -> int:
        g = self.groups.get(group_id)
        try:
            g, m = self._check_member(g, member_id, instance_id, generation)
        except GroupError as e:
            if e.code == ILLEGAL_GENERATION and g is not None and \
                    g.state == GroupState.PREPARING_REBALANCE:
                return REBALANCE_IN_PROGRESS
            return e.code
        m.last_heartbeat = time.monotonic()
        if g.state == GroupState.PREPARING_REBALANCE:
            return REBALANCE_IN_PROGRESS
        return NONE

    def leave(self, group_id: str, members: list[tuple[str, str | None]]) -> tuple[int, list[int]]:
        """Remove members ((member id, instance id) pairs); returns (top error, per-member errors)."""
        g = self.groups.get(group_id)
        if g is None or g.state == GroupState.DEAD:
            return UNKNOWN_MEMBER_ID, [UNKNOWN_MEMBER_ID] * len(members)
        codes = []
        removed = False
        for member_id, instance_id in members:
            if instance_id is not None:
                current = g.static_members.get(instance_id)
                if current is None:
                    codes.append(UNKNOWN_MEMBER_ID)
                    continue
                if member_id and member_id != current:
                    codes.append(FENCED_INSTANCE_ID)
                    continue
                member_id = current
            m = g.members.get(member_id)
            if m is None:
                codes.append(UNKNOWN_MEMBER_ID)
                continue
            self._remove_member(g, m)
            removed = True
            codes.append(NONE)
        if removed:
            self._after_removal(g, "member left")
        return NONE, codes

    def _after_removal(self, g: Group, reason: str) -> None:
        if g.state == GroupState.PREPARING_REBALANCE:
            self._maybe_complete_join(g)
        elif g.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            if not g.members:
                # the last member left: straight to Empty, as the join completes at once
                g.state = GroupState.PREPARING_REBALANCE
                self._maybe_complete_join(g, force=True)
            else:
                self._prepare_rebalance(g, reason)

    async def _expiry_loop(self) -> None:
        while True:
            await asyncio.sleep(0.1)
            self.expire_consumer_members()
            now = time.monotonic()
            for g in list(self.groups.values()):
                if g.state not in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE,
                                   GroupState.PREPARING_REBALANCE):
                    continue
                expired = [m for m in g.members.values()
                           if (m.join_future is None or m.join_future.done())
                           and now - m.last_heartbeat > m.session_timeout_ms / 1000]
                for m in expired:
                    log.info("group %s: member %s session expired", g.group_id, m.member_id)
                    self._remove_member(g, m)
                if expired:
                    self._after_removal(g, "session timeout")

    # ---- offsets -----------------------------------------------------------------------
    def _offset_key(self, gid: str, topic: str, p: int) -> bytes:
        return json.dumps({"t": "o", "g": gid, "topic": topic, "p": p}).encode()

    async def commit(self, *, group_id: str, member_id: str, instance_id: str | None,
                     generation: int, offsets: list[tuple[str, int, int, int, str | None]],
                     retention_ms: int = -1) -> dict[tuple[str, int], int] | int:
        """offsets: (topic, partition, offset, leader epoch, metadata). Returns a group-wide error
        code or per-partition codes."""
        g = self.groups.get(group_id)
        if not group_id:
            return INVALID_GROUP_ID
        cg = self.consumer_groups.get(group_id)
        if cg is not None and cg.members:
            cm = cg.members.get(member_id)
            if cm is None:
                return UNKNOWN_MEMBER_ID
            if generation != cm.epoch:
                return STALE_MEMBER_EPOCH
            g = self.groups.setdefault(group_id, Group(group_id))
        elif g is None or g.state == GroupState.DEAD:
            if generation >= 0:
                return ILLEGAL_GENERATION
            g = self.groups.setdefault(group_id, Group(group_id))
            if g.state == GroupState.DEAD:
                g.state = GroupState.EMPTY
        elif generation < 0 and g.state == GroupState.EMPTY:
            pass  # a consumer that assigns its own partitions
        else:
            if instance_id is not None and \
                    g.static_members.get(instance_id) not in (None, member_id):
                return FENCED_INSTANCE_ID
            if member_id not in g.members:
                return UNKNOWN_MEMBER_ID
            if generation != g.generation:
                return ILLEGAL_GENERATION
            if g.state == GroupState.COMPLETING_REBALANCE:
                return REBALANCE_IN_PROGRESS
            g.members[member_id].last_heartbeat = time.monotonic()
        codes, records, entries = self._offset_records(group_id, offsets, retention_ms)
        if records:
            try:
                async with self._write_lock:
                    await self.topic.append(self.topic.partition_of(group_id), records)
            except ReplicationError as e:
                log.warning("offset commit for %s not written: %s", group_id, e)
                return append_error(e.code)
            except Exception as e:  # noqa: BLE001
                log.error("offset commit for %s failed: %r", group_id, e)
                return COORDINATOR_NOT_AVAILABLE
            g.offsets.update(entries)
        return codes

    def _offset_records(self, group_id: str,
                        offsets: list[tuple[str, int, int, int, str | None]], retention_ms: int
                        ) -> tuple[dict[tuple[str, int], int], list[tuple[bytes, bytes | None]],
                                   dict[tuple[str, int], OffsetEntry]]:
        """Validate commits (unknown partition, metadata size) and build their records and
        entries: shared by OffsetCommit and TxnOffsetCommit."""
        codes: dict[tuple[str, int], int] = {}
        records: list[tuple[bytes, bytes | None]] = []
        entries: dict[tuple[str, int], OffsetEntry] = {}
        now = _now_ms()
        for topic, p, off, epoch, meta in offsets:
            if not self.partition_exists(topic, p):
                codes[(topic, p)] = UNKNOWN_TOPIC_OR_PARTITION
                continue
            meta = meta or ""
            if len(meta.encode()) > self.config.metadata_max_bytes:
                codes[(topic, p)] = OFFSET_METADATA_TOO_LARGE
                continue
            exp = now + retention_ms if retention_ms > 0 else -1
            entries[(topic, p)] = OffsetEntry(off, epoch, meta, now, exp)
            records.append((self._offset_key(group_id, topic, p),
                            json.dumps({"offset": off, "epoch": epoch, "meta": meta, "ts": now,
                                        "exp": exp}).encode()))
            codes[(topic, p)] = NONE
        return codes, records, entries

    def fetch_offsets(self, group_id: str, wanted: list[tuple[str, int]] | None
                      ) -> dict[tuple[str, int], OffsetEntry | None]:
        g = self.groups.get(group_id)
        have = g.offsets if g is not None else {}
        if wanted is None:
            return dict(have)
        return {tp: have.get(tp) for tp in wanted}

    async def delete_offsets(self, group_id: str, tps: list[tuple[str, int]]
                             ) -> int | dict[tuple[str, int], int]:
        g = self.groups.get(group_id)
        if g is None or g.state == GroupState.DEAD:
            return GROUP_ID_NOT_FOUND
        subscribed = self.subscribed_topics(g)
        codes: dict[tuple[str, int], int] = {}
        records: list[tuple[bytes, bytes | None]] = []
        for topic, p in tps:
            if not g.is_empty and (subscribed is None or topic in subscribed):
                codes[(topic, p)] = GROUP_SUBSCRIBED_TO_TOPIC
                continue
            codes[(topic, p)] = NONE
            if (topic, p) in g.offsets:
                records.append((self._offset_key(group_id, topic, p), None))
        if records:
            try:
                async with self._write_lock:
                    await self.topic.append(self.topic.partition_of(group_id), records)
            except ReplicationError as e:
                return append_error(e.code)
            for (topic, p), c in codes.items():
                if c == NONE:
                    g.offsets.pop((topic, p), None)
        return codes

    def subscribed_topics(self, g: Group) -> set[str] | None:
        """Topics the members subscribe to (consumer protocol), or None if unknown."""
        if g.protocol_type != "consumer" or g.protocol is None:
            return None
        from .subscription import subscription_topics
        out: set[str] = set()
        for m in g.members.values():
            topics = subscription_topics(m.metadata_for(g.protocol))
            if topics is None:
                return None
            out |= topics
        return out

    async def delete_group(self, group_id: str) -> int:
        cg = self.consumer_groups.get(group_id)
        if cg is not None:
            if cg.members:
                return NON_EMPTY_GROUP
            del self.consumer_groups[group_id]
            if group_id not in self.groups:
                return NONE
        g = self.groups.get(group_id)
        if g is None or g.state == GroupState.DEAD:
            return GROUP_ID_NOT_FOUND
        if g.state != GroupState.EMPTY:
            return NON_EMPTY_GROUP
        records: list[tuple[bytes, bytes | None]] = [
            (self._offset_key(group_id, t, p), None) for t, p in g.offsets]
        records.append((self._group_key(group_id), None))
        try:
            async with self._write_lock:
                await self.topic.append(self.topic.partition_of(group_id), records)
        except ReplicationError as e:
            return append_error(e.code)
        g.state = GroupState.DEAD
        self.groups.pop(group_id, None)
        return NONE

    async def _offset_retention_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.retention_check_ms / 1000)
            try:
                await self.expire_offsets(_now_ms())
            except Exception:
                log.exception("offset expiration failed")

    async def expire_offsets(self, now_ms: int) -> int:
        """Kafka 2.1+ semantics: offsets of an Empty group expire `offsets.retention.minutes`
        after the group became empty (or after an explicit per-commit expiry)."""
        n = 0
        for g in list(self.groups.values()):
            if g.state != GroupState.EMPTY:
                continue
            dead = [tp for tp, e in g.offsets.items()
                    if (e.expire_ms > 0 and now_ms >= e.expire_ms)
                    or now_ms - max(g.empty_since_ms, e.commit_ms) >= self.config.retention_ms]
            if not dead:
                continue
            records: list[tuple[bytes, bytes | None]] = [
                (self._offset_key(g.group_id, t, p), None) for t, p in dead]
            if len(dead) == len(g.offsets):
                records.append((self._group_key(g.group_id), None))
            async with self._write_lock:
                await self.topic.append(self.topic.partition_of(g.group_id), records)
            for tp in dead:
                g.offsets.pop(tp, None)
            if not g.offsets:
                self.groups.pop(g.group_id, None)
            n += len(dead)
        return n

    # ---- transactional offsets (TxnOffsetCommit) ---------------------------------------------
    async def txn_commit(self, *, group_id: str, producer_id: int, producer_epoch: int,
                         member_id: str, instance_id: str | None, generation: int,
                         offsets: list[tuple[str, int, int, int, str | None]]
                         ) -> dict[tuple[str, int], int] | int:
        """Stage offsets inside a transaction: written now as transactional records, visible only
        when the COMMIT marker lands (complete_txn)."""
        g = self.groups.get(group_id)
        if generation >= 0 or member_id:
            if g is None or member_id not in g.members:
                cg = self.consumer_groups.get(group_id)
                if cg is None or member_id not in cg.members:
                    return UNKNOWN_MEMBER_ID
                if generation != cg.members[member_id].epoch:
                    return ILLEGAL_GENERATION
            elif generation != g.generation:
                return ILLEGAL_GENERATION
        codes, records, entries = self._offset_records(group_id, offsets, -1)
        staged = {(group_id, t, p): e for (t, p), e in entries.items()}
        if records:
            try:
                async with self._write_lock:
                    await self.topic.append(self.topic.partition_of(group_id), records,
                                            producer_id=producer_id,
                                            producer_epoch=producer_epoch, transactional=True)
            except ReplicationError as e:
                log.warning("transactional offset commit for %s not written: %s", group_id, e)
                return append_error(e.code)
            self.pending_txn.setdefault(producer_id, {}).update(staged)
        return codes

    def complete_txn(self, producer_id: int, commit: bool) -> None:
        for (gid, topic, p), e in self.pending_txn.pop(producer_id, {}).items():
            if commit:
                g = self.groups.setdefault(gid, Group(gid))
                g.offsets[(topic, p)] = e

    async def forget_topic(self, topic: str) -> int:
        """A deleted topic's committed offsets go too (Kafka removes them with the partitions),
        so a re-created topic does not inherit them."""
        n = 0
        for g in list(self.groups.values()):
            gone = [tp for tp in g.offsets if tp[0] == topic]
            if not gone:
                continue
            async with self._write_lock:
                await self.topic.append(self.topic.partition_of(g.group_id),
                                        [(self._offset_key(g.group_id, t, p), None)
                                         for t, p in gone])
            for tp in gone:
                g.offsets.pop(tp, None)
            n += len(gone)
        return n

    def has_pending_txn_offsets(self, group_id: str, topic: str, p: int) -> bool:
        return any((group_id, topic, p) in staged for staged in self.pending_txn.values())
