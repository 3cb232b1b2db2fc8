"""Partition log: offsets, indexes, rolling, recovery of torn/corrupt tails, retention."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from samsa.protocol.records import decode_batch, encode_batch, iter_batches
from samsa.storage.log import LogConfig, OffsetOutOfRange, PartitionLog

T0 = 1_700_000_000_000


def batch(start: int, n: int, ts: int | None = None, size: int = 10) -> bytearray:
    base_ts = T0 + start if ts is None else ts
    return bytearray(encode_batch([(str(start + i).encode(), b"v" * size, [], base_ts + i)
                                   for i in range(n)]))


def read_all(lg: PartitionLog, start: int | None = None) -> list[int]:
    """Offsets of every record readable from `start`, following reads like a consumer."""
    off = lg.log_start_offset if start is None else start
    seen: list[int] = []
    while off < lg.high_watermark:
        data = lg.read(off, 1 << 20)
        if not data:
            break
        for pos, _size in iter_batches(data):
            for r in decode_batch(data, pos):
                if r.offset >= off:
                    seen.append(r.offset)
        off = seen[-1] + 1
    return seen


def open_log(d: Path, clean: bool = True, **cfg: int) -> PartitionLog:
    return PartitionLog.open(d / "t-0", "t", 0, LogConfig(**cfg), clean)  # type: ignore[arg-type]


def test_append_assigns_contiguous_offsets_and_reads_back(tmp_path: Path) -> None:
    lg = open_log(tmp_path, index_interval=100)
    for i in range(50):
        base, _ = lg.append(batch(i * 3, 3), now_ms=T0)
        assert base == i * 3
    assert lg.end_offset == 150
    assert read_all(lg) == list(range(150))
    assert read_all(lg, 77)[0] == 77  # mid-batch offsets land in the batch that holds them
    with pytest.raises(OffsetOutOfRange):
        lg.read(151, 100)
    assert lg.read(150, 100) == b""


def test_rolls_segments_by_size_and_reopens(tmp_path: Path) -> None:
    lg = open_log(tmp_path, segment_bytes=1000)
    for i in range(40):
        lg.append(batch(i * 2, 2), now_ms=T0)
    assert len(lg.segments) > 3
    names = sorted(p.name for p in (tmp_path / "t-0").glob("*.log"))
    assert names[0] == "00000000000000000000.log"
    lg.close()
    again = open_log(tmp_path, segment_bytes=1000)
    assert again.end_offset == 80 and read_all(again) == list(range(80))
    again.append(batch(80, 1), now_ms=T0)
    assert read_all(again)[-1] == 80


def test_unclean_recovery_truncates_torn_tail(tmp_path: Path) -> None:
    lg = open_log(tmp_path)
    for i in range(10):
        lg.append(batch(i, 1), now_ms=T0)
    path = lg.active.log_path
    lg.close(clean=False)
    whole = path.stat().st_size
    with open(path, "ab") as f:  # a torn write: half a batch at the end
        f.write(bytes(batch(10, 5))[:40])
    again = open_log(tmp_path, clean=False)
    assert path.stat().st_size == whole
    assert again.end_offset == 10 and read_all(again) == list(range(10))
    base, _ = again.append(batch(10, 1), now_ms=T0)
    assert base == 10  # offsets continue without a gap


def test_unclean_recovery_drops_corrupt_batch_and_everything_after(tmp_path: Path) -> None:
    lg = open_log(tmp_path)
    positions = []
    for i in range(10):
        positions.append(lg.active.size)
        lg.append(batch(i, 1), now_ms=T0)
    path = lg.active.log_path
    lg.close(clean=False)
    with open(path, "r+b") as f:  # flip a byte inside batch 6's records
        f.seek(positions[6] + 70)
        b = f.read(1)
        f.seek(positions[6] + 70)
        f.write(bytes([b[0] ^ 0xFF]))
    again = open_log(tmp_path, clean=False)
    assert again.end_offset == 6
    assert read_all(again) == list(range(6))


def test_index_rebuilt_when_missing(tmp_path: Path) -> None:
    lg = open_log(tmp_path, index_interval=50)
    for i in range(100):
        lg.append(batch(i, 1), now_ms=T0)
    idx = lg.active.index_path
    lg.close(clean=False)
    os.unlink(idx)
    again = open_log(tmp_path, clean=False, index_interval=50)
    assert idx.exists() and idx.stat().st_size > 0
    assert read_all(again, 63)[0] == 63


def test_retention_by_bytes_and_time_moves_log_start(tmp_path: Path) -> None:
    lg = open_log(tmp_path, segment_bytes=600, retention_bytes=1500)
    for i in range(30):
        lg.append(batch(i, 1), now_ms=T0)
    before = len(lg.segments)
    assert lg.apply_retention(T0) > 0
    assert len(lg.segments) < before and lg.size_bytes <= 1500 + 600
    assert lg.log_start_offset == lg.segments[0].base > 0
    with pytest.raises(OffsetOutOfRange):
        lg.read(0, 100)
    lg.config.retention_bytes = -1
    lg.config.retention_ms = 1000
    lg.apply_retention(T0 + 10 * 86400_000)  # everything expired: the log empties but keeps offsets
    assert lg.log_start_offset == 30 == lg.end_offset
    assert lg.append(batch(30, 1), now_ms=T0)[0] == 30


def test_delete_records_and_timestamp_lookup(tmp_path: Path) -> None:
    lg = open_log(tmp_path, segment_bytes=700, index_interval=1)
    for i in range(20):
        lg.append(batch(i * 2, 2, ts=T0 + i * 1000), now_ms=T0)
    assert lg.offset_for_timestamp(T0 + 5000) == (10, T0 + 5000)
    assert lg.offset_for_timestamp(T0 + 5001) == (11, T0 + 5001)
    assert lg.offset_for_timestamp(T0 + 99_000) is None
    assert lg.max_timestamp_offset() == (39, T0 + 19_001)
    assert lg.delete_records(15) == 15
    assert read_all(lg)[0] == 15
    with pytest.raises(OffsetOutOfRange):
        lg.delete_records(41)
    lg.close()
    assert open_log(tmp_path, segment_bytes=700).log_start_offset == 15
