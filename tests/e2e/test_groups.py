"""Consumer groups with real clients in separate processes: balanced assignment, a member killed
with kill -9 (its partitions move to the survivors, nothing is lost), mixed clients, cooperative
rebalancing, static membership, and the broker itself killed and restarted."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.testing import SamsaBroker

pytestmark = pytest.mark.timeout(240)
MEMBER = str(Path(__file__).with_name("group_member.py"))
PARTS = 6


@pytest.fixture(scope="module")
def broker() -> Iterator[SamsaBroker]:
    with SamsaBroker(overrides={"group.initial.rebalance.delay.ms": "200"}) as b:
        yield b


class Member:
    def __init__(self, client: str, bs: str, group: str, topic: str, path: Path,
                 **extra: str) -> None:
        self.path = path
        args = [sys.executable, MEMBER, client, bs, group, topic, str(path)]
        args += [f"{k}={v}" for k, v in extra.items()]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL,
                                     stderr=open(str(path) + ".err", "w"), env=env)  # noqa: SIM115

    def lines(self) -> list[str]:
        return self.path.read_text().splitlines() if self.path.exists() else []

    def assignment(self) -> list[int] | None:
        """Current partitions as seen from the member's own assign/revoke events."""
        owned: set[int] | None = None
        for line in self.lines():
            kind, _, rest = line.partition(" ")
            if kind not in ("assign", "revoke", "set"):
                continue
            parts = {int(x) for x in rest.split(",") if x}
            if kind == "set":
                owned = parts
            elif kind == "assign":
                owned = (owned or set()) | parts
            elif kind == "revoke" and owned is not None:
                owned -= parts
        return None if owned is None else sorted(owned)

    def messages(self) -> set[tuple[int, int]]:
        out = set()
        for line in self.lines():
            if line.startswith("msg "):
                _, p, o = line.split()
                out.add((int(p), int(o)))
        return out

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def wait_until(cond, timeout: float = 60.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return True
        time.sleep(0.2)
    return False


def make_topic(bs: str, topic: str, n: int) -> None:
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(topic, PARTS, 1)])[topic].result(10)
    produce(bs, topic, n)


def produce(bs: str, topic: str, n: int, start: int = 0) -> None:
    p = Producer({"bootstrap.servers": bs, "linger.ms": 5})
    for i in range(start, start + n):
        p.produce(topic, value=b"%d" % i, partition=i % PARTS)
    assert p.flush(20) == 0


def balanced(members: list[Member], per: int) -> bool:
    got = [m.assignment() for m in members]
    if any(a is None or len(a) != per for a in got):
        return False
    flat = sorted(p for a in got for p in a)  # type: ignore[union-attr]
    return flat == list(range(PARTS))


def all_offsets(bs: str, topic: str) -> set[tuple[int, int]]:
    c = Consumer({"bootstrap.servers": bs, "group.id": "x"})
    out = set()
    for p in range(PARTS):
        lo, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
        out |= {(p, o) for o in range(lo, hi)}
    c.close()
    return out


@pytest.mark.parametrize("client", ["confluent", "kafka-python", "aiokafka"])
def test_three_members_split_and_survive_kill9(broker: SamsaBroker, tmp_path: Path,
                                               client: str) -> None:
    bs = broker.bootstrap
    topic, group = f"grp-{client}", f"g-{client}"
    make_topic(bs, topic, 3000)
    members = [Member(client, bs, group, topic, tmp_path / f"m{i}.log") for i in range(3)]
    try:
        assert wait_until(lambda: balanced(members, 2)), [m.lines()[-3:] for m in members]
        victim, survivors = members[0], members[1:]
        taken = victim.assignment()
        victim.kill()
        produce(bs, topic, 600, start=3000)
        assert wait_until(lambda: balanced(survivors, 3)), [m.assignment() for m in survivors]
        assert set(taken or []) <= {p for m in survivors for p in m.assignment() or []}
        want = all_offsets(bs, topic)
        assert wait_until(lambda: want <= set().union(*(m.messages() for m in members)))
    finally:
        for m in members:
            m.stop()


def test_mixed_clients_in_one_group(broker: SamsaBroker, tmp_path: Path) -> None:
    bs = broker.bootstrap
    make_topic(bs, "grp-mixed", 600)
    members = [Member("confluent", bs, "g-mixed", "grp-mixed", tmp_path / "a.log",
                      **{"partition.assignment.strategy": "range"}),
               Member("kafka-python", bs, "g-mixed", "grp-mixed", tmp_path / "b.log",
                      assignor="range"),
               Member("aiokafka", bs, "g-mixed", "grp-mixed", tmp_path / "c.log",
                      assignor="range")]
    try:
        assert wait_until(lambda: balanced(members, 2)), [m.assignment() for m in members]
        want = all_offsets(bs, "grp-mixed")
        assert wait_until(lambda: want <= set().union(*(m.messages() for m in members)))
    finally:
        for m in members:
            m.stop()


def test_cooperative_sticky_join_revokes_only_what_moves(broker: SamsaBroker,
                                                         tmp_path: Path) -> None:
    bs = broker.bootstrap
    make_topic(bs, "grp-coop", 60)
    conf = {"partition.assignment.strategy": "cooperative-sticky"}
    a = Member("confluent", bs, "g-coop", "grp-coop", tmp_path / "a.log", **conf)
    try:
        assert wait_until(lambda: a.assignment() == list(range(PARTS)))
        b = Member("confluent", bs, "g-coop", "grp-coop", tmp_path / "b.log", **conf)
        assert wait_until(lambda: balanced([a, b], 3)), (a.lines(), b.lines())
        revoked = [line for line in a.lines() if line.startswith("revoke")]
        moved = {int(x) for line in revoked for x in line.split()[1].split(",") if x}
        assert moved == set(b.assignment() or []), "a revoked partitions it kept"
        assert all(line != "revoke " + ",".join(map(str, range(PARTS))) for line in revoked)
        b.stop()
    finally:
        a.stop()


def test_static_member_restart_keeps_partitions_without_rebalance(broker: SamsaBroker,
                                                                  tmp_path: Path) -> None:
    bs = broker.bootstrap
    make_topic(bs, "grp-static", 60)
    ms = [Member("confluent", bs, "g-static", "grp-static", tmp_path / f"s{i}.log",
                 **{"group.instance.id": f"inst-{i}"}) for i in range(2)]
    try:
        assert wait_until(lambda: balanced(ms, 3))
        before = ms[0].assignment()
        gen_before = describe_generation(bs, "g-static")
        ms[0].kill()
        ms[0] = Member("confluent", bs, "g-static", "grp-static", tmp_path / "s0b.log",
                       **{"group.instance.id": "inst-0"})
        assert wait_until(lambda: ms[0].assignment() is not None)
        assert ms[0].assignment() == before
        assert not [x for x in ms[1].lines() if x.startswith("revoke") and x != "revoke "], \
            "the other member was revoked: a rebalance happened"
        assert describe_generation(bs, "g-static") == gen_before
    finally:
        for m in ms:
            m.stop()


def test_kip848_consumer_protocol_balances_and_rebalances(broker: SamsaBroker,
                                                           tmp_path: Path) -> None:
    bs = broker.bootstrap
    make_topic(bs, "grp-848", 600)
    conf = {"group.protocol": "consumer"}
    ms = [Member("confluent", bs, "g-848", "grp-848", tmp_path / f"k{i}.log", **conf)
          for i in range(2)]
    try:
        assert wait_until(lambda: balanced(ms, 3)), [m.assignment() for m in ms]
        ms.append(Member("confluent", bs, "g-848", "grp-848", tmp_path / "k2.log", **conf))
        assert wait_until(lambda: balanced(ms, 2)), [m.assignment() for m in ms]
        ms[0].stop()  # leaves the group (member epoch -1)
        assert wait_until(lambda: balanced(ms[1:], 3)), [m.assignment() for m in ms[1:]]
        want = all_offsets(bs, "grp-848")
        assert wait_until(lambda: want <= set().union(*(m.messages() for m in ms)))
        admin = AdminClient({"bootstrap.servers": bs})
        d = admin.describe_consumer_groups(["g-848"])["g-848"].result(10)
        assert len(d.members) == 2
    finally:
        for m in ms:
            m.stop()


def describe_generation(bs: str, group: str) -> tuple[str, list[str]]:
    """(state, sorted instance ids) from DescribeGroups; the generation itself is not exposed, so
    'no rebalance' is checked by the survivor never being revoked."""
    admin = AdminClient({"bootstrap.servers": bs})
    d = admin.describe_consumer_groups([group])[group].result(10)
    return str(d.state), sorted(m.group_instance_id or "" for m in d.members)


def test_broker_kill9_keeps_offsets_groups_and_lag(tmp_path: Path) -> None:
    with SamsaBroker(overrides={"group.initial.rebalance.delay.ms": "0"}) as b:
        bs = b.bootstrap
        make_topic(bs, "grp-dur", 600)
        c = Consumer({"bootstrap.servers": bs, "group.id": "g-dur", "enable.auto.commit": False,
                      "auto.offset.reset": "earliest"})
        c.subscribe(["grp-dur"])
        n = 0
        deadline = time.time() + 30
        while n < 300 and time.time() < deadline:
            got = sum(1 for m in c.consume(50, 0.5) if m.error() is None)
            n += got
            if got:  # committing with nothing new consumed fails with _NO_OFFSET
                c.commit(asynchronous=False)
        committed_before = {tp.partition: tp.offset for tp in c.committed(
            [TopicPartition("grp-dur", p) for p in range(PARTS)], timeout=10)}
        c.close()
        assert sum(max(o, 0) for o in committed_before.values()) >= 300
        b.kill()
        b.start()
        admin = AdminClient({"bootstrap.servers": bs})
        groups = admin.list_consumer_groups().result(10)
        assert "g-dur" in {g.group_id for g in groups.valid}
        c2 = Consumer({"bootstrap.servers": bs, "group.id": "g-dur"})
        after = {tp.partition: tp.offset for tp in c2.committed(
            [TopicPartition("grp-dur", p) for p in range(PARTS)], timeout=10)}
        c2.close()
        assert after == committed_before
