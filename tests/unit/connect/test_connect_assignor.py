"""Connect's group protocol bytes and the incremental cooperative assignor.

The simulation runs seeded groups through joins, graceful leaves, crashes, restarts within the
delay, connector creation/deletion/resizing and members that miss an assignment, and checks after
every round that nothing runs on two workers, that lost work waits for the delay, and that the
group settles with everything running exactly once, balanced within one.
"""

from __future__ import annotations

import random
import struct

import pytest

from samsa.connect.runtime.group.assignor import (
    AssignorState,
    ConnectorsAndTasks,
    assign,
    configured_work,
    revoking_backoff_ms,
)
from samsa.connect.runtime.group.protocol import (
    COMPATIBLE,
    CONFIG_MISMATCH,
    SESSIONED,
    Assignment,
    ConnectProtocolError,
    WorkerState,
    decode_assignment,
    decode_metadata,
    encode_assignment,
    encode_metadata,
    join_protocols,
)
from samsa.connect.runtime.status import ConnectorTaskId as T

# ---- protocol ----------------------------------------------------------------------------------

FULL = Assignment(error=0, leader="w-1", leader_url="http://a:8083/", config_offset=42,
                  connectors=("c1", "c2"), tasks=(T("c1", 0), T("c1", 1), T("c3", 0)),
                  revoked_connectors=("c4",), revoked_tasks=(T("c4", 0), T("c5", 2)),
                  delay_ms=1234, version=2)


def test_assignment_v1_bytes_are_kafkas_layout() -> None:
    a = Assignment(leader="L", leader_url="u", config_offset=7, connectors=("c",),
                   tasks=(T("c", 0),), revoked_tasks=(T("d", 3),), delay_ms=5, version=1)
    expected = (struct.pack(">hh", 1, 0) + b"\x00\x01L" + b"\x00\x01u" + struct.pack(">q", 7)
                + struct.pack(">i", 1) + b"\x00\x01c" + struct.pack(">iii", 2, -1, 0)
                + struct.pack(">i", 1) + b"\x00\x01d" + struct.pack(">ii", 1, 3)
                + struct.pack(">i", 5))
    assert encode_assignment(a) == expected


def test_metadata_v0_and_v1_bytes() -> None:
    ws = WorkerState("http://w:8083/", 9, None)
    v0 = struct.pack(">h", 0) + struct.pack(">h", 14) + b"http://w:8083/" + struct.pack(">q", 9)
    assert encode_metadata(ws, 0) == v0
    assert encode_metadata(ws, 1) == struct.pack(">h", 1) + v0[2:] + struct.pack(">i", -1)
    back = decode_metadata(v0)
    assert (back.url, back.config_offset, back.assignment, back.version) == \
        ("http://w:8083/", 9, None, 0)


@pytest.mark.parametrize("version", [1, 2])
def test_assignment_round_trip(version: int) -> None:
    a = Assignment(**{**FULL.__dict__, "version": version})
    assert decode_assignment(encode_assignment(a)) == a


def test_assignment_v0_drops_revocations_and_delay() -> None:
    back = decode_assignment(encode_assignment(FULL, 0))
    assert back.version == 0
    assert (back.connectors, back.tasks) == (FULL.connectors, FULL.tasks)
    assert (back.revoked_connectors, back.revoked_tasks, back.delay_ms) == ((), (), 0)


@pytest.mark.parametrize("version", [1, 2])
def test_metadata_round_trip_with_assignment(version: int) -> None:
    ws = WorkerState("http://x:1/", 1 << 40, Assignment(**{**FULL.__dict__, "version": version}))
    back = decode_metadata(encode_metadata(ws, version))
    assert back == ws and back.version == version


def test_join_protocols_prefer_sessioned() -> None:
    protos = join_protocols(WorkerState("u", 3), SESSIONED)
    assert [n for n, _ in protos] == ["sessioned", "compatible"]
    assert [struct.unpack_from(">h", m)[0] for _, m in protos] == [2, 1]
    assert [n for n, _ in join_protocols(WorkerState("u", 3), COMPATIBLE)] == ["compatible"]
    with pytest.raises(ValueError):
        join_protocols(WorkerState("u", 3), "eager-ish")


def test_missing_trailing_fields_read_as_defaults() -> None:
    # an assignment cut right after its config offset: Kafka reads empty lists and delay 0
    head = struct.pack(">hh", 1, 0) + b"\x00\x01L\x00\x00" + struct.pack(">q", 3)
    a = decode_assignment(head)
    assert (a.leader, a.leader_url, a.config_offset, a.connectors, a.delay_ms) == \
        ("L", "", 3, (), 0)
    nulls = head + struct.pack(">ii", -1, -1)
    assert decode_assignment(nulls).tasks == ()


def test_truncated_input_raises_clearly() -> None:
    data = encode_assignment(FULL)
    required = 2 + 2 + 2 + len(FULL.leader) + 2 + len(FULL.leader_url) + 8
    refused = 0
    for cut in range(len(data)):
        try:
            a = decode_assignment(data[:cut])
        except ConnectProtocolError as e:
            assert "malformed" in str(e)
            refused += 1
            continue
        # only a cut between the optional trailing fields decodes (Kafka reads defaults)
        assert cut >= required and a.config_offset == FULL.config_offset
    assert refused >= required
    meta = encode_metadata(WorkerState("u", 1, FULL), 2)
    for cut in range(len(meta)):
        if cut == 2 + 3 + 8:
            assert decode_metadata(meta[:cut]).assignment is None  # no allocation field at all
            continue
        with pytest.raises(ConnectProtocolError):
            decode_metadata(meta[:cut])


def test_garbage_raises_and_never_allocates_huge() -> None:
    bad = [
        b"",
        b"\x00",
        struct.pack(">h", -1) + b"\x00" * 20,  # negative version
        struct.pack(">hh", 1, 0) + struct.pack(">h", -5),  # negative string length
        struct.pack(">hh", 1, 0) + b"\x00\x00\x00\x00" + struct.pack(">q", 0)
        + struct.pack(">i", 0x7FFFFFFF),  # a 2^31 element array in 0 bytes
        struct.pack(">hh", 1, 0) + b"\x00\x02\xff\xfe\x00\x00" + struct.pack(">q", 0),  # bad UTF-8
        struct.pack(">h", 1) + b"\x00\x01u" + struct.pack(">q", 0) + struct.pack(">i", 1000),
    ]
    for data in bad:
        with pytest.raises(ConnectProtocolError):
            if data.startswith(struct.pack(">h", 1) + b"\x00\x01u"):
                decode_metadata(data)
            else:
                decode_assignment(data)
    rng = random.Random(7)
    for _ in range(2000):  # random bytes: decoded or refused, never another exception
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(40)))
        for decode in (decode_assignment, decode_metadata):
            try:
                decode(data)
            except ConnectProtocolError:
                pass


# ---- assignor: single scenarios ---------------------------------------------------------------

def ws(url: str, held: ConnectorsAndTasks | None = None, offset: int = 10) -> WorkerState:
    a = None if held is None else Assignment(connectors=tuple(sorted(held.connectors)),
                                             tasks=tuple(sorted(held.tasks)))
    return WorkerState(url, offset, a)


def test_config_mismatch_when_leader_is_behind() -> None:
    members = {"a": ws("ua", offset=5), "b": ws("ub", offset=9)}
    out = assign("a", members, 5, {"c": 1}, now_ms=0)
    for a in out.assignments.values():
        assert a.error == CONFIG_MISMATCH and a.config_offset == 9
        assert a.connectors == () and a.tasks == ()
        assert a.leader == "a" and a.leader_url == "ua"
    assert out.state == AssignorState()


def test_fresh_group_spreads_evenly() -> None:
    members = {m: ws("u" + m) for m in "abc"}
    out = assign("a", members, 10, {"x": 4, "y": 2}, now_ms=0)
    counts = sorted(len(a.tasks) for a in out.assignments.values())
    assert counts == [2, 2, 2]
    assert sorted(c for a in out.assignments.values() for c in a.connectors) == ["x", "y"]


def test_deleted_connector_is_revoked() -> None:
    held = configured_work({"x": 2})
    out = assign("a", {"a": ws("u", held)}, 10, {}, now_ms=0)
    a = out.assignments["a"]
    assert set(a.revoked_connectors) == {"x"} and set(a.revoked_tasks) == {T("x", 0), T("x", 1)}


def test_new_worker_gets_work_only_after_revocation_round() -> None:
    work = configured_work({"x": 4})
    first = assign("a", {"a": ws("u", work)}, 10, {"x": 4}, now_ms=0)
    st = first.state
    members = {"a": ws("u", work), "b": ws("u")}
    r1 = assign("a", members, 10, {"x": 4}, st, now_ms=1)
    assert r1.assignments["b"].tasks == ()  # nothing moves in the revoking round
    revoked = set(r1.assignments["a"].revoked_tasks)
    assert len(revoked) == 2
    kept = ConnectorsAndTasks.of({"x"}, work.tasks - revoked)
    r2 = assign("a", {"a": ws("u", kept), "b": ws("u")}, 10, {"x": 4}, r1.state, now_ms=2)
    assert set(r2.assignments["b"].tasks) == revoked


def test_lost_work_waits_for_the_delay_and_goes_to_the_returning_worker() -> None:
    cfg = {"x": 4}
    a_work = ConnectorsAndTasks.of({"x"}, {T("x", 0), T("x", 1)})
    b_work = ConnectorsAndTasks.of((), {T("x", 2), T("x", 3)})
    st = AssignorState(previous_assignment=a_work | b_work, previous_members=frozenset("ab"))
    r1 = assign("a", {"a": ws("u", a_work)}, 10, cfg, st, now_ms=1000, max_delay_ms=5000)
    assert r1.assignments["a"].tasks == () and r1.assignments["a"].delay_ms == 5000
    # b restarts as a new member ("c") within the delay: still nothing until the delay ends
    r2 = assign("a", {"a": ws("u", a_work), "c": ws("u")}, 10, cfg, r1.state, now_ms=3000,
                max_delay_ms=5000)
    assert r2.assignments["c"].tasks == () and r2.assignments["c"].delay_ms == 3000
    r3 = assign("a", {"a": ws("u", a_work), "c": ws("u")}, 10, cfg, r2.state, now_ms=6000,
                max_delay_ms=5000)
    assert set(r3.assignments["c"].tasks) == b_work.tasks
    assert r3.assignments["a"].tasks == () and r3.assignments["c"].delay_ms == 0


def test_zero_delay_reassigns_at_once() -> None:
    a_work = configured_work({"x": 2})
    st = AssignorState(previous_assignment=a_work, previous_members=frozenset("ab"))
    out = assign("b", {"b": ws("u")}, 10, {"x": 2}, st, now_ms=5, max_delay_ms=0)
    assert set(out.assignments["b"].tasks) == a_work.tasks


def test_duplicates_are_revoked_from_everyone() -> None:
    dup = ConnectorsAndTasks.of((), {T("x", 0)})
    out = assign("a", {"a": ws("u", dup), "b": ws("u", dup)}, 10, {"x": 1}, now_ms=0)
    assert all(a.revoked_tasks == (T("x", 0),) for a in out.assignments.values())


def test_revoking_backoff() -> None:
    assert [revoking_backoff_ms(n, 300_000) for n in (1, 2, 3, 4, 9)] == \
        [40, 1600, 64000, 300000, 300000]
    assert revoking_backoff_ms(3, 0) == 0


# ---- assignor: seeded simulation --------------------------------------------------------------

class Sim:
    """A group of workers and a leader that runs the assignor each rebalance; time in ms."""

    def __init__(self, seed: int, max_delay: int) -> None:
        self.rng = random.Random(seed)
        self.max_delay = max_delay
        self.now = 0
        self.next_id = 0
        self.members: dict[str, ConnectorsAndTasks] = {}  # live member -> what it runs
        self.order: list[str] = []  # join order: the oldest live member leads
        self.leader: str | None = None
        self.state: AssignorState | None = None
        self.generation = 0
        self.leader_completed = -1
        self.connectors: dict[str, int] = {}
        self.offset = 0
        # work whose worker died -> when the delay a later round announced ends (None: none yet)
        self.lost_until: dict[str | T, int | None] = {}
        self.pending_delay = 0
        self.rounds = 0

    def join(self) -> str:
        m = f"w{self.next_id:03d}"
        self.next_id += 1
        self.members[m] = ConnectorsAndTasks()
        self.order.append(m)
        return m

    def depart(self, m: str) -> None:
        """Crash or leave: either way the worker stops what it ran. Its work waits for the delay
        already running, if one is (Kafka's rule: one delay for all lost work), else for the
        one the next round announces. Work the leader had revoked from it (the worker missed
        that answer) is free in the leader's view, not lost."""
        pending = self.state.scheduled_rebalance_ms if self.state is not None else 0
        revoked = self.state.previous_revocation if self.state is not None \
            else ConnectorsAndTasks()
        for item in (*self.members[m].connectors, *self.members[m].tasks):
            if item not in revoked.connectors and item not in revoked.tasks:
                self.lost_until.setdefault(item, pending or None)
        del self.members[m]
        self.order.remove(m)

    def set_connector(self, name: str, tasks: int | None) -> None:
        if tasks is None:
            self.connectors.pop(name, None)
        else:
            self.connectors[name] = tasks
        self.offset += 1
        want = configured_work(self.connectors)
        for item in list(self.lost_until):  # deleted work is no longer lost
            if item not in want.connectors and item not in want.tasks:
                del self.lost_until[item]

    def rebalance(self, miss: float = 0.0) -> dict[str, Assignment]:
        assert self.members
        self.rounds += 1
        self.generation += 1
        leader = self.order[0]
        if leader != self.leader:  # a new leader knows nothing of earlier rounds
            self.leader, self.state, self.leader_completed = leader, None, -1
            self.lost_until.clear()
        elif self.state is not None and self.state.previous_generation != self.leader_completed:
            self.lost_until.clear()  # the leader missed its last assignment: its view is dropped
        running_now = ConnectorsAndTasks()
        for ct in self.members.values():
            running_now = running_now | ct
        if self.state is not None and self.state.previous_revocation & running_now:
            # a member missed a revocation: Kafka's leader restarts from what runs now
            self.lost_until.clear()
        meta = {m: WorkerState(f"http://{m}/", self.offset, Assignment(
            connectors=tuple(sorted(ct.connectors)), tasks=tuple(sorted(ct.tasks))))
            for m, ct in self.members.items()}
        out = assign(leader, meta, self.offset, dict(self.connectors), self.state,
                     now_ms=self.now, max_delay_ms=self.max_delay, generation=self.generation,
                     last_completed_generation=self.leader_completed)
        self.state = out.state
        running = {}
        for m, ct in self.members.items():
            for item in (*ct.connectors, *ct.tasks):
                running[item] = m
        for m, a in out.assignments.items():
            assert a.error == 0
            new = set(a.connectors) | set(a.tasks)
            # cooperative: nothing is given to a worker while another one runs it
            clash = {i: running[i] for i in new if i in running}
            assert not clash, f"round {self.rounds}: {m} given {clash} still running elsewhere"
            for item in new:
                if item in self.lost_until and self.max_delay:
                    # lost work moves only when a delay announced after the loss has passed
                    until = self.lost_until.pop(item)
                    assert until is not None and self.now >= until, \
                        f"round {self.rounds}: {item} reassigned at {self.now}, delay {until}"
        for m, a in out.assignments.items():
            if miss and self.rng.random() < miss:
                continue  # this member never got its SyncGroup answer
            ct = self.members[m]
            ct = ct - ConnectorsAndTasks.of(a.revoked_connectors, a.revoked_tasks)
            self.members[m] = ct | ConnectorsAndTasks.of(a.connectors, a.tasks)
            if m == leader:
                self.leader_completed = self.generation
        self.pending_delay = max((a.delay_ms for a in out.assignments.values()), default=0)
        if self.pending_delay:
            for item, until in self.lost_until.items():
                if until is None:
                    self.lost_until[item] = self.now + self.pending_delay
        held: dict[str | T, str] = {}
        for m, ct in self.members.items():
            for item in (*ct.connectors, *ct.tasks):
                assert item not in held, f"{item} runs on {held[item]} and {m}"
                held[item] = m
        return out.assignments

    def settle(self) -> None:
        """Rebalance until nobody needs to rejoin: no revocations, no pending delay."""
        for _ in range(40):
            out = self.rebalance()
            moved = any(a.revoked_connectors or a.revoked_tasks or a.connectors or a.tasks
                        for a in out.values())
            if self.pending_delay:
                self.now += self.pending_delay
            elif not moved:
                return
            else:
                self.now += 10
        raise AssertionError("the group did not settle in 40 rounds")

    def check_steady(self) -> None:
        want = configured_work(self.connectors)
        got: list[str | T] = [i for ct in self.members.values()
                              for i in (*ct.connectors, *ct.tasks)]
        assert len(got) == len(set(got))
        assert set(got) == set(want.connectors) | set(want.tasks)
        for count in (lambda ct: len(ct.connectors), lambda ct: len(ct.tasks)):
            sizes = [count(ct) for ct in self.members.values()]
            assert max(sizes) - min(sizes) <= 1, sizes


@pytest.mark.parametrize("seed", range(12))
def test_simulation(seed: int) -> None:
    sim = Sim(seed, max_delay=random.Random(seed).choice([0, 3000, 60_000]))
    rng = sim.rng
    for _ in range(rng.randrange(1, 4)):
        sim.join()
    for i in range(rng.randrange(2, 6)):
        sim.set_connector(f"c{i}", rng.randrange(0, 8))
    sim.settle()
    sim.check_steady()
    for _step in range(60):
        ev = rng.random()
        if ev < 0.2 or not sim.members:
            sim.join()
        elif ev < 0.35 and len(sim.members) > 1:
            sim.depart(rng.choice(sorted(sim.members)))  # crash or graceful leave
        elif ev < 0.45 and len(sim.members) > 1:
            # crash and come back (a new member id) within the delay
            sim.depart(rng.choice(sorted(sim.members)))
            sim.rebalance()
            sim.now += rng.randrange(0, max(1, sim.max_delay // 2))
            sim.join()
        elif ev < 0.6:
            sim.set_connector(f"c{rng.randrange(10)}", rng.randrange(0, 8))
        elif ev < 0.7:
            sim.set_connector(f"c{rng.randrange(10)}", None)
        sim.now += rng.randrange(1, 2000)
        sim.rebalance(miss=0.1)
        if rng.random() < 0.25:
            sim.settle()
            sim.check_steady()
    sim.settle()
    sim.check_steady()


def test_returning_worker_gets_its_work_back() -> None:
    sim = Sim(1, max_delay=10_000)
    for _ in range(3):
        sim.join()
    sim.set_connector("a", 6)
    sim.set_connector("b", 3)
    sim.settle()
    victim = sim.order[-1]
    work = sim.members[victim]
    sim.depart(victim)
    sim.now += 100
    sim.rebalance()
    assert sim.pending_delay == 10_000
    sim.now += 4000
    back = sim.join()
    sim.rebalance()
    assert sim.members[back] == ConnectorsAndTasks()  # not before the delay ends
    sim.now += sim.pending_delay
    sim.rebalance()
    assert sim.members[back] == work
    sim.settle()
    sim.check_steady()
