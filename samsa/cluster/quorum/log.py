"""The replicated log as the Raft core sees it, and an in-memory implementation with fsync semantics.

Writes (`append`, `truncate_to`, `install_snapshot`) may be buffered; they are durable only after
`flush()`. The core never flushes itself: its `Output.flush_log` tells the driver to, before any
message of that output leaves. `MemoryLog.crash()` drops whatever was not flushed, which is how the
simulator models `kill -9`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, cast


@dataclass(frozen=True, slots=True)
class Entry:
    """One record of `__cluster_metadata`: its leader epoch and opaque bytes.

    `control` marks Kafka's control records (the LeaderChange record a new leader writes first).
    """

    epoch: int
    data: bytes
    control: bool = False


@dataclass(frozen=True, slots=True, order=True)
class OffsetAndEpoch:
    """An end offset (exclusive) and the epoch of the last entry below it; also a SnapshotId."""

    offset: int
    epoch: int


class RaftLog(Protocol):
    """What the Raft core reads and writes. Offsets below `start_offset` live in the snapshot."""

    @property
    def start_offset(self) -> int: ...
    @property
    def end_offset(self) -> int: ...
    @property
    def last_epoch(self) -> int: ...
    @property
    def snapshot_id(self) -> OffsetAndEpoch | None: ...
    def read(self, offset: int, max_entries: int) -> list[Entry]: ...
    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch: ...
    def read_snapshot(self, snapshot_id: OffsetAndEpoch) -> bytes | None: ...
    def append(self, entries: Sequence[Entry]) -> None: ...
    def truncate_to(self, offset: int) -> None: ...
    def install_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None: ...


@dataclass(slots=True)
class _Image:
    start: int
    entries: list[Entry]
    snapshot: tuple[OffsetAndEpoch, bytes] | None

    def copy(self) -> _Image:
        return _Image(self.start, list(self.entries), self.snapshot)


class MemoryLog:
    """A `RaftLog` in memory. Writes go to a volatile image; `flush()` makes them durable.

    Pending writes are kept as a list of operations and replayed on the durable image at flush,
    so a flush costs what was written, not the log's size.
    """

    def __init__(self) -> None:
        self._live = _Image(0, [], None)
        self._durable = _Image(0, [], None)
        self._pending: list[tuple[str, object]] = []

    # ---- reads
    @property
    def start_offset(self) -> int:
        return self._live.start

    @property
    def end_offset(self) -> int:
        return self._live.start + len(self._live.entries)

    @property
    def last_epoch(self) -> int:
        if self._live.entries:
            return self._live.entries[-1].epoch
        return self._live.snapshot[0].epoch if self._live.snapshot else 0

    @property
    def snapshot_id(self) -> OffsetAndEpoch | None:
        return self._live.snapshot[0] if self._live.snapshot else None

    def entry(self, offset: int) -> Entry:
        return self._live.entries[offset - self._live.start]

    def read(self, offset: int, max_entries: int) -> list[Entry]:
        i = offset - self._live.start
        if i < 0:
            raise ValueError(f"offset {offset} is below the log start offset {self._live.start}")
        return self._live.entries[i : i + max_entries]

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """The largest epoch <= `epoch` in the log and the end offset of its entries.

        Below the snapshot the answer is the snapshot id (the caller sends SnapshotId instead).
        """
        entries = self._live.entries
        # scan back: epochs only grow along the log
        i = len(entries)
        while i > 0 and entries[i - 1].epoch > epoch:
            i -= 1
        if i > 0:
            return OffsetAndEpoch(self._live.start + i, entries[i - 1].epoch)
        snap = self._live.snapshot
        if snap is not None:
            return snap[0]
        return OffsetAndEpoch(0, 0)

    def read_snapshot(self, snapshot_id: OffsetAndEpoch) -> bytes | None:
        snap = self._live.snapshot
        return snap[1] if snap is not None and snap[0] == snapshot_id else None

    # ---- writes (volatile until flush)
    def append(self, entries: Sequence[Entry]) -> None:
        if not entries:
            return
        if entries[0].epoch < self.last_epoch:
            raise ValueError(f"epoch {entries[0].epoch} after epoch {self.last_epoch}")
        self._live.entries.extend(entries)
        self._pending.append(("append", list(entries)))

    def truncate_to(self, offset: int) -> None:
        if offset < self._live.start:
            raise ValueError(f"cannot truncate to {offset}, below log start {self._live.start}")
        if offset >= self.end_offset:
            return
        del self._live.entries[offset - self._live.start :]
        self._pending.append(("truncate", offset))

    def install_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        """Replace the whole log by a snapshot received from the leader (FetchSnapshot)."""
        self._live = _Image(snapshot_id.offset, [], (snapshot_id, data))
        self._pending.append(("install", (snapshot_id, data)))

    def take_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        """The state machine's own snapshot up to `snapshot_id.offset` (committed entries only).

        Durable at once (a snapshot file is written and fsynced before it is used), and the log
        prefix it covers is deleted.
        """
        self.flush()
        for img in (self._live, self._durable):
            cut = snapshot_id.offset - img.start
            if cut < 0 or cut > len(img.entries):
                raise ValueError(f"snapshot end {snapshot_id.offset} outside the log")
            if cut > 0 and img.entries[cut - 1].epoch != snapshot_id.epoch:
                raise ValueError("snapshot epoch does not match the log")
            del img.entries[:cut]
            img.start = snapshot_id.offset
            img.snapshot = (snapshot_id, data)

    # ---- durability
    @property
    def dirty(self) -> bool:
        return bool(self._pending)

    def flush(self) -> None:
        d = self._durable
        for op, arg in self._pending:
            if op == "append":
                d.entries.extend(cast(list[Entry], arg))
            elif op == "truncate":
                del d.entries[cast(int, arg) - d.start :]
            else:
                sid, data = cast(tuple[OffsetAndEpoch, bytes], arg)
                self._durable = d = _Image(sid.offset, [], (sid, data))
        self._pending.clear()

    def crash(self) -> None:
        """Lose every write that was not flushed (`kill -9`)."""
        self._pending.clear()
        self._live = self._durable.copy()
