"""The leader epoch cache: where each leader epoch's records start in a partition's log.

Followers use it to find where their log diverges from a new leader's (the leader answers "epoch E
ends at offset O", the follower truncates to O): Kafka's LeaderEpochFileCache semantics, kept in
Kafka's `leader-epoch-checkpoint` text format so a partition directory reads the same to Kafka's
tools: a version line `0`, an entry count line, then one `epoch startOffset` line per entry.
"""

from __future__ import annotations

import logging
from bisect import bisect_right
from pathlib import Path

from . import fsio

FILE_NAME = "leader-epoch-checkpoint"
VERSION = 0
UNDEFINED = (-1, -1)  # OffsetsForLeaderEpoch's UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
log = logging.getLogger("samsa.storage")


class MalformedCheckpoint(ValueError):
    pass


def parse(text: str) -> list[tuple[int, int]]:
    """Entries of a checkpoint file's text; raises MalformedCheckpoint on anything off-format."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    try:
        if len(lines) < 2 or int(lines[0]) != VERSION:
            raise MalformedCheckpoint(f"expected version {VERSION}")
        count = int(lines[1])
        if count != len(lines) - 2:
            raise MalformedCheckpoint(f"{count} entries announced, {len(lines) - 2} present")
        out = []
        for line in lines[2:]:
            parts = line.split(" ")
            if len(parts) != 2:
                raise MalformedCheckpoint(f"bad entry line {line!r}")
            out.append((int(parts[0]), int(parts[1])))
    except ValueError as e:  # int() of a non-number
        raise MalformedCheckpoint(str(e)) from e
    for (e0, o0), (e1, o1) in zip(out, out[1:], strict=False):
        if e1 <= e0 or o1 < o0:
            raise MalformedCheckpoint("entries not increasing")
    if any(e < 0 or o < 0 for e, o in out):
        raise MalformedCheckpoint("negative entry")
    return out


def render(entries: list[tuple[int, int]]) -> bytes:
    body = "".join(f"{e} {o}\n" for e, o in entries)
    return f"{VERSION}\n{len(entries)}\n{body}".encode()


class LeaderEpochCache:
    """(epoch, start offset) entries, both increasing. Every change is written through (temp file,
    fsync, rename, directory fsync): changes are rare (a new leader epoch, a truncation) and a
    follower must not come back from a crash with an epoch history its log does not have."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: list[tuple[int, int]] = []
        # the file was unreadable: the owner rebuilds the entries from its batch headers
        self.needs_rebuild = False
        try:
            text = path.read_text()
        except FileNotFoundError:
            return
        except (OSError, UnicodeDecodeError) as e:
            log.warning("%s: unreadable (%s); rebuilding it from the log", path, e)
            self.needs_rebuild = True
            return
        try:
            self.entries = parse(text)
        except MalformedCheckpoint as e:
            log.warning("%s: malformed (%s); rebuilding it from the log", path, e)
            self.needs_rebuild = True

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else -1

    @property
    def earliest(self) -> tuple[int, int] | None:
        return self.entries[0] if self.entries else None

    def _write(self) -> None:
        fsio.replace_file(self.path, render(self.entries), sync=True)
        fsio.fsync_dir(self.path.parent)

    def _assign(self, epoch: int, start_offset: int) -> bool:
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid leader epoch entry ({epoch}, {start_offset})")
        if self.entries:
            last_epoch, last_start = self.entries[-1]
            if epoch == last_epoch and start_offset >= last_start:
                return False
        # entries that would break monotonicity go: a later-or-equal epoch, or a start at or
        # after the new one (Kafka logs this as a truncation of conflicting entries)
        removed = []
        while self.entries and (self.entries[-1][0] >= epoch or self.entries[-1][1] >= start_offset):
            removed.append(self.entries.pop())
        if len(removed) > 1 or (removed and removed[0][1] != start_offset):
            log.warning("%s: new epoch entry (%d, %d) removed conflicting entries %s", self.path,
                        epoch, start_offset, removed[::-1])
        self.entries.append((epoch, start_offset))
        return True

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that `epoch` starts at `start_offset`. A no-op for the latest epoch at or after its
        start; otherwise later conflicting entries are dropped first (Kafka's assign). If the
        write fails the entries stay as they were (the caller's append fails with it, and a retry
        writes the entry again)."""
        before = list(self.entries)
        if self._assign(epoch, start_offset):
            try:
                self._write()
            except BaseException:
                self.entries = before
                raise

    def end_offset_for(self, epoch: int, log_end: int) -> tuple[int, int]:
        """Kafka's endOffsetFor: (the largest known epoch <= `epoch`, the start offset of the first
        epoch after `epoch`, or `log_end` when `epoch` is the latest). UNDEFINED (-1, -1) for epoch -1
        or an epoch above every known one. An epoch below every known one answers (epoch, start of
        the first known): the data before it is gone, the follower starts there."""
        if epoch == -1 or not self.entries:
            return UNDEFINED
        if epoch == self.entries[-1][0]:
            return epoch, log_end
        i = bisect_right(self.entries, (epoch, 2**63))  # first entry with epoch > requested
        if i == len(self.entries):
            return UNDEFINED
        higher_start = self.entries[i][1]
        if i == 0:
            return epoch, higher_start
        return self.entries[i - 1][0], higher_start

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch the record at `offset` was written in (-1 if unknown)."""
        found = -1
        for e, start in self.entries:
            if start > offset:
                break
            found = e
        return found

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or after `end_offset` (the log was truncated there)."""
        if end_offset < 0 or not self.entries or self.entries[-1][1] < end_offset:
            return
        while self.entries and self.entries[-1][1] >= end_offset:
            self.entries.pop()
        self._write()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at `start_offset`: entries starting at or before it collapse into one,
        the latest of them, moved to `start_offset` (an entry at exactly start_offset stays)."""
        n = 0
        while n < len(self.entries) and self.entries[n][1] <= start_offset:
            n += 1
        if n == 0:
            return
        new = [(self.entries[n - 1][0], start_offset), *self.entries[n:]]
        if new != self.entries:
            self.entries = new
            self._write()

    def clear(self) -> None:
        if self.entries or self.needs_rebuild or self.path.exists():
            self.entries = []
            self.needs_rebuild = False
            self._write()

    def rebuild(self, pairs: list[tuple[int, int]]) -> None:
        """Replace the entries with those implied by the log's batches, (epoch, base offset) in log
        order (batches with epoch -1 left out), and write them."""
        self.entries = []
        for epoch, base in pairs:
            if epoch >= 0:
                self._assign(epoch, base)
        self.needs_rebuild = False
        self._write()
