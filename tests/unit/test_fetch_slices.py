"""File slices for Fetch: same bytes as PartitionLog.read, segment fds pinned while a slice is
outstanding, the server's sendfile/pread writing path, and the handler's caught-up fast path."""

from __future__ import annotations

import asyncio
import gc
import os
import socket
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import uvloop

from samsa.broker.handlers import fetch as fetch_handler
from samsa.broker.server import KafkaConnection
from samsa.protocol.fetch_response import FetchChunks
from samsa.protocol.records import encode_batch
from samsa.storage.file_slice import FileSlice
from samsa.storage.log import LogConfig, OffsetOutOfRange, PartitionLog
from samsa.storage.segment import Segment

T0 = 1_700_000_000_000


def batch(start: int, n: int, size: int = 10) -> bytearray:
    return bytearray(encode_batch([(str(start + i).encode(), os.urandom(size), [], T0 + start + i)
                                   for i in range(n)]))


def open_log(d: Path, **cfg: Any) -> PartitionLog:
    return PartitionLog.open(d / "t-0", "t", 0, LogConfig(**cfg), clean=True)


def fd_open(fd: int) -> bool:
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False


def test_read_slice_matches_read(tmp_path: Path) -> None:
    lg = open_log(tmp_path, segment_bytes=3000, index_interval=200)
    for i in range(60):
        lg.append(batch(i * 3, 3, size=20), now_ms=T0)
    assert len(lg.segments) > 3
    for offset in (0, 1, 5, 77, 100, lg.end_offset - 1, lg.end_offset):
        for max_bytes in (0, 1, 150, 1000, 1 << 20):
            for whole_first in (True, False):
                for upper in (None, 90, offset):
                    want = lg.read(offset, max_bytes, whole_first, upper)
                    sl = lg.read_slice(offset, max_bytes, whole_first, upper)
                    if not want:
                        assert sl is None
                        continue
                    assert sl is not None and sl.length == len(want)
                    assert sl.read() == want
                    sl.release()
    with pytest.raises(OffsetOutOfRange):
        lg.read_slice(lg.end_offset + 1, 100)
    assert all(s._refs == 0 for s in lg.segments)


def test_slice_survives_retention_deleting_its_segment(tmp_path: Path) -> None:
    lg = open_log(tmp_path, segment_bytes=1000, retention_bytes=0)
    for i in range(30):
        lg.append(batch(i * 2, 2), now_ms=T0)
    first = lg.segments[0]
    sl = lg.read_slice(0, 1 << 20)
    assert sl is not None and sl.segment is first
    original = sl.read()
    fd = sl.fd
    assert lg.apply_retention(T0) > 0
    assert first not in lg.segments and not first.log_path.exists()
    assert first.fd == -1 and fd_open(fd)  # closed for everyone else, pinned for the slice
    # new files opened meanwhile never get the pinned descriptor number
    others = [os.open(tmp_path / f"x{i}", os.O_CREAT | os.O_RDWR) for i in range(5)]
    assert fd not in others
    os.pwrite(others[0], b"\xff" * len(original), 0)
    assert sl.read() == original
    sl.release()
    assert not fd_open(fd) or fd in others
    sl.release()  # idempotent
    for o in others:
        os.close(o)


def test_slice_survives_topic_deletion_and_compaction_swap(tmp_path: Path) -> None:
    lg = open_log(tmp_path, segment_bytes=800)
    for i in range(20):
        lg.append(batch(i * 2, 2), now_ms=T0)
    sl_a = lg.read_slice(0, 1 << 20)
    sl_b = lg.read_slice(lg.end_offset - 2, 1 << 20)
    assert sl_a is not None and sl_b is not None
    data_a, data_b = sl_a.read(), sl_b.read()
    lg.delete()  # closes every segment, removes the directory
    assert not lg.dir.exists()
    assert sl_a.read() == data_a and sl_b.read() == data_b
    seg = sl_a.segment
    assert seg is not None
    sl_a.release()
    assert seg._orphan_fds == []
    sl_b.release()


def test_dropped_slice_releases_on_garbage_collection(tmp_path: Path) -> None:
    seg = Segment(tmp_path, 0, 4096)
    seg.recover(validate=False)
    data = batch(0, 3)
    seg.append(data, 0, 2, T0)
    sl = FileSlice(seg, 0, len(data))
    assert seg._refs == 1
    seg.close()
    fd = sl.fd
    assert fd_open(fd)
    del sl
    gc.collect()
    assert seg._refs == 0 and seg._orphan_fds == []
    with pytest.raises(ValueError):
        FileSlice(seg, 0, 1)  # a closed segment hands out no new slices


# ---- server: writing responses with slices -----------------------------------------------

class _Config:
    def get_int(self, _name: str) -> int:
        return 100 << 20


def _stub_broker() -> Any:
    from samsa.broker.server import NetworkLimits
    from samsa.metrics.counters import BrokerMetrics
    return SimpleNamespace(config=_Config(), connections=set(), handlers={},
                           network_limits=NetworkLimits(1 << 20, 500, 256, 1 << 30, 1 << 30),
                           metrics=BrokerMetrics())


def _run(loop_factory: Callable[[], asyncio.AbstractEventLoop], coro: Any) -> Any:
    loop = loop_factory()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()


async def _connected() -> tuple[KafkaConnection, socket.socket, asyncio.AbstractServer]:
    conn = KafkaConnection(_stub_broker())
    server = await asyncio.get_running_loop().create_server(lambda: conn, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    client.setblocking(False)
    while conn.transport is None:
        await asyncio.sleep(0.001)
    return conn, client, server


async def _recv(client: socket.socket, n: int) -> bytes:
    loop = asyncio.get_running_loop()
    out = bytearray()
    while len(out) < n:
        out += await loop.sock_recv(client, min(1 << 20, n - len(out)))
    return bytes(out)


LOOPS = {"uvloop": uvloop.new_event_loop, "asyncio": asyncio.new_event_loop}


@pytest.mark.parametrize("loop_name", list(LOOPS))
def test_server_writes_slices_in_order(tmp_path: Path, loop_name: str,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    payload = os.urandom(12 << 20)
    seg = Segment(tmp_path, 0, 4096)
    seg.recover(validate=False)
    os.write(seg.fd, payload)
    seg.size = len(payload)
    calls = []
    real_sendfile = os.sendfile

    def counting_sendfile(*args: Any) -> int:
        n = real_sendfile(*args)
        calls.append(n)
        return n

    monkeypatch.setattr(os, "sendfile", counting_sendfile)

    async def go() -> None:
        conn, client, server = await _connected()
        pieces: list[tuple[bytes | None, int, int]] = [  # (bytes, or None for a slice: pos, len)
            (b"head", 0, 0), (None, 100, 8 << 20),          # big: sendfile, then pread the rest
            (b"mid", 0, 0), (None, 9 << 20, 1000),          # small: pread
            (None, 10 << 20, 200_000), (b"tail", 0, 0)]     # big, after a full socket: pread
        chunks = FetchChunks()
        want = bytearray()
        for data, pos, n in pieces:
            if data is None:
                chunks.append(FileSlice(seg, pos, n))
                want += payload[pos:pos + n]
            else:
                chunks.append(data)
                want += data
        # a second response right after: must come after the first, byte for byte
        second = FetchChunks([b"next", FileSlice(seg, 5, SENDFILE_MIN + 7)])
        want += b"next" + payload[5:5 + SENDFILE_MIN + 7]
        conn._respond_now(chunks)
        conn._respond_now(second)
        # 20 MB cannot all be in the socket yet: the rest waits in the outbox as pinned slices,
        # not as bytes in memory
        assert seg._refs > 0
        assert conn.transport is not None
        assert conn.transport.get_write_buffer_size() <= 2 * (256 << 10)
        got = await _recv(client, len(want))
        assert got == bytes(want)
        assert seg._refs == 0  # every slice released once written
        assert calls and sum(calls) > 0  # the sendfile path ran
        client.close()
        server.close()

    from samsa.broker.server import SENDFILE_MIN
    _run(LOOPS[loop_name], go())
    seg.close()


def test_server_releases_slices_of_dropped_responses(tmp_path: Path) -> None:
    seg = Segment(tmp_path, 0, 4096)
    seg.recover(validate=False)
    os.write(seg.fd, b"x" * 1000)
    seg.size = 1000

    async def go() -> None:
        conn, client, server = await _connected()
        loop = asyncio.get_running_loop()
        waiting: asyncio.Future[Any] = loop.create_future()
        done: asyncio.Future[Any] = loop.create_future()
        done.set_result(FetchChunks([b"a", FileSlice(seg, 0, 10)]))
        conn._enqueue(waiting)   # an earlier request still running holds the queue
        conn._enqueue(done)
        assert seg._refs == 1
        client.close()
        while not conn.closed:
            await asyncio.sleep(0.001)
        await asyncio.sleep(0.01)
        assert seg._refs == 0
        # a response finishing after the connection closed is released too
        waiting.set_result(FetchChunks([FileSlice(seg, 0, 10)]))
        await asyncio.sleep(0.01)
        assert seg._refs == 0
        conn._respond_now(FetchChunks([FileSlice(seg, 0, 10)]))  # closed: dropped
        assert seg._refs == 0
        server.close()

    _run(uvloop.new_event_loop, go())
    seg.close()


# ---- handler: caught-up partitions do not touch the files --------------------------------

def test_caught_up_partitions_skip_the_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lg = open_log(tmp_path)
    for i in range(5):
        lg.append(batch(i * 2, 2), now_ms=T0)
    replicas = SimpleNamespace(leadership=lambda name, idx: None, following={})
    broker: Any = SimpleNamespace(partition_log=lambda name, idx: lg if name == "t" else None,
                                  replicas=replicas)
    ctx: Any = SimpleNamespace(version=12)
    hints: Any = None  # only consulted for a partition this broker does not lead

    def part(offset: int) -> Any:
        return SimpleNamespace(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)

    def req(isolation: int) -> Any:
        return SimpleNamespace(max_bytes=1 << 20, isolation_level=isolation)

    def boom(*_a: Any) -> Any:
        raise AssertionError("files touched")

    with monkeypatch.context() as m:
        m.setattr(Segment, "position_of", boom)
        m.setattr(Segment, "extent", boom)
        m.setattr(os, "pread", boom)
        for isolation in (0, 1):
            responses, total, errors, logs = fetch_handler._read_all(
                broker, ctx, req(isolation), [("t", "t", [part(lg.end_offset)])], hints)
            p = responses[0][1][0]
            assert (total, errors, p.records, p.error_code) == (0, False, b"", 0)
            assert p.high_watermark == lg.end_offset
            assert p.aborted == ([] if isolation else None)
    responses, total, errors, _ = fetch_handler._read_all(
        broker, ctx, req(0), [("t", "t", [part(4), part(lg.end_offset + 1)])], hints)
    first, second = responses[0][1]
    assert isinstance(first.records, FileSlice) and total == first.records.length
    assert second.error_code == 1 and errors  # OFFSET_OUT_OF_RANGE still checked
    fetch_handler._release(responses)
    assert all(s._refs == 0 for s in lg.segments)
