"""Replication throttles (KIP-73): `leader.replication.throttled.rate` and
`follower.replication.throttled.rate` bound the bytes per second a broker sends to (or fetches
for) the replicas a topic lists in `leader.replication.throttled.replicas` /
`follower.replication.throttled.replicas` (`partition:broker` pairs, or `*`). As in Kafka, a
replica in the ISR is never throttled, and a throttled partition is left out of a fetch (no
records) while the broker's quota is exceeded; the bytes of throttled partitions count against it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

UNLIMITED = 2**63 - 1


class ReplicationQuota:
    """A byte rate over a one-second token bucket: `exceeded` once more than `rate` bytes were
    recorded in the last second or so (a fetch may overshoot by its own size, as Kafka's)."""

    def __init__(self, rate: Callable[[], int], clock: Callable[[], float] = time.monotonic
                 ) -> None:
        self._rate = rate
        self._clock = clock
        self._tokens = 0.0
        self._at = clock()
        self._last_rate = -1

    def _refill(self) -> int:
        rate = self._rate()
        now = self._clock()
        if rate != self._last_rate:
            self._tokens, self._last_rate = float(min(rate, UNLIMITED)), rate
        else:
            self._tokens = min(float(rate), self._tokens + (now - self._at) * rate)
        self._at = now
        return rate

    @property
    def enabled(self) -> bool:
        return self._rate() < UNLIMITED

    def exceeded(self) -> bool:
        rate = self._refill()
        return rate < UNLIMITED and self._tokens < 0

    def record(self, nbytes: int) -> None:
        if self._refill() < UNLIMITED:
            self._tokens -= nbytes


def throttled_partitions(value: str | None, broker_id: int) -> frozenset[int] | bool:
    """A `*.replication.throttled.replicas` value as this broker sees it: True for `*`, else the
    partitions listed with this broker's id (Kafka's parseThrottledPartitions)."""
    if not value or not value.strip():
        return frozenset()
    if value.strip() == "*":
        return True
    out = set()
    for item in value.split(","):
        p, _, b = item.strip().partition(":")
        try:
            if int(b) == broker_id:
                out.add(int(p))
        except ValueError:
            continue
    return frozenset(out)


def is_throttled(spec: frozenset[int] | bool, partition: int) -> bool:
    return spec is True or (not isinstance(spec, bool) and partition in spec)
