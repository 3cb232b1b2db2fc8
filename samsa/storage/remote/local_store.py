"""The local-directory remote store (the embedded default): one directory per partition, one
file per segment part, written to a temporary name, fsynced and renamed, so a crash leaves whole
files or temporary ones (which listing reports and deleting removes).

Layout: `<dir>/<topic>-<partition>-<topic id>/<start offset>-<segment id>.<part>`, with parts
`log`, `index`, `timeindex`, `snapshot`, `txnindex`, `leader-epoch-checkpoint` (as Kafka's
LocalTieredStorage lays out a partition). Configured by `rsm.config.dir`; by default a directory
`remote-storage` beside the first log directory. For a cluster every broker must name the same
directory (a shared file system): the remote tier is shared.
"""

from __future__ import annotations

import errno
import os
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path

from .. import fsio
from .rsm import (
    IndexType,
    LogSegmentData,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteObject,
    RemoteResourceNotFound,
    RemoteStorageError,
    TopicIdPartition,
)

LOG_PART = "log"
TMP = ".tmp-"
_CHUNK = 8 << 20


def partition_dir_name(tp: TopicIdPartition) -> str:
    return f"{tp.topic}-{tp.partition}-{tp.topic_id}"


def parse_partition_dir(name: str) -> TopicIdPartition | None:
    """Inverse of partition_dir_name (topic names may hold '-'; the uuid has a fixed length)."""
    if len(name) < 38 or name[-37] != "-":
        return None
    try:
        topic_id = uuid.UUID(name[-36:])
    except ValueError:
        return None
    topic, sep, part = name[:-37].rpartition("-")
    if not sep or not part.isdigit():
        return None
    return TopicIdPartition(topic_id, topic, int(part))


class LocalDirectoryRemoteStorageManager:
    """RemoteStorageManager over a directory (see the module docstring)."""

    def __init__(self) -> None:
        self.root = Path("remote-storage")
        # tests: called with a step name inside copy/delete (a simulated crash or failure)
        self.hook: object | None = None

    def configure(self, configs: Mapping[str, str]) -> None:
        d = configs.get("dir")
        if not d:
            first = (configs.get("log.dirs") or "./samsa-data").split(",")[0]
            d = str(Path(first).resolve().parent / "remote-storage")
        self.root = Path(d)
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise RemoteStorageError(f"remote store directory {self.root}: {e}") from e

    # ---- names -------------------------------------------------------------------------
    def _pdir(self, tp: TopicIdPartition) -> Path:
        return self.root / partition_dir_name(tp)

    def _path(self, meta: RemoteLogSegmentMetadata, part: str) -> Path:
        return self._pdir(meta.tp) / f"{meta.start_offset:020d}-{meta.id.hex}.{part}"

    # ---- RemoteStorageManager ----------------------------------------------------------
    def copy_log_segment_data(self, meta: RemoteLogSegmentMetadata,
                              data: LogSegmentData) -> bytes | None:
        try:
            d = self._pdir(meta.tp)
            made = fsio.makedirs(d)
            parts: list[tuple[str, bytes | Path]] = []
            for t in IndexType:
                b = data.part(t)
                if b is not None:
                    parts.append((t.value, b))
            parts.append((LOG_PART, data.log_segment))  # the log last: the largest
            for part, src in parts:
                self._write(self._path(meta, part), src)
            fsio.fsync_dir(d)
            for m in made:
                fsio.fsync_dir(m.parent)
        except OSError as e:
            raise RemoteStorageError(f"copy of segment {meta.id} failed: {e}") from e
        return None

    def _write(self, dst: Path, src: bytes | Path) -> None:
        tmp = dst.with_name(dst.name + TMP + uuid.uuid4().hex[:8])
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            if isinstance(src, bytes):
                _write_all(fd, src)
            else:
                with open(src, "rb") as f:
                    size = os.fstat(f.fileno()).st_size
                    off = 0
                    while off < size:
                        n = os.sendfile(fd, f.fileno(), off, min(_CHUNK, size - off)) \
                            if hasattr(os, "sendfile") else _copy_chunk(f, fd, off, size)
                        if n <= 0:
                            raise OSError(errno.EIO, f"short copy of {src}")
                        off += n
                    self._step("log-copying")
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        os.close(fd)
        os.replace(tmp, dst)

    def _step(self, name: str) -> None:
        if callable(self.hook):
            self.hook(name)

    def fetch_log_segment(self, meta: RemoteLogSegmentMetadata, start_position: int,
                          end_position: int | None = None) -> bytes:
        path = self._path(meta, LOG_PART)
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            raise RemoteResourceNotFound(f"segment {meta.id} is not in the store") from None
        except OSError as e:
            raise RemoteStorageError(f"reading segment {meta.id}: {e}") from e
        try:
            size = os.fstat(fd).st_size
            end = size if end_position is None else min(end_position + 1, size)
            n = max(end - start_position, 0)
            out = bytearray()
            pos = start_position
            while len(out) < n:
                chunk = os.pread(fd, min(_CHUNK, n - len(out)), pos)
                if not chunk:
                    break
                out += chunk
                pos += len(chunk)
            return bytes(out)
        except OSError as e:
            raise RemoteStorageError(f"reading segment {meta.id}: {e}") from e
        finally:
            os.close(fd)

    def fetch_index(self, meta: RemoteLogSegmentMetadata, index_type: IndexType) -> bytes:
        try:
            return self._path(meta, index_type.value).read_bytes()
        except FileNotFoundError:
            raise RemoteResourceNotFound(
                f"segment {meta.id} has no {index_type.name} index in the store") from None
        except OSError as e:
            raise RemoteStorageError(f"reading index of segment {meta.id}: {e}") from e

    def delete_log_segment_data(self, meta: RemoteLogSegmentMetadata) -> None:
        d = self._pdir(meta.tp)
        try:
            names = [p for p in d.iterdir() if f"-{meta.id.hex}." in p.name]
        except FileNotFoundError:
            return
        except OSError as e:
            raise RemoteStorageError(f"deleting segment {meta.id}: {e}") from e
        # the log first: a crash part-way leaves no readable log without its indexes' owner
        names.sort(key=lambda p: (not p.name.endswith("." + LOG_PART), p.name))
        try:
            for i, p in enumerate(names):
                try:
                    os.unlink(p)
                except FileNotFoundError:
                    pass
                if i == 0:
                    self._step("delete-log-removed")
            fsio.fsync_dir(d)
        except OSError as e:
            raise RemoteStorageError(f"deleting segment {meta.id}: {e}") from e
        try:
            d.rmdir()  # the last segment of the partition: the directory goes too
        except OSError:
            pass

    def list_segments(self, tp: TopicIdPartition | None = None) -> Iterable[RemoteObject]:
        try:
            dirs = [self._pdir(tp)] if tp is not None else [
                p for p in self.root.iterdir() if p.is_dir()]
        except OSError as e:
            raise RemoteStorageError(f"listing {self.root}: {e}") from e
        out: list[RemoteObject] = []
        for d in dirs:
            ptp = tp if tp is not None else parse_partition_dir(d.name)
            if ptp is None:
                continue
            found: dict[str, list[tuple[str, int, float]]] = {}
            try:
                entries = list(d.iterdir())
            except FileNotFoundError:
                continue
            for p in entries:
                stem = p.name.split(".", 1)[0]
                _start, sep, hexid = stem.partition("-")
                if not sep or len(hexid) != 32:
                    continue
                try:
                    st = p.stat()
                except FileNotFoundError:
                    continue
                found.setdefault(hexid, []).append((p.name, st.st_size, st.st_mtime))
            for hexid, files in found.items():
                try:
                    sid = uuid.UUID(hex=hexid)
                except ValueError:
                    continue
                out.append(RemoteObject(RemoteLogSegmentId(ptp, sid),
                                        sum(f[1] for f in files),
                                        int(max(f[2] for f in files) * 1000),
                                        tuple(sorted(f[0] for f in files))))
        return out

    def close(self) -> None:
        pass


def _write_all(fd: int, data: bytes) -> None:
    mv = memoryview(data)
    while mv:
        n = os.write(fd, mv)
        mv = mv[n:]


def _copy_chunk(f: object, fd: int, off: int, size: int) -> int:
    src = f.fileno()  # type: ignore[attr-defined]
    chunk = os.pread(src, min(_CHUNK, size - off), off)
    _write_all(fd, chunk)
    return len(chunk)
