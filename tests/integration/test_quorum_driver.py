"""QuorumDriver over real TCP (127.0.0.1) and real files: elections, commits, crash-restart,
a lone voter, an observer, snapshot catch-up, malformed frames. All nodes run in this process;
a crash is `stop(resign=False)` (sockets cut, tasks cancelled; only fsync'd state survives)."""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import struct
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from samsa.cluster.quorum.config import QuorumConfig, VoterEndpoint
from samsa.cluster.quorum.driver import NotLeaderError, QuorumDriver, WireError
from samsa.cluster.quorum.log import Entry, OffsetAndEpoch
from samsa.cluster.quorum.messages import NONE
from samsa.cluster.quorum.wire.frames import encode_request

FAST = QuorumConfig(election_timeout_ms=300, fetch_timeout_ms=600, election_backoff_max_ms=300,
                    request_timeout_ms=1000, retry_backoff_ms=20)
CLUSTER = "qdriver-test-cluster"


class Machine:
    """A state machine: the list of committed records, checked for order and exactly-once."""

    def __init__(self) -> None:
        self.records: list[bytes] = []
        self.offsets: list[int] = []
        self.snapshots: list[OffsetAndEpoch] = []

    def on_commit(self, batch: list[tuple[int, Entry]]) -> None:
        for off, e in batch:
            assert not e.control
            assert not self.offsets or off > self.offsets[-1], (off, self.offsets[-1:])
            self.offsets.append(off)
            self.records.append(e.data)

    def on_snapshot(self, sid: OffsetAndEpoch, data: bytes) -> None:
        doc = json.loads(data)
        self.records = [r.encode() for r in doc["records"]]
        self.offsets = list(doc["offsets"])
        self.snapshots.append(sid)

    def take_snapshot(self) -> bytes:
        return json.dumps({"records": [r.decode() for r in self.records], "offsets": self.offsets}).encode()


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


class Cluster:
    def __init__(self, root: Path, n_voters: int, observers: int = 0,
                 config: QuorumConfig = FAST, snapshot_bytes: int = 1 << 20) -> None:
        self.root = root
        self.config = config
        self.snapshot_bytes = snapshot_bytes
        ids = list(range(1, n_voters + observers + 1))
        ports = free_ports(len(ids))
        self.ports = dict(zip(ids, ports, strict=True))
        self.voters = {i: VoterEndpoint(i, "127.0.0.1", self.ports[i]) for i in ids[:n_voters]}
        self.ids = ids
        self.nodes: dict[int, QuorumDriver] = {}
        self.machines: dict[int, Machine] = {}

    async def start(self, i: int) -> QuorumDriver:
        sm = Machine()
        d = QuorumDriver(i, self.voters, self.root / f"n{i}", self.config, CLUSTER,
                         on_commit=sm.on_commit, on_snapshot=sm.on_snapshot,
                         take_snapshot=sm.take_snapshot, snapshot_bytes=self.snapshot_bytes)
        await d.serve("127.0.0.1", self.ports[i])
        await d.start()
        self.nodes[i], self.machines[i] = d, sm
        return d

    async def start_all(self) -> None:
        for i in self.ids:
            await self.start(i)

    async def crash(self, i: int) -> None:
        await self.nodes.pop(i).stop(resign=False)

    async def stop_all(self) -> None:
        for d in list(self.nodes.values()):
            await d.stop(resign=False)
        self.nodes.clear()

    async def leader(self, timeout: float = 20) -> QuorumDriver:
        """The leader that every running voter follows."""
        async def agreed() -> bool:
            ls = [d for d in self.nodes.values() if d.is_leader]
            if len(ls) != 1:
                return False
            lead = ls[0]
            return all(d.leader_id == lead.node_id and d.epoch == lead.epoch
                       for d in self.nodes.values())
        await until(agreed, timeout)
        return next(d for d in self.nodes.values() if d.is_leader)


async def until(cond: Callable[[], Awaitable[bool]], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not await cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        await asyncio.sleep(0.02)


async def propose_retrying(c: Cluster, records: list[bytes], timeout: float = 20) -> int:
    deadline = time.monotonic() + timeout
    while True:
        lead = await c.leader(timeout)
        try:
            return await asyncio.wait_for(lead.propose(records), timeout)
        except NotLeaderError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)


async def all_have(c: Cluster, records: list[bytes], timeout: float = 20) -> None:
    async def ok() -> bool:
        return all(c.machines[i].records[: len(records)] == records for i in c.nodes)
    await until(ok, timeout)


def run(coro: Awaitable[None], timeout: float = 90) -> None:
    async def main() -> None:
        await asyncio.wait_for(coro, timeout)
        await asyncio.sleep(0)  # let cancelled callbacks run
        left = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        assert not left, f"tasks left running after stop: {left}"
    asyncio.run(main())


def test_three_voters_elect_one_leader_and_commit_on_all(tmp_path: Path) -> None:
    async def body() -> None:
        c = Cluster(tmp_path, 3)
        await c.start_all()
        try:
            lead = await c.leader()
            off = await lead.propose([b"a", b"b"])
            # propose returns after the leader's on_commit delivered it
            assert c.machines[lead.node_id].records == [b"a", b"b"]
            assert c.machines[lead.node_id].offsets[-1] == off
            await all_have(c, [b"a", b"b"])
            follower = next(d for d in c.nodes.values() if not d.is_leader)
            with pytest.raises(NotLeaderError) as ei:
                await follower.propose([b"x"])
            assert ei.value.leader_id == lead.node_id
            desc = lead.describe()
            assert desc.error_code == NONE and desc.leader_id == lead.node_id
            assert sorted(v.replica_id for v in desc.current_voters) == [1, 2, 3]
            assert desc.high_watermark > off
            # DescribeQuorum through the wire, on any node
            frame = await follower.handle_request(encode_request(_describe_req(), 7))
            assert frame is not None and struct.unpack_from(">i", frame)[0] == 7
        finally:
            await c.stop_all()
    run(body())


def _describe_req() -> object:
    from samsa.cluster.quorum.messages import DescribeQuorumRequest
    return DescribeQuorumRequest()


def test_graceful_stop_resigns_and_a_successor_takes_over(tmp_path: Path) -> None:
    async def body() -> None:
        c = Cluster(tmp_path, 3, config=QuorumConfig())  # default timeouts: resignation is quick
        await c.start_all()
        try:
            await propose_retrying(c, [b"before"])
            old = await c.leader()
            old_id, old_epoch = old.node_id, old.epoch
            await c.nodes.pop(old_id).stop(resign=True)
            # the successor is elected on EndQuorumEpoch, well before a fetch timeout would
            # elect one (that path is covered by the crash test)
            new = await c.leader()
            assert new.node_id != old_id and new.epoch > old_epoch
            await propose_retrying(c, [b"after"])
            await all_have(c, [b"before", b"after"])
        finally:
            await c.stop_all()
    run(body())


def test_leader_crash_elects_new_leader_and_loses_nothing(tmp_path: Path) -> None:
    async def body() -> None:
        c = Cluster(tmp_path, 3)
        await c.start_all()
        try:
            expect: list[bytes] = []
            for k in range(3):
                rec = [b"r%d" % k]
                await propose_retrying(c, rec)
                expect += rec
            old = await c.leader()
            old_id, old_epoch = old.node_id, old.epoch
            await c.crash(old_id)
            new = await c.leader()
            assert new.node_id != old_id and new.epoch > old_epoch
            await propose_retrying(c, [b"after"])
            expect.append(b"after")
            await c.start(old_id)  # crash restart from its directory: a replay
            await all_have(c, expect)
            assert all(c.machines[i].records == expect for i in c.nodes)
        finally:
            await c.stop_all()
    run(body())


def test_single_voter_elects_itself_commits_and_replays(tmp_path: Path) -> None:
    async def body() -> None:
        c = Cluster(tmp_path, 1, config=QuorumConfig())  # default timeouts
        await c.start_all()
        lead = await c.leader(5)
        assert lead.node_id == 1
        await lead.propose([b"one"])
        await lead.propose([b"two", b"three"])
        await lead.stop(resign=True)
        c.nodes.clear()
        d = await c.start(1)
        await all_have(c, [b"one", b"two", b"three"], 10)
        assert c.machines[1].records == [b"one", b"two", b"three"]  # delivered once
        assert d.is_leader
        await c.stop_all()
    run(body())


def test_observer_receives_all_commits(tmp_path: Path) -> None:
    async def body() -> None:
        c = Cluster(tmp_path, 3, observers=1)
        await c.start_all()
        try:
            obs = c.nodes[4]
            expect: list[bytes] = []
            for k in range(5):
                await propose_retrying(c, [b"o%d" % k])
                expect.append(b"o%d" % k)
            await all_have(c, expect)
            lead = await c.leader()
            assert obs.leader_id == lead.node_id and not obs.is_leader
            desc = lead.describe()
            assert [o.replica_id for o in desc.observers] == [4]
            assert 4 not in [v.replica_id for v in desc.current_voters]
            # the observer finds the next leader after a crash, and never votes
            await c.crash(lead.node_id)
            await propose_retrying(c, [b"later"])
            await all_have(c, [*expect, b"later"])
        finally:
            await c.stop_all()
    run(body())


def test_lagging_node_catches_up_through_a_snapshot(tmp_path: Path) -> None:
    async def body() -> None:
        c = Cluster(tmp_path, 3, snapshot_bytes=200)
        await c.start_all()
        try:
            lead = await c.leader()
            lagger = next(i for i in c.nodes if i != lead.node_id)
            await c.crash(lagger)
            expect = []
            for k in range(30):
                rec = [b"snapshot-record-%03d" % k]
                await propose_retrying(c, rec)
                expect += rec
            lead = await c.leader()
            assert lead._log is not None and lead._log.start_offset > 0  # the leader snapshotted
            await c.start(lagger)
            await all_have(c, expect)
            assert c.machines[lagger].snapshots, "the lagging node did not load a snapshot"
            assert c.machines[lagger].records == expect
        finally:
            await c.stop_all()
    run(body())


def test_malformed_frames_raise_wire_error_and_close_the_connection(tmp_path: Path) -> None:
    async def body() -> None:
        c = Cluster(tmp_path, 1)
        await c.start_all()
        d = c.nodes[1]
        try:
            await c.leader(5)
            for bad in (b"", b"\x00\x34\x00\x02garbage", b"\x00\x01\x00\x11" + b"\xff" * 40):
                with pytest.raises(WireError):
                    await d.handle_request(bad)
            reader, writer = await asyncio.open_connection("127.0.0.1", c.ports[1])
            writer.write(struct.pack(">i", 12) + b"\x00\x34\x00\x02\x00\x00\x00\x01zzzz")
            assert await asyncio.wait_for(reader.read(), 5) == b""  # closed, nothing answered
            writer.close()
            assert await d.propose([b"still-alive"]) >= 0
        finally:
            await c.stop_all()
    run(body())


def test_a_disk_failure_stops_the_driver_and_fails_waiting_proposals(tmp_path: Path) -> None:
    async def body() -> None:
        c = Cluster(tmp_path, 1)
        await c.start_all()
        d = c.nodes[1]
        try:
            await c.leader(5)
            await d.propose([b"ok"])
            shutil.rmtree(tmp_path / "n1")  # the next flush cannot create or write its files
            with pytest.raises(NotLeaderError):
                await asyncio.wait_for(d.propose([b"lost"] * 2000), 10)
            assert isinstance(d.error, OSError)
            assert await d.handle_request(encode_request(_vote_req(), 3)) is None
        finally:
            await c.stop_all()
    run(body())


def _vote_req() -> object:
    from samsa.cluster.quorum.messages import VoteRequest
    return VoteRequest(CLUSTER, 5, 2, 1, 0, 0, False)


def test_describe_before_start_names_no_leader(tmp_path: Path) -> None:
    """A node's CONTROLLER listener opens before its driver has read the log: DescribeQuorum
    asked then gets NOT_LEADER_OR_FOLLOWER without a leader, not an exception."""
    from samsa.cluster.quorum import messages as m

    voters = {1: VoterEndpoint(1, "127.0.0.1", free_ports(1)[0])}
    d = QuorumDriver(1, voters, tmp_path / "n1", QuorumConfig(), CLUSTER,
                     on_commit=lambda entries: None, on_snapshot=lambda oe, data: None,
                     take_snapshot=lambda: b"")
    got = d.describe()
    assert (got.error_code, got.leader_id, got.leader_epoch) == (m.NOT_LEADER_OR_FOLLOWER,
                                                                  m.NO_LEADER, 0)
