"""Kafka's RequestMetrics for one request: counted by name and version, its times observed when
it is answered (queue: bytes received -> handler start; local: the handler's synchronous work;
remote: waiting after that, e.g. for followers, a flush or a long poll)."""

from __future__ import annotations

import time
from typing import Any

from .counters import BrokerMetrics
from .names import request_name

_FETCH = 1


class RequestTiming:
    __slots__ = ("metrics", "name", "version", "received", "started", "local_end")

    def __init__(self, metrics: BrokerMetrics, api_key: int, version: int, body: Any,
                 received: float, started: float) -> None:
        self.metrics = metrics
        if api_key == _FETCH:
            rs = getattr(body, "replica_state", None)
            replica = rs.replica_id if rs is not None else getattr(body, "replica_id", -1)
            self.name = request_name(_FETCH, follower=replica >= 0)
        else:
            self.name = request_name(api_key)
        self.version = version
        self.received = received
        self.started = started
        self.local_end = time.perf_counter()

    def done(self, _fut: object = None) -> None:
        """Called once: at once for a request answered synchronously, else when its future
        completes (a cancelled one is counted too: Kafka counts every request it read)."""
        now = time.perf_counter()
        queue_ms = max(0.0, (self.started - self.received) * 1000) if self.received else 0.0
        if _fut is None:
            local_ms, remote_ms = (now - self.started) * 1000, 0.0
        else:
            local_ms = (self.local_end - self.started) * 1000
            remote_ms = (now - self.local_end) * 1000
        m = self.metrics
        m.request(self.name).record(self.version, queue_ms, local_ms, remote_ms)
        if self.name.startswith("Fetch"):  # Kafka counts Fetch both ways
            m.request("Fetch").record(self.version, queue_ms, local_ms, remote_ms)
