"""Tiered storage review (session 9), S3: orphaned objects (a segment the metadata never heard of)
are deleted by the remote log manager's orphan scan whatever offset their segment starts at.
The real S3 backend over HTTP (moto's server) and the real manager method; the metadata is the
real cache, empty (the orphan's partition belongs to a deleted topic)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa.storage.remote.config import RemoteLogManagerConfig
from samsa.storage.remote.manager import RemoteLogManager
from samsa.storage.remote.metadata import RemoteLogMetadataCache
from samsa.storage.remote.rsm import TopicIdPartition, create_rsm
from samsa.storage.remote.s3_store import S3RemoteStorageManager
from samsa.testing.s3 import MotoS3, aws_env
from tests.integration.test_tiered_s3_store import _data, _meta, _segment

BUCKET = "samsa-review"


@pytest.fixture(scope="module")
def moto() -> Iterator[MotoS3]:
    with MotoS3() as server, aws_env(server.env):
        server.create_bucket(BUCKET)
        yield server


def test_s3_orphans_not_starting_at_zero_are_deleted(moto: MotoS3, tmp_path: Path) -> None:
    """The orphan scan rebuilt each object's start offset from its listed names; S3 lists full
    keys (`<prefix><topic>-<p>-<id>/<start>-<segment>.<part>`), so every start read as 0 and the
    delete addressed keys that do not exist: an orphan starting past offset 0 stayed in the
    bucket forever (while the broker logged it as deleted)."""
    rsm = create_rsm("s3", {"rsm.config.bucket": BUCKET, "rsm.config.endpoint.url": moto.endpoint,
                            "rsm.config.region": "us-east-1", "rsm.config.prefix": "c1/"})
    assert isinstance(rsm, S3RemoteStorageManager)
    tp = TopicIdPartition(uuid.uuid4(), "gone-topic", 2)
    for start in (0, 1500):
        log_path, data = _segment(tmp_path, start, 3)
        rsm.copy_log_segment_data(_meta(tp, start, start + 2, len(data)),
                                  _data(tmp_path, log_path))
    assert len(list(rsm.list_segments(tp))) == 2

    async def scan() -> int:
        rlm = RemoteLogManager(RemoteLogManagerConfig(), 1, rsm, RemoteLogMetadataCache(),  # type: ignore[arg-type]
                               logs=None, leader_log=lambda t, p: None,
                               topic_id=lambda name: None, cleanup_node=lambda: True)
        try:
            return await rlm.clean_orphans(grace_ms=0)
        finally:
            for pool in (rlm.copier, rlm.expirer, rlm.reader_pool):
                pool.shutdown(wait=True)

    assert asyncio.run(scan()) == 2
    left = sorted(k for o in rsm.list_segments(tp) for k in o.files)
    assert left == [], left
