"""How `make test` runs the suite on several pytest-xdist workers without changing what any test
checks.

- Scheduling (`--dist loadfile`): one test file is one unit of work, so a module's broker fixture
  starts once, on one worker. The files that share the session-scoped SparkSession form one unit
  (one JVM per run, not one per worker). Workers collect the files heaviest first (measured costs,
  else an estimate from directory and markers), so the long e2e/kill -9 files do not start last
  and leave a tail.
- `@pytest.mark.serial`: the test runs with no other test of this run alongside (a writer-preferring
  file lock: every test holds it shared, a serial test exclusive). For tests whose liveness windows
  assume the CPU is theirs; the lock covers the whole test protocol, module fixtures included.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

# Files whose tests share a session-scoped fixture that is costly to start on every worker.
SHARED_UNITS = {
    "spark": ("tests/integration/test_spark_",),
}


def unit_of(nodeid: str) -> str:
    """The unit of work a test belongs to: its file, or a named group of files."""
    path = nodeid.split("::", 1)[0]
    for name, prefixes in SHARED_UNITS.items():
        if path.startswith(prefixes):
            return name
    return path


# Seconds per file summed over its tests, from a 4-worker run on a loaded 2-core machine (only the
# order matters; test_long only runs with SAMSA_FUZZ_LONG=1). Files not listed are estimated from
# their directory and markers by `_weight`.
MEASURED = {
    "tests/e2e/test_replication_coordinators.py": 388,
    "tests/e2e/test_cluster_faults.py": 355,
    "tests/e2e/test_replication_faults.py": 309,
    "tests/e2e/test_spark_pipeline.py": 247,
    "tests/e2e/test_spark_eos.py": 234,
    "tests/integration/test_spark_read.py": 197,
    "tests/integration/connect/test_distributed.py": 184,
    "tests/integration/test_cli_groups.py": 183,
    "tests/unit/test_raft_simulation.py": 180,
    "tests/integration/test_cli.py": 150,
    "tests/integration/test_clients.py": 148,
    "tests/integration/test_replication_clients.py": 141,
    "tests/e2e/test_transactions.py": 99,
    "tests/e2e/test_compaction_crash.py": 96,
    "tests/integration/connect/test_standalone.py": 89,
    "tests/integration/test_cli_cluster.py": 84,
    "tests/fuzz/test_abuse.py": 81,
    "tests/integration/test_spark_write.py": 76,
    "tests/e2e/test_groups.py": 70,
    "tests/integration/test_console_tools.py": 70,
    "tests/integration/test_cluster_clients.py": 70,
    "tests/integration/test_replication.py": 62,
    "tests/integration/test_cluster_config.py": 61,
    "tests/e2e/test_min_insync.py": 60,
    "tests/e2e/test_durability.py": 59,
    "tests/integration/test_bad_input.py": 58,
    "tests/integration/test_cli_partitions.py": 57,
    "tests/integration/connect/test_rest_conformance.py": 56,
    "tests/fuzz/test_framing.py": 53,
    "tests/integration/connect/test_kafka_stores.py": 52,
    "tests/unit/test_replication_simulation.py": 51,
    "tests/integration/test_registry_restart.py": 49,
    "tests/integration/test_configs_metadata.py": 46,
    "tests/integration/connect/test_kafka_stores_cluster.py": 42,
    "tests/integration/test_cli_transactions.py": 39,
    "tests/integration/test_admin_limits.py": 33,
    "tests/integration/test_replication_rack.py": 29,
    "tests/integration/test_registry_cli.py": 27,
    "tests/integration/test_metadata_snapshots.py": 26,
    "tests/integration/test_retention_admin.py": 26,
    "tests/integration/test_legacy_migration.py": 25,
    "tests/unit/test_follower_log.py": 24,
    "tests/integration/test_spark_registry.py": 24,
    "tests/e2e/test_fd_limit.py": 24,
    "tests/integration/test_replication_backpressure.py": 23,
    "tests/integration/test_channel.py": 22,
    "tests/fuzz/test_values.py": 21,
    "tests/integration/connect/test_registry_converters.py": 20,
    "tests/integration/test_corrupt_records.py": 20,
    "tests/fuzz/test_long.py": 0,
}


def _weight(item: pytest.Item) -> float:
    """A rough cost in seconds of a test in a file not in MEASURED (a wrong guess costs balance,
    not results)."""
    path = item.nodeid.split("::", 1)[0]
    if item.get_closest_marker("slow") is not None:
        return 60.0
    if path.startswith("tests/e2e/"):
        return 25.0
    if path.startswith("tests/fuzz/"):
        return 10.0
    if path.startswith("tests/integration/"):
        return 2.0
    return 0.05


def order_heaviest_first(items: list[pytest.Item]) -> None:
    """Reorder the collection in place: units by estimated cost, descending; tests inside a unit
    keep their order (module fixtures and test order within a file are unchanged)."""
    cost: dict[str, float] = {}
    first: dict[str, int] = {}
    measured: set[str] = set()
    for i, item in enumerate(items):
        unit, path = unit_of(item.nodeid), item.nodeid.split("::", 1)[0]
        first.setdefault(unit, i)
        cost.setdefault(unit, 0.0)
        if path not in MEASURED:
            cost[unit] += _weight(item)
        elif path not in measured:
            measured.add(path)
            cost[unit] += MEASURED[path]
    items.sort(key=lambda it: (-cost[unit_of(it.nodeid)], first[unit_of(it.nodeid)]))


def make_scheduler(config: pytest.Config, log: Any) -> Any:
    """A loadfile scheduler that uses `unit_of` for its units and keeps the workers' collection
    order (heaviest first) instead of xdist's largest-test-count-first."""
    from xdist.scheduler import LoadFileScheduling

    class UnitScheduling(LoadFileScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    config.option.loadscopereorder = False
    return UnitScheduling(config, log)


class RunLock:
    """A writer-preferring reader/writer lock over two files, shared by the workers of one run:
    a serial test first takes the turnstile (new tests wait behind it), then the lock exclusive."""

    def __init__(self, directory: Path) -> None:
        self.turnstile = os.open(directory / "samsa-serial.turnstile", os.O_CREAT | os.O_RDWR, 0o644)
        self.lock = os.open(directory / "samsa-serial.lock", os.O_CREAT | os.O_RDWR, 0o644)

    @contextmanager
    def shared(self) -> Iterator[None]:
        fcntl.flock(self.turnstile, fcntl.LOCK_EX)
        fcntl.flock(self.turnstile, fcntl.LOCK_UN)
        fcntl.flock(self.lock, fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(self.lock, fcntl.LOCK_UN)

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        fcntl.flock(self.turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(self.lock, fcntl.LOCK_EX)
        finally:
            fcntl.flock(self.turnstile, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(self.lock, fcntl.LOCK_UN)
