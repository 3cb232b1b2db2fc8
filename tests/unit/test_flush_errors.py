"""A failed fsync must never be followed by an acknowledgement: after a write-back error Linux
reports EIO once and marks the pages clean, so a retried fsync "succeeds" on data that may be gone.
A segment closed (retention, DeleteRecords, compaction) while a worker thread fsyncs it keeps its
descriptors until the fsync is done."""

from __future__ import annotations

import asyncio
import errno
import os
import threading
import time
from pathlib import Path

import pytest

from samsa.protocol.records import encode_batch
from samsa.storage import fsio
from samsa.storage.log import LogConfig, PartitionLog


def _batch(i: int) -> bytearray:
    now = int(time.time() * 1000)
    return bytearray(encode_batch([(None, f"v{i}".encode() * 50, [], now)]))


def test_a_waiter_on_a_failed_fsync_is_not_acknowledged(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    lg = PartitionLog.open(tmp_path / "t-0", "t", 0, LogConfig(flush_messages=1), clean=True)
    real = os.fsync
    failed = []

    def eio_once(fd: int) -> None:
        if not failed:
            failed.append(fd)
            time.sleep(0.05)  # the second producer's flush joins this one meanwhile
            raise OSError(errno.EIO, "write-back error")
        real(fd)

    monkeypatch.setattr(fsio, "fsync", eio_once)

    async def main() -> list[BaseException | None]:
        lg.append(_batch(0))
        first = asyncio.ensure_future(lg.flush())
        await asyncio.sleep(0)
        lg.append(_batch(1))
        second = asyncio.ensure_future(lg.flush())
        out: list[BaseException | None] = []
        for t in (first, second):
            try:
                await t
                out.append(None)
            except OSError as e:
                out.append(e)
        # and any later flush: the retried fsync would report success on lost pages
        try:
            lg.append(_batch(2))
            await lg.flush()
            out.append(None)
        except OSError as e:
            out.append(e)
        return out

    results = asyncio.run(main())
    assert failed
    assert all(isinstance(r, OSError) for r in results), results
    lg.close(clean=False)


def test_a_failed_rolled_segment_fsync_fails_later_flushes(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    lg = PartitionLog.open(tmp_path / "t-0", "t", 0, LogConfig(), clean=True)
    real = os.fsync
    failed = []

    def eio_once(fd: int) -> None:
        if not failed:
            failed.append(fd)
            raise OSError(errno.EIO, "write-back error")
        real(fd)

    async def main() -> None:
        lg.append(_batch(0))
        monkeypatch.setattr(fsio, "fsync", eio_once)
        lg.roll()  # the rolled segment's fsync fails in the background
        for _ in range(100):
            if failed:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        lg.append(_batch(1))
        with pytest.raises(OSError):
            await lg.flush()

    asyncio.run(main())
    assert failed
    assert lg.recovery_point == 0  # never moved past the segment that failed to sync
    lg.close(clean=False)


def test_close_during_a_flush_keeps_the_index_descriptors(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Retention deletes a just-rolled segment while its background fsync runs: the fsync of its
    index files must not hit closed descriptors (EBADF) or ones reused for other files."""
    lg = PartitionLog.open(tmp_path / "t-0", "t", 0, LogConfig(), clean=True)
    lg.append(_batch(0))
    seg = lg.active
    real = os.fsync
    in_fsync = threading.Event()
    go_on = threading.Event()
    synced: list[int] = []

    def slow_fsync(fd: int) -> None:
        synced.append(fd)
        if len(synced) == 2:  # the .index fsync: both index descriptors were read already
            in_fsync.set()
            go_on.wait(5)
        real(fd)

    monkeypatch.setattr(fsio, "fsync", slow_fsync)
    idx_fds = {seg._idx_fd, seg._tidx_fd}
    seg.acquire()  # what log.flush / roll do before handing the segment to a worker
    err: list[BaseException] = []

    def worker() -> None:
        try:
            seg.flush()
        except BaseException as e:  # noqa: BLE001 - reported below
            err.append(e)

    t = threading.Thread(target=worker)
    t.start()
    assert in_fsync.wait(5)  # the worker is in the .index fsync
    seg.delete()  # retention / DeleteRecords on the event loop
    # a file opened meanwhile may get a just-closed descriptor number
    others = [os.open(tmp_path / f"other{i}", os.O_RDWR | os.O_CREAT) for i in range(4)]
    go_on.set()
    t.join(5)
    seg.release()
    for fd in others:
        os.close(fd)
    assert not err, err
    assert not (set(synced) & set(others)), "fsynced another file's descriptor"
    assert synced[1:] == sorted(idx_fds)
    lg.close(clean=False)


def test_no_clean_shutdown_marker_after_a_failed_fsync(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The marker would let the next start trust the indexes and skip the scan of data whose
    write-back failed."""
    from samsa.storage.manager import CLEAN_MARKER, LogManager

    d = tmp_path / "logs"
    mgr = LogManager([d])
    mgr.detect_clean()
    lg = PartitionLog.open(d / "t-0", "t", 0, LogConfig(flush_messages=1), clean=True)
    mgr.logs[("t", 0)] = lg

    def eio(fd: int) -> None:
        raise OSError(errno.EIO, "write-back error")

    async def main() -> None:
        lg.append(_batch(0))
        monkeypatch.setattr(fsio, "fsync", eio)
        with pytest.raises(OSError):
            await lg.flush()
        monkeypatch.undo()

    asyncio.run(main())
    mgr.shutdown()
    assert not (d / CLEAN_MARKER).exists()
    assert not LogManager([d]).detect_clean()


def test_emfile_pinning_a_segment_loses_nothing(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Reopening an idle segment for a flush runs out of descriptors: the flush fails, but the
    segments already pinned are released and the directories still to sync are kept for the next
    flush (else an acknowledged record could sit in a file whose name a power loss removes)."""
    d = tmp_path / "t-0"
    lg = PartitionLog.open(d, "t", 0, LogConfig(flush_messages=1), clean=True)
    first = lg.active
    real_open = os.open
    dirs_synced: list[Path] = []

    async def main() -> None:
        lg.append(_batch(0))
        await lg.flush()
        lg.roll()  # a new segment file: its directory entry must be synced by the next flush
        lg.append(_batch(1))
        await asyncio.sleep(0.1)  # the rolled segment's background fsync
        lg.flushed_offset = 0  # as if that fsync were still running: the flush takes both
        lg.active._close_files()  # idle, closed by the LRU

        def emfile(path: str | Path, flags: int, mode: int = 0o777) -> int:
            if str(path).endswith(".log"):
                raise OSError(errno.EMFILE, "Too many open files")
            return real_open(path, flags, mode)

        monkeypatch.setattr(fsio, "open_fd", emfile)
        with pytest.raises(OSError):
            await lg.flush()
        monkeypatch.undo()
        assert first._refs == 0, "a segment stayed pinned"
        monkeypatch.setattr(fsio, "fsync_dir", lambda p: dirs_synced.append(Path(p)))
        await lg.flush()

    asyncio.run(main())
    assert d in dirs_synced
    assert lg.flush_error is None  # nothing was fsynced and failed: a retry is honest
    lg.close(clean=False)
