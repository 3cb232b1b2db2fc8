"""KIP-848 consumer groups: the broker computes assignments (server-side assignor) and members
reconcile through ConsumerGroupHeartbeat.

Reconciliation follows the KIP: when the target assignment changes, a member is first told its
assignment without the partitions it must give up (its epoch stays); once its heartbeat reports
that it no longer owns them, it moves to the new epoch. A partition is handed to its new owner only
after the previous owner released it, so no partition is ever consumed by two members at once.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field

from .assignors import ASSIGNORS, TP

UNKNOWN_MEMBER_ID = 25
FENCED_MEMBER_EPOCH = 110
UNRELEASED_INSTANCE_ID = 111
UNSUPPORTED_ASSIGNOR = 112
INVALID_REQUEST = 42
GROUP_ID_NOT_FOUND = 69


class HeartbeatError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class ConsumerMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    subscribed: list[str] = field(default_factory=list)
    assignor: str | None = None
    epoch: int = 0
    assigned: set[TP] = field(default_factory=set)      # what the member was last told
    owned: set[TP] | None = None                        # what it last reported owning
    last_sent: frozenset[TP] | None = None
    last_heartbeat: float = field(default_factory=time.monotonic)


@dataclass
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, set[TP]] = field(default_factory=dict)
    assignor_name: str = "uniform"

    @property
    def state(self) -> str:
        if not self.members:
            return "Empty"
        if self.assignment_epoch < self.group_epoch:
            return "Assigning"
        if any(m.epoch != self.assignment_epoch or m.assigned != self.target.get(m.member_id)
               for m in self.members.values()):
            return "Reconciling"
        return "Stable"

    # ---- membership changes -------------------------------------------------------------
    def bump(self, partitions: dict[str, int]) -> None:
        """Membership or subscriptions changed: new group epoch and a new target assignment."""
        self.group_epoch += 1
        self.recompute(partitions)

    def recompute(self, partitions: dict[str, int]) -> None:
        chosen = {m.assignor for m in self.members.values() if m.assignor}
        self.assignor_name = sorted(chosen)[0] if chosen else "uniform"
        fn = ASSIGNORS[self.assignor_name]
        subs = {mid: set(m.subscribed) for mid, m in self.members.items()}
        self.target = fn(subs, partitions, {mid: set(m.assigned) for mid, m in self.members.items()})
        self.assignment_epoch = self.group_epoch

    def remove(self, member_id: str, partitions: dict[str, int]) -> None:
        if self.members.pop(member_id, None) is not None:
            self.target.pop(member_id, None)
            self.bump(partitions)

    # ---- reconciliation -------------------------------------------------------------------
    def reconcile(self, m: ConsumerMember) -> None:
        target = self.target.get(m.member_id, set())
        to_revoke = m.assigned - target
        still_owned = to_revoke if m.owned is None else (to_revoke & m.owned)
        if to_revoke and still_owned:
            m.assigned = m.assigned & target  # tell it to give these up; epoch stays
            return
        if to_revoke:
            m.assigned = m.assigned & target
        # hand out partitions that no other member still holds (assigned or reported owned)
        busy: set[TP] = set()
        for other in self.members.values():
            if other is not m:
                busy |= other.assigned
                if other.owned:
                    busy |= other.owned
        m.assigned = m.assigned | {tp for tp in target - m.assigned if tp not in busy}
        m.epoch = self.assignment_epoch


def new_member_id() -> str:
    return str(uuid.uuid4())
