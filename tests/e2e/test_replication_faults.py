"""Jepsen-style faults against replicated partitions on a 3-node proxied cluster.

Every node reaches the others only through a fault proxy link (samsa.testing.faultproxy), so a
test can cut a node off the network while clients still reach it. A workload of idempotent
acks=all producers, a read_committed reader, a group committing offsets and a transactional writer
runs while partition leaders are `kill -9`'d, frozen (SIGSTOP) past broker.session.timeout.ms and
isolated from the majority; then the checker (samsa.testing.workload) judges the healed cluster:
nothing acknowledged lost or duplicated, ISR replicas byte-identical up to the high watermark,
reader offsets never backwards, no aborted value read committed, no group offset regression.

SAMSA_SOAK_FAULTS=<n> runs n faults instead of the normal schedule (10 kills, 5 SIGSTOPs,
5 isolations, a one-way cut and a slowed network), drawn from SAMSA_SOAK_KINDS (default
kill9,kill9,sigstop,isolate,one_way,delay); SAMSA_FAULTS_SEED picks the seed (printed on
failure); SAMSA_FAULTS_RF=1 runs the harness on unreplicated topics (a check of the harness itself,
with no isolation assertion).
"""

from __future__ import annotations

import os
import random
import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.testing import SamsaCluster, workload
from samsa.testing.workload import (
    GroupCommitter,
    IdempotentProducers,
    Reader,
    Report,
    TxnWriter,
    check,
    metadata,
    raw_produce,
)
from tests.cluster_util import LeaderClaims, quorum_view, wait_until

SESSION_MS = 3000
OVERRIDES = {
    "broker.session.timeout.ms": str(SESSION_MS),
    "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "200",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "transaction.state.log.num.partitions": "3",
    "group.initial.rebalance.delay.ms": "0",
}
TOPIC, TXN_TOPIC, PARTITIONS = "jepsen", "jepsen-txn", 3
NOT_ENOUGH_REPLICAS, NOT_ENOUGH_REPLICAS_AFTER_APPEND = 19, 20


def create_topics(c: SamsaCluster, rf: int, min_isr: int, names: list[str],
                  partitions: int = PARTITIONS, timeout: float = 60.0) -> None:
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    pending = set(names)
    deadline = time.monotonic() + timeout
    while pending:
        futures = admin.create_topics([NewTopic(n, partitions, rf, config={
            "min.insync.replicas": str(min_isr)}) for n in sorted(pending)], request_timeout=15)
        for name, fut in futures.items():
            try:
                fut.result(20)
                pending.discard(name)
            except Exception as e:
                if "TOPIC_ALREADY_EXISTS" in str(e):
                    pending.discard(name)
                elif time.monotonic() > deadline:
                    raise
        time.sleep(0.5)
    for name in names:
        wait_until(f"{name} led everywhere", lambda n=name: all(
            i.leader >= 0 for i in metadata(c.brokers[0].bootstrap, n)[1].values()) and
            len(metadata(c.brokers[0].bootstrap, n)[1]) == partitions, 60)


def leader_of(c: SamsaCluster, topic: str, partition: int,
              exclude: tuple[int, ...] = ()) -> tuple[int, int]:
    """(leader, leader epoch) as the live brokers not in `exclude` report it, the highest epoch
    first; raises AssertionError while none knows a leader."""
    best: tuple[int, int] | None = None
    for node in c.brokers:
        if not node.running or node.paused or node.node_id in exclude:
            continue
        try:
            info = metadata(node.bootstrap, topic, timeout=2.0)[1].get(partition)
        except OSError:
            continue
        if info is not None and info.leader >= 0 and (best is None or info.leader_epoch > best[1]):
            best = (info.leader, info.leader_epoch)
    assert best is not None, f"no leader known for {topic}-{partition}"
    return best


def fenced(c: SamsaCluster, node_id: int) -> bool:
    """True when another live broker's DescribeCluster shows `node_id` fenced (the node itself
    may be cut off from the metadata and still believe it is not)."""
    from samsa.cli import _cluster_wire as w

    for node in c.brokers:
        if node.node_id == node_id or not node.running or node.paused:
            continue
        try:
            with w.connect(node.bootstrap, 2.0) as conn:
                info = w.describe_cluster(conn)
        except w.CliError:
            continue
        return any(b.broker_id == node_id and b.fenced for b in info.brokers)
    return False


class Faults:
    """Runs faults against the leaders of the workload's partitions, counting each kind."""

    def __init__(self, c: SamsaCluster, producers: IdempotentProducers, rng: random.Random,
                 rf: int, report: Report) -> None:
        self.c, self.producers, self.rng, self.rf, self.report = c, producers, rng, rf, report
        self.pinned_acks: list[tuple[int, str, int]] = []  # (node, value, offset) acked in isolation
        self.pinned: Counter[int] = Counter()
        self.log: list[str] = []

    def progress(self, what: str, timeout: float = 60.0) -> None:
        before = self.producers.acked_count()
        assert self.producers.wait_acked(before + 5, timeout), \
            f"no acknowledged write within {timeout}s {what}; faults so far: {self.log}"

    def rejoin(self, node_id: int) -> None:
        """After a fault heals: every broker unfenced and every replica of the workload's
        partitions back in its ISR (Kafka's liveness once the network and nodes are whole)."""
        self.c.wait_brokers(len(self.c.brokers), timeout=90)
        self.steady(f"after node {node_id} came back")

    def steady(self, what: str, timeout: float = 60.0) -> None:
        if self.rf == 1:
            return

        def full() -> bool:
            for topic in (TOPIC, TXN_TOPIC):
                view = metadata(self.c.brokers[0].bootstrap, topic, timeout=2.0)[1]
                if len(view) != PARTITIONS or any(
                        i.leader < 0 or sorted(i.isr) != sorted(i.replicas) for i in view.values()):
                    return False
            return True

        wait_until(f"every ISR full {what}", full, timeout, 0.2)

    def kill9(self, k: int) -> None:
        p = self.rng.randrange(PARTITIONS)
        leader, epoch = wait_until("a leader", lambda: leader_of(self.c, TOPIC, p), 60)
        self.log.append(f"kill9 node {leader} (leader of {TOPIC}-{p} epoch {epoch})")
        node = self.c.node(leader)
        node.kill()
        if self.rf > 1:
            wait_until(f"a new leader of {TOPIC}-{p} after kill -9 of {leader}",
                       lambda: (le := leader_of(self.c, TOPIC, p, exclude=(leader,)))[1] > epoch
                       and le[0] != leader, 60)
            self.progress(f"after kill -9 of node {leader}")
        node.start()
        self.rejoin(leader)
        self.progress(f"after restarting node {leader}")
        self.report.faults["kill -9 leader"] += 1

    def sigstop(self, k: int) -> None:
        p = self.rng.randrange(PARTITIONS)
        leader, epoch = wait_until("a leader", lambda: leader_of(self.c, TOPIC, p), 60)
        self.log.append(f"sigstop node {leader} (leader of {TOPIC}-{p} epoch {epoch})")
        self.c.pause(leader)
        try:
            # past the session timeout: the controller fences the frozen broker
            wait_until(f"node {leader} fenced while frozen", lambda: fenced(self.c, leader),
                       SESSION_MS / 1000 * 4 + 30)
            if self.rf > 1:
                wait_until(f"a new leader of {TOPIC}-{p} while {leader} is frozen",
                           lambda: leader_of(self.c, TOPIC, p, exclude=(leader,))[0] != leader, 60)
                self.progress(f"while node {leader} is frozen")
        finally:
            self.c.resume(leader)
        self.rejoin(leader)
        self.progress(f"after SIGCONT of node {leader}")
        self.report.faults["SIGSTOP leader past session timeout"] += 1

    def isolate(self, k: int) -> None:
        p = self.rng.randrange(PARTITIONS)
        leader, epoch = wait_until("a leader", lambda: leader_of(self.c, TOPIC, p), 60)
        mode = self.rng.choice(["drop", "blackhole"])
        self.log.append(f"isolate ({mode}) node {leader} (leader of {TOPIC}-{p} epoch {epoch})")
        self.c.isolate(leader, mode)
        try:
            # a producer pinned to the old leader: acks=all must not be acknowledged there
            # (its followers cannot fetch, so the high watermark cannot pass the append)
            deadline = time.monotonic() + SESSION_MS / 1000 + 3
            j = 0
            while time.monotonic() < deadline and j < 20:
                value = f"pinned-{k}-{j}"
                j += 1
                try:
                    code, offset = raw_produce(self.c.node(leader).bootstrap, TOPIC, p,
                                               [value.encode()], acks=-1, timeout_ms=1500)
                except OSError:
                    continue
                self.pinned[code] += 1
                if code == 0:
                    self.pinned_acks.append((leader, value, offset))
            if self.rf > 1:
                wait_until(f"a new leader of {TOPIC}-{p} in the majority while {leader} is "
                           f"isolated", lambda: (le := leader_of(self.c, TOPIC, p,
                                                                 exclude=(leader,)))[0] != leader
                           and le[1] > epoch, 60)
                self.progress(f"while node {leader} is isolated")
        finally:
            self.c.heal()
        self.rejoin(leader)
        self.progress(f"after healing node {leader}")
        self.report.faults["leader isolated from the majority"] += 1


    def one_way(self, k: int) -> None:
        """The leader's bytes stop reaching every other node (theirs still reach it): its
        followers' fetches arrive but the answers vanish, its heartbeats never arrive."""
        p = self.rng.randrange(PARTITIONS)
        leader, epoch = wait_until("a leader", lambda: leader_of(self.c, TOPIC, p), 60)
        self.log.append(f"one-way cut from node {leader} (leader of {TOPIC}-{p} epoch {epoch})")
        try:
            for other in self.c.nodes:
                if other.node_id != leader:
                    self.c.one_way(leader, other.node_id)
            wait_until(f"node {leader} fenced behind a one-way cut",
                       lambda: fenced(self.c, leader), SESSION_MS / 1000 * 4 + 30)
            if self.rf > 1:
                self.progress(f"while node {leader}'s bytes do not reach the others")
        finally:
            self.c.heal()
        self.rejoin(leader)
        self.progress(f"after healing node {leader}'s one-way cut")
        self.report.faults["one-way cut from the leader"] += 1

    def delay(self, k: int) -> None:
        """Every link slowed by 50-300 ms for a while: replication lags, nothing may be lost."""
        ms = self.rng.randrange(50, 300)
        self.log.append(f"delay {ms} ms on every link")
        try:
            for link in self.c.links.values():
                link.delay(ms)
            self.progress(f"with {ms} ms delay on every link")
            time.sleep(2)
        finally:
            self.c.heal()
        self.progress("after the delay")
        self.report.faults["delayed links"] += 1


def restore(c: SamsaCluster) -> None:
    """Every link healed, every node running and unfrozen."""
    c.heal()
    for n in c.nodes:
        if n.paused:
            n.resume()
        if not n.running:
            n.start()


def layouts(c: SamsaCluster) -> str:
    """Each live broker's view of the workload's partitions (leader, epoch, replicas, ISR)."""
    lines = []
    for node in c.brokers:
        if not node.running or node.paused:
            lines.append(f"node {node.node_id}: {'paused' if node.paused else 'down'}")
            continue
        for topic in (TOPIC, TXN_TOPIC):
            try:
                view = metadata(node.bootstrap, topic, timeout=2.0)[1]
            except OSError as e:
                lines.append(f"node {node.node_id} {topic}: {e}")
                continue
            lines.append(f"node {node.node_id} {topic}: " + "; ".join(
                f"{p}: leader {i.leader} epoch {i.leader_epoch} isr {list(i.isr)}"
                for p, i in sorted(view.items())))
    try:
        lines.append(f"brokers (id, fenced): {c.describe_cluster()}")
    except ConnectionError as e:
        lines.append(str(e))
    return "\n".join(lines)


def schedule(rng: random.Random) -> list[str]:
    soak = int(os.environ.get("SAMSA_SOAK_FAULTS", "0"))
    if soak > 0:
        kinds = os.environ.get("SAMSA_SOAK_KINDS", "kill9,kill9,sigstop,isolate,one_way,delay")
        kinds = [k.strip() for k in kinds.split(",") if k.strip()]
        return [rng.choice(kinds) for _ in range(soak)]
    plan = ["kill9"] * 10 + ["sigstop"] * 5 + ["isolate"] * 5 + ["one_way", "delay"]
    rng.shuffle(plan)
    return plan


@pytest.mark.slow
@pytest.mark.timeout(int(os.environ.get("SAMSA_SOAK_TIMEOUT", "900")))
def test_workload_survives_leader_faults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seed = int(os.environ.get("SAMSA_FAULTS_SEED", str(random.randrange(1 << 30))))
    rf = int(os.environ.get("SAMSA_FAULTS_RF", "3"))
    rng = random.Random(seed)
    report = Report()
    overrides = dict(OVERRIDES) if rf == 3 else {
        k: v for k, v in OVERRIDES.items() if "replication.factor" not in k and "min.isr" not in k}
    # librdkafka's own account (eos debug for the producers), for diagnosis
    monkeypatch.setattr(workload, "CLIENT_LOG", tmp_path / "clients.log")
    with SamsaCluster(3, data_dir=tmp_path, overrides=overrides, proxied=True) as c:
        create_topics(c, rf, min(2, rf), [TOPIC, TXN_TOPIC])
        producers = IdempotentProducers(c.bootstrap, TOPIC, n=3, rate_per_s=150).start()
        reader = Reader(c.bootstrap, {TOPIC: PARTITIONS, TXN_TOPIC: PARTITIONS}).start()
        committer = GroupCommitter(c.bootstrap, TOPIC).start()
        txn = TxnWriter(c.bootstrap, TXN_TOPIC, seed=seed).start()
        faults = Faults(c, producers, rng, rf, report)
        stopped = False
        liveness: list[str] = []
        try:
            faults.progress("before the first fault")
            faults.steady("before the first fault")
            for k, kind in enumerate(schedule(rng)):
                try:
                    getattr(faults, kind)(k)
                except (AssertionError, TimeoutError) as e:
                    # the cluster did not recover from this fault in time: a liveness failure.
                    # Recorded, the cluster restored, and the run goes on to the safety checks
                    # (after a second one no more faults: the cluster is likely stuck)
                    liveness.append(f"fault {k} ({kind}): {e}\nfault log so far: "
                                    f"{faults.log}\n{layouts(c)}")
                    report.problem(f"liveness: fault {k} ({kind}): {str(e).splitlines()[0]}")
                    restore(c)
                    if len(liveness) >= 2:
                        break
        finally:
            restore(c)
            producers.stop()
            txn.stop()
            reader.stop()
            committer.stop()
            stopped = True
        assert stopped
        try:
            c.wait_brokers(3, timeout=90)
            faults.steady("after the run")
        except (AssertionError, TimeoutError) as e:
            liveness.append(f"after the run: {e}\n{layouts(c)}")
            report.problem(f"liveness: after the run: {str(e).splitlines()[0]}")
        with producers.lock:  # acknowledged by the pinned producer: they must be kept too
            producers.acked.update({v: (-1, o) for _, v, o in faults.pinned_acks})
        check(producers, c.bootstrap, TOPIC, PARTITIONS, readers=[reader], txn=txn,
              committer=committer, log_dirs={n.node_id: n.spec.log_dir for n in c.nodes},
              broker_addresses=[n.bootstrap for n in c.brokers], want_isr=rf, report=report)
        for node, value, offset in faults.pinned_acks if rf > 1 else []:
            report.problem(f"isolated old leader {node} acknowledged acks=all {value} at {offset}")
        summary = (f"seed={seed} rf={rf}\n{report.summary()}\npinned produce outcomes: "
                   f"{dict(faults.pinned)}\nproducer errors: {producers.errors[:5]}\ntxn: "
                   f"{dict(txn.outcomes)}\nfault log: {faults.log}\n" + "\n".join(liveness))
        print(summary)
        assert report.ok, summary
        assert report.acknowledged > 0 and report.lost == 0 and report.duplicates == 0, summary
        if rf > 1:
            assert not faults.pinned_acks, summary
            assert sum(faults.pinned.values()) > 0, summary  # the isolated leader was asked
        assert report.txn_committed > 0 and report.txn_aborted > 0, summary


def controllers_of(c: SamsaCluster) -> dict[int, str]:
    return {n.node_id: n.controller_address for n in c.controllers}


def test_isolated_controller_steps_down_and_majority_elects(tmp_path: Path) -> None:
    """The proxy really cuts a node off: isolate the active controller, the other two elect a
    new leader of a higher epoch, the isolated one stops answering as leader (check-quorum), and
    after heal one leader of that epoch remains, which the returning node follows."""
    claims = LeaderClaims()
    with SamsaCluster(3, data_dir=tmp_path, proxied=True) as c:
        leader = c.wait_for_leader()
        ctl = controllers_of(c)
        _, _, epoch = wait_until("the leader's view", lambda: quorum_view(ctl[leader]), 30)
        c.isolate(leader)
        others = [n for n in ctl if n != leader]

        def majority_leader() -> tuple[int, int] | None:
            views = claims.poll({n: ctl[n] for n in others})
            led = [(v[2], n) for n, v in views.items() if v[0] == 0 and v[2] > epoch]
            return (led[0][1], led[0][0]) if led else None

        new_leader, new_epoch = wait_until("a leader among the majority", majority_leader, 60)
        assert new_leader in others

        def stepped_down() -> bool:
            v = claims.poll({leader: ctl[leader]}).get(leader)
            return v is not None and v[0] != 0

        wait_until(f"isolated node {leader} resigning", stepped_down, 60)
        assert c.links[(leader, others[0])].stats.refused > 0  # the links did refuse it
        c.heal()

        def one_leader() -> bool:
            views = claims.poll(ctl)
            leaders = {n for n, v in views.items() if v[0] == 0}
            return len(views) == 3 and len(leaders) == 1 and \
                len({(v[1], v[2]) for v in views.values()}) == 1
        wait_until("one leader that every node follows after heal", one_leader, 60)
        claims.check()

