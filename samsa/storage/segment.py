"""One log segment: `<base>.log` of RecordBatch v2 bytes plus a sparse `.index` and a `.timeindex`.

The .index holds (relative base offset i32, file position i32) per indexed batch; the .timeindex holds
(max timestamp so far i64, relative offset i32). Both are kept in memory as arrays too: lookups never
touch the disk.
"""

from __future__ import annotations

import errno
import logging
import os
import struct
import time
from array import array
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

import crc32c

from samsa.protocol.batch import ATTR_OFFSET, HEADER_SIZE, LOG_OVERHEAD, read_header

from . import fsio

_IDX = struct.Struct(">ii")
_TIDX = struct.Struct(">qi")
_PREFIX = struct.Struct(">qi")
_BASE_AND_TS = struct.Struct(">q")
_I32 = struct.Struct(">i")
log = logging.getLogger("samsa.storage")

# tests set this to stop a truncation between its index and log cuts (a simulated crash)
truncate_hook: Callable[[str], None] | None = None


def segment_name(base: int) -> str:
    return f"{base:020d}"


class _OpenSegments:
    """Which segments hold open files, least recently used first. Opening one beyond `limit`
    closes the files of the least recently used segment no file slice pins: with thousands of
    partitions the broker stays under RLIMIT_NOFILE, reopening a segment when it is read again.
    Event-loop only (segments being built elsewhere, the cleaner's, are not in it)."""

    def __init__(self) -> None:
        self.lru: OrderedDict[Segment, None] = OrderedDict()
        self.limit = 1 << 30  # segments; storage.fdlimit sets it from RLIMIT_NOFILE
        self.closed_idle = 0  # how often an idle segment's files were closed

    def opened(self, seg: Segment) -> None:
        self.lru[seg] = None
        excess = len(self.lru) - self.limit
        if excess > 0:
            victims = []
            for victim in self.lru:  # oldest first; pinned ones are skipped
                if victim is not seg and victim._refs == 0:
                    victims.append(victim)
                    if len(victims) == excess:
                        break
            for victim in victims:
                victim._close_files()


OPEN_SEGMENTS = _OpenSegments()


class Segment:
    def __init__(self, directory: Path, base_offset: int, index_interval: int, suffix: str = "") -> None:
        """`suffix` names a segment being built beside the live one (the cleaner's `.cleaned`)."""
        self.dir = directory
        self.base = base_offset
        self.index_interval = index_interval
        stem = str(directory / segment_name(base_offset))
        self.log_path = Path(stem + ".log" + suffix)
        self.index_path = Path(stem + ".index" + suffix)
        self.tindex_path = Path(stem + ".timeindex" + suffix)
        # files are opened on first use and may be closed again (OPEN_SEGMENTS) while idle
        self._fd = -1
        self._closed = False
        self._managed = not suffix
        self._idx_fd = -1
        self._tidx_fd = -1
        self._idx_unsynced = False
        # an index file write failed: the files are gone and the next start rebuilds them by a
        # scan; the in-memory index stays exact
        self._idx_broken = False
        # a short write could not be cut back: the file holds bytes no offset accounts for, so
        # nothing more is appended here (the next start truncates the torn tail)
        self._write_failed = False
        try:
            self.size = os.stat(self.log_path).st_size
        except FileNotFoundError:
            self._open_log()  # creates it
            self.size = 0
        self.idx_off = array("q")
        self.idx_pos = array("q")
        self.t_ts = array("q")
        self.t_off = array("q")
        self.bytes_since_index = 0
        self.next_offset = base_offset  # one past the last offset in this segment
        self.max_timestamp = -1
        self.max_timestamp_offset = -1
        self.created = time.time()
        self.first_timestamp: int | None = None
        # file slices (storage.file_slice) still to be sent: close() keeps the log fd open for them
        self._refs = 0
        self._orphan_fds: list[int] = []  # closed while pinned: closed by the last release

    # ---- open files ----------------------------------------------------------------------
    @property
    def fd(self) -> int:
        """The log file's descriptor, opened if idle; -1 once closed."""
        fd = self._fd
        if fd >= 0:
            if self._managed:
                OPEN_SEGMENTS.lru.move_to_end(self)
            return fd
        if self._closed:
            return -1
        return self._open_log()

    def _open_log(self) -> int:
        self._fd = fsio.open_fd(self.log_path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        if self._managed:
            OPEN_SEGMENTS.opened(self)
        return self._fd

    def _close_files(self) -> None:
        """Close the log and index files of an idle segment (reopened on next use). Unsynced
        bytes stay in the page cache; a later fsync of the file by name covers them."""
        OPEN_SEGMENTS.lru.pop(self, None)
        OPEN_SEGMENTS.closed_idle += 1
        for fd in (self._fd, self._idx_fd, self._tidx_fd):
            if fd >= 0:
                fsio.close(fd)
        self._fd = self._idx_fd = self._tidx_fd = -1

    # ---- index files -------------------------------------------------------------------
    def _open_indexes(self, truncate: bool) -> None:
        self._release_index_fds()
        self.fd  # noqa: B018 - the segment's files are opened (and accounted) together
        flags = os.O_RDWR | os.O_CREAT | os.O_APPEND | (os.O_TRUNC if truncate else 0)
        idx = fsio.open_fd(self.index_path, flags, 0o644)
        try:
            tidx = fsio.open_fd(self.tindex_path, flags, 0o644)
        except BaseException:
            fsio.close(idx)  # EMFILE: neither is kept, so no half-open pair is used later
            raise
        self._idx_fd, self._tidx_fd = idx, tidx

    def _release_index_fds(self) -> None:
        """Close the index descriptors, or leave them to the last release while a flush in a
        worker thread may still fsync them."""
        fds = [fd for fd in (self._idx_fd, self._tidx_fd) if fd >= 0]
        self._idx_fd = self._tidx_fd = -1
        if self._refs > 0:
            self._orphan_fds += fds
        else:
            for fd in fds:
                fsio.close(fd)

    def _index_write(self, tidx: bool, entry: bytes) -> None:
        """Append an entry to an index file. On failure (ENOSPC, EIO) the index files are removed
        rather than left torn or incomplete: the append itself stands, and the next start
        rebuilds them by scanning the log."""
        if self._idx_broken:
            return
        try:
            if self._idx_fd < 0:
                self._open_indexes(truncate=False)
            if fsio.write(self._tidx_fd if tidx else self._idx_fd, entry) != len(entry):
                raise OSError(errno.ENOSPC, "short write")
            self._idx_unsynced = True
        except OSError as e:
            log.warning("%s: cannot write its index files (%s); removed, the next start "
                        "rebuilds them", self.log_path, e)
            self._idx_broken = True
            self._release_index_fds()
            for p in (self.index_path, self.tindex_path):
                try:
                    fsio.unlink(p)
                except OSError:
                    pass

    def load_indexes(self) -> bool:
        """Load index files written before a clean shutdown. False if they look unusable."""
        try:
            idx = self.index_path.read_bytes()
            tidx = self.tindex_path.read_bytes()
        except FileNotFoundError:
            return False
        if len(idx) % 8 or len(tidx) % 12:
            return False
        for rel, pos in _IDX.iter_unpack(idx):
            if pos >= self.size:
                return False
            self.idx_off.append(self.base + rel)
            self.idx_pos.append(pos)
        for ts, rel in _TIDX.iter_unpack(tidx):
            self.t_ts.append(ts)
            self.t_off.append(self.base + rel)
        if self.t_ts:
            self.max_timestamp, self.max_timestamp_offset = self.t_ts[-1], self.t_off[-1]
        # the first batch's timestamp ages the segment (segment.ms, max.compaction.lag.ms)
        if self.size >= HEADER_SIZE:
            self.first_timestamp = read_header(os.pread(self.fd, HEADER_SIZE, 0)).max_timestamp
        # the last batch tells the next offset; the max timestamp comes from the time index or a scan
        start = self.idx_pos[-1] if self.idx_pos else 0
        self._scan(start, validate=False, rebuild=False)
        return True

    def recover(self, validate: bool = True) -> int:
        """Rebuild indexes by scanning the log; truncate a torn or corrupt tail. Returns bytes cut."""
        self.idx_off = array("q")
        self.idx_pos = array("q")
        self.t_ts = array("q")
        self.t_off = array("q")
        self.bytes_since_index = 0
        self._idx_broken = False
        self._open_indexes(truncate=True)
        valid_end = self._scan(0, validate=validate, rebuild=True)
        cut = self.size - valid_end
        if cut:
            fsio.ftruncate(self.fd, valid_end)
            self.size = valid_end
        return cut

    def _scan(self, start: int, validate: bool, rebuild: bool) -> int:
        """Walk batches from `start`; returns the end of the last valid batch."""
        pos = start
        chunk = 8 << 20
        while pos + HEADER_SIZE <= self.size:
            head = os.pread(self.fd, HEADER_SIZE, pos)
            if len(head) < HEADER_SIZE:
                break
            h = read_header(head)
            size = h.batch_length + LOG_OVERHEAD
            if h.magic != 2 or h.batch_length < HEADER_SIZE - LOG_OVERHEAD or pos + size > self.size:
                break
            if h.base_offset < self.next_offset and self.next_offset != self.base:
                break
            if validate:
                c = crc32c.crc32c(b"")
                off = pos + ATTR_OFFSET
                end = pos + size
                while off < end:
                    n = min(chunk, end - off)
                    c = crc32c.crc32c(os.pread(self.fd, n, off), c)
                    off += n
                if c != h.crc:
                    break
            if rebuild:
                self._index(h.base_offset, h.last_offset, h.max_timestamp, pos, size)
            else:
                self._note(h.last_offset, h.max_timestamp)
            pos += size
        return pos

    def _note(self, last_offset: int, max_ts: int) -> None:
        self.next_offset = last_offset + 1
        if self.first_timestamp is None:
            self.first_timestamp = max_ts
        if max_ts > self.max_timestamp:
            self.max_timestamp = max_ts
            self.max_timestamp_offset = last_offset

    def _index(self, base: int, last: int, max_ts: int, pos: int, size: int) -> None:
        if not self.idx_pos or self.bytes_since_index >= self.index_interval:
            self.idx_off.append(base)
            self.idx_pos.append(pos)
            self._index_write(False, _IDX.pack(base - self.base, pos))
            self.bytes_since_index = 0
            new_max = max(max_ts, self.max_timestamp)
            if not self.t_ts or new_max > self.t_ts[-1]:
                off = last if max_ts >= self.max_timestamp else self.max_timestamp_offset
                self.t_ts.append(new_max)
                self.t_off.append(off)
                self._index_write(True, _TIDX.pack(new_max, off - self.base))
        self.bytes_since_index += size
        self._note(last, max_ts)

    # ---- append / read -----------------------------------------------------------------
    def _write(self, data: bytes | bytearray | memoryview) -> int:
        """Append bytes to the log file; returns their position. All or nothing: whatever fails
        (EMFILE reopening the files, ENOSPC part-way) leaves the file and the offsets as they
        were, so the caller can refuse the batch and later appends still line up."""
        if self._write_failed:
            raise OSError(errno.EIO, f"{self.log_path}: an earlier short write could not be cut back")
        fd = self.fd
        if fd < 0:
            raise OSError(errno.EBADF, f"{self.log_path} is closed")
        if self._idx_fd < 0 and not self._idx_broken:
            self._open_indexes(truncate=False)  # before the write: EMFILE here changes nothing
        pos = self.size
        n = fsio.write(fd, data)
        if n != len(data):
            try:
                fsio.ftruncate(fd, pos)
            except OSError:
                self._write_failed = True
            raise OSError(errno.ENOSPC, f"short write to {self.log_path}: {n} of {len(data)} bytes")
        self.size += n
        return pos

    def append(self, data: bytes | bytearray, base: int, last: int, max_ts: int) -> None:
        pos = self._write(data)
        self._index(base, last, max_ts, pos, len(data))

    def append_many(self, data: bytes | bytearray | memoryview,
                    batches: list[tuple[int, int, int, int]]) -> None:
        """Append several batches with one write; `batches` holds (base, last, max timestamp, size)
        of each, in order (the cleaner's output)."""
        pos = self._write(data)
        for base, last, max_ts, size in batches:
            self._index(base, last, max_ts, pos, size)
            pos += size

    def position_of(self, offset: int) -> int | None:
        """File position of the batch containing `offset` (or the first batch after it)."""
        if offset >= self.next_offset:
            return None
        i = bisect_right(self.idx_off, offset) - 1
        pos = self.idx_pos[i] if i >= 0 else 0
        fd = self.fd
        while pos < self.size:
            head = os.pread(fd, 27, pos)  # base offset, length … last offset delta
            base, length = _PREFIX.unpack_from(head)
            if base + _I32.unpack_from(head, 23)[0] >= offset:
                return pos
            pos += length + LOG_OVERHEAD
        return None

    def extent(self, pos: int, max_bytes: int, whole_first: bool) -> int:
        """How many bytes from pos to serve: at most max_bytes, but the whole first batch when
        whole_first (KIP-74); 0 when the first batch does not fit."""
        n = min(max_bytes, self.size - pos)
        length = _I32.unpack(os.pread(self.fd, 4, pos + 8))[0]
        first = min(length + LOG_OVERHEAD, self.size - pos)
        if whole_first:
            return max(n, first, 0)
        return n if n >= first else 0

    def read(self, pos: int, max_bytes: int, whole_first: bool) -> bytes:
        """Bytes from pos; at least the whole first batch when whole_first (KIP-74)."""
        n = self.extent(pos, max_bytes, whole_first)
        return os.pread(self.fd, n, pos) if n > 0 else b""

    def truncate_to(self, offset: int) -> int:
        """Drop every batch holding an offset >= `offset` (the whole batch when `offset` falls inside
        one): the log file, both index files and the in-memory state. Returns the bytes cut.

        Order, for a kill -9 at any point: the time index, then the offset index, then the log. A
        crash before the log is cut leaves shorter indexes over the longer log (the load scans from
        the last index entry, so the old tail comes back whole); after it, the indexes are already
        cut. Either way the segment reads as a prefix of what it held."""
        pos = self.position_of(offset)
        if pos is None:
            return 0
        cut_base = _PREFIX.unpack(os.pread(self.fd, 12, pos))[0]
        keep_idx = bisect_right(self.idx_pos, pos - 1)  # index entries at positions < pos
        keep_t = bisect_right(self.t_off, cut_base - 1)  # t_off never decreases
        if not self._idx_broken:
            try:
                if self._idx_fd < 0:
                    self._open_indexes(truncate=False)
                fsio.ftruncate(self._tidx_fd, keep_t * _TIDX.size)
                fsio.ftruncate(self._idx_fd, keep_idx * _IDX.size)
                self._idx_unsynced = True
            except OSError as e:
                log.warning("%s: cannot truncate its index files (%s); removed, the next start "
                            "rebuilds them", self.log_path, e)
                self._idx_broken = True
                self._release_index_fds()
                for p in (self.index_path, self.tindex_path):
                    fsio.unlink(p)
        if truncate_hook is not None:
            truncate_hook("segment-indexes-cut")
        fsio.ftruncate(self.fd, pos)
        self._write_failed = False  # whatever a failed write left past `pos` is gone too
        cut = self.size - pos
        self.size = pos
        del self.idx_off[keep_idx:], self.idx_pos[keep_idx:], self.t_ts[keep_t:], self.t_off[keep_t:]
        if self.t_ts:
            self.max_timestamp, self.max_timestamp_offset = self.t_ts[-1], self.t_off[-1]
        else:
            self.max_timestamp, self.max_timestamp_offset = -1, -1
        self.next_offset = self.base
        if pos == 0:
            self.first_timestamp = None
        # what follows the last kept index entry: next offset, max timestamp (as load_indexes)
        start = self.idx_pos[-1] if self.idx_pos else 0
        self._scan(start, validate=False, rebuild=False)
        self.bytes_since_index = pos - start
        return cut

    # ---- file slices ---------------------------------------------------------------------
    def acquire(self) -> int:
        """Pin the log fd for a file slice or a flush (released by `release`): it is neither
        closed for idleness nor reused meanwhile. Returns the fd."""
        fd = self.fd
        if fd < 0:
            raise ValueError(f"segment {self.log_path} is closed")
        self._refs += 1
        return fd

    def release(self) -> None:
        """Unpin; the last release after close() closes the files (they may be unlinked by
        then: the descriptors still reach the original bytes)."""
        self._refs -= 1
        if self._refs == 0 and self._orphan_fds:
            fds, self._orphan_fds = self._orphan_fds, []
            for fd in fds:
                fsio.close(fd)

    def batches_from(self, pos: int) -> list[tuple[int, bytes]]:
        """Headers (position, 61 bytes) from pos to the end: for timestamp lookups."""
        out = []
        while pos + HEADER_SIZE <= self.size:
            head = os.pread(self.fd, HEADER_SIZE, pos)
            out.append((pos, head))
            pos += struct.unpack_from(">i", head, 8)[0] + LOG_OVERHEAD
        return out

    def time_lookup_start(self, ts: int) -> int:
        """Position from which to scan for the first record with timestamp >= ts."""
        # the last time-index entry strictly below ts: everything up to its offset is < ts
        i = bisect_right(self.t_ts, ts - 1) - 1
        if i < 0:
            return 0
        return self.position_of(self.t_off[i] + 1) or 0

    @property
    def index_full(self) -> bool:
        return len(self.idx_pos) * 8 >= 10 * 1024 * 1024

    def flush(self) -> None:
        """fsync the log and (if written since) the index files. Runs in a worker thread: the
        caller pins the segment (acquire) so its descriptors stay valid."""
        if self._closed:
            return  # closed: it was flushed then, or deleted (retention, compaction)
        fd = self._fd
        if fd >= 0:
            fsio.fsync(fd)
        else:
            fsio.fsync_path(self.log_path)
        if self._idx_unsynced:
            self._idx_unsynced = False  # before the fsync: a write meanwhile sets it again
            for ifd, path in ((self._idx_fd, self.index_path), (self._tidx_fd, self.tindex_path)):
                if ifd >= 0:
                    fsio.fsync(ifd)
                else:
                    fsio.fsync_path(path)

    def close(self) -> None:
        """Close the files; they stay open while file slices or a flush hold the segment, so a slice
        queued for sending or an fsync never uses a closed (or reused) descriptor."""
        self._closed = True
        if self._managed:
            OPEN_SEGMENTS.lru.pop(self, None)
        fds = [fd for fd in (self._fd, self._idx_fd, self._tidx_fd) if fd >= 0]
        self._fd = self._idx_fd = self._tidx_fd = -1
        if self._refs > 0:
            # a flush in a worker thread may be about to fsync the index descriptors too: closing
            # them now would fail it (EBADF) or sync whatever file reuses the number
            self._orphan_fds += fds
            return
        for fd in fds:
            fsio.close(fd)

    def delete(self) -> None:
        self.close()
        for p in (self.log_path, self.index_path, self.tindex_path):
            fsio.unlink(p)
