"""pytest plugin: the `samsa_broker` fixture, a real broker shared by the tests of one module, and
`samsa_cluster`, a real 3-node cluster (combined broker+controller nodes) shared the same way."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from . import SamsaBroker, SamsaCluster
from .postgres import PostgresServer


@pytest.fixture(scope="module")
def samsa_broker() -> Iterator[SamsaBroker]:
    with SamsaBroker() as broker:
        yield broker


@pytest.fixture(scope="module")
def samsa_cluster() -> Iterator[SamsaCluster]:
    with SamsaCluster(3) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def postgres_server() -> Iterator[PostgresServer]:
    """A real PostgreSQL server (Debian's binaries, temp dir, free port, wal_level=logical)."""
    with PostgresServer() as server:
        yield server


@pytest.fixture(scope="module")
def moto_s3() -> Iterator[object]:
    """moto's S3 server over real HTTP on a free port (tiered storage's S3 backend tests)."""
    from .s3 import MotoS3

    with MotoS3() as server:
        yield server
