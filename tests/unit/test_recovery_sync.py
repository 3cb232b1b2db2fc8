"""After an unclean start the recovery point (checkpointed in partition.meta) moves to the active
segment's base: every segment below it must then have been fsynced, or a power loss after the
restart leaves a torn segment that the next start trusts without validating it (Kafka keeps the
old recovery point instead; Samsa syncs what it recovered)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import time
from pathlib import Path

import pytest

from samsa.protocol.records import encode_batch
from samsa.storage import fsio
from samsa.storage.log import LogConfig, PartitionLog


def _batch(i: int) -> bytearray:
    now = int(time.time() * 1000)
    return bytearray(encode_batch([(None, f"v{i}".encode() * 20, [], now)]))


def test_recovered_segments_are_synced_before_the_recovery_point_passes_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = tmp_path / "t-0"
    crashed = tmp_path / "crashed" / "t-0"
    cfg = LogConfig()
    monkeypatch.setattr(fsio, "fsync", lambda fd: None)  # the rolled segment's fsync never ran

    async def workload() -> None:
        lg = PartitionLog.open(d, "t", 0, cfg, clean=True)
        for i in range(3):
            lg.append(_batch(i))
        lg.roll()
        lg.append(_batch(3))
        shutil.copytree(d, crashed)  # kill -9 before the background fsync
        lg.close(clean=False)

    asyncio.run(workload())
    monkeypatch.undo()
    synced: set[int] = set()
    real = os.fsync

    def recording(fd: int) -> None:
        synced.add(os.fstat(fd).st_ino)
        real(fd)

    monkeypatch.setattr(fsio, "fsync", recording)
    lg = PartitionLog.open(crashed, "t", 0, cfg, clean=False)  # the unclean restart
    rp = json.loads((crashed / "partition.meta").read_text())["recovery_point"]
    below = [s for s in lg.segments if s is not lg.active and s.next_offset <= rp]
    assert below, "the recovery point passed no segment: nothing to check"
    for s in below:
        assert os.stat(s.log_path).st_ino in synced, f"segment {s.base} below {rp} never fsynced"
    lg.close(clean=False)
