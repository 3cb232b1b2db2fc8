"""Replication throttles (samsa/cluster/replication/throttle.py): Kafka's throttled-replica lists
and the byte quota a leader or follower spends."""

from __future__ import annotations

from samsa.cluster.replication.throttle import (
    UNLIMITED,
    ReplicationQuota,
    is_throttled,
    throttled_partitions,
)


def test_throttled_replica_lists_as_a_broker_sees_them() -> None:
    assert throttled_partitions("*", 1) is True
    assert throttled_partitions(" ", 1) == frozenset()
    assert throttled_partitions(None, 1) == frozenset()
    spec = throttled_partitions("0:1,0:2,1:2,3:1", 1)
    assert spec == frozenset({0, 3})
    assert is_throttled(spec, 0) and not is_throttled(spec, 1)
    assert is_throttled(True, 7)
    assert throttled_partitions("x:1,2:y,4:1", 1) == frozenset({4})  # junk ignored


def test_quota_allows_rate_bytes_per_second() -> None:
    now = [100.0]
    rate = [1000]
    q = ReplicationQuota(lambda: rate[0], lambda: now[0])
    assert q.enabled and not q.exceeded()
    q.record(600)
    assert not q.exceeded()
    q.record(600)  # 1200 bytes within the first second
    assert q.exceeded()
    now[0] += 0.1  # 100 bytes of credit: still 100 over
    assert q.exceeded()
    now[0] += 0.2
    assert not q.exceeded()
    now[0] += 10  # credit never exceeds one second's worth
    q.record(1000)
    assert q.exceeded() is False
    q.record(1)
    assert q.exceeded()


def test_unlimited_quota_never_exceeds() -> None:
    q = ReplicationQuota(lambda: UNLIMITED)
    assert not q.enabled
    q.record(10**12)
    assert not q.exceeded()


def test_rate_change_resets_the_bucket() -> None:
    now = [0.0]
    rate = [100]
    q = ReplicationQuota(lambda: rate[0], lambda: now[0])
    q.record(1000)
    assert q.exceeded()
    rate[0] = UNLIMITED  # --verify removed the throttle
    assert not q.exceeded()
