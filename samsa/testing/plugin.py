"""pytest plugin: the `samsa_broker` fixture, a real broker shared by the tests of one module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from . import SamsaBroker


@pytest.fixture(scope="module")
def samsa_broker() -> Iterator[SamsaBroker]:
    with SamsaBroker() as broker:
        yield broker
