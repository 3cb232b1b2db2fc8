"""Faults against a real KRaft cluster of separate processes: the active controller `kill -9`'d
again and again while topics are created through every broker, the leader frozen (SIGSTOP) past
the election timeout, every node killed at once, and a broker-only node joining three voters.
Every check asks each node alone (its own listener, raw wire), so it is that node's image that is
judged, not whichever broker a client library picked."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from samsa.testing import SamsaCluster
from tests.cluster_util import (
    LeaderClaims,
    TopicView,
    create_topic,
    create_topic_retrying,
    quorum_members,
    topic_configs,
    topics,
    wait_until,
)

pytestmark = pytest.mark.timeout(300)

KILLS = 20
CONFIG_KEYS = ["retention.ms", "cleanup.policy"]


def configs_for(i: int) -> dict[str, str]:
    return {"retention.ms": str(3_600_000 + i), "cleanup.policy": "compact" if i % 2 else "delete"}


def controllers_of(c: SamsaCluster) -> dict[int, str]:
    return {n.node_id: n.controller_address for n in c.controllers if n.running and not n.paused}


def leader_epoch(c: SamsaCluster, claims: LeaderClaims) -> tuple[int, int] | None:
    """(leader, epoch) of a live node that answers as the leader, the highest epoch first."""
    views = claims.poll(controllers_of(c))
    leaders = [(v[2], node) for node, v in views.items() if v[0] == 0]
    if not leaders:
        return None
    epoch, node = max(leaders)
    return node, epoch


class Creator(threading.Thread):
    """Creates topics with configs through each broker in turn (CreateTopics sent to that broker,
    which forwards it to the active controller) and records which were acknowledged."""

    def __init__(self, c: SamsaCluster, prefix: str) -> None:
        super().__init__(daemon=True)
        self.addresses = [n.bootstrap for n in c.brokers]
        self.prefix = prefix
        self.acked: dict[str, tuple[int, dict[str, str]]] = {}
        self.acked_via: Counter[str] = Counter()
        self.outcomes: Counter[str] = Counter()
        self.done = threading.Event()
        self.lock = threading.Lock()

    def run(self) -> None:
        i = 0
        while not self.done.is_set() and i < 5000:
            address = self.addresses[i % len(self.addresses)]
            name, parts, configs = f"{self.prefix}-{i}", 1 + i % 3, configs_for(i)
            i += 1
            try:
                code, _ = create_topic(address, name, parts, configs, timeout=6.0)
            except (OSError, ConnectionError):
                self.outcomes["connection"] += 1
                time.sleep(0.05)
                continue
            self.outcomes[str(code)] += 1
            if code == 0:
                with self.lock:
                    self.acked[name] = (parts, configs)
                    self.acked_via[address] += 1
            else:
                time.sleep(0.02)

    def count(self) -> int:
        with self.lock:
            return len(self.acked)


def check_every_image(c: SamsaCluster, expected: dict[str, tuple[int, dict[str, str]]],
                      timeout: float = 60.0) -> dict[str, TopicView]:
    """Each broker alone lists every expected topic with its partition count and a live leader,
    the same topic ids and replicas everywhere, and answers DescribeConfigs with its configs."""
    views: dict[str, dict[str, TopicView]] = {}
    for node in c.brokers:
        def complete(address: str = node.bootstrap) -> dict[str, TopicView] | None:
            seen = topics(address)
            missing = [n for n in expected if n not in seen]
            offline = [n for n in expected if n in seen and -1 in seen[n].leaders]
            return None if missing or offline else seen
        views[node.bootstrap] = wait_until(f"every acknowledged topic on {node.bootstrap}",
                                           complete, timeout)
        seen = views[node.bootstrap]
        for name, (parts, _) in expected.items():
            assert len(seen[name].partitions) == parts, (node.bootstrap, name, seen[name])
        names = sorted(expected)
        for start in range(0, len(names), 200):
            got = topic_configs(node.bootstrap, names[start:start + 200], CONFIG_KEYS)
            for name in names[start:start + 200]:
                for key, value in expected[name][1].items():
                    assert got[name][key] == (value, 1), (node.bootstrap, name, key, got[name])
    first = next(iter(views.values()))
    for address, seen in views.items():
        for name in expected:
            assert seen[name].topic_id == first[name].topic_id, (address, name)
            assert seen[name].partitions == first[name].partitions, (address, name)
    return first


@pytest.mark.slow  # ~75 s on 2 cores; `make test` runs slow tests too
@pytest.mark.timeout(600)  # 20 restarts are CPU-bound: > 300 s once next to `make test`'s workers
def test_kill_active_controller_while_creating_topics(tmp_path: Path) -> None:
    """KILLS times: kill -9 the quorum leader while a thread creates topics through every broker,
    restart it, and wait for a new leader (of a higher epoch) and for the next acknowledged
    CreateTopics. At the end every acknowledged topic is on every node's image, with its
    configs."""
    claims = LeaderClaims()
    with SamsaCluster(3, data_dir=tmp_path) as c:
        creator = Creator(c, "kill")
        creator.start()
        try:
            leader, epoch = wait_until("a quorum leader", lambda: leader_epoch(c, claims), 60)
            for k in range(KILLS):
                before = creator.count()
                wait_until(f"a CreateTopics acknowledged after kill {k}",
                           lambda b=before: creator.count() > b, 60, 0.05)
                c.node(leader).kill()
                c.node(leader).launch()  # back at once: it rejoins while the others elect
                killed, old_epoch = leader, epoch
                leader, epoch = wait_until(
                    f"a leader after killing node {killed} (epoch {old_epoch}, kill {k})",
                    lambda oe=old_epoch: (le := leader_epoch(c, claims)) and le[1] > oe and le,
                    60, 0.05)
                c.node(killed).wait_listening(time.monotonic() + 60)
            before = creator.count()
            wait_until("a CreateTopics acknowledged after the last kill",
                       lambda: creator.count() > before, 60, 0.05)
        finally:
            creator.done.set()
            creator.join(30)
        claims.check()
        acked = dict(creator.acked)
        assert len(acked) >= KILLS
        # through every broker (each forwards to whichever node is the active controller)
        assert sorted(creator.acked_via) == sorted(n.bootstrap for n in c.brokers), \
            creator.acked_via
        c.wait_brokers(3, timeout=60)
        view = check_every_image(c, acked)
        # nothing was created twice or made up: the only topics are ones this test asked for
        assert all(name.startswith("kill-") for name in view), sorted(view)
        print(f"{KILLS} kills, {len(acked)} topics acknowledged, outcomes {dict(creator.outcomes)}")


# ---- one cluster of three voters (combined) and one broker-only node, shared by the tests below --
@pytest.fixture(scope="module")
def cluster4(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SamsaCluster]:
    with SamsaCluster(4, controllers=3, data_dir=tmp_path_factory.mktemp("c4")) as c:
        yield c


def test_broker_only_node_joins_and_gets_partitions(cluster4: SamsaCluster) -> None:
    c = cluster4
    assert [n.spec.roles for n in c.nodes] == [("broker", "controller")] * 3 + [("broker",)]
    assert c.wait_brokers(4, timeout=60) == [1, 2, 3, 4]
    assert sorted(int(v.split("@")[0]) for v in c.voters.split(",")) == [1, 2, 3]
    broker4 = c.node(4).bootstrap
    create_topic_retrying(broker4, "spread", 8, {"retention.ms": "7200000"})
    view = wait_until("the topic on node 4", lambda: topics(broker4).get("spread"), 30)
    led_by_4 = [i for i, leader in enumerate(view.leaders) if leader == 4]
    assert led_by_4, view  # partitions are assigned across every live broker, node 4 included
    assert set(view.leaders) == {1, 2, 3, 4}, view
    # node 4 serves its partition to a real client
    p = Producer({"bootstrap.servers": c.bootstrap})
    p.produce("spread", b"to-node-4", partition=led_by_4[0])
    assert p.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": broker4, "group.id": "c4-read",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        from confluent_kafka import TopicPartition

        consumer.assign([TopicPartition("spread", led_by_4[0], 0)])
        got = None
        deadline = time.monotonic() + 30
        while got is None and time.monotonic() < deadline:
            m = consumer.poll(1.0)
            if m is not None and m.error() is None:
                got = m.value()
        assert got == b"to-node-4"
    finally:
        consumer.close()
    # the broker-only node has no CONTROLLER listener and follows the quorum as an observer
    assert c.node(4).controller_address == ""
    leader = c.wait_for_leader(30)
    voters, observers = wait_until(
        "node 4 among the observers",
        lambda: (vo := quorum_members(c.node(leader).controller_address)) and 4 in vo[1] and vo,
        30)
    assert voters == [1, 2, 3] and observers == [4]
    check_every_image(c, {"spread": (8, {"retention.ms": "7200000"})})


def test_sigstop_leader_steps_down_after_sigcont(cluster4: SamsaCluster) -> None:
    c = cluster4
    claims = LeaderClaims()
    old, old_epoch = wait_until("a quorum leader", lambda: leader_epoch(c, claims), 60)
    c.node(old).pause()
    try:
        # past the election timeout the other two voters elect a leader of a higher epoch
        new, new_epoch = wait_until(
            "a new leader while the old one is stopped",
            lambda: (le := leader_epoch(c, claims)) and le[0] != old and le[1] > old_epoch and le,
            60)
        # metadata writes keep working while the old leader is frozen
        via = next(n.bootstrap for n in c.brokers if n.node_id not in (old, ))
        create_topic_retrying(via, "during-stop", 2, configs_for(1))
    finally:
        c.node(old).resume()
    # after SIGCONT: every voter names one leader and one epoch, and the old one no longer leads
    def agreed() -> dict[int, tuple[int, int, int]] | None:
        views = claims.poll(controllers_of(c))
        pairs = {(v[1], v[2]) for v in views.values()}
        if len(views) == 3 and len(pairs) == 1:
            leader, epoch = next(iter(pairs))
            if leader >= 0 and epoch >= new_epoch:
                return views
        return None
    views = wait_until("every voter agreeing on one leader after SIGCONT", agreed, 60)
    leader = views[old][1]
    # exactly one voter answers as the leader; the old one follows unless a later election
    # made it leader again
    assert [n for n, v in views.items() if v[0] == 0] == [leader], views
    if leader != old:
        assert views[old][0] != 0, views
    claims.check()
    # writes work through the old leader's broker too, and reach every image
    create_topic_retrying(c.node(old).bootstrap, "after-cont", 3, configs_for(2))
    check_every_image(c, {"during-stop": (2, configs_for(1)), "after-cont": (3, configs_for(2))})


def test_all_nodes_killed_together_keep_the_metadata(cluster4: SamsaCluster) -> None:
    c = cluster4
    created = {f"all-{i}": (1 + i % 4, configs_for(i)) for i in range(6)}
    for i, (name, (parts, configs)) in enumerate(created.items()):
        via = c.brokers[i % len(c.brokers)].bootstrap
        create_topic_retrying(via, name, parts, configs)
    before = check_every_image(c, created)
    names = sorted(before)
    configs_before = topic_configs(c.node(1).bootstrap, names, CONFIG_KEYS)
    # one more, acknowledged right before the crash: committed means it survives
    create_topic_retrying(c.node(2).bootstrap, "all-last", 2, configs_for(99))
    for node in c.nodes:
        node.kill()
    for node in c.nodes:
        node.launch()
    deadline = time.monotonic() + 60
    for node in c.nodes:
        node.wait_listening(deadline)
    c.wait_for_leader(60)
    c.wait_brokers(4, timeout=60)
    after = check_every_image(c, {**created, "all-last": (2, configs_for(99))})
    assert set(after) == set(before) | {"all-last"}
    for name in names:  # same ids, partitions and replicas, same configs
        assert after[name].topic_id == before[name].topic_id, name
        assert after[name].partitions == before[name].partitions, name
    for node in c.brokers:
        assert topic_configs(node.bootstrap, names, CONFIG_KEYS) == configs_before, node
