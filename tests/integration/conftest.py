"""Fixtures for the integration tests in this directory."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local SparkSession (samsa source registered) for all Spark tests: a cold start costs
    5-10 s (more on a loaded machine), so the test_spark_* modules share it."""
    pytest.importorskip("pyspark")
    from samsa.spark import local_session
    s = local_session("samsa-tests")
    yield s
    s.stop()
