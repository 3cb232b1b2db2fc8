"""Shared fixtures: real brokers (subprocesses) via samsa.testing."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from samsa.testing import SamsaBroker


@pytest.fixture(scope="module")
def fast_broker() -> Iterator[SamsaBroker]:
    """A broker that checks retention every 200 ms (for retention tests)."""
    with SamsaBroker(overrides={"log.retention.check.interval.ms": "200"}) as b:
        yield b
