"""Crash-consistency testing of the storage package (in the style of ALICE and CrashMonkey).

`FsRecorder` swaps a recording layer into `samsa.storage.fsio` (the module through which storage
changes the disk) while a workload runs: every file creation, write, truncation, rename, unlink,
mkdir, fsync and directory fsync under one root is logged in the order it happened, together with
the workload's own marks (e.g. "this record was acknowledged").

`crash_states` then builds the on-disk states a power loss at any point of that log could leave,
under this model of the file system:
- file data (writes, truncations) is durable once the file was fsynced; data written since then
  may be lost, partly applied (any subset of the writes, in order) or torn (a write cut short);
- directory entries (create, mkdir, rename, unlink) are durable once their directory was fsynced;
  those made since persist as a prefix of the directory's operations (journaled metadata keeps a
  directory's changes in order), each directory independently of the others.
Each state is materialized as real files for recovery to run on.
"""

from __future__ import annotations

import copy
import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from samsa.storage import fsio

Op = tuple[Any, ...]


class FsRecorder:
    """Records the storage package's file-system operations under `root` (a context manager)."""

    def __init__(self, root: Path, stall: Callable[[str], float] | None = None) -> None:
        """`stall(path)`: seconds an fsync of that file (relative to root) made outside the main
        thread waits first, so a test can make a background fsync finish late, as on a busy disk."""
        self.root = str(root.resolve())
        self.stall = stall
        self.ops: list[Op] = []
        self._lock = threading.RLock()
        self._saved: dict[str, Any] = {}
        self._next_ino = 0
        self._paths: dict[str, int] = {}  # volatile namespace: path -> inode
        self._fds: dict[int, int] = {}  # open fd -> inode

    # ---- helpers -------------------------------------------------------------------------
    def _rel(self, path: str | Path) -> str | None:
        p = os.path.abspath(os.fspath(path))
        if p == self.root:
            return ""
        if p.startswith(self.root + os.sep):
            return p[len(self.root) + 1:]
        return None

    def mark(self, *what: Any) -> None:
        """A workload event (e.g. an acknowledgement) at this point of the operation log."""
        with self._lock:
            self.ops.append(("mark", *what))

    # ---- the recording layer ---------------------------------------------------------------
    def _open_fd(self, path: Any, flags: int, mode: int = 0o777) -> int:
        with self._lock:
            rel = self._rel(path)
            existed = os.path.exists(path)
            fd = self._saved["open_fd"](path, flags, mode)
            if rel is None:
                return fd
            if not existed and flags & os.O_CREAT:
                ino = self._next_ino
                self._next_ino += 1
                self._paths[rel] = ino
                d, name = os.path.split(rel)
                self.ops.append(("creat", d, name, ino))
            ino = self._paths.get(rel, -1)
            if ino < 0:
                return fd  # a directory or a file from before recording: not modelled
            if existed and flags & os.O_TRUNC:
                self.ops.append(("trunc", ino, 0))
            self._fds[fd] = ino
            return fd

    def _write(self, fd: int, data: Any) -> int:
        with self._lock:
            n: int = self._saved["write"](fd, data)
            ino = self._fds.get(fd)
            if ino is not None:
                end = os.lseek(fd, 0, os.SEEK_CUR)  # O_APPEND writes leave the offset at the end
                self.ops.append(("write", ino, end - n, bytes(data[:n])))
            return n

    def _ftruncate(self, fd: int, size: int) -> None:
        with self._lock:
            self._saved["ftruncate"](fd, size)
            ino = self._fds.get(fd)
            if ino is not None:
                self.ops.append(("trunc", ino, size))

    def _fsync(self, fd: int) -> None:
        if self.stall is not None and threading.current_thread() is not threading.main_thread():
            with self._lock:
                ino = self._fds.get(fd)
                path = next((p for p, i in self._paths.items() if i == ino), "")
                pause = self.stall(path)
            time.sleep(pause)
        with self._lock:
            self._saved["fsync"](fd)
            ino = self._fds.get(fd)
            if ino is not None:
                self.ops.append(("fsync", ino))

    def _close(self, fd: int) -> None:
        with self._lock:
            self._fds.pop(fd, None)
            self._saved["close"](fd)

    def _rename(self, src: Any, dst: Any) -> None:
        with self._lock:
            self._saved["replace"](src, dst)
            rs, rd = self._rel(src), self._rel(dst)
            if rs is None or rd is None:
                return
            d, sname = os.path.split(rs)
            d2, dname = os.path.split(rd)
            assert d == d2, "renames across directories are not modelled"
            ino = self._paths.pop(rs, -1)
            if ino >= 0:
                self._paths[rd] = ino
            self.ops.append(("rename", d, sname, dname))

    def _unlink(self, path: Any) -> None:
        with self._lock:
            rel = self._rel(path)
            existed = os.path.exists(path)
            self._saved["unlink"](path)
            if rel is not None and existed:
                self._paths.pop(rel, None)
                d, name = os.path.split(rel)
                self.ops.append(("unlink", d, name))

    def _mkdir(self, path: Any) -> bool:
        with self._lock:
            made: bool = self._saved["mkdir"](path)
            rel = self._rel(path)
            if made and rel:
                d, name = os.path.split(rel)
                self.ops.append(("mkdir", d, name))
            return made

    def _fsync_dir(self, path: Any) -> None:
        with self._lock:
            self._saved["fsync_dir"](path)
            rel = self._rel(path)
            if rel is not None:
                self.ops.append(("fsyncdir", rel))

    def __enter__(self) -> FsRecorder:
        layer = {"open_fd": self._open_fd, "write": self._write, "ftruncate": self._ftruncate,
                 "fsync": self._fsync, "close": self._close, "rename": self._rename,
                 "replace": self._rename, "unlink": self._unlink, "mkdir": self._mkdir,
                 "fsync_dir": self._fsync_dir}
        for name, fn in layer.items():
            self._saved[name] = getattr(fsio, name)
            setattr(fsio, name, fn)
        return self

    def __exit__(self, *exc: object) -> None:
        for name, fn in self._saved.items():
            setattr(fsio, name, fn)


# ---- crash states ----------------------------------------------------------------------------
Entry = tuple[str, Any]  # ("f", inode) or ("d", relative path)


@dataclass
class Disk:
    """A file-system image: directory tables and file contents by inode."""

    dirs: dict[str, dict[str, Entry]] = field(default_factory=lambda: {"": {}})
    files: dict[int, bytearray] = field(default_factory=dict)

    def apply_dir(self, op: Op) -> None:
        kind, d = op[0], op[1]
        table = self.dirs.setdefault(d, {})
        if kind == "creat":
            table[op[2]] = ("f", op[3])
            self.files.setdefault(op[3], bytearray())
        elif kind == "mkdir":
            child = os.path.join(d, op[2])
            table[op[2]] = ("d", child)
            self.dirs.setdefault(child, {})
        elif kind == "rename":
            e = table.pop(op[2], None)
            if e is not None:
                table[op[3]] = e
        elif kind == "unlink":
            table.pop(op[2], None)

    def apply_data(self, op: Op, torn: int | None = None) -> None:
        buf = self.files.setdefault(op[1], bytearray())
        if op[0] == "trunc":
            del buf[op[2]:]
            buf.extend(bytes(op[2] - len(buf)))
            return
        pos, data = op[2], op[3] if torn is None else op[3][:torn]
        if pos > len(buf):
            buf.extend(bytes(pos - len(buf)))
        buf[pos:pos + len(data)] = data

    def materialize(self, target: Path, d: str = "") -> None:
        target.mkdir(parents=True, exist_ok=True)
        for name, (kind, ref) in self.dirs.get(d, {}).items():
            if kind == "d":
                self.materialize(target / name, ref)
            else:
                (target / name).write_bytes(self.files.get(ref, b""))


@dataclass
class CrashState:
    """One possible on-disk state after a power loss after `point` operations."""

    point: int
    variant: str
    disk: Disk
    marks: list[Op]  # the workload's marks made before the crash


class _Replay:
    """Walks the operation log keeping the durable image and what is not durable yet."""

    def __init__(self) -> None:
        self.durable = Disk()
        self.pending_data: dict[int, list[Op]] = {}
        self.pending_dir: dict[str, list[Op]] = {}
        self.marks: list[Op] = []

    def step(self, op: Op) -> None:
        kind = op[0]
        if kind in ("creat", "mkdir", "rename", "unlink"):
            self.pending_dir.setdefault(op[1], []).append(op)
        elif kind in ("write", "trunc"):
            self.pending_data.setdefault(op[1], []).append(op)
        elif kind == "fsync":
            for d in self.pending_data.pop(op[1], []):
                self.durable.apply_data(d)
        elif kind == "fsyncdir":
            for d in self.pending_dir.pop(op[1], []):
                self.durable.apply_dir(d)
        elif kind == "mark":
            self.marks.append(op)

    def state(self, rng: random.Random, point: int, variant: str) -> CrashState:
        """The durable image plus a random choice of what else reached the disk: "none" (only what
        was synced), "all" (everything, as after a clean stop), or "random"."""
        disk = copy.deepcopy(self.durable)
        for ops in self.pending_dir.values():
            n = {"none": 0, "all": len(ops)}.get(variant, rng.randint(0, len(ops)))
            for op in ops[:n]:
                disk.apply_dir(op)
        for ops in self.pending_data.values():
            if variant == "none":
                continue
            if variant == "all":
                for op in ops:
                    disk.apply_data(op)
            elif rng.random() < 0.5:  # a prefix of the writes, the next one torn
                n = rng.randint(0, len(ops))
                for op in ops[:n]:
                    disk.apply_data(op)
                if n < len(ops) and ops[n][0] == "write" and len(ops[n][3]) > 1:
                    disk.apply_data(ops[n], torn=rng.randint(1, len(ops[n][3]) - 1))
            else:  # any subset, in order (write-back reorders pages)
                for op in ops:
                    if rng.random() < 0.5:
                        disk.apply_data(op)
        return CrashState(point, variant, disk, list(self.marks))


def crash_states(ops: list[Op], count: int, seed: int) -> Iterator[CrashState]:
    """About `count` crash states of the log (seeded): at crash points just after workload marks
    (where an acknowledgement has just been given: three in four points) and at random points, the
    "none" variant and random ones at each (plus "all" when there is room)."""
    rng = random.Random(seed)
    per_point = max(2, count // (len(ops) + 1))
    n_points = min(len(ops) + 1, max(1, count // per_point))
    after_marks = [i + 1 for i, op in enumerate(ops) if op[0] == "mark"]
    chosen = set(rng.sample(after_marks, min(len(after_marks), n_points * 3 // 4)))
    others = [i for i in range(len(ops) + 1) if i not in chosen]
    chosen.update(rng.sample(others, min(len(others), n_points - len(chosen))))
    replay = _Replay()
    done = 0
    for p in sorted(chosen):
        while done < p:
            replay.step(ops[done])
            done += 1
        for i in range(per_point):
            variant = "none" if i == 0 else ("all" if i == 1 and per_point > 2 else "random")
            yield replay.state(rng, p, variant)


class NoSync:
    """Recovery checks run on throw-away copies: skipping their fsyncs (a context manager) keeps
    hundreds of states fast; what is checked does not depend on them."""

    def __enter__(self) -> NoSync:
        self._saved = {name: getattr(fsio, name) for name in ("fsync", "fsync_dir")}
        for name in self._saved:
            setattr(fsio, name, _no_sync)
        return self

    def __exit__(self, *exc: object) -> None:
        for name, fn in self._saved.items():
            setattr(fsio, name, fn)


def _no_sync(_target: Any) -> None:
    return None
