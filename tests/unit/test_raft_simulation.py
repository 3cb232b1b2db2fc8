"""The Raft core under a deterministic simulator: thousands of seeded fault schedules.

Each schedule (see `samsa/cluster/quorum/sim.py`) runs a 3- or 5-voter quorum through message
loss, delay and reordering, symmetric and one-way partitions, crash-restarts that keep only what
was fsynced (including crashes between the persist, the flush and the sends of one output),
clients proposing to the leader and snapshots; safety is checked after every step and liveness
after the faults heal.

- `SAMSA_RAFT_SCHEDULES=N` runs N schedules per cluster size (default 2000 for 3 voters, 1000 for 5).
- `SAMSA_RAFT_SEED=S` (or `SAMSA_RAFT_SEED=5:S`) replays exactly one schedule; a failure prints it.
"""

from __future__ import annotations

import os

import pytest

from samsa.cluster.quorum.node import RaftNode
from samsa.cluster.quorum.sim import Simulation, Violation, run_schedule
from samsa.cluster.quorum.state import QuorumStateRecord, Unattached

DEFAULT_SCHEDULES = {3: 2000, 5: 1000}


def _seeds(n: int) -> list[int]:
    replay = os.environ.get("SAMSA_RAFT_SEED")
    if replay:
        size, _, seed = replay.rpartition(":")
        return [int(seed)] if not size or int(size) == n else []
    count = int(os.environ.get("SAMSA_RAFT_SCHEDULES", DEFAULT_SCHEDULES[n]))
    return list(range(count))


@pytest.mark.parametrize("n", [3, 5])
def test_safety_and_liveness_over_seeded_schedules(n):
    seeds = _seeds(n)
    steps = elections = crashes = snapshots = 0
    worst_liveness = 0
    for seed in seeds:
        r = run_schedule(seed, n)  # raises Violation naming the seed and how to replay it
        steps += r.steps
        elections += r.epochs
        crashes += r.crashes
        snapshots += r.snapshots_installed
        worst_liveness = max(worst_liveness, r.liveness_ms)
    if len(seeds) >= 100:
        # the schedules really exercise the protocol (not vacuously safe)
        assert elections > len(seeds) and crashes > len(seeds) and snapshots > 0
        assert steps > 100 * len(seeds)
    print(f"n={n}: {len(seeds)} schedules, {steps} steps, {elections} leader epochs, "
          f"{crashes} crashes, {snapshots} snapshots installed, worst liveness {worst_liveness} ms")


def test_a_schedule_replays_exactly():
    def fingerprint(seed):
        s = Simulation(seed, 5)
        r = s.run()
        persisted = {i: sn.persisted for i, sn in s.nodes.items()}
        return r, list(s.checker.committed), persisted

    assert fingerprint(7) == fingerprint(7)
    assert fingerprint(7)[0] != fingerprint(8)[0]


# ---- the checker catches bugs: deliberately broken nodes, and seeds that expose them


class SkipsPersistingTheVote(RaftNode):
    """Answers a vote without making it durable: after a crash it can vote again in the epoch."""

    def _quorum_record(self) -> QuorumStateRecord:
        r = super()._quorum_record()
        if isinstance(self.state, Unattached):
            return QuorumStateRecord(r.epoch, r.leader_id, None)
        return r


class CommitsOldEpochByCount(RaftNode):
    """Breaks the high-watermark rule: counts replicas of entries from earlier epochs."""

    def _may_commit(self, offset, leader) -> bool:
        return True


class GrantsVotesToStaleLogs(RaftNode):
    """Forgets the election restriction: votes for a candidate whose log is behind."""

    def _log_up_to_date(self, last_epoch, end_offset) -> bool:
        return True


# seeds found by `find_bug_seeds` below; re-find them if the simulator's schedule changes
BUGS = [
    (SkipsPersistingTheVote, 5, [572, 605], "two leaders in epoch"),
    (CommitsOldEpochByCount, 3, [230, 2150], "without committed offset"),
    (GrantsVotesToStaleLogs, 3, [2, 8], "without committed offset"),
]


@pytest.mark.parametrize("factory, n, seeds, words", BUGS, ids=lambda x: getattr(x, "__name__", None))
def test_the_simulator_catches_a_broken_node(factory, n, seeds, words):
    for seed in seeds:
        run_schedule(seed, n)  # the correct node passes the same schedule
        with pytest.raises(Violation, match=words) as e:
            run_schedule(seed, n, node_factory=factory)
        assert f"SAMSA_RAFT_SEED={seed}" in str(e.value)


def find_bug_seeds(factory, n, limit, want=1):
    """The first `want` seeds (below `limit`) whose schedule makes `factory`'s node fail."""
    found = []
    for seed in range(limit):
        try:
            run_schedule(seed, n, node_factory=factory)
        except Violation:
            found.append(seed)
            if len(found) >= want:
                break
    return found


@pytest.mark.slow
@pytest.mark.parametrize("factory, n, seeds, words", BUGS, ids=lambda x: getattr(x, "__name__", None))
def test_the_simulator_finds_each_bug_by_search(factory, n, seeds, words):
    assert find_bug_seeds(factory, n, 4000)
