"""Bounds checked before any topic or partition is created, so that an absurd request (a fuzzer's
2^31-1 partitions) is refused with Kafka's error codes instead of making the broker work for ever.

Two caps: Kafka's per-request limit (its controller refuses a CreateTopics or CreatePartitions that
would add more than 10,000 partitions: POLICY_VIOLATION) and a per-broker total,
`max.broker.partitions` (the name KIP-578 proposed). Manual replica assignments are checked as
Kafka's controller checks them (INVALID_REPLICA_ASSIGNMENT)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from samsa.protocol.errors import Err

# Kafka's ReplicationControlManager.MAX_PARTITIONS_PER_BATCH
MAX_PARTITIONS_PER_REQUEST = 10_000
EXCESSIVE = "Excessively large number of partitions per request."


class ControllerError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def request_total_too_large(counts: Iterable[int]) -> bool:
    """True when the partitions a request would add exceed Kafka's per-request limit. Stops summing
    as soon as the limit is passed (Python ints do not overflow, but the loop should stay short)."""
    total = 0
    for n in counts:
        if n > 0:
            total += n
            if total > MAX_PARTITIONS_PER_REQUEST:
                return True
    return False


def check_broker_budget(have: int, adding: int, cap: int, broker: int | None = None) -> None:
    """POLICY_VIOLATION when `adding` partitions would take a broker (this one, or `broker`) over
    max.broker.partitions."""
    if have + adding > cap:
        who = "this broker" if broker is None else f"broker {broker}"
        raise ControllerError(Err.POLICY_VIOLATION,
                              f"Adding {adding} partition(s) would bring {who} to "
                              f"{have + adding} partitions, over max.broker.partitions={cap} "
                              f"(it has {have}).")


def check_replica_list(broker_ids: Sequence[int], known: frozenset[int],
                       replication: int | None) -> None:
    """One partition's manual assignment: not empty, known brokers, each once, and as many replicas
    as the other partitions (`replication`, when known)."""
    if not broker_ids:
        raise ControllerError(Err.INVALID_REPLICA_ASSIGNMENT,
                              "The manual partition assignment includes an empty replica list.")
    seen: set[int] = set()
    for b in sorted(broker_ids):
        if b not in known:
            raise ControllerError(Err.INVALID_REPLICA_ASSIGNMENT,
                                  f"The manual partition assignment includes broker {b}, but no "
                                  "such broker is registered.")
        if b in seen:
            raise ControllerError(Err.INVALID_REPLICA_ASSIGNMENT,
                                  f"The manual partition assignment includes the broker {b} more "
                                  "than once.")
        seen.add(b)
    if replication is not None and len(broker_ids) != replication:
        raise ControllerError(Err.INVALID_REPLICA_ASSIGNMENT,
                              f"The manual partition assignment includes a partition with "
                              f"{len(broker_ids)} replica(s), but this is not consistent with "
                              f"previous partitions, which have {replication} replica(s).")


def check_topic_assignments(assignments: Sequence[tuple[int, Sequence[int]]],
                            known: frozenset[int]) -> tuple[int, int]:
    """CreateTopics' manual assignment, (partition index, broker ids) pairs: each index once, the
    indexes 0..n-1, consistent replica lists. Returns (partitions, replication factor)."""
    indexes: set[int] = set()
    replication: int | None = None
    for index, broker_ids in assignments:
        if index in indexes:
            raise ControllerError(Err.INVALID_REPLICA_ASSIGNMENT,
                                  f"Found multiple manual partition assignments for partition "
                                  f"{index}")
        check_replica_list(broker_ids, known, replication)
        replication = len(broker_ids)
        indexes.add(index)
    if any(i not in indexes for i in range(len(indexes))):
        raise ControllerError(Err.INVALID_REPLICA_ASSIGNMENT,
                              "partitions should be a consecutive 0-based integer sequence")
    return len(indexes), replication or 0
