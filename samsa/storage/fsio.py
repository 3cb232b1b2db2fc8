"""Every call by which the storage package changes the disk, in one module.

The names below are looked up on this module at call time (`fsio.write(...)`), so a crash-consistency
test can swap in a recording layer (samsa.testing.crashfs) without any cost when it is off: by
default they are the `os` functions themselves. Reads (pread, stat, listing) are not routed here.
"""

from __future__ import annotations

import os
from pathlib import Path

open_fd = os.open
write = os.write
ftruncate = os.ftruncate
fsync = os.fsync
close = os.close
rename = os.rename
replace = os.replace


def _unlink(path: str | Path) -> None:
    """Remove a file; a missing one is not an error (every caller tolerates that)."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _mkdir(path: str | Path) -> bool:
    """Create a directory (not its parents); True when it was created."""
    try:
        os.mkdir(path)
        return True
    except FileExistsError:
        return False


def _fsync_dir(path: str | Path) -> None:
    """Make the directory's entries (created, renamed, removed names) durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


unlink = _unlink
mkdir = _mkdir
fsync_dir = _fsync_dir


def write_file(path: str | Path, data: bytes, sync: bool) -> None:
    """Replace the contents of `path` (created if needed); fsynced when `sync`."""
    fd = open_fd(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[write(fd, view):]
        if sync:
            fsync(fd)
    finally:
        close(fd)


def replace_file(path: Path, data: bytes, sync: bool) -> None:
    """Atomically give `path` new contents: a temporary file, then a rename over it. With `sync`
    the temporary is fsynced before the rename, so the name never points at unwritten bytes (the
    rename itself becomes durable with the directory's next fsync)."""
    tmp = path.with_name(path.name + ".tmp")
    write_file(tmp, data, sync)
    replace(tmp, path)


def append_file(path: str | Path, data: bytes) -> None:
    fd = open_fd(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[write(fd, view):]
    finally:
        close(fd)


def fsync_path(path: str | Path) -> None:
    """fsync a file by name (one not kept open); a missing file is nothing to sync."""
    try:
        fd = open_fd(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        fsync(fd)
    finally:
        close(fd)


def makedirs(path: Path) -> list[Path]:
    """mkdir -p; returns the directories created, outermost first (their parents need a dir fsync)."""
    made: list[Path] = []
    missing = []
    p = path
    while not p.exists():
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        if mkdir(d):
            made.append(d)
    return made
