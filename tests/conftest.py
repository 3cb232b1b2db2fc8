"""Shared fixtures: real brokers (subprocesses) via samsa.testing; and the hooks that let `make test`
run the files on several pytest-xdist workers (see tests/parallel.py)."""

from __future__ import annotations

from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from samsa.testing import SamsaBroker

from .parallel import RunLock, make_scheduler, order_heaviest_first


@pytest.fixture(scope="module")
def fast_broker() -> Iterator[SamsaBroker]:
    """A broker that checks retention every 200 ms (for retention tests)."""
    with SamsaBroker(overrides={"log.retention.check.interval.ms": "200"}) as b:
        yield b


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") == "loadfile":
        return make_scheduler(config, log)
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if hasattr(config, "workerinput"):  # an xdist worker: every worker sorts the same way
        order_heaviest_first(items)


_run_lock: list[RunLock] = []


@pytest.hookimpl(wrapper=True, tryfirst=True)  # outside pytest-timeout: waiting is not the test's time
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, Any, Any]:
    """Under xdist, a `serial` test (setup, call, teardown) runs with no other test alongside."""
    config = item.config
    if not hasattr(config, "workerinput") or not config.option.basetemp:
        return (yield)
    if not _run_lock:
        _run_lock.append(RunLock(Path(config.option.basetemp).parent))
    lock = _run_lock[0]
    with lock.exclusive() if item.get_closest_marker("serial") else lock.shared():
        return (yield)
