"""Connect group membership against a real Samsa broker: three WorkerGroupMembers in one process
join one group, agree on one leader and one spread of the work; a member that dies without
LeaveGroup is expelled after its session timeout and its work moves only after
scheduled.rebalance.max.delay.ms; the broker lists and describes a "connect" group."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator, Mapping, Sequence

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from samsa.cluster.channel import NodeChannel
from samsa.connect.runtime.group.member import MemberConfig, WorkerGroupMember
from samsa.connect.runtime.group.protocol import Assignment, decode_assignment, decode_metadata
from samsa.connect.runtime.status import ConnectorTaskId
from samsa.testing import SamsaBroker

CONNECTORS = {"alpha": 4, "beta": 3, "gamma": 2}
DESCRIBE_GROUPS = 15
LIST_GROUPS = 16


@pytest.fixture(scope="module")
def broker() -> Iterator[SamsaBroker]:
    # no initial rebalance delay: the test measures rounds, not the broker's join window
    with SamsaBroker(overrides={"group.initial.rebalance.delay.ms": "0"}) as b:
        yield b


class Herder:
    """The smallest herder: a fixed config snapshot and a record of what the member said."""

    def __init__(self, name: str) -> None:
        self.url = f"http://{name}:8083/"
        self.running_c: set[str] = set()
        self.running_t: set[ConnectorTaskId] = set()
        self.events: list[tuple[str, Assignment | None]] = []
        self.generation = -1

    def metadata(self) -> tuple[str, int]:
        return self.url, 5

    def config_snapshot(self) -> tuple[int, Mapping[str, int]]:
        return 5, CONNECTORS

    def on_revoked(self, connectors: Sequence[str], tasks: Sequence[ConnectorTaskId]) -> None:
        self.running_c -= set(connectors)
        self.running_t -= set(tasks)
        self.events.append(("revoked", None))

    def on_assigned(self, assignment: Assignment, generation: int) -> None:
        assert assignment.error == 0
        self.running_c = set(assignment.connectors)
        self.running_t = set(assignment.tasks)
        self.generation = generation
        self.events.append(("assigned", assignment))


def all_work() -> tuple[set[str], set[ConnectorTaskId]]:
    return set(CONNECTORS), {ConnectorTaskId(c, i) for c, n in CONNECTORS.items()
                             for i in range(n)}


def spread_ok(herders: Sequence[Herder]) -> bool:
    conns, tasks = all_work()
    got_c = [c for h in herders for c in h.running_c]
    got_t = [t for h in herders for t in h.running_t]
    if sorted(got_c) != sorted(conns) or sorted(got_t) != sorted(tasks):
        return False
    sizes_c = [len(h.running_c) for h in herders]
    sizes_t = [len(h.running_t) for h in herders]
    return max(sizes_c) - min(sizes_c) <= 1 and max(sizes_t) - min(sizes_t) <= 1


async def wait_for(cond: Callable[[], bool], what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def member(broker: SamsaBroker, group: str, herder: Herder) -> WorkerGroupMember:
    cfg = MemberConfig(group_id=group, bootstrap_servers=broker.bootstrap,
                       session_timeout_ms=6000, heartbeat_interval_ms=300,
                       rebalance_timeout_ms=10_000, scheduled_rebalance_max_delay_ms=2000)
    return WorkerGroupMember(cfg, herder)


async def describe(broker: SamsaBroker, group: str) -> object:
    host, port = broker.bootstrap.split(":")
    ch = NodeChannel(host, int(port), "test")
    try:
        resp = await ch.request(DESCRIBE_GROUPS, 5, {"groups": [group],
                                                     "include_authorized_operations": False})
    finally:
        await ch.close()
    return resp.groups[0]


def test_three_members_share_one_group(broker: SamsaBroker) -> None:
    asyncio.run(_three_members(broker))


async def _three_members(broker: SamsaBroker) -> None:
    group = "connect-cluster-a"
    herders = [Herder(f"w{i}") for i in range(3)]
    members = [member(broker, group, h) for h in herders]
    for m in members:
        m.start()
    try:
        def settled() -> bool:
            gens = {m.generation for m in members}
            return len(gens) == 1 and spread_ok(herders) and \
                not any(m.rejoin_needed for m in members)
        await wait_for(settled, "three members to settle on one balanced spread")
        leaders = {m.assignment.leader for m in members if m.assignment is not None}
        assert len(leaders) == 1
        leader_id = leaders.pop()
        assert [m.is_leader for m in members].count(True) == 1
        lead = next(m for m in members if m.is_leader)
        assert lead.member_id == leader_id
        assert {m.leader_url for m in members} == {herders[members.index(lead)].url}
        assert lead.owner_url("alpha") in {h.url for h in herders}

        # the broker describes a "connect" group whose member metadata is Connect's
        g = await describe(broker, group)
        assert int(g.error_code) == 0
        assert g.protocol_type == "connect" and g.protocol_data == "sessioned"
        assert g.group_state == "Stable"
        assert sorted(m.member_id for m in g.members) == sorted(m.member_id for m in members)
        urls = {decode_metadata(m.member_metadata).url for m in g.members}
        assert urls == {h.url for h in herders}
        for d in g.members:
            a = decode_assignment(d.member_assignment)
            assert a.leader == leader_id and a.version == 2

        # a follower dies without LeaveGroup: expelled after the session timeout, its work
        # parked for the delay, then given to the survivors
        victim = next(i for i, m in enumerate(members) if not m.is_leader)
        lost_t = set(herders[victim].running_t)
        lost_c = set(herders[victim].running_c)
        assert lost_t
        await members[victim].close(leave=False)
        survivors = [h for i, h in enumerate(herders) if i != victim]
        marks = [len(h.events) for h in survivors]
        await wait_for(lambda: spread_ok(survivors), "the survivors to take over", 90.0)
        assert lost_t <= set().union(*(h.running_t for h in survivors))
        assert lost_c <= set().union(*(h.running_c for h in survivors))
        # before any survivor got the lost work, a round told them to wait for the delay
        for h, mark in zip(survivors, marks, strict=True):
            seen_delay = False
            for _kind, a in h.events[mark:]:
                if a is None:
                    continue
                got_lost = (set(a.tasks) & lost_t) or (set(a.connectors) & lost_c)
                if got_lost:
                    assert seen_delay, f"{h.url} got lost work without a delay first"
                    break
                seen_delay = seen_delay or a.delay_ms > 0
        g = await describe(broker, group)
        assert len(g.members) == 2
    finally:
        for m in members:
            await m.close()


def test_admin_tools_see_a_connect_group(broker: SamsaBroker) -> None:
    asyncio.run(_admin_tools(broker))


async def _admin_tools(broker: SamsaBroker) -> None:
    group = "connect-cluster-b"
    h = Herder("solo")
    m = member(broker, group, h)
    m.start()
    try:
        await wait_for(lambda: spread_ok([h]), "a single member to take all work")
        host, port = broker.bootstrap.split(":")
        ch = NodeChannel(host, int(port), "test")
        try:
            listed = await ch.request(LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})
        finally:
            await ch.close()
        mine = [g for g in listed.groups if g.group_id == group]
        assert [(g.protocol_type, g.group_state, g.group_type) for g in mine] == \
            [("connect", "Stable", "classic")]
        # Kafka's admin clients list and describe consumer groups only: a connect group is
        # left out of the list, and describing it names its protocol type
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        consumer_groups = await asyncio.to_thread(
            lambda: admin.list_consumer_groups().result(10))
        assert group not in {g.group_id for g in consumer_groups.valid}
        with pytest.raises(KafkaException, match=r"not a consumer group \(connect\)"):
            await asyncio.to_thread(
                lambda: admin.describe_consumer_groups([group])[group].result(10))
    finally:
        await m.close()
    g = await describe(broker, group)
    assert g.group_state == "Empty" and not g.members  # LeaveGroup on close
