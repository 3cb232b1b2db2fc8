"""Replica placement for new partitions, as Kafka places them when no broker has a rack: the
first replica (the leader) of consecutive partitions goes round-robin over the usable brokers from
a random start, and the followers follow the leader at a distance that shifts each time the
round-robin wraps, so that no two brokers always share the same partitions."""

from __future__ import annotations

from collections.abc import Sequence


def place_replicas(brokers: Sequence[int], partitions: int, replication: int,
                   start: int, shift: int) -> list[tuple[int, ...]]:
    """Replica lists (leader first) of `partitions` new partitions over `brokers` (sorted ids of
    the usable brokers; at least `replication` of them). `start` and `shift` are the random
    starting position and follower distance."""
    n = len(brokers)
    if replication > n or replication < 1:
        raise ValueError(f"cannot place {replication} replica(s) on {n} broker(s)")
    out: list[tuple[int, ...]] = []
    for p in range(partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (start + p) % n
        replicas = [brokers[first]]
        for j in range(replication - 1):
            replicas.append(brokers[(first + 1 + (shift + j) % (n - 1)) % n])
        out.append(tuple(replicas))
    return out
