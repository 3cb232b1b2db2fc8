"""After a clean start the recovery point is the log end offset, inside the active segment. Records
appended after it are not synced until that segment rolls and its background fsync finishes: if
the broker dies first, the next start must validate them (the segment holding the recovery point
is rescanned, as Kafka does), even though a later segment exists."""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path

import crc32c

from samsa.protocol.batch import ATTR_OFFSET, HEADER_SIZE, read_header
from samsa.protocol.records import encode_batch
from samsa.storage.log import LogConfig, PartitionLog


def _batch(i: int) -> bytearray:
    now = int(time.time() * 1000)
    return bytearray(encode_batch([(None, f"v{i}".encode() * 20, [], now)]))


def _batches(data: bytes) -> list[tuple[int, int]]:
    """(base, last offset) of each whole batch; asserts each one's CRC (what a consumer checks)."""
    out, pos = [], 0
    while pos + HEADER_SIZE <= len(data):
        h = read_header(data, pos)
        if pos + h.size > len(data):
            break  # a partial batch at the end of a fetch is allowed
        assert crc32c.crc32c(data[pos + ATTR_OFFSET: pos + h.size]) == h.crc, f"corrupt at {h.base_offset}"
        out.append((h.base_offset, h.last_offset))
        pos += h.size
    return out


def test_segment_holding_the_recovery_point_is_validated(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    cfg = LogConfig()
    lg = PartitionLog.open(d, "t", 0, cfg, clean=True)
    for i in range(3):
        lg.append(_batch(i))
    lg.close(clean=True)
    lg = PartitionLog.open(d, "t", 0, cfg, clean=True)
    assert lg.recovery_point == 3 and len(lg.segments) == 1
    crashed = tmp_path / "crashed" / "t-0"

    async def main() -> tuple[int, int]:
        lg.append(_batch(3))
        size_before = lg.active.size
        lg.append(_batch(4))  # not synced yet: appended after the recovery point
        lg.roll()  # its fsync runs in the background ...
        lg.append(_batch(5))
        shutil.copytree(d, crashed)  # ... and the broker dies before it finishes
        return size_before, lg.segments[0].size

    start, end = asyncio.run(main())
    lg.close(clean=False)
    # the power loss left garbage where the last unsynced batch of the rolled segment was
    with open(crashed / f"{0:020d}.log", "r+b") as f:
        f.seek(start + (end - start) // 2)
        f.write(b"\xff" * 8)
    rec = PartitionLog.open(crashed, "t", 0, cfg, clean=False)
    offset, seen = 0, []
    while offset < rec.end_offset:
        data = rec.read(offset, 1 << 20)
        if not data:
            break
        batches = _batches(data)
        assert batches, f"nothing whole at {offset}"
        seen += [b for b, _ in batches]
        offset = batches[-1][1] + 1
    assert seen[:4] == [0, 1, 2, 3]
    assert 4 not in seen
    rec.close()
