"""One partition's next state, decided the way Kafka's controller decides it (its
PartitionChangeBuilder): a caller sets targets (ISR, replicas, adding/removing replicas, the kind
of election, the leader recovery state) and gets the single PartitionChangeRecord that moves the
partition there, or None when nothing would change.

Every decision goes through here so that each one also finishes a reassignment whose new replicas
have all joined the ISR, elects a leader only from the ISR (unless the election is unclean: then any
acceptable replica, the ISR becomes that replica alone and the leader is marked RECOVERING), and
bumps the leader epoch when replicas leave the assignment."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Sequence
from enum import Enum

from ..metadata.image import PartitionState, apply_partition_change
from ..metadata.records import NO_LEADER, PartitionChangeRecord

__all__ = ["RECOVERED", "RECOVERING", "Election", "build_change", "complete_reassignment",
           "merged", "reassignment_in_progress"]

RECOVERED, RECOVERING = 0, 1  # Kafka's LeaderRecoveryState


class Election(Enum):
    """PREFERRED: the first replica if it may lead; ONLINE: keep a valid leader, else the first
    ISR member that may lead; UNCLEAN: as ONLINE, then any replica that may lead."""

    PREFERRED = "preferred"
    ONLINE = "online"
    UNCLEAN = "unclean"


def reassignment_in_progress(ps: PartitionState) -> bool:
    return bool(ps.adding_replicas or ps.removing_replicas)


def complete_reassignment(replicas: Sequence[int], adding: Sequence[int],
                          removing: Sequence[int], isr: Sequence[int]
                          ) -> tuple[list[int], list[int]] | None:
    """(replicas, ISR) once a reassignment may finish: every replica that stays is in the ISR
    (KIP-455). None while it may not, or when none is in progress."""
    if not adding and not removing:
        return None
    gone = set(removing)
    new_isr = [b for b in isr if b not in gone]
    new_replicas = [b for b in replicas if b not in gone]
    if gone and (not new_isr or not new_replicas):
        return None
    if not set(new_replicas) <= set(new_isr):
        return None
    return new_replicas, new_isr


def build_change(ps: PartitionState, topic_id: uuid.UUID, partition: int,
                 acceptable: Callable[[int], bool], *,
                 isr: Sequence[int] | None = None,
                 replicas: Sequence[int] | None = None,
                 adding: Sequence[int] | None = None,
                 removing: Sequence[int] | None = None,
                 election: Election = Election.ONLINE,
                 recovery: int | None = None) -> tuple[PartitionChangeRecord | None, bool]:
    """The record moving `ps` to the targets (None: unchanged) and whether its leader was elected
    uncleanly. `acceptable(broker)` says whether a broker may lead (unfenced, not shutting
    down). An empty target ISR is never written (no KIP-966 ELR): the old one stays."""
    t_isr = list(ps.isr if isr is None else isr)
    t_replicas = list(ps.replicas if replicas is None else replicas)
    t_adding = list(ps.adding_replicas if adding is None else adding)
    t_removing = list(ps.removing_replicas if removing is None else removing)
    t_recovery = ps.leader_recovery_state if recovery is None else recovery
    done = complete_reassignment(t_replicas, t_adding, t_removing, t_isr)
    if done is not None:
        t_replicas, t_isr = done
        t_adding, t_removing = [], []
    fields: dict[str, object] = {}
    leader, unclean = _elect(ps, t_replicas, t_isr, acceptable, election)
    if leader != ps.leader:
        fields["leader"] = leader
        if unclean:
            fields["isr"] = (leader,)  # data the old ISR had may be lost
            if ps.leader_recovery_state != RECOVERING:
                fields["leader_recovery_state"] = RECOVERING
    elif not set(ps.replicas) <= set(t_replicas):
        fields["leader"] = ps.leader  # a replica leaves: the leader epoch must move
    if "isr" not in fields and t_isr and tuple(t_isr) != ps.isr:
        fields["isr"] = tuple(t_isr)
    if t_replicas and tuple(t_replicas) != ps.replicas:
        fields["replicas"] = tuple(t_replicas)
    if tuple(t_removing) != ps.removing_replicas:
        fields["removing_replicas"] = tuple(t_removing)
    if tuple(t_adding) != ps.adding_replicas:
        fields["adding_replicas"] = tuple(t_adding)
    if "leader_recovery_state" not in fields and t_recovery != ps.leader_recovery_state:
        fields["leader_recovery_state"] = t_recovery
    if not fields:
        return None, False
    return PartitionChangeRecord(partition, topic_id, **fields), unclean  # type: ignore[arg-type]


def _elect(ps: PartitionState, replicas: list[int], isr: list[int],
           acceptable: Callable[[int], bool], election: Election) -> tuple[int, bool]:
    members = set(isr)

    def valid(b: int) -> bool:
        return b in members and acceptable(b)

    if election is Election.PREFERRED:
        if replicas and valid(replicas[0]):
            return replicas[0], False
        if valid(ps.leader):
            return ps.leader, False
        for b in replicas[1:]:
            if valid(b):
                return b, False
        return NO_LEADER, False
    if valid(ps.leader):
        return ps.leader, False
    for b in replicas:
        if valid(b):
            return b, False
    if election is Election.UNCLEAN:
        for b in replicas:
            if acceptable(b):
                return b, True
    return NO_LEADER, False


def merged(ps: PartitionState, r: PartitionChangeRecord) -> PartitionState:
    """A copy of `ps` with `r` applied as the image applies it."""
    out = dataclasses.replace(ps)
    apply_partition_change(out, r)
    return out
