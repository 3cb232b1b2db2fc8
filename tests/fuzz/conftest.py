"""Fixtures of the fuzz suite: one broker per module with its health checker, a seeded generator
per test, and the run's seed printed with every failure (SAMSA_FUZZ_SEED replays it)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest

from samsa.testing import SamsaBroker

from ._support import SEED, Health, rng_for, start_broker


@pytest.fixture(scope="module")
def fuzz_broker() -> Iterator[SamsaBroker]:
    b = start_broker()
    try:
        yield b
    finally:
        b.close()


@pytest.fixture(scope="module")
def health(fuzz_broker: SamsaBroker) -> Health:
    h = Health(fuzz_broker)
    h.check("baseline")
    return h


@pytest.fixture(autouse=True)
def _per_test_broker_state(request: pytest.FixtureRequest) -> None:
    """Each test answers for its own log lines, and starts with a live broker: one that an
    earlier test killed is restarted (same data dir: crash recovery) so failures stay apart."""
    if "health" not in request.fixturenames:
        return
    h: Health = request.getfixturevalue("health")
    proc = h.broker.proc
    if proc is None or proc.poll() is not None:
        h.broker.kill()
        h.broker.start()
        h.baseline_mb = None
        h.log_mark = len(h.broker.log_text())
        h.check("restarted after an earlier test killed the broker")
    h.log_mark = len(h.broker.log_text())


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> random.Random:
    return rng_for(request.node.nodeid)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        report.sections.append(("fuzz seed", f"replay with SAMSA_FUZZ_SEED={SEED}"))
