"""The counters the broker's hot paths bump: integer adds on the broker's event loop, once per
request or per partition batch (never per record). Read by collector.py through a snapshot taken on
that same loop, so no locks are needed."""

from __future__ import annotations

import struct
from bisect import bisect_left
from typing import Any

# Histogram bucket bounds in milliseconds (upper bounds; +Inf is implicit)
BUCKETS_MS: tuple[float, ...] = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500,
                                 5000, 10000, 30000)

# Kafka's RequestMetrics time names (JMX exporter: kafka_network_requestmetrics_<name>)
# (response queue and send times are not measured: see docs/operations.md)
TIMES = ("requestqueuetimems", "localtimems", "remotetimems", "totaltimems")

_COUNT = struct.Struct(">i")  # a RecordBatch v2's record count, at byte 57


class Histogram:
    """Cumulated later: counts per bucket (the last one is +Inf) and the sum."""

    __slots__ = ("counts", "total")

    def __init__(self) -> None:
        self.counts = [0] * (len(BUCKETS_MS) + 1)
        self.total = 0.0

    def observe(self, ms: float) -> None:
        self.counts[bisect_left(BUCKETS_MS, ms)] += 1
        self.total += ms


class RequestStats:
    """One request name's counts per version and its five time histograms."""

    __slots__ = ("versions", "times")

    def __init__(self) -> None:
        self.versions: dict[int, int] = {}
        self.times = tuple(Histogram() for _ in TIMES)

    def record(self, version: int, queue_ms: float, local_ms: float, remote_ms: float) -> None:
        self.versions[version] = self.versions.get(version, 0) + 1
        t = self.times
        t[0].observe(queue_ms)
        t[1].observe(local_ms)
        if remote_ms:
            t[2].observe(remote_ms)
        else:  # answered without waiting: the first bucket, no search
            t[2].counts[0] += 1
        t[3].observe(queue_ms + local_ms + remote_ms)


class TopicStats:
    """kafka.server BrokerTopicMetrics of one topic (the all-topics numbers are their sums)."""

    __slots__ = ("messages_in", "bytes_in", "bytes_out", "failed_produce", "failed_fetch",
                 "total_produce", "total_fetch", "bytes_rejected")

    def __init__(self) -> None:
        self.messages_in = 0
        self.bytes_in = 0
        self.bytes_out = 0
        self.failed_produce = 0
        self.failed_fetch = 0
        self.total_produce = 0
        self.total_fetch = 0
        self.bytes_rejected = 0

    def add(self, other: TopicStats) -> None:
        for name in self.__slots__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


class ListenerStats:
    __slots__ = ("created", "closed")

    def __init__(self) -> None:
        self.created = 0
        self.closed = 0


class BrokerMetrics:
    """Everything counted as it happens. Topics deleted from the cluster are folded into
    `gone` (so all-topics totals never go backwards) when the collector sees they are gone."""

    def __init__(self) -> None:
        self.topics: dict[str, TopicStats] = {}
        self.gone = TopicStats()
        self.requests: dict[str, RequestStats] = {}
        # (request name, error name) -> count: Kafka's ErrorsPerSec, counted today only for the
        # requests whose handler failed and were answered UNKNOWN_SERVER_ERROR
        self.errors: dict[tuple[str, str], int] = {}
        self.listeners: dict[str, ListenerStats] = {}
        self.replication_bytes_in = 0
        self.replication_bytes_out = 0

    def topic(self, name: str) -> TopicStats:
        t = self.topics.get(name)
        if t is None:
            t = self.topics[name] = TopicStats()
        return t

    # ---- produce (per partition batch) ----------------------------------------------------
    def produced(self, topic: str, batch: bytes | bytearray | memoryview) -> None:
        t = self.topic(topic)
        t.total_produce += 1
        t.bytes_in += len(batch)
        t.messages_in += _COUNT.unpack_from(batch, 57)[0] if len(batch) >= 61 else 0

    def produce_failed(self, topic: str, size: int) -> None:
        t = self.topic(topic)
        t.total_produce += 1
        t.failed_produce += 1
        t.bytes_rejected += size

    # ---- fetch (per response) -------------------------------------------------------------
    def fetched(self, names: dict[Any, str | None], responses: list[Any], follower: bool) -> None:
        """`responses`: [(topic key, [FetchPartition])] as sent; `names`: key -> topic name."""
        for key, parts in responses:
            name = names.get(key)
            if name is None:
                continue
            size = 0
            failed = 0
            for p in parts:
                size += p.records_size
                if p.error_code:
                    failed += 1
            if follower:
                self.replication_bytes_out += size
                continue
            t = self.topic(name)
            t.total_fetch += len(parts)
            t.failed_fetch += failed
            t.bytes_out += size

    # ---- requests -------------------------------------------------------------------------
    def request(self, name: str) -> RequestStats:
        r = self.requests.get(name)
        if r is None:
            r = self.requests[name] = RequestStats()
        return r

    def request_error(self, name: str, error: str) -> None:
        k = (name, error)
        self.errors[k] = self.errors.get(k, 0) + 1

    def listener(self, name: str | None) -> ListenerStats:
        key = name or "PLAINTEXT"
        s = self.listeners.get(key)
        if s is None:
            s = self.listeners[key] = ListenerStats()
        return s

    def forget_topics(self, live: set[str]) -> None:
        for name in [n for n in self.topics if n not in live]:
            self.gone.add(self.topics.pop(name))
