"""A byte range of a segment's log file, handed to the network layer instead of the bytes.

Fetch answers with slices so the server can `sendfile` them. A response may wait behind earlier
pipelined responses while retention, DeleteRecords, compaction or topic deletion closes the segment:
the slice pins the segment's log fd (Segment.acquire) so it is never closed, let alone reused for
another file, before the slice is sent or dropped. An unlinked file stays readable through the fd.
"""

from __future__ import annotations

import os

from .segment import Segment


class FileSlice:
    """`length` bytes at `position` of a segment's log; release() (or garbage collection) unpins."""

    __slots__ = ("segment", "fd", "position", "length")

    def __init__(self, segment: Segment, position: int, length: int) -> None:
        self.segment: Segment | None = None  # set once pinned: __del__ must not unpin otherwise
        self.fd = segment.acquire()
        self.segment = segment
        self.position = position
        self.length = length

    def read(self, skip: int = 0) -> bytes:
        """The slice's bytes from `skip` on (pread). Raises EOFError if the file got shorter."""
        if self.segment is None:
            raise ValueError("file slice already released")
        want = self.length - skip
        data = os.pread(self.fd, want, self.position + skip)
        if len(data) < want:  # a short pread: retry once for the rest, then give up
            data += os.pread(self.fd, want - len(data), self.position + skip + len(data))
            if len(data) < want:
                raise EOFError(f"file slice {self.position}+{self.length} is past the end of the file")
        return data

    def release(self) -> None:
        """Idempotent: the first call unpins the segment's fd."""
        seg = self.segment
        if seg is not None:
            self.segment = None
            seg.release()

    @property
    def released(self) -> bool:
        return self.segment is None

    def __del__(self) -> None:
        # a dropped response (closed connection, discarded long-poll round) must not leak the fd
        if self.segment is not None:
            self.release()

    def __repr__(self) -> str:
        seg = self.segment
        name = seg.log_path.name if seg is not None else "released"
        return f"FileSlice({name}, {self.position}, {self.length})"
