"""An append that fails (ENOSPC short write, EMFILE reopening an idle segment's index files, EIO
writing an index entry) is not acknowledged and must leave the log as if it had not happened, or
with the batch whole and accounted: never bytes in the file that the offsets do not know about (a
later batch would be read from the wrong position, or cut by recovery although acknowledged)."""

from __future__ import annotations

import asyncio
import errno
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from samsa.protocol.records import decode_batch, encode_batch
from samsa.storage import fsio
from samsa.storage.log import LogConfig, PartitionLog


def _batch(i: int) -> bytearray:
    now = int(time.time() * 1000)
    return bytearray(encode_batch([(f"k{i}".encode(), f"v{i}".encode() * 50, [], now)]))


def _values(lg: PartitionLog) -> list[tuple[int, bytes]]:
    out = []
    offset = lg.log_start_offset
    while offset < lg.end_offset:
        data = lg.read(offset, 1 << 20)
        recs = decode_batch(data)
        assert recs, f"nothing readable at {offset}"
        out += [(r.offset, r.value) for r in recs]
        offset = recs[-1].offset + 1
    return out


def _check_after_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                         fail: Callable[[PartitionLog], None], config: LogConfig,
                         refused: bool = True, clean: bool = False) -> None:
    d = tmp_path / "t-0"
    lg = PartitionLog.open(d, "t", 0, config, clean=True)
    lg.append(_batch(0))
    fail(lg)
    if refused:
        with pytest.raises(OSError):
            lg.append(_batch(1))
    else:  # the batch is whole in the log: it stands
        b1, _ = lg.append(_batch(1))
    monkeypatch.undo()
    b2, _ = lg.append(_batch(2))
    b3, _ = lg.append(_batch(3))
    asyncio.run(lg.flush())  # flush.messages=1: b2 and b3 are acknowledged as durable
    got = _values(lg)
    assert [o for o, _ in got] == sorted({o for o, _ in got}), got  # no offset twice
    assert (b3, b"v3" * 50) in got and (b2, b"v2" * 50) in got
    if not refused:
        assert (b1, b"v1" * 50) in got
    lg.close(clean=clean)  # clean=False: kill -9, the next start recovers
    lg = PartitionLog.open(d, "t", 0, config, clean=clean)
    got = _values(lg)
    assert (b2, b"v2" * 50) in got and (b3, b"v3" * 50) in got, got
    lg.close()


def test_short_write_is_undone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(lg: PartitionLog) -> None:
        def short(fd: int, data: bytes) -> int:  # the disk fills up half-way through the batch
            return os.write(fd, bytes(data[: len(data) // 2]))
        monkeypatch.setattr(fsio, "write", short)

    _check_after_failure(tmp_path, monkeypatch, fail, LogConfig(flush_messages=1))


def test_emfile_reopening_index_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The segment's files were closed while idle; reopening its index files runs out of
    descriptors after the log file itself was reopened."""
    def fail(lg: PartitionLog) -> None:
        lg.active._close_files()
        real = os.open

        def emfile(path: str | Path, flags: int, mode: int = 0o777) -> int:
            if str(path).endswith("index"):
                raise OSError(errno.EMFILE, "Too many open files")
            return real(path, flags, mode)
        monkeypatch.setattr(fsio, "open_fd", emfile)

    # every batch gets an index entry
    _check_after_failure(tmp_path, monkeypatch, fail, LogConfig(flush_messages=1, index_interval=1))


@pytest.mark.parametrize("clean", [False, True])
def test_eio_writing_an_index_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    clean: bool) -> None:
    """The batch stands (it is whole); the index files go, and a start after a clean shutdown
    rebuilds them instead of trusting files that miss entries."""
    def fail(lg: PartitionLog) -> None:
        real = os.write
        log_fd = lg.active.fd

        def eio(fd: int, data: bytes) -> int:
            if fd != log_fd:
                raise OSError(errno.EIO, "index write failed")
            return real(fd, data)
        monkeypatch.setattr(fsio, "write", eio)

    _check_after_failure(tmp_path, monkeypatch, fail, LogConfig(flush_messages=1, index_interval=1),
                         refused=False, clean=clean)


def test_failed_snapshot_on_roll_does_not_stall_the_recovery_point(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The producer-state snapshot written at a roll fails (ENOSPC): the rolled segment still gets
    its background fsync, so the recovery point (and the cleaner's bound, the flushed offset)
    keeps moving; before, neither ever passed that segment again."""
    lg = PartitionLog.open(tmp_path / "t-0", "t", 0, LogConfig(segment_bytes=300), clean=True)

    def enospc(offset: int, sync: bool = False) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    async def main() -> None:
        lg.append(_batch(0))
        lg.append(_batch(1))  # over segment.bytes: rolls
        monkeypatch.setattr(lg.producers, "snapshot", enospc)
        try:
            lg.append(_batch(2))  # rolls again; its snapshot fails
        except OSError:
            pass  # refused is fine; what matters is what follows
        monkeypatch.undo()
        lg.append(_batch(3))
        lg.append(_batch(4))
        await asyncio.sleep(0.2)  # the background fsyncs of the rolls

    asyncio.run(main())
    assert len(lg.segments) >= 4
    assert lg.recovery_point == lg.active.base
    assert lg.flushed_offset == lg.active.base
    lg.close(clean=False)
