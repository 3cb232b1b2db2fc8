"""Segment files are opened on use and closed while idle (segment.OPEN_SEGMENTS), so the broker's
descriptors stay bounded however many segments it holds; a file slice still to be sent pins its
segment's descriptor; a flush works on a segment whose files were closed."""

from __future__ import annotations

import asyncio
import os
import resource
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa.protocol.records import decode_batch, encode_batch
from samsa.storage import fdlimit
from samsa.storage.log import LogConfig, PartitionLog
from samsa.storage.segment import OPEN_SEGMENTS


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def small_budget() -> Iterator[int]:
    saved = OPEN_SEGMENTS.limit
    OPEN_SEGMENTS.limit = 4
    try:
        yield 4
    finally:
        OPEN_SEGMENTS.limit = saved


def _fill(d: Path, segments: int) -> PartitionLog:
    lg = PartitionLog.open(d, "t", 0, LogConfig(segment_bytes=300), clean=True)
    now = int(time.time() * 1000)
    for i in range(segments):
        lg.append(bytearray(encode_batch([(None, f"v{i}".encode() * 100, [], now)])), now)
    assert len(lg.segments) == segments
    return lg


def test_open_files_stay_bounded(tmp_path: Path, small_budget: int) -> None:
    base = _open_fds()
    logs = [_fill(tmp_path / f"t-{p}", 10) for p in range(3)]
    # every record of every segment is still readable, reopening files as needed
    for lg in logs:
        for off in range(lg.end_offset):
            (r,) = decode_batch(lg.read(off, 1 << 16))
            assert r.value == f"v{off}".encode() * 100
    assert _open_fds() - base <= small_budget * fdlimit.FDS_PER_SEGMENT
    assert len(OPEN_SEGMENTS.lru) <= small_budget
    for lg in logs:
        lg.close()


def test_a_pinned_segment_is_not_closed(tmp_path: Path, small_budget: int) -> None:
    lg = _fill(tmp_path / "t-0", 12)
    sl = lg.read_slice(0, 1 << 16)
    assert sl is not None
    for off in range(1, lg.end_offset):  # opens every other segment, evicting idle ones
        lg.read(off, 1 << 16)
    assert lg.segments[0]._fd == sl.fd  # still open: the slice can be sent
    (r,) = decode_batch(sl.read())
    assert r.value == b"v0" * 100
    sl.release()
    lg.close()


def test_flush_after_files_were_closed(tmp_path: Path, small_budget: int) -> None:
    lg = _fill(tmp_path / "t-0", 8)
    assert lg.segments[0]._fd < 0  # closed for idleness
    lg.flushed_offset = 0
    asyncio.run(lg.flush())
    assert lg.flushed_offset == lg.end_offset
    lg.close()
    lg2 = PartitionLog.open(tmp_path / "t-0", "t", 0, LogConfig(segment_bytes=300), clean=False)
    assert lg2.end_offset == 8
    lg2.close()


def test_soft_limit_raised_to_hard(monkeypatch: pytest.MonkeyPatch) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    saved = OPEN_SEGMENTS.limit
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(256, hard), hard))
        before, now, segments = fdlimit.configure()
        assert before == min(256, hard)
        assert now == resource.getrlimit(resource.RLIMIT_NOFILE)[0] == hard or hard == -1
        assert segments == OPEN_SEGMENTS.limit
        assert segments * fdlimit.FDS_PER_SEGMENT < now
        assert "partitions" in fdlimit.describe(before, now, segments, 5)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        OPEN_SEGMENTS.limit = saved
