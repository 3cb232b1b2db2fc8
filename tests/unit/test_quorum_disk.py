"""The Raft core's disk (samsa/cluster/quorum/disk): quorum-state file and file-backed RaftLog.

- one behavioural contract run against MemoryLog and FileRaftLog, plus a seeded differential run
  (random operations, flushes and crashes) that must keep them identical;
- crash consistency with the recorder of samsa.testing.crashfs: after any simulated power loss
  the log reopens to a state the core really had, with every flushed entry present, and the
  quorum-state file reads as the old or the new record, never as nothing or garbage;
- torn and corrupt tails are cut on reopen;
- the deterministic simulator and a 3-node in-process cluster run over these files.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from samsa.cluster.quorum.config import QuorumConfig
from samsa.cluster.quorum.disk.files import (
    LEADER_EPOCH_CHECKPOINT,
    decode_epoch_checkpoint,
    parse_snapshot_name,
    snapshot_name,
)
from samsa.cluster.quorum.disk.log import FileRaftLog, ForeignLogError, encode_entry
from samsa.cluster.quorum.disk.state_file import CorruptQuorumStateError, FileQuorumStateStore
from samsa.cluster.quorum.log import Entry, MemoryLog, OffsetAndEpoch
from samsa.cluster.quorum.messages import Message
from samsa.cluster.quorum.node import RaftNode
from samsa.cluster.quorum.sim import Simulation
from samsa.cluster.quorum.state import QuorumStateRecord
from samsa.protocol.batch import CONTROL_BIT, read_header
from samsa.testing.crashfs import FsRecorder, NoSync, crash_states

LogFactory = Callable[[], MemoryLog | FileRaftLog]


@pytest.fixture(params=["memory", "file"])
def new_log(request: pytest.FixtureRequest, tmp_path: Path) -> LogFactory:
    if request.param == "memory":
        return MemoryLog
    return lambda: FileRaftLog(tmp_path / "__cluster_metadata-0", segment_bytes=300)


def E(epoch: int, tag: str, control: bool = False) -> Entry:  # noqa: N802
    return Entry(epoch, tag.encode(), control)


# ---------------------------------------------------------------------------- the contract
def test_append_read_and_epochs(new_log: LogFactory) -> None:
    log = new_log()
    assert (log.start_offset, log.end_offset, log.last_epoch, log.snapshot_id) == (0, 0, 0, None)
    log.append([E(1, "a", control=True), E(1, "b")])
    log.append([E(3, "c"), E(3, "d"), E(4, "e")])
    assert log.end_offset == 5 and log.last_epoch == 4
    assert log.read(1, 2) == [E(1, "b"), E(3, "c")]
    assert log.read(0, 100)[0].control
    assert log.read(5, 10) == []
    assert log.end_offset_for_epoch(1) == OffsetAndEpoch(2, 1)
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(2, 1)
    assert log.end_offset_for_epoch(3) == OffsetAndEpoch(4, 3)
    assert log.end_offset_for_epoch(9) == OffsetAndEpoch(5, 4)
    assert log.end_offset_for_epoch(0) == OffsetAndEpoch(0, 0)
    with pytest.raises(ValueError):
        log.append([E(2, "older epoch")])


def test_truncate_then_append(new_log: LogFactory) -> None:
    log = new_log()
    log.append([E(1, "a"), E(2, "b"), E(2, "c"), E(3, "d")])
    log.truncate_to(2)
    assert log.end_offset == 2 and log.last_epoch == 2
    assert log.end_offset_for_epoch(3) == OffsetAndEpoch(2, 2)
    log.truncate_to(7)  # past the end: nothing
    assert log.end_offset == 2
    log.append([E(5, "x")])
    assert log.read(0, 10) == [E(1, "a"), E(2, "b"), E(5, "x")]
    log.flush()
    assert log.read(0, 10) == [E(1, "a"), E(2, "b"), E(5, "x")]


def test_snapshots(new_log: LogFactory) -> None:
    log = new_log()
    log.append([E(1, "a"), E(1, "b"), E(2, "c"), E(2, "d")])
    log.flush()
    log.take_snapshot(OffsetAndEpoch(3, 2), b"state@3")
    assert log.start_offset == 3 and log.snapshot_id == OffsetAndEpoch(3, 2)
    assert log.read(3, 5) == [E(2, "d")]
    with pytest.raises(ValueError):
        log.read(2, 1)
    with pytest.raises(ValueError):
        log.truncate_to(2)
    assert log.read_snapshot(OffsetAndEpoch(3, 2)) == b"state@3"
    assert log.read_snapshot(OffsetAndEpoch(3, 1)) is None
    assert log.end_offset_for_epoch(1) == OffsetAndEpoch(3, 2)  # below the log: the snapshot
    with pytest.raises(ValueError):
        log.take_snapshot(OffsetAndEpoch(4, 1), b"wrong epoch")
    log.install_snapshot(OffsetAndEpoch(10, 5), b"leader@10")
    assert (log.start_offset, log.end_offset, log.last_epoch) == (10, 10, 5)
    assert log.read_snapshot(OffsetAndEpoch(10, 5)) == b"leader@10"
    log.append([E(6, "after")])
    log.flush()
    assert log.read(10, 5) == [E(6, "after")]
    assert log.end_offset_for_epoch(5) == OffsetAndEpoch(10, 5)


def _view(log: MemoryLog | FileRaftLog) -> tuple[object, ...]:
    sid = log.snapshot_id
    probes = tuple(log.end_offset_for_epoch(e) for e in range(0, 12))
    return (log.start_offset, log.end_offset, log.last_epoch, sid,
            log.read(log.start_offset, 1 << 20), probes,
            log.read_snapshot(sid) if sid is not None else None)


@pytest.mark.parametrize("seed", range(6))
def test_file_log_matches_memory_log_through_crashes(seed: int, tmp_path: Path) -> None:
    """Random appends, truncations, snapshots, flushes and crashes: FileRaftLog (a crash is a
    reopen from disk) stays identical to MemoryLog (a crash drops what was not flushed)."""
    rng = random.Random(seed)
    d = tmp_path / "__cluster_metadata-0"
    mem, disk = MemoryLog(), FileRaftLog(d, segment_bytes=rng.choice((200, 1000, 1 << 20)))
    epoch = 1
    crashes = 0
    with NoSync():
        for step in range(400):
            r = rng.random()
            if r < 0.45:
                if rng.random() < 0.2:
                    epoch += 1
                batch = [E(epoch, f"{step}.{i}", control=rng.random() < 0.1)
                         for i in range(rng.randint(1, 4))]
                mem.append(batch)
                disk.append(batch)
            elif r < 0.55 and mem.end_offset > mem.start_offset:
                to = rng.randint(mem.start_offset, mem.end_offset)
                mem.truncate_to(to)
                disk.truncate_to(to)
            elif r < 0.75:
                mem.flush()
                disk.flush()
            elif r < 0.8 and mem.end_offset > mem.start_offset:
                mem.flush()
                disk.flush()
                off = rng.randint(mem.start_offset + 1, mem.end_offset)
                sid = OffsetAndEpoch(off, mem.entry(off - 1).epoch)
                mem.take_snapshot(sid, b"snap%d" % step)
                disk.take_snapshot(sid, b"snap%d" % step)
            elif r < 0.83:
                epoch += 1
                sid = OffsetAndEpoch(mem.end_offset + rng.randint(0, 5), epoch)
                mem.install_snapshot(sid, b"installed%d" % step)
                disk.install_snapshot(sid, b"installed%d" % step)
            elif r < 0.93:
                crashes += 1
                mem.crash()
                disk = FileRaftLog(d, segment_bytes=disk.segment_bytes)
                epoch = max(epoch, mem.last_epoch)
            assert _view(disk) == _view(mem), f"seed {seed} step {step}"
    assert crashes > 10
    # the leader-epoch-checkpoint on disk is Kafka's format and matches the flushed log
    mem.flush()
    disk.flush()
    ckpt = decode_epoch_checkpoint((d / LEADER_EPOCH_CHECKPOINT).read_bytes())
    assert ckpt == disk.epoch_entries()


# ---------------------------------------------------------------------------- on-disk layout
def test_layout_is_kafkas(tmp_path: Path) -> None:
    d = tmp_path / "__cluster_metadata-0"
    log = FileRaftLog(d, segment_bytes=250)
    log.append([E(3, "LeaderChange", control=True)] + [E(3, f"r{i}") for i in range(5)])
    log.flush()
    segs = sorted(p.name for p in d.glob("*.log"))
    assert len(segs) > 1 and segs[0] == "00000000000000000000.log"
    data = (d / segs[0]).read_bytes()
    h = read_header(data, 0)
    assert (h.base_offset, h.leader_epoch, h.magic) == (0, 3, 2)
    assert h.attributes & CONTROL_BIT
    h2 = read_header(data, h.batch_length + 12)
    assert h2.base_offset == 1 and not h2.attributes & CONTROL_BIT
    assert (d / LEADER_EPOCH_CHECKPOINT).read_text() == "0\n1\n3 0\n"
    log.take_snapshot(OffsetAndEpoch(4, 3), b"s")
    assert snapshot_name(OffsetAndEpoch(4, 3)) == "00000000000000000004-0000000003.checkpoint"
    assert (d / "00000000000000000004-0000000003.checkpoint").read_bytes() == b"s"
    assert parse_snapshot_name("00000000000000000004-0000000003.checkpoint") == OffsetAndEpoch(4, 3)
    assert parse_snapshot_name("4-3.checkpoint") is None
    # segments wholly below the snapshot are gone
    assert "00000000000000000000.log" not in {p.name for p in d.glob("*.log")}
    again = FileRaftLog(d, segment_bytes=250)
    assert again.start_offset == 4 and again.read(4, 10) == [E(3, "r3"), E(3, "r4")]


# ---------------------------------------------------------------------------- torn tails
def test_torn_tail_is_cut_on_reopen(tmp_path: Path) -> None:
    d = tmp_path / "__cluster_metadata-0"
    log = FileRaftLog(d)
    log.append([E(1, f"entry-{i}" * 5) for i in range(5)])
    log.flush()
    seg = d / "00000000000000000000.log"
    full = seg.stat().st_size
    with open(seg, "r+b") as f:
        f.truncate(full - 7)  # the last batch loses its end
    again = FileRaftLog(d)
    assert again.end_offset == 4
    assert again.read(0, 10) == [E(1, f"entry-{i}" * 5) for i in range(4)]
    assert seg.stat().st_size < full - 7  # the partial batch is gone from the file too
    again.append([E(2, "new")])
    again.flush()
    assert FileRaftLog(d).read(0, 10)[-2:] == [E(1, "entry-3" * 5), E(2, "new")]


def test_corrupt_batch_cuts_the_log_there(tmp_path: Path) -> None:
    d = tmp_path / "__cluster_metadata-0"
    log = FileRaftLog(d, segment_bytes=200)
    log.append([E(1, f"e{i}" * 10) for i in range(8)])
    log.flush()
    segs = sorted(d.glob("*.log"))
    assert len(segs) >= 3
    victim = segs[1]
    data = bytearray(victim.read_bytes())
    data[-3] ^= 0xFF  # a flipped bit in its last batch: the CRC fails
    victim.write_bytes(bytes(data))
    first_in_victim = int(victim.stem)
    again = FileRaftLog(d, segment_bytes=200)
    # everything from the corrupt batch on is dropped, later segments included
    assert first_in_victim < again.end_offset < 8
    assert again.read(0, 10) == [E(1, f"e{i}" * 10) for i in range(again.end_offset)]
    assert sorted(d.glob("*.log"))[-1] == victim


def test_batches_out_of_order_end_the_log(tmp_path: Path) -> None:
    """A batch whose offset does not follow, or whose epoch goes back, is not a log the core
    wrote: recovery cuts the log before it."""
    d = tmp_path / "__cluster_metadata-0"
    log = FileRaftLog(d)
    log.append([E(2, "a"), E(3, "b")])
    log.flush()
    seg = d / "00000000000000000000.log"
    good = seg.stat().st_size
    with open(seg, "ab") as f:
        f.write(encode_entry(2, E(1, "older epoch"), 0))
    assert FileRaftLog(d).read(0, 10) == [E(2, "a"), E(3, "b")]
    assert seg.stat().st_size == good
    with open(seg, "ab") as f:
        f.write(encode_entry(5, E(3, "offset gap"), 0))
    assert FileRaftLog(d).end_offset == 2
    with open(seg, "ab") as f:
        f.write(encode_entry(2, E(3, "fine"), 0))
    assert FileRaftLog(d).read(2, 1) == [E(3, "fine")]


def test_a_foreign_log_is_refused_not_truncated(tmp_path: Path) -> None:
    """Today's single-node metadata log (samsa/cluster/metadata.py) lives in a directory of the
    same name; opening it as a Raft log must fail loudly, leaving its files alone."""
    from samsa.cluster.metadata.legacy import MetadataLog

    async def write() -> None:
        ml = MetadataLog(tmp_path, clean=True)
        await ml.write([{"type": "cluster", "cluster_id": "x"}, {"type": "producer_ids", "next": 5}])
        ml.close()

    asyncio.run(write())
    d = tmp_path / "__cluster_metadata-0"
    before = {p.name: p.read_bytes() for p in d.iterdir()}
    with pytest.raises(ForeignLogError):
        FileRaftLog(d)
    assert {p.name: p.read_bytes() for p in d.iterdir()} == before
    # a segment alone (no PartitionLog files): an intact multi-record batch is not a torn tail
    only = tmp_path / "only"
    only.mkdir()
    seg = next(p for p in d.iterdir() if p.suffix == ".log")
    (only / seg.name).write_bytes(seg.read_bytes())
    with pytest.raises(ForeignLogError):
        FileRaftLog(only)
    assert (only / seg.name).read_bytes() == seg.read_bytes()


# ---------------------------------------------------------------------------- crash consistency
def _images_workload(d: Path, rec: FsRecorder, seed: int) -> list[tuple[int, list[Entry]]]:
    """Flushes (and snapshots) with a mark after each; returns the image after each mark."""
    rng = random.Random(seed)
    log = FileRaftLog(d, segment_bytes=220)
    images: list[tuple[int, list[Entry]]] = [(0, [])]
    rec.mark("image", 0)
    epoch = 1
    for step in range(25):
        r = rng.random()
        if r < 0.6:
            if rng.random() < 0.3:
                epoch += 1
            log.append([E(epoch, f"{step}.{i}" * 4) for i in range(rng.randint(1, 4))])
            if rng.random() < 0.3 and log.end_offset > log.start_offset:
                log.truncate_to(rng.randint(log.start_offset, log.end_offset))
            log.flush()
        elif r < 0.75 and log.end_offset > log.start_offset:
            off = rng.randint(log.start_offset + 1, log.end_offset)
            log.take_snapshot(OffsetAndEpoch(off, log.entry(off - 1).epoch), b"s%d" % step)
        elif r < 0.85:
            # a leader's snapshot, maybe below our end and of an older epoch than our tail (our
            # tail diverged): none of the old entries may come back beside it
            at = rng.randint(log.start_offset, log.end_offset + 2)
            log.install_snapshot(OffsetAndEpoch(at, rng.randint(1, epoch)), b"i%d" % step)
            epoch += 1
            log.append([E(epoch, f"{step}.after")])
            log.flush()
        else:
            continue
        images.append((log.start_offset, log.read(log.start_offset, 1 << 20)))
        rec.mark("image", len(images) - 1)
    return images


def _abs(image: tuple[int, list[Entry]]) -> dict[int, Entry]:
    start, entries = image
    return {start + i: e for i, e in enumerate(entries)}


@pytest.mark.parametrize("seed", range(3))
def test_log_recovers_to_a_state_the_core_had(seed: int, tmp_path: Path) -> None:
    root = tmp_path / "disk"
    root.mkdir()
    d = root / "__cluster_metadata-0"
    with FsRecorder(root) as rec:
        images = _images_workload(d, rec, seed)
    checked = 0
    for state in crash_states(rec.ops, 150, seed):
        work = tmp_path / f"state{checked}"
        state.disk.materialize(work)
        last = state.marks[-1][2] if state.marks else 0
        before, after = images[last], images[min(last + 1, len(images) - 1)]
        with NoSync():
            log = FileRaftLog(work / "__cluster_metadata-0")
        got = _abs((log.start_offset, log.read(log.start_offset, 1 << 20)))
        # what is there was written by the core, in a state it had: the last flushed image or a
        # step towards the next one (an entry at each offset from one image, never a mix)
        a, b = _abs(before), _abs(after)
        ok_before = all(a.get(o) == e for o, e in got.items())
        ok_after = all(b.get(o) == e for o, e in got.items())
        assert ok_before or ok_after, f"seed {seed}, point {state.point}: {got}"
        # and nothing the last flush made durable is lost, unless the next flush replaced it
        kept = {o: e for o, e in a.items() if b.get(o) == e and o >= log.start_offset}
        if log.start_offset <= before[0] or log.start_offset == after[0]:
            assert all(got.get(o) == e for o, e in kept.items()), f"seed {seed}: lost flushed"
        if state.variant == "none" and state.marks:
            # only fsynced data: exactly the last image, or the next one once its fsyncs ran
            assert got in (a, {o: e for o, e in b.items() if o in got})
        checked += 1
    assert checked > 50


_WRITER = """
import sys
from pathlib import Path
from samsa.cluster.quorum.disk.log import FileRaftLog
from samsa.cluster.quorum.disk.state_file import FileQuorumStateStore
from samsa.cluster.quorum.log import Entry
from samsa.cluster.quorum.state import QuorumStateRecord
d = Path(sys.argv[1])
log, store = FileRaftLog(d / "__cluster_metadata-0", segment_bytes=4096), FileQuorumStateStore(d)
for i in range(100000):
    epoch = 1 + i // 50
    store.write(QuorumStateRecord(epoch, 1, 1))
    log.append([Entry(epoch, b"%d.%d" % (i, k) * 20) for k in range(3)])
    if i % 7 == 3:
        log.truncate_to(log.end_offset - 1)
    log.flush()
    print(epoch, log.end_offset, flush=True)  # acknowledged: durable
"""


def test_kill_9_keeps_every_flushed_entry(tmp_path: Path) -> None:
    """A real process appending, truncating and flushing, killed with SIGKILL mid-stream:
    reopening finds every entry it acknowledged (and the quorum-state it wrote), uncorrupted."""
    import subprocess
    import sys
    import time

    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(tmp_path)], stdout=subprocess.PIPE,
                            env=env, text=True)
    assert proc.stdout is not None
    acked: list[tuple[int, int]] = []
    deadline = time.monotonic() + 30
    while len(acked) < 60 and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        e, end = map(int, line.split())
        acked.append((e, end))
    proc.kill()
    rest = proc.stdout.read()  # acknowledgements written before the kill landed
    acked += [(int(a), int(b)) for a, b in (ln.split() for ln in rest.splitlines() if ln.strip())]
    proc.wait()
    assert len(acked) >= 60, "the writer did not get going"
    epoch, end = acked[-1]
    log = FileRaftLog(tmp_path / "__cluster_metadata-0")
    assert log.end_offset >= end
    entries = log.read(0, 1 << 30)
    assert all(a.epoch <= b.epoch for a, b in zip(entries, entries[1:], strict=False))
    # entry contents follow the writer's rule: round i wrote b"i.k" * 20 in epoch 1 + i // 50
    for e in entries:
        i = int(e.data.split(b".")[0])
        assert e.epoch == 1 + i // 50 and e.data == e.data[: len(e.data) // 20] * 20
    rec = FileQuorumStateStore(tmp_path).read()
    assert rec is not None and rec.epoch >= epoch


# ---------------------------------------------------------------------------- quorum-state
def test_quorum_state_file_round_trip_and_format(tmp_path: Path) -> None:
    store = FileQuorumStateStore(tmp_path / "meta", voters=[3, 1, 2])
    assert store.read() is None  # no file: a fresh node
    store.write(QuorumStateRecord(7, None, 2))
    assert store.read() == QuorumStateRecord(7, None, 2)
    doc = json.loads((tmp_path / "meta" / "quorum-state").read_text())
    assert doc == {"leaderId": -1, "leaderEpoch": 7, "votedId": 2, "appliedOffset": 0,
                   "currentVoters": [{"voterId": 1}, {"voterId": 2}, {"voterId": 3}],
                   "data_version": 0}
    store.write(QuorumStateRecord(8, 3, None))
    assert FileQuorumStateStore(tmp_path / "meta").read() == QuorumStateRecord(8, 3, None)


@pytest.mark.parametrize("content", [b"", b"{", b"\xff\xfe", b"[]", b'{"leaderEpoch": 1}',
                                     b'{"leaderId":-1,"leaderEpoch":"7","votedId":2,"data_version":0}',
                                     b'{"leaderId":-1,"leaderEpoch":7,"votedId":2,"data_version":9}'])
def test_a_corrupt_quorum_state_is_an_error_not_a_fresh_start(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "quorum-state").write_bytes(content)
    with pytest.raises(CorruptQuorumStateError):
        FileQuorumStateStore(tmp_path).read()


def test_quorum_state_is_durable_before_write_returns(tmp_path: Path) -> None:
    """tmp written and fsynced, renamed over, directory fsynced, all before write() returns;
    after a power loss at any point the file holds the previous or the new record."""
    root = tmp_path / "root"
    root.mkdir()
    records = [QuorumStateRecord(e, None if e % 2 else 1, 2 if e % 2 else None) for e in range(1, 9)]
    with FsRecorder(root) as rec:
        store = FileQuorumStateStore(root / "meta", voters=[1, 2, 3])
        for i, r in enumerate(records):
            store.write(r)
            rec.mark("durable", i)
    kinds = [op[0] for op in rec.ops if op[0] != "mark"]
    # one write: creat/trunc of the temporary, write, fsync, rename, dir fsync
    first = kinds[kinds.index("write"):kinds.index("fsyncdir", kinds.index("rename")) + 1]
    assert first == ["write", "fsync", "rename", "fsyncdir"]
    checked = 0
    for state in crash_states(rec.ops, 120, 7):
        work = tmp_path / f"s{checked}"
        state.disk.materialize(work)
        got = FileQuorumStateStore(work / "meta").read()  # never raises: no torn file
        if state.marks:
            i = state.marks[-1][2]
            assert got in (records[i], records[min(i + 1, len(records) - 1)])
        else:
            assert got in (None, records[0])
        checked += 1
    assert checked > 40


# ---------------------------------------------------------------------------- driving the core
class _DiskLogForSim(FileRaftLog):
    """The simulator's crash() becomes a reopen of the files (kill -9: buffered writes lost)."""

    def crash(self) -> None:
        self.__init__(self.dir, self.segment_bytes)  # type: ignore[misc]


def test_simulator_runs_over_file_logs(tmp_path: Path) -> None:
    """The deterministic simulator (its safety checks after every step: committed entries never
    lost or changed, one leader per epoch; then liveness) with every node's log on files and each
    crash a reopen from disk. The schedules must come out exactly as over MemoryLog."""
    seeds = list(range(40)) + [211, 240]  # 30, 211, 240: many commits, crashes and snapshots
    crashes = installs = 0
    for seed in seeds:
        expected = Simulation(seed, 3).run()
        sim = Simulation(seed, 3)
        for nid, sn in sim.nodes.items():
            sn.log = _DiskLogForSim(tmp_path / f"s{seed}n{nid}", segment_bytes=512)  # type: ignore[assignment]
        with NoSync():
            got = sim.run()
        assert got == expected, f"seed {seed}"
        crashes += got.crashes
        installs += got.snapshots_installed
        for nid, sn in sim.nodes.items():
            reopened = FileRaftLog(tmp_path / f"s{seed}n{nid}")
            assert reopened.snapshot_id == sn.log.snapshot_id
            start = reopened.start_offset
            assert reopened.read(start, 1 << 20) == sn.log.read(start, 1 << 20)
    assert crashes > 100 and installs > 2


class _DiskNode:
    """One voter with its quorum-state file and log directory, restartable from disk."""

    def __init__(self, nid: int, root: Path, voters: list[int], now: int) -> None:
        self.nid, self.root, self.voters = nid, root, voters
        self.start(now)

    def start(self, now: int) -> None:
        self.store = FileQuorumStateStore(self.root, self.voters)
        self.log = FileRaftLog(self.root / "__cluster_metadata-0")
        cfg = QuorumConfig(election_timeout_ms=300, fetch_timeout_ms=600, fetch_max_wait_ms=100)
        self.node = RaftNode(self.nid, self.voters, cfg, self.store.read(), self.log,
                             random.Random(self.nid * 1000 + now), now)
        self.committed = self.log.start_offset


class _Net:
    """Messages in memory, delivered at the next 10 ms tick; in flight across `run` calls."""

    def __init__(self, nodes: dict[int, _DiskNode]) -> None:
        self.nodes = nodes
        self.inbox: list[Message] = []

    def run(self, now: int, until: Callable[[], bool], limit_ms: int) -> int:
        end = now + limit_ms
        while now < end and not until():
            now += 10
            batch, self.inbox = self.inbox, []
            for n in self.nodes.values():
                out = n.node.step(now, [m for m in batch if m.dst == n.nid])
                out.apply(n.store.write, n.log.flush, self.inbox.append,
                          lambda hw, n=n: setattr(n, "committed", hw))
        assert until(), "the cluster did not get there in time"
        return now


def test_three_nodes_elect_commit_and_survive_a_full_restart(tmp_path: Path) -> None:
    ids = [1, 2, 3]
    now = 0
    nodes = {i: _DiskNode(i, tmp_path / f"node{i}", ids, now) for i in ids}
    net = _Net(nodes)

    def leader() -> _DiskNode | None:
        ls = [n for n in nodes.values() if n.node.role == "leader"]
        return ls[0] if len(ls) == 1 else None

    now = net.run(now, lambda: leader() is not None, 20_000)
    first = leader()
    assert first is not None
    last = first.node.propose([b"rec-%d" % i for i in range(20)])
    now = net.run(now, lambda: all(n.committed > last for n in nodes.values()), 20_000)
    committed = first.log.read(0, last + 1)
    assert [e.data for e in committed if not e.control] == [b"rec-%d" % i for i in range(20)]
    epoch1 = first.node.epoch
    assert all(n.store.read() is not None and n.store.read().epoch == epoch1  # type: ignore[union-attr]
               for n in nodes.values())

    # kill -9 all three (objects dropped; only files remain) and start them from disk
    for n in nodes.values():
        n.start(now)
        assert n.log.read(0, last + 1) == committed  # every committed entry is on every disk
    net.inbox.clear()  # what was in flight died with the senders
    now = net.run(now, lambda: leader() is not None, 20_000)
    second = leader()
    assert second is not None and second.node.epoch > epoch1
    last2 = second.node.propose([b"after-restart"])
    now = net.run(now, lambda: all(n.committed > last2 for n in nodes.values()), 20_000)
    for n in nodes.values():
        assert n.log.read(0, last + 1) == committed
        assert n.log.entry(last2).data == b"after-restart"
    # the on-disk vote/leader record matches what the node runs with
    for n in nodes.values():
        rec = FileQuorumStateStore(n.root).read()
        assert rec is not None and rec.epoch == second.node.epoch
        assert os.path.exists(n.root / "__cluster_metadata-0" / LEADER_EPOCH_CHECKPOINT)
