"""Crash consistency of the log under `flush.messages=1` (ALICE / CrashMonkey style).

A workload of concurrent producers appends to two partitions with small segments (so segments roll
while fsyncs run) and marks each record acknowledged where the produce handler would answer: after
`PartitionLog.flush`. The storage package's file-system operations are recorded
(samsa.testing.crashfs); from them we build the disk states a power loss could leave at sampled
points (unsynced writes dropped, reordered or torn; directory entries not yet dir-fsynced missing),
run the broker's recovery (LogManager start-up) on each and check:
- recovery does not fail;
- every record acknowledged before the crash is served, at its offset, with its value;
- everything served passes its CRC and is a record the workload wrote at that very offset;
- the recovered log takes appends at its end.
The default run builds ~300 states; SAMSA_CRASH_STATES / SAMSA_CRASH_SEED widen or vary it.
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import tempfile
import time
from pathlib import Path

import crc32c
import pytest

from samsa.protocol.batch import ATTR_OFFSET, read_header
from samsa.protocol.records import decode_batch, encode_batch, iter_batches
from samsa.storage.cleaner import CleanerConfig
from samsa.storage.log import LogConfig, PartitionLog
from samsa.storage.manager import LogManager
from samsa.testing.crashfs import CrashState, FsRecorder, NoSync, _Replay, crash_states

TOPIC = "crash"
PARTS = 2
PRODUCERS = 3
PER_PRODUCER = 14
STATES = int(os.environ.get("SAMSA_CRASH_STATES", "300"))
SEED = int(os.environ.get("SAMSA_CRASH_SEED", "20261124"))
CFG = LogConfig(segment_bytes=450, index_interval=150, flush_messages=1)


def now_ms() -> int:
    return int(time.time() * 1000)


def _value(producer: int, i: int) -> bytes:
    return f"p{producer}-{i}-".encode() + bytes([65 + (i % 26)]) * (40 + 7 * (i % 5))


async def _workload(logs_dir: Path, rec: FsRecorder) -> dict[tuple[int, int], bytes]:
    """Produce like the produce handler does with flush.messages=1: append, flush, acknowledge."""
    mgr = LogManager([logs_dir])
    mgr.detect_clean()
    logs = [mgr.create(TOPIC, p, CFG) for p in range(PARTS)]
    written: dict[tuple[int, int], bytes] = {}

    async def producer(k: int) -> None:
        for i in range(PER_PRODUCER):
            p = (k + i) % PARTS
            value = _value(k, i)
            lg = logs[p]
            base, _ = lg.append(bytearray(encode_batch([(None, value, [], now_ms())])))
            written[(p, base)] = value
            if lg.flush_due:
                # the handler's flush runs as a task of its own (server.py ensure_future): other
                # requests may append, and roll the segment, before it starts
                await asyncio.sleep(0)
                await lg.flush()
            rec.mark("ack", p, base, value)

    await asyncio.gather(*(producer(k) for k in range(PRODUCERS)))
    # let the rolled segments' background fsyncs finish before the recorder goes
    for _ in range(50):
        await asyncio.sleep(0.01)
    for lg in logs:
        lg.close(clean=False)
    mgr.cleaner.close()
    return written


def _served(lg: PartitionLog) -> list[tuple[int, bytes | None]]:
    """Every record a consumer reading from the log start gets, CRCs checked."""
    out: list[tuple[int, bytes | None]] = []
    off = lg.log_start_offset
    while off < lg.high_watermark:
        data = lg.read(off, 1 << 20)
        if not data:
            break
        for pos, size in iter_batches(data):
            h = read_header(data, pos)
            assert crc32c.crc32c(bytes(data[pos + ATTR_OFFSET:pos + size])) == h.crc, "bad CRC"
            for r in decode_batch(data, pos):
                if r.offset >= off:
                    out.append((r.offset, r.value))
        assert out and out[-1][0] >= off, f"read at {off} made no progress"
        off = out[-1][0] + 1
    return out


def _check(state: CrashState, work: Path, written: dict[tuple[int, int], bytes],
           parts: int = PARTS) -> str | None:
    """Recover the state and check it; the problem found, or None."""
    shutil.rmtree(work, ignore_errors=True)
    state.disk.materialize(work)
    acked = [(m[2], m[3], m[4]) for m in state.marks if m[1] == "ack"]
    mgr = LogManager([work])
    try:
        mgr.detect_clean()
        mgr.startup({TOPIC: CFG})
    except Exception as e:  # recovery must not fail on any crash state
        return f"recovery failed: {e!r}"
    try:
        for p, off, _value in acked:
            lg = mgr.get(TOPIC, p)
            if lg is None:
                return f"partition {p} lost, acknowledged offset {off} with it"
        for p in range(parts):
            lg = mgr.get(TOPIC, p)
            if lg is None:
                continue
            served = dict(_served(lg))
            for (wp, off), value in written.items():
                if wp == p and off in served and served[off] != value:
                    return f"{p}@{off}: served {served[off]!r}, written {value!r}"
            for off in served:
                if (p, off) not in written:
                    return f"{p}@{off}: served a record never written there"
            for ap, off, value in acked:
                if ap == p and served.get(off) != value:
                    return f"acknowledged {p}@{off} missing after recovery (end {lg.end_offset})"
            end = lg.end_offset
            base, _ = lg.append(bytearray(encode_batch([(None, b"after", [], 1)])))
            if base != end or dict(_served(lg)).get(base) != b"after":
                return f"partition {p}: append after recovery went to {base}, end was {end}"
    finally:
        for lg in mgr.logs.values():
            lg.close(clean=False)
        mgr.cleaner.close()
    return None


def test_acknowledged_records_survive_any_power_loss(tmp_path: Path) -> None:
    logs_dir = tmp_path / "logs"
    logs_dir.mkdir()
    rng = random.Random(SEED)
    # half the background fsyncs of segment data stall a little: some finish after later ones
    with FsRecorder(logs_dir, stall=lambda p: 0.02 if p.endswith(".log") and rng.random() < 0.5
                    else 0.0) as rec:
        written = asyncio.run(_workload(logs_dir, rec))
    kinds = {op[0] for op in rec.ops}
    assert {"creat", "write", "fsync", "rename", "mark"} <= kinds, kinds
    acks = sum(1 for op in rec.ops if op[0] == "mark")
    assert acks == PRODUCERS * PER_PRODUCER
    # the workload rolled segments (several .log files per partition)
    assert sum(1 for op in rec.ops if op[0] == "creat" and op[2].endswith(".log")) > 2 * PARTS
    failures: list[str] = []
    checked = 0
    # the states are scratch copies: on tmpfs when there is one (thousands of small files)
    scratch = Path(tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else tmp_path))
    try:
        for state in crash_states(rec.ops, STATES, SEED):
            with NoSync():
                problem = _check(state, scratch / "state", written)
            checked += 1
            if problem is not None:
                failures.append(f"crash after op {state.point}/{len(rec.ops)} ({state.variant}): "
                                f"{problem}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    assert checked >= min(STATES, len(rec.ops)), checked
    assert not failures, f"{len(failures)} of {checked} crash states failed, e.g.:\n" + "\n".join(
        failures[:8])


def test_flush_covers_a_segment_rolled_before_it_started(tmp_path: Path) -> None:
    """The roll race, made deterministic: record x is appended, then y rolls the segment (the
    rolled segment's own fsync runs in the background and is slow); the flush that acknowledges x
    starts after the roll. x must be durable when the flush returns, whatever the background fsync
    does. (Before the fix a flush synced only the segment active when it began.)"""
    logs_dir = tmp_path / "logs"
    logs_dir.mkdir()
    cfg = LogConfig(segment_bytes=300, flush_messages=1)
    stalled: list[str] = []

    def stall(path: str) -> float:  # the first background fsync of the first segment is slow
        if path.endswith("00000000000000000000.log") and not stalled:
            stalled.append(path)
            return 0.5
        return 0.0

    async def work(rec: FsRecorder) -> dict[tuple[int, int], bytes]:
        mgr = LogManager([logs_dir])
        mgr.detect_clean()
        lg = mgr.create(TOPIC, 0, cfg)
        x, y = b"x" * 200, b"y" * 200
        bx, _ = lg.append(bytearray(encode_batch([(None, x, [], now_ms())])))
        by, _ = lg.append(bytearray(encode_batch([(None, y, [], now_ms())])))
        assert len(lg.segments) == 2  # y rolled the segment x is in
        await lg.flush()
        rec.mark("ack", 0, bx, x)
        rec.mark("ack", 0, by, y)
        await asyncio.sleep(0.7)  # the stalled background fsync ends before recording stops
        lg.close(clean=False)
        mgr.cleaner.close()
        return {(0, bx): x, (0, by): y}

    with FsRecorder(logs_dir, stall=stall) as rec:
        written = asyncio.run(work(rec))
    assert stalled, "the background fsync of the rolled segment was not seen"
    # the state a power loss leaves just after the acknowledgements, only synced data on disk
    first_ack = next(i for i, op in enumerate(rec.ops) if op[0] == "mark")
    state = _state_at(rec.ops, first_ack + 2)
    scratch = tmp_path / "state"
    with NoSync():
        assert _check(state, scratch, written, parts=1) is None


def _state_at(ops: list[tuple[object, ...]], point: int) -> CrashState:
    replay = _Replay()
    for op in ops[:point]:
        replay.step(op)
    return replay.state(random.Random(0), point, "none")


def test_recorder_models_unsynced_data_as_losable(tmp_path: Path) -> None:
    """The model itself: without an fsync a write may vanish; after file + directory fsync it
    cannot. (Guards against a crash model too kind to find anything.)"""
    from samsa.storage import fsio

    root = tmp_path / "r"
    root.mkdir()
    with FsRecorder(root) as rec:
        fsio.write_file(root / "a", b"hello", sync=False)
        rec.mark("a written")
        fsio.write_file(root / "b", b"world", sync=True)
        fsio.fsync_dir(root)
        rec.mark("b durable")
    states = list(crash_states(rec.ops, 60, 1))
    after_a = [s for s in states if [m[1] for m in s.marks] == ["a written"]]
    after_b = [s for s in states if len(s.marks) == 2]
    assert after_a and after_b
    assert any(s.disk.dirs[""].get("a") is None for s in after_a)
    for s in after_b:
        entry = s.disk.dirs[""].get("b")
        assert entry is not None and s.disk.files[entry[1]] == b"world"


@pytest.mark.parametrize("seed", [1, 2])
def test_crash_states_are_seeded(seed: int, tmp_path: Path) -> None:
    root = tmp_path / "r"
    root.mkdir()
    with FsRecorder(root) as rec:
        for i in range(5):
            fsio_write(root / f"f{i}", bytes(10 * i))
    a = [(s.point, s.variant) for s in crash_states(rec.ops, 20, seed)]
    b = [(s.point, s.variant) for s in crash_states(rec.ops, 20, seed)]
    assert a == b and len(a) >= 5


def fsio_write(path: Path, data: bytes) -> None:
    from samsa.storage import fsio

    fsio.write_file(path, data, sync=False)


COMPACT = LogConfig(cleanup_policy="compact", segment_bytes=450, flush_messages=1,
                    min_cleanable_ratio=0.01)
KEYS = 3


async def _compacting_workload(logs_dir: Path, rec: FsRecorder) -> dict[int, tuple[bytes, bytes]]:
    """Keyed records to a compacted partition with flush.messages=1; the cleaner (inline) runs
    between acknowledgements, so cleaned segments are swapped in while producers append."""
    mgr = LogManager([logs_dir], CleanerConfig(mode="inline"))
    mgr.detect_clean()
    lg = mgr.create(TOPIC, 0, COMPACT)
    written: dict[int, tuple[bytes, bytes]] = {}

    async def producer(k: int) -> None:
        for i in range(PER_PRODUCER):
            key, value = f"k{(k + i) % KEYS}".encode(), _value(k, i)
            base, _ = lg.append(bytearray(encode_batch([(key, value, [], now_ms())])))
            written[base] = (key, value)
            await asyncio.sleep(0)
            await lg.flush()
            rec.mark("ack", key, base, value)
            if i % 3 == 2:
                await mgr.cleaner.clean_once(mgr.logs)

    await asyncio.gather(*(producer(k) for k in range(2)))
    for _ in range(20):
        await asyncio.sleep(0.01)
    lg.close(clean=False)
    mgr.cleaner.close()
    return written


def _check_compacted(state: CrashState, work: Path,
                     written: dict[int, tuple[bytes, bytes]]) -> str | None:
    shutil.rmtree(work, ignore_errors=True)
    state.disk.materialize(work)
    last_acked: dict[bytes, int] = {}
    for m in state.marks:
        last_acked[m[2]] = max(last_acked.get(m[2], -1), m[3])
    mgr = LogManager([work], CleanerConfig(mode="inline"))
    try:
        mgr.detect_clean()
        mgr.startup({TOPIC: COMPACT})
    except Exception as e:
        return f"recovery failed: {e!r}"
    try:
        lg = mgr.get(TOPIC, 0)
        if lg is None:
            return "partition lost" if last_acked else None
        latest: dict[bytes, int] = {}
        off = lg.log_start_offset
        while off < lg.high_watermark:
            data = lg.read(off, 1 << 20)
            if not data:
                break
            for pos, size in iter_batches(data):
                h = read_header(data, pos)
                if crc32c.crc32c(bytes(data[pos + ATTR_OFFSET:pos + size])) != h.crc:
                    return f"bad CRC at {h.base_offset}"
                for r in decode_batch(data, pos):
                    if written.get(r.offset) != (r.key, r.value):
                        return f"@{r.offset}: served {(r.key, r.value)!r}, never written there"
                    latest[r.key or b""] = r.offset
                    off = r.offset + 1
        for key, acked_off in last_acked.items():
            if latest.get(key, -1) < acked_off:
                return (f"key {key!r}: acknowledged @{acked_off}, latest served "
                        f"@{latest.get(key)} (end {lg.end_offset})")
    finally:
        for lg in mgr.logs.values():
            lg.close(clean=False)
        mgr.cleaner.close()
    return None


def test_compacted_log_keeps_every_acknowledged_key(tmp_path: Path) -> None:
    """Compaction under power loss: for every key, the last acknowledged value (or a later one)
    survives, whatever state of a segment swap the crash leaves."""
    logs_dir = tmp_path / "logs"
    logs_dir.mkdir()
    rng = random.Random(SEED)
    with FsRecorder(logs_dir, stall=lambda p: 0.02 if p.endswith(".log") and rng.random() < 0.5
                    else 0.0) as rec:
        written = asyncio.run(_compacting_workload(logs_dir, rec))
    swaps = [op for op in rec.ops if op[0] == "rename" and op[3].endswith(".swap")]
    assert swaps, "the cleaner never swapped a segment in"
    scratch = Path(tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else tmp_path))
    failures: list[str] = []
    try:
        for state in crash_states(rec.ops, STATES // 2, SEED):
            with NoSync():
                problem = _check_compacted(state, scratch / "state", written)
            if problem is not None:
                failures.append(f"crash after op {state.point}/{len(rec.ops)} ({state.variant}): "
                                f"{problem}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    assert not failures, f"{len(failures)} crash states failed, e.g.:\n" + "\n".join(failures[:8])


def test_cleaner_never_drops_a_record_for_an_unsynced_successor(tmp_path: Path) -> None:
    """k@0 is acknowledged (durable); k@1 is appended and its segment rolled, its background fsync
    slow; the cleaner runs meanwhile. It must not drop k@0 on the strength of k@1, which a power
    loss can still take away: every crash point of the log, with only synced data, keeps k."""
    logs_dir = tmp_path / "logs"
    logs_dir.mkdir()
    cfg = LogConfig(cleanup_policy="compact", segment_bytes=200, flush_messages=1,
                    min_cleanable_ratio=0.01)
    stalled: list[str] = []

    def stall(path: str) -> float:  # the rolled segment holding k@1 syncs late
        if path.endswith("00000000000000000001.log") and not stalled:
            stalled.append(path)
            return 0.5
        return 0.0

    async def work(rec: FsRecorder) -> dict[int, tuple[bytes, bytes]]:
        mgr = LogManager([logs_dir], CleanerConfig(mode="inline"))
        mgr.detect_clean()
        lg = mgr.create(TOPIC, 0, cfg)
        recs = [(b"k", b"first" * 30), (b"k", b"second" * 25), (b"other", b"third" * 30)]
        written = {}
        for i, (k, v) in enumerate(recs):
            base, _ = lg.append(bytearray(encode_batch([(k, v, [], now_ms())])))
            written[base] = (k, v)
            if i == 0:
                await lg.flush()
                rec.mark("ack", k, base, v)
        assert len(lg.segments) == 3
        await mgr.cleaner.clean_once(mgr.logs)
        await asyncio.sleep(0.7)
        lg.close(clean=False)
        mgr.cleaner.close()
        return written

    with FsRecorder(logs_dir, stall=stall) as rec:
        written = asyncio.run(work(rec))
    assert stalled
    failures = []
    replay = _Replay()
    for point, op in enumerate([*rec.ops, ("end",)]):
        if replay.marks:
            state = replay.state(random.Random(0), point, "none")
            with NoSync():
                problem = _check_compacted(state, tmp_path / "state", written)
            if problem is not None:
                failures.append(f"crash after op {point}: {problem}")
        if op[0] != "end":
            replay.step(op)
    assert not failures, "\n".join(failures[:5])


def test_out_of_order_roll_fsyncs_move_the_flushed_offset_in_order(tmp_path: Path) -> None:
    """Background fsyncs of two rolled segments finish in the wrong order: the later one alone
    must not move the flushed offset (a flush starts from it and would skip the earlier one)."""
    lg = PartitionLog.open(tmp_path / "t-0", "t", 0, LogConfig(), clean=True)
    lg.flushed_offset = lg.recovery_point = 0
    lg._rolled_synced.clear()
    lg._rolled_flushed(None, 20, None, 10)  # [10, 20) synced, [0, 10) not yet
    assert lg.flushed_offset == 0 and lg.recovery_point == 0
    lg._rolled_flushed(None, 10, None, 0)  # now both
    assert lg.flushed_offset == 20 and lg.recovery_point == 20
    lg.close()
