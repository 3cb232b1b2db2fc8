"""Decisions on existing partitions that the active controller takes on request or on its own:
leader elections (ElectLeaders; unclean elections of offline partitions; the automatic preferred
leader rebalance) and replica reassignments (KIP-455). Each function reads the image and returns
records (and per-partition results) without writing anything; QuorumController proposes them.

Errors and messages follow Kafka's ReplicationControlManager."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from samsa.protocol.errors import Err

from ..limits import ControllerError, check_replica_list
from ..metadata.image import MetadataImage, PartitionState, TopicImage
from ..metadata.records import NO_LEADER, PartitionChangeRecord
from .partition_change import Election, build_change, merged, reassignment_in_progress

log = logging.getLogger("samsa.controller")

PREFERRED, UNCLEAN = 0, 1  # ElectLeaders' election_type
Acceptable = Callable[[int], bool]
UncleanEnabled = Callable[[str], bool]


@dataclass(frozen=True, slots=True)
class Reassigning:
    """One partition of ListPartitionReassignments."""

    partition: int
    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


def warn_unclean(topic: str, partition: int, leader: int, isr: Sequence[int]) -> None:
    log.warning("Unclean leader election for %s-%d: broker %d, not in the ISR %s, is the new "
                "leader; records only the old ISR had may be lost.", topic, partition, leader,
                list(isr))


class Pending:
    """Partition states as the records built so far in one request leave them, so that a
    partition named twice is decided on its latest state."""

    def __init__(self, image: MetadataImage) -> None:
        self.image = image
        self.records: list[PartitionChangeRecord] = []
        self._states: dict[tuple[uuid.UUID, int], PartitionState] = {}

    def state(self, t: TopicImage, p: int) -> PartitionState | None:
        return self._states.get((t.topic_id, p)) or t.partitions.get(p)

    def add(self, t: TopicImage, ps: PartitionState, rec: PartitionChangeRecord) -> None:
        self.records.append(rec)
        self._states[(t.topic_id, rec.partition_id)] = merged(ps, rec)


# ---- elections ----------------------------------------------------------------------------------

def elect_leaders(image: MetadataImage, election_type: int,
                  partitions: Sequence[tuple[str, Sequence[int]]] | None,
                  acceptable: Acceptable
                  ) -> tuple[list[PartitionChangeRecord],
                             list[tuple[str, list[tuple[int, int, str | None]]]]]:
    """ElectLeaders: records, and per topic its (partition, error, message) results. With no
    partitions named, every partition of every topic is tried and those already led as asked
    (ELECTION_NOT_NEEDED) are left out of the results, as Kafka does."""
    if election_type not in (PREFERRED, UNCLEAN):
        raise ControllerError(Err.INVALID_REQUEST, f"Unknown election type {election_type}")
    pending = Pending(image)
    results: list[tuple[str, list[tuple[int, int, str | None]]]] = []
    if partitions is None:
        for name, t in list(image.topics.items()):
            out = []
            for p in sorted(t.partitions):
                code, msg = _elect_one(pending, name, p, election_type, acceptable)
                if code != Err.ELECTION_NOT_NEEDED:
                    out.append((p, code, msg))
            results.append((name, out))
    else:
        for name, ps in partitions:
            results.append((name, [(p, *_elect_one(pending, name, p, election_type, acceptable))
                                   for p in ps]))
    return pending.records, results


def _elect_one(pending: Pending, name: str, p: int, election_type: int,
               acceptable: Acceptable) -> tuple[int, str | None]:
    t = pending.image.topics.get(name)
    if t is None:
        return Err.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {name}"
    ps = pending.state(t, p)
    if ps is None:
        return Err.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {name}-{p}"
    preferred = election_type == PREFERRED
    if (preferred and ps.replicas and ps.leader == ps.replicas[0]) or \
            (not preferred and ps.leader != NO_LEADER):
        return Err.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition."
    rec, unclean = build_change(ps, t.topic_id, p, acceptable,
                                election=Election.PREFERRED if preferred else Election.UNCLEAN)
    if rec is None:
        if preferred:
            return Err.PREFERRED_LEADER_NOT_AVAILABLE, "The preferred leader was not available."
        return Err.ELIGIBLE_LEADERS_NOT_AVAILABLE, \
            "Eligible topic partition leaders are not available."
    if unclean:
        warn_unclean(name, p, rec.leader, ps.isr)
    pending.add(t, ps, rec)
    return Err.NONE, None


def unclean_elections(image: MetadataImage, acceptable: Acceptable,
                      enabled: UncleanEnabled, limit: int = 1000) -> list[PartitionChangeRecord]:
    """Offline partitions of topics with unclean.leader.election.enable: led again by a live
    replica outside the ISR when no ISR member can lead (at most `limit` per call)."""
    out: list[PartitionChangeRecord] = []
    for name, t in image.topics.items():
        offline = [(p, ps) for p, ps in sorted(t.partitions.items()) if ps.leader == NO_LEADER]
        if not offline or not enabled(name):
            continue
        for p, ps in offline:
            rec, unclean = build_change(ps, t.topic_id, p, acceptable, election=Election.UNCLEAN)
            if rec is None:
                continue
            if unclean:
                warn_unclean(name, p, rec.leader, ps.isr)
            out.append(rec)
            if len(out) >= limit:
                return out
    return out


def rebalance_elections(image: MetadataImage, acceptable: Acceptable,
                        imbalance_percentage: int) -> list[PartitionChangeRecord]:
    """auto.leader.rebalance.enable: for each broker whose share of partitions it should lead
    (it is their first replica) but does not lead is above leader.imbalance.per.broker.percentage,
    preferred elections for those partitions where it may lead (in the ISR, unfenced, not
    shutting down) and no reassignment is in progress."""
    preferred_of: dict[int, int] = {}
    imbalanced: dict[int, list[tuple[TopicImage, int, PartitionState]]] = {}
    for t in image.topics.values():
        for p, ps in sorted(t.partitions.items()):
            if not ps.replicas:
                continue
            first = ps.replicas[0]
            preferred_of[first] = preferred_of.get(first, 0) + 1
            if ps.leader != first:
                imbalanced.setdefault(first, []).append((t, p, ps))
    out: list[PartitionChangeRecord] = []
    for broker, parts in sorted(imbalanced.items()):
        if len(parts) * 100 <= imbalance_percentage * preferred_of[broker]:
            continue
        for t, p, ps in parts:
            if reassignment_in_progress(ps):
                continue
            rec, _ = build_change(ps, t.topic_id, p, acceptable, election=Election.PREFERRED)
            if rec is not None and rec.leader == broker:
                out.append(rec)
    return out


# ---- reassignments ------------------------------------------------------------------------------

def alter_reassignments(image: MetadataImage,
                        requests: Sequence[tuple[str, int, Sequence[int] | None]],
                        acceptable: Acceptable, enabled: UncleanEnabled
                        ) -> tuple[list[PartitionChangeRecord], list[tuple[int, str | None]]]:
    """AlterPartitionReassignments: (topic, partition, target replicas or None to cancel) each;
    records and one (error, message) per request entry."""
    pending = Pending(image)
    results: list[tuple[int, str | None]] = []
    for name, p, target in requests:
        try:
            _reassign_one(pending, name, p, target, acceptable, enabled)
            results.append((Err.NONE, None))
        except ControllerError as e:
            log.info("Unable to alter the reassignment of %s:%d: %s", name, p, e)
            results.append((e.code, str(e)))
    return pending.records, results


def _reassign_one(pending: Pending, name: str, p: int, target: Sequence[int] | None,
                  acceptable: Acceptable, enabled: UncleanEnabled) -> None:
    t = pending.image.topics.get(name)
    if t is None:
        raise ControllerError(Err.UNKNOWN_TOPIC_OR_PARTITION,
                              f"Unable to find a topic named {name}.")
    ps = pending.state(t, p)
    if ps is None:
        raise ControllerError(Err.UNKNOWN_TOPIC_OR_PARTITION,
                              f"Unable to find partition {name}:{p}.")
    if target is None:
        rec = _cancel(t, p, ps, acceptable, enabled(name))
    else:
        check_replica_list(target, frozenset(pending.image.brokers), None)
        current = set(ps.replicas)
        removing = sorted(current - set(target))
        adding = sorted(set(target) - current)
        replicas = [*target, *removing]
        rec, unclean = build_change(
            ps, t.topic_id, p, acceptable,
            replicas=replicas if tuple(replicas) != ps.replicas else None,
            removing=removing or None, adding=adding or None)
        if rec is not None and unclean:  # not reachable: ONLINE elections are clean
            warn_unclean(name, p, rec.leader, ps.isr)
    if rec is not None:
        pending.add(t, ps, rec)


def _cancel(t: TopicImage, p: int, ps: PartitionState, acceptable: Acceptable,
            unclean_enabled: bool) -> PartitionChangeRecord | None:
    """Back to the replicas before the reassignment: the adding ones leave the replicas and the
    ISR; if only adding ones were in the ISR, the first original replica is put in it alone,
    which is an unclean election and needs unclean.leader.election.enable."""
    if not reassignment_in_progress(ps):
        raise ControllerError(Err.NO_REASSIGNMENT_IN_PROGRESS,
                              "No partition reassignment is in progress.")
    adding = set(ps.adding_replicas)
    replicas = [b for b in ps.replicas if b not in adding]
    isr = [b for b in ps.isr if b not in adding]
    if not isr:
        if not replicas:
            raise ControllerError(Err.INVALID_REPLICA_ASSIGNMENT,
                                  "Invalid replica assignment: addingReplicas contains all "
                                  "replicas.")
        if not unclean_enabled:
            raise ControllerError(Err.INVALID_REPLICA_ASSIGNMENT,
                                  f"Unable to revert partition assignment for {t.name}:{p} "
                                  "because it would require an unclean leader election.")
        isr = [replicas[0]]
        warn_unclean(t.name, p, replicas[0], ps.isr)
    rec, _ = build_change(ps, t.topic_id, p, acceptable, isr=isr, replicas=replicas,
                          removing=(), adding=(),
                          election=Election.UNCLEAN if unclean_enabled else Election.ONLINE)
    return rec


def list_reassignments(image: MetadataImage,
                       topics: Sequence[tuple[str, Sequence[int]]] | None
                       ) -> list[tuple[str, list[Reassigning]]]:
    """ListPartitionReassignments: the reassigning partitions of the named topics (unknown ones
    skipped), or of every topic; topics with none are left out."""
    if topics is None:
        wanted = [(name, sorted(t.partitions)) for name, t in image.topics.items()]
    else:
        wanted = [(name, list(ps)) for name, ps in topics]
    out: list[tuple[str, list[Reassigning]]] = []
    for name, parts in wanted:
        t = image.topics.get(name)
        if t is None:
            continue
        found = []
        for p in parts:
            ps = t.partitions.get(p)
            if ps is not None and reassignment_in_progress(ps):
                found.append(Reassigning(p, ps.replicas, ps.adding_replicas,
                                         ps.removing_replicas))
        if found:
            out.append((name, found))
    return out
