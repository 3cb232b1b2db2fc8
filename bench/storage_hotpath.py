"""Micro-benchmark of the storage hot paths: PartitionLog.append (one batch) and read_slice (one
fetch of a partition), in microseconds per call, the best of 5 runs (the machine is shared).
No fsync (default flush policy).

    python bench/storage_hotpath.py [batches]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from samsa.protocol.records import encode_batch
from samsa.storage.log import LogConfig, PartitionLog


def run(n: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as d:
        lg = PartitionLog.open(Path(d) / "bench-0", "bench", 0,
                               LogConfig(segment_bytes=8 << 20), clean=True)
        now = int(time.time() * 1000)
        proto = encode_batch([(None, b"v" * 100, [], now) for _ in range(10)])
        batches = [bytearray(proto) for _ in range(n)]
        t0 = time.perf_counter()
        for b in batches:
            lg.append(b, now)
        t_append = (time.perf_counter() - t0) / n * 1e6
        end = lg.end_offset
        t0 = time.perf_counter()
        off = 0
        reads = 0
        while off < end:
            sl = lg.read_slice(off, 16384)
            assert sl is not None
            sl.release()
            off += 10  # one batch per fetch: the worst case per byte
            reads += 1
        t_read = (time.perf_counter() - t0) / reads * 1e6
        lg.close()
        return t_append, t_read


def main(n: int) -> None:
    results = [run(n) for _ in range(5)]
    print(f"append: {min(r[0] for r in results):.2f} us/batch   "
          f"read_slice: {min(r[1] for r in results):.2f} us/fetch   ({n} batches of 10 records)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000)
