"""prometheus-client glue: a collector whose collect() asks the broker's event loop for a snapshot
(samsa.metrics.snapshot) and renders it in the calling (admin HTTP) thread."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from .snapshot import Family

SNAPSHOT_TIMEOUT_S = 5.0


class SnapshotCollector(Collector):
    """`take` is a coroutine function run on `loop` (the broker's); a scrape waits for it at most
    SNAPSHOT_TIMEOUT_S (then TimeoutError: the admin app answers 503)."""

    def __init__(self, loop: asyncio.AbstractEventLoop,
                 take: Callable[[], Coroutine[Any, Any, list[Family]]]) -> None:
        self.loop = loop
        self.take = take

    def families(self) -> list[Family]:
        fut = asyncio.run_coroutine_threadsafe(self.take(), self.loop)
        try:
            return fut.result(SNAPSHOT_TIMEOUT_S)
        except TimeoutError:
            fut.cancel()
            raise

    def describe(self) -> list[Metric]:
        return []  # no snapshot at registration time

    def collect(self) -> Iterator[Metric]:
        for f in self.families():
            m = Metric(f.name, f.help, f.type)
            for name, labels, value in f.samples:
                m.add_sample(name, labels, value)
            yield m


def build_registry(collector: SnapshotCollector) -> CollectorRegistry:
    """The broker's families plus process_* (CPU seconds, resident memory, open fds...)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    ProcessCollector(registry=registry)
    return registry
