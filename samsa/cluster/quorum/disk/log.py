"""A file-backed `RaftLog` for `__cluster_metadata-0`, laid out as KRaft lays it out.

- Segments `<20-digit base offset>.log` hold one RecordBatch v2 per entry: its
  partitionLeaderEpoch is the entry's epoch, a control entry is a control batch (key: version 0,
  type 2 = LeaderChange). One entry per batch keeps `truncate_to` a plain file truncation.
- Snapshots are `<20-digit offset>-<10-digit epoch>.checkpoint` files, written atomically.
- `leader-epoch-checkpoint` lists `epoch startOffset` for the live log (Kafka's format). It is
  rewritten at each flush that changed it; recovery rebuilds the epoch cache by scanning, since
  the segments, not the checkpoint, are the truth.

Writes are buffered in memory until `flush()` (the core's `Output.flush_log`), which makes
truncations durable before appends, so a crash can only leave a prefix of the flushed
operations: never an entry the core did not append, never old and new entries interleaved.
Recovery drops a torn or corrupt tail (bad CRC, short batch, broken offset or epoch order).
All entries above the snapshot are kept in memory too: the metadata log stays small because the
state machine snapshots it.
"""

from __future__ import annotations

import logging
import os
import struct
import time
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from samsa.cluster.quorum.disk.files import (
    LEADER_EPOCH_CHECKPOINT,
    encode_epoch_checkpoint,
    parse_snapshot_name,
    replace_durably,
    snapshot_name,
)
from samsa.cluster.quorum.log import Entry, OffsetAndEpoch
from samsa.protocol.batch import CONTROL_BIT, HEADER_SIZE, LOG_OVERHEAD, crc_ok, read_header
from samsa.protocol.records import decode_batch, encode_batch
from samsa.storage import fsio

METADATA_PARTITION = "__cluster_metadata-0"
log = logging.getLogger("samsa.quorum.disk")
INSTALLING = ".installing"  # a snapshot from the leader, staged while the old log is deleted
LEADER_CHANGE = 2  # Kafka's ControlRecordType for LeaderChange
_CONTROL_KEY = struct.pack(">hh", 0, LEADER_CHANGE)


class ForeignLogError(Exception):
    """The directory holds data this log did not write; refusing beats truncating it."""


def _seg_name(base: int) -> str:
    return f"{base:020d}.log"


def encode_entry(offset: int, entry: Entry, timestamp_ms: int) -> bytes:
    """One entry as one RecordBatch v2 at `offset`."""
    key = _CONTROL_KEY if entry.control else None
    return encode_batch(
        [(key, entry.data, [], timestamp_ms)],
        base_offset=offset,
        leader_epoch=entry.epoch,
        attributes_extra=CONTROL_BIT if entry.control else 0,
    )


@dataclass(slots=True)
class _Pos:
    segment: int  # base offset of the segment file
    position: int  # byte position of the entry's batch in it


class FileRaftLog:
    """`RaftLog` on files in `directory` (the `__cluster_metadata-0` directory)."""

    def __init__(self, directory: Path, segment_bytes: int = 1 << 20) -> None:
        self.dir = directory
        self.segment_bytes = segment_bytes
        # live (what the core sees, flushed or not)
        self._start = 0
        self._entries: list[Entry] = []
        self._epochs: list[tuple[int, int]] = []  # (epoch, start offset) of the live entries
        self._snap: OffsetAndEpoch | None = None
        self._pending: list[tuple[str, object]] = []
        self._pending_snapshot: tuple[OffsetAndEpoch, bytes] | None = None
        # durable (what is on disk)
        self._dstart = 0
        self._pos: list[_Pos] = []  # one per durable entry from _dstart
        self._sizes: dict[int, int] = {}  # segment base -> file size
        self._written_epochs: list[tuple[int, int]] | None = None
        self._open()

    # ------------------------------------------------------------------ recovery
    def _open(self) -> None:
        for marker in ("partition.meta", "00000000000000000000.index"):
            if (self.dir / marker).exists():
                # the single-node metadata log (a PartitionLog): recovery here would cut it
                raise ForeignLogError(f"{self.dir} holds a PartitionLog ({marker}), not a Raft log")
        made = fsio.makedirs(self.dir)
        for d in made:
            fsio.fsync_dir(d.parent)
        for n in os.listdir(self.dir):
            if n.endswith(".tmp"):
                fsio.unlink(self.dir / n)  # an interrupted atomic replace: the old file stands
        for n in os.listdir(self.dir):
            if n.endswith(INSTALLING):
                self._finish_install(self.dir / n)  # complete: it was renamed into place whole
        names = sorted(os.listdir(self.dir))
        snaps = sorted(s for s in map(parse_snapshot_name, names) if s is not None)
        if snaps:
            self._snap = snaps[-1]
            for old in snaps[:-1]:
                fsio.unlink(self.dir / snapshot_name(old))
        start = self._snap.offset if self._snap else 0
        self._start = self._dstart = start
        bases = sorted(int(n[:-4]) for n in names if n.endswith(".log") and n[:-4].isdigit())
        changed_dir = False
        expect: int | None = None  # offset the next batch must have
        last_epoch = self._snap.epoch if self._snap else 0
        broken = False
        for base in bases:
            path = self.dir / _seg_name(base)
            if broken or (expect is not None and base != expect) or (expect is None and base > start):
                # after a torn segment, or a hole in the offsets: nothing here can be trusted
                broken = True
                log.warning("%s: dropping %s (after a cut, or a hole in the offsets)", self.dir, path.name)
                fsio.unlink(path)
                changed_dir = True
                continue
            data = path.read_bytes()
            pos, exp = 0, base
            while pos < len(data):
                entry, size, offset = self._decode_at(data, pos)
                if entry is None or offset != exp or (offset >= start and entry.epoch < last_epoch):
                    broken = True
                    break
                if offset >= start:
                    last_epoch = entry.epoch
                    self._note_epoch(entry.epoch, offset)
                    self._entries.append(entry)
                    self._pos.append(_Pos(base, pos))
                pos += size
                exp += 1
            if pos < len(data):
                log.warning("%s: cutting %s at byte %d of %d (torn or invalid tail)", self.dir, path.name,
                            pos, len(data))
                self._cut(path, pos)  # the torn tail
            self._sizes[base] = pos
            expect = exp
        if expect is not None and expect < start:
            # segments end below the snapshot (all they hold is in it): the log restarts there
            for base in list(self._sizes):
                fsio.unlink(self.dir / _seg_name(base))
            self._sizes.clear()
            changed_dir = True
        else:
            for base in sorted(self._sizes):
                first = self._pos[0].segment if self._pos else max(self._sizes)
                if base < first:
                    fsio.unlink(self.dir / _seg_name(base))  # wholly below the snapshot
                    del self._sizes[base]
                    changed_dir = True
        if changed_dir:
            fsio.fsync_dir(self.dir)

    def _decode_at(self, data: bytes, pos: int) -> tuple[Entry | None, int, int]:
        """(entry, size, base offset) of the batch at `pos`; no entry when torn or corrupt."""
        if pos + HEADER_SIZE > len(data):
            return None, 0, -1
        h = read_header(data, pos)
        size = h.batch_length + LOG_OVERHEAD
        if h.magic != 2 or size < HEADER_SIZE or pos + size > len(data):
            return None, 0, -1
        if not crc_ok(data, pos, size):
            return None, 0, -1
        try:
            recs = decode_batch(data, pos)
        except ValueError:
            return None, 0, -1
        if len(recs) != 1 or recs[0].value is None:
            # an intact batch this log never writes: another writer's data, not a torn tail
            raise ForeignLogError(f"{self.dir}: batch at offset {h.base_offset} is not one entry")
        control = bool(h.attributes & CONTROL_BIT)
        return Entry(h.leader_epoch, bytes(recs[0].value), control), size, h.base_offset

    def _cut(self, path: Path, size: int) -> None:
        """Truncate a torn tail and make the cut durable before anything is appended after it."""
        fd = fsio.open_fd(path, os.O_WRONLY)
        try:
            fsio.ftruncate(fd, size)
            fsio.fsync(fd)
        finally:
            fsio.close(fd)

    # ------------------------------------------------------------------ reads
    @property
    def start_offset(self) -> int:
        return self._start

    @property
    def end_offset(self) -> int:
        return self._start + len(self._entries)

    @property
    def last_epoch(self) -> int:
        if self._entries:
            return self._entries[-1].epoch
        return self._snap.epoch if self._snap else 0

    @property
    def snapshot_id(self) -> OffsetAndEpoch | None:
        return self._snap

    def entry(self, offset: int) -> Entry:
        return self._entries[offset - self._start]

    def read(self, offset: int, max_entries: int) -> list[Entry]:
        i = offset - self._start
        if i < 0:
            raise ValueError(f"offset {offset} is below the log start offset {self._start}")
        return self._entries[i : i + max_entries]

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """The largest epoch <= `epoch` in the log and the end offset of its entries (from the
        epoch cache: one lookup, not a scan); below the log, the snapshot id."""
        i = bisect_right(self._epochs, (epoch, 1 << 62))
        if i > 0:
            e = self._epochs[i - 1][0]
            end = self._epochs[i][1] if i < len(self._epochs) else self.end_offset
            return OffsetAndEpoch(end, e)
        return self._snap if self._snap is not None else OffsetAndEpoch(0, 0)

    def read_snapshot(self, snapshot_id: OffsetAndEpoch) -> bytes | None:
        if self._snap != snapshot_id:
            return None
        if self._pending_snapshot is not None and self._pending_snapshot[0] == snapshot_id:
            return self._pending_snapshot[1]
        try:
            return (self.dir / snapshot_name(snapshot_id)).read_bytes()
        except FileNotFoundError:
            return None

    def epoch_entries(self) -> list[tuple[int, int]]:
        """(epoch, start offset) pairs of the live log: what leader-epoch-checkpoint holds."""
        return list(self._epochs)

    # ------------------------------------------------------------------ buffered writes
    def _note_epoch(self, epoch: int, offset: int) -> None:
        if not self._epochs or self._epochs[-1][0] != epoch:
            self._epochs.append((epoch, offset))

    def append(self, entries: Sequence[Entry]) -> None:
        if not entries:
            return
        if entries[0].epoch < self.last_epoch:
            raise ValueError(f"epoch {entries[0].epoch} after epoch {self.last_epoch}")
        off = self.end_offset
        prev = entries[0].epoch
        for e in entries:
            if e.epoch < prev:
                raise ValueError(f"epoch {e.epoch} after epoch {prev}")
            prev = e.epoch
            self._note_epoch(e.epoch, off)
            off += 1
        self._entries.extend(entries)
        self._pending.append(("append", None))

    def truncate_to(self, offset: int) -> None:
        if offset < self._start:
            raise ValueError(f"cannot truncate to {offset}, below log start {self._start}")
        if offset >= self.end_offset:
            return
        del self._entries[offset - self._start :]
        while self._epochs and self._epochs[-1][1] >= offset:
            self._epochs.pop()
        self._pending.append(("truncate", offset))

    def install_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        """Replace the whole log by a snapshot received from the leader (FetchSnapshot)."""
        self._start = snapshot_id.offset
        self._entries = []
        self._epochs = []
        self._snap = snapshot_id
        self._pending_snapshot = (snapshot_id, bytes(data))
        self._pending.append(("install", snapshot_id))

    def take_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        """The state machine's own snapshot up to `snapshot_id.offset` (committed entries only):
        durable at once; the log prefix it covers is dropped (whole segments deleted)."""
        self.flush()
        cut = snapshot_id.offset - self._start
        if cut < 0 or cut > len(self._entries):
            raise ValueError(f"snapshot end {snapshot_id.offset} outside the log")
        if cut > 0 and self._entries[cut - 1].epoch != snapshot_id.epoch:
            raise ValueError("snapshot epoch does not match the log")
        replace_durably(self.dir / snapshot_name(snapshot_id), data)
        old = self._snap
        del self._entries[:cut]
        del self._pos[:cut]
        self._start = self._dstart = snapshot_id.offset
        self._snap = snapshot_id
        self._epochs = []
        for i, e in enumerate(self._entries):
            self._note_epoch(e.epoch, self._start + i)
        first = self._pos[0].segment if self._pos else None
        dropped = False
        if old is not None and old != snapshot_id:
            fsio.unlink(self.dir / snapshot_name(old))
            dropped = True
        for base in sorted(self._sizes):
            if (first is None and base < max(self._sizes)) or (first is not None and base < first):
                fsio.unlink(self.dir / _seg_name(base))
                del self._sizes[base]
                dropped = True
        if dropped:
            fsio.fsync_dir(self.dir)
        self._write_epoch_checkpoint()

    # ------------------------------------------------------------------ durability
    @property
    def dirty(self) -> bool:
        return bool(self._pending)

    def flush(self) -> None:
        """Make every buffered write durable: snapshot install, then truncation, then appends."""
        if not self._pending:
            return
        ops = self._pending
        installs = [i for i, (op, _) in enumerate(ops) if op == "install"]
        dend = self._dstart + len(self._pos)
        if installs:
            ops = ops[installs[-1] + 1 :]
            self._flush_install()
            keep = self._dstart
        else:
            keep = dend
        for op, arg in ops:
            if op == "truncate":
                keep = min(keep, cast(int, arg))
        if keep < self._dstart + len(self._pos):
            self._truncate_files(keep)
        self._write_entries(self._entries[keep - self._start :], keep)
        self._pending.clear()
        self._write_epoch_checkpoint()

    def _flush_install(self) -> None:
        """Replace the log by the installed snapshot, crash-safely: the snapshot is staged
        complete as `<name>.installing`, the segments go, then the stage is renamed into place.
        Recovery finishes a staged install, so old (maybe divergent) segments never reappear
        beside the new snapshot."""
        assert self._pending_snapshot is not None
        sid, data = self._pending_snapshot
        final = self.dir / snapshot_name(sid)
        staged = final.with_name(final.name + INSTALLING)
        replace_durably(staged, data)
        self._finish_install(staged)
        self._sizes.clear()
        self._pos = []
        self._dstart = sid.offset
        self._pending_snapshot = None

    def _finish_install(self, staged: Path) -> None:
        for name in os.listdir(self.dir):
            if name.endswith(".log") or parse_snapshot_name(name) is not None:
                fsio.unlink(self.dir / name)
        fsio.fsync_dir(self.dir)
        fsio.replace(staged, staged.with_name(staged.name[: -len(INSTALLING)]))
        fsio.fsync_dir(self.dir)

    def _truncate_files(self, offset: int) -> None:
        p = self._pos[offset - self._dstart]
        unlinked = False
        for base in sorted(self._sizes):
            if base > p.segment:
                fsio.unlink(self.dir / _seg_name(base))
                del self._sizes[base]
                unlinked = True
        self._cut(self.dir / _seg_name(p.segment), p.position)
        self._sizes[p.segment] = p.position
        if unlinked:
            fsio.fsync_dir(self.dir)
        del self._pos[offset - self._dstart :]

    def _write_entries(self, entries: list[Entry], offset: int) -> None:
        """Append to the last segment (a new one when it would pass segment_bytes), then fsync
        it, and the directory when a file was created."""
        if not entries:
            return
        now = int(time.time() * 1000)
        new_files = False
        fd = -1
        base = max(self._sizes) if self._sizes else -1
        try:
            for e in entries:
                batch = encode_entry(offset, e, now)
                size = self._sizes.get(base, 0)
                full = 0 < size and size + len(batch) > self.segment_bytes
                if base < 0 or full:
                    if fd >= 0:
                        fsio.fsync(fd)
                        fsio.close(fd)
                        fd = -1
                    base = offset
                    self._sizes[base] = 0
                    new_files = True
                if fd < 0:
                    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
                    fd = fsio.open_fd(self.dir / _seg_name(base), flags, 0o644)
                view = memoryview(batch)
                while view:
                    view = view[fsio.write(fd, view) :]
                self._pos.append(_Pos(base, self._sizes[base]))
                self._sizes[base] += len(batch)
                offset += 1
            fsio.fsync(fd)
        finally:
            if fd >= 0:
                fsio.close(fd)
        if new_files:
            fsio.fsync_dir(self.dir)

    def _write_epoch_checkpoint(self) -> None:
        if self._epochs != self._written_epochs:
            replace_durably(self.dir / LEADER_EPOCH_CHECKPOINT, encode_epoch_checkpoint(self._epochs))
            self._written_epochs = list(self._epochs)


__all__ = ["METADATA_PARTITION", "FileRaftLog", "ForeignLogError", "encode_entry"]
