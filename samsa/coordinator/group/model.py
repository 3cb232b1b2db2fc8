"""Group and member state of the classic consumer-group protocol."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class GroupState(StrEnum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass
class OffsetEntry:
    offset: int
    leader_epoch: int
    metadata: str
    commit_ms: int
    expire_ms: int = -1  # explicit retention (OffsetCommit v2-v4), else -1


@dataclass
class Member:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    last_heartbeat: float = field(default_factory=time.monotonic)
    join_future: asyncio.Future[dict[str, Any]] | None = None
    sync_future: asyncio.Future[dict[str, Any]] | None = None
    join_version: int = 0

    def metadata_for(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def same_protocols(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols


@dataclass
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending_members: set[str] = field(default_factory=set)
    offsets: dict[tuple[str, int], OffsetEntry] = field(default_factory=dict)
    rebalance_timer: asyncio.TimerHandle | None = None
    initial_delay_active: bool = False
    members_at_delay: int = -1
    empty_since_ms: int = field(default_factory=lambda: int(time.time() * 1000))

    @property
    def is_empty(self) -> bool:
        return not self.members

    def candidate_protocols(self) -> set[str]:
        sets = [{name for name, _ in m.protocols} for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def supports(self, protocols: list[tuple[str, bytes]]) -> bool:
        if self.is_empty:
            return bool(protocols)
        return bool({name for name, _ in protocols} & self.candidate_protocols())

    def select_protocol(self) -> str:
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        order: list[str] = []
        for m in self.members.values():
            choice = next(name for name, _ in m.protocols if name in candidates)
            votes[choice] = votes.get(choice, 0) + 1
            if choice not in order:
                order.append(choice)
        return max(order, key=lambda p: votes[p])
