"""Partition replication under a deterministic simulator: seeded fault schedules over the real
pure core (LeaderState, divergence, truncation_offset) wired as the broker wires it.

Each schedule (see `samsa/cluster/replication/sim.py`) runs one partition over 3 or 4 brokers and
a controller through message loss, delay and reordering, cuts (from the controller, from the other
brokers, one way), kill -9 restarts and SIGSTOP pauses, with clients producing acks=all
(min.insync.replicas=2) and acks=1; safety is checked after every step, liveness (identical logs,
the ISR back to every replica) after the faults heal.

- `SAMSA_REPL_SCHEDULES=N` runs N schedules per cluster size (default 1500 for 3 brokers, 400 for 4;
  a soak beyond a few thousand needs `-p no:timeout`).
- `SAMSA_REPL_SEED=S` (or `SAMSA_REPL_SEED=4:S`) replays exactly one schedule; a failure prints it.
  With `SAMSA_REPL_TRACE=1` a failing replay prints its event trace; `SAMSA_REPL_WIRING=today`
  replays with the wiring before the fixes (`Wiring()`) instead of the current one.

The simulator found four defects in the broker's first wiring (see FOUND below) and one in the
storage contract (a high watermark that stopped following the log end is now written at once);
all are fixed in manager.py / leader.py / log.py. The schedules run with `Wiring.fixed()`, which
mirrors the code as it is; `Wiring()` is the wiring before the fixes, and FOUND shows each defect
again with its fix turned off.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from samsa.cluster.replication import sim
from samsa.cluster.replication.leader import UNKNOWN, LeaderState
from samsa.cluster.replication.sim import (
    Config,
    EpochCache,
    Simulation,
    Violation,
    Wiring,
    run_schedule,
)

DEFAULT_SCHEDULES = {3: 1500, 4: 400}


def _seeds(n: int) -> list[int]:
    replay = os.environ.get("SAMSA_REPL_SEED")
    if replay:
        size, _, seed = replay.rpartition(":")
        return [int(seed)] if not size or int(size) == n else []
    count = int(os.environ.get("SAMSA_REPL_SCHEDULES", DEFAULT_SCHEDULES[n]))
    return list(range(count))


@pytest.mark.parametrize("n", [3, 4])
def test_safety_and_liveness_over_seeded_schedules(n: int) -> None:
    seeds = _seeds(n)
    steps = acked = elections = truncations = crashes = isr_changes = 0
    worst = 0
    today = os.environ.get("SAMSA_REPL_WIRING") == "today"
    for seed in seeds:
        s = Simulation(seed, n, wiring=Wiring() if today else Wiring.fixed())
        if os.environ.get("SAMSA_REPL_TRACE"):
            s.trace = []
            s.controller.trace = s.log
        try:
            r = s.run()  # raises Violation naming the seed
        except Violation:
            if s.trace is not None:
                print("\n".join(s.trace))
            raise
        steps += r.steps
        acked += r.acked
        elections += r.elections
        truncations += r.truncations
        crashes += r.crashes
        isr_changes += r.isr_changes
        worst = max(worst, r.liveness_ms)
    if len(seeds) >= 100:
        # the schedules really exercise the protocol (not vacuously safe)
        assert acked > 50 * len(seeds) and elections > len(seeds) and crashes > len(seeds)
        assert truncations > len(seeds) // 2 and isr_changes > 3 * len(seeds)
    print(f"n={n}: {len(seeds)} schedules, {steps} steps, {acked} acks=all acknowledged, "
          f"{elections} elections, {isr_changes} ISR changes, {truncations} truncations, "
          f"{crashes} crashes, worst convergence {worst} ms after healing")


def test_a_schedule_replays_exactly() -> None:
    def fingerprint(seed: int) -> tuple[object, ...]:
        s = Simulation(seed, 3, wiring=Wiring.fixed())
        r = s.run()
        return r, list(s.checker.committed), dict(s.checker.acks), s.controller.images[-1]

    assert fingerprint(7) == fingerprint(7)
    assert fingerprint(7)[0] != fingerprint(8)[0]


# ---- defects the simulator found in today's wiring (manager.py, fetcher.py, storage) --------

# (name, the flags of a wiring that fails: Wiring(freeze_hw_on_propose, keep_pending,
#  trim_epochs_at_log_end, ignore_stale_answers), seeds, what the checker says). Each seed passes
# with Wiring.fixed(), fails with the flags given (every other fix on) and with today's Wiring().
FOUND = [
    # ReplicaManager._send_alter does not re-choose the high watermark mode: a leader alone in
    # its ISR proposes an expansion and keeps moving the high watermark with its log end; the
    # controller accepts the new member, the leader is fenced, the new member leads without the
    # entries the old leader exposed as committed.
    ("freeze_hw_on_propose", (False, True, True, True), [162, 488], "without committed offset"),
    # ReplicaManager._alter drops the pending change on any answer but NONE: here a leader cut
    # from the controller (its expansion was applied, the answers lost) times out, falls back to
    # its committed ISR (itself alone), moves the high watermark to its log end and exposes
    # entries no other replica has; they are truncated when it follows the new leader.
    ("keep_pending", (True, False, True, True), [1529, 3797], "below its high watermark"),
    # ReplicaManager.truncate (and PartitionLog.truncate_to) return at once for an offset at or
    # past the log end; a replica that led an epoch without appending keeps that epoch in its
    # cache, sends it as last_fetched_epoch, is answered DivergingEpoch at its own log end again
    # and again, and never catches up.
    ("trim_epochs_at_log_end", (True, True, False, True), [72, 215], "no convergence"),
    # ReplicaManager._alter applies a late answer to whatever change is pending now: shrink A to
    # (1, 2) is applied and the image clears it; the leader proposes B = (1, 2, 3), applied too;
    # the answer to A's retried request (INVALID_UPDATE_VERSION) clears B, the high watermark
    # moves over (1, 2) while replica 3 (in the controller's ISR) lags; the leader is fenced, 3
    # is elected and acks=all acknowledged values are lost. (With today's keep_pending.)
    ("ignore_stale_answers", (True, False, True, False), [7222], "without committed offset"),
]


@pytest.mark.parametrize("name, flags, seeds, words", FOUND, ids=[f[0] for f in FOUND])
def test_found_defect_in_todays_wiring(name: str, flags: tuple[bool, ...], seeds: list[int],
                                       words: str) -> None:
    fixed = list(flags)
    fixed[[f[0] for f in FOUND].index(name)] = True
    for seed in seeds:
        run_schedule(seed, 3, wiring=Wiring(*fixed))  # with this one fix: passes
        run_schedule(seed, 3, wiring=Wiring.fixed())
        with pytest.raises(Violation, match=words) as e:
            run_schedule(seed, 3, wiring=Wiring(*flags))
        assert f"SAMSA_REPL_SEED={seed}" in str(e.value)
        with pytest.raises(Violation):
            run_schedule(seed, 3, wiring=Wiring())  # today's wiring, every fix off


def test_found_high_watermark_of_a_log_that_never_wrote_one() -> None:
    """The storage contract's None-backed high watermark: a replicated log whose high watermark
    was set but not yet written when the broker was killed comes back with high watermark = log
    end (uncommitted entries exposed, then truncated). Kafka starts it at the log start."""
    for seed in (16, 23):
        run_schedule(seed, 3, wiring=Wiring.fixed())
        with pytest.raises(Violation, match="below its high watermark"):
            run_schedule(seed, 3, wiring=Wiring.fixed(), cfg=Config(hw_restore="none-backed"))


def test_unclean_election_loses_committed_entries() -> None:
    """unclean.leader.election.enable: a replica outside the ISR may lead, and the checker sees
    what Kafka documents: committed (even acknowledged) entries are lost."""
    unclean = Config(unclean_leader_election=True)
    for seed in (0, 3):
        run_schedule(seed, 3, wiring=Wiring.fixed())
        s = Simulation(seed, 3, wiring=Wiring.fixed(), cfg=unclean)
        with pytest.raises(Violation, match="without committed offset"):
            s.run()
        assert s.controller.unclean_elections > 0


def test_power_loss_of_the_last_isr_member_loses_committed_entries() -> None:
    """With every crash a power loss (the unflushed tail gone), a replica that lost committed
    entries and is (or becomes) the last ISR member leads without them: the risk Kafka documents
    (replication, not fsync, makes data durable; KIP-966). The same schedules lose nothing when
    crashes keep the page cache."""
    for seed in (0, 10):
        run_schedule(seed, 3, wiring=Wiring.fixed())
        s = Simulation(seed, 3, wiring=Wiring.fixed(), cfg=Config(power_loss=1.0))
        with pytest.raises(Violation, match="without committed offset"):
            s.run()
        assert any(sole for _, sole in s.checker.committed_lost_on)


# ---- the checker catches bugs: deliberately broken variants of the core -----------------------

def _hw_over_max(self: LeaderState, leader_leo: int) -> int | None:
    """High watermark = the furthest ISR member instead of the slowest."""
    hw: int | None = None
    for r in self.maximal_isr():
        if r == self.node_id:
            continue
        f = self.followers.get(r)
        if f is None or f.leo == UNKNOWN:
            return None
        hw = f.leo if hw is None else max(hw, f.leo)
    return leader_leo if hw is None else min(hw, leader_leo)


def _maximal_isr_ignores_pending(self: LeaderState) -> tuple[int, ...]:
    """KIP-497 forgotten: the high watermark counts only the committed ISR."""
    return self.isr


class NoDivergenceCheck(Wiring):
    """The leader answers a follower's Fetch without comparing epochs."""

    divergence = staticmethod(lambda end_offset_for, last_fetched_epoch, fetch_offset: None)


def _ignores_leader_end(end_offset_for, leader_epoch: int, leader_end: int, log_end: int) -> int:
    mine_epoch, mine_end = end_offset_for(leader_epoch)
    return log_end if mine_epoch < 0 else min(mine_end, log_end)


class IgnoresLeaderEnd(Wiring):
    """The follower truncates to the end of its own epoch, ignoring where the leader's ends."""

    truncation_offset = staticmethod(_ignores_leader_end)


def _fixed(cls: type[Wiring]) -> Wiring:
    return cls(True, True, True, True)


# seeds found by `find_bug_seeds`; re-find them if the simulator's schedule changes
PLANTED = [
    ("hw_over_max", [10, 15], "without committed offset"),
    ("maximal_isr_ignores_pending", [162, 675], "without committed offset"),
    ("no_divergence_check", [1, 2], "below its high watermark"),
    ("ignores_leader_end", [1, 2], "no convergence"),
]


def _plant(name: str, monkeypatch: pytest.MonkeyPatch) -> Wiring:
    if name == "hw_over_max":
        monkeypatch.setattr(LeaderState, "high_watermark", _hw_over_max)
    elif name == "maximal_isr_ignores_pending":
        monkeypatch.setattr(LeaderState, "maximal_isr", _maximal_isr_ignores_pending)
    elif name == "no_divergence_check":
        return _fixed(NoDivergenceCheck)
    elif name == "ignores_leader_end":
        return _fixed(IgnoresLeaderEnd)
    return Wiring.fixed()


@pytest.mark.parametrize("name, seeds, words", PLANTED, ids=[p[0] for p in PLANTED])
def test_the_simulator_catches_a_planted_bug(name: str, seeds: list[int], words: str,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    for seed in seeds:
        run_schedule(seed, 3, wiring=Wiring.fixed())  # the correct core passes the schedule
    wiring = _plant(name, monkeypatch)
    for seed in seeds:
        with pytest.raises(Violation, match=words) as e:
            run_schedule(seed, 3, wiring=wiring)
        assert f"SAMSA_REPL_SEED={seed}" in str(e.value)


def find_bug_seeds(wiring: Wiring, limit: int, want: int = 1) -> list[int]:
    found = []
    for seed in range(limit):
        try:
            run_schedule(seed, 3, wiring=wiring)
        except Violation:
            found.append(seed)
            if len(found) >= want:
                break
    return found


@pytest.mark.slow
@pytest.mark.parametrize("name, seeds, words", PLANTED, ids=[p[0] for p in PLANTED])
def test_the_simulator_finds_each_planted_bug_by_search(name: str, seeds: list[int], words: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    assert find_bug_seeds(_plant(name, monkeypatch), 3000)


# ---- the in-memory epoch cache is Kafka's LeaderEpochFileCache ------------------------------

def _cache(*pairs: tuple[int, int]) -> EpochCache:
    c = EpochCache()
    for epoch, start in pairs:
        c.assign(epoch, start)
    return c


def test_epoch_cache_follows_kafkas_end_offset_for() -> None:
    c = _cache((1, 0), (3, 10), (6, 25))
    assert c.end_offset_for(6, 40) == (6, 40)  # the latest epoch ends at the log end
    assert c.end_offset_for(3, 40) == (3, 25)
    assert c.end_offset_for(4, 40) == (3, 25)  # largest epoch <= 4, ending where 6 starts
    assert c.end_offset_for(0, 40) == (0, 0)  # below every epoch: where the first starts
    assert c.end_offset_for(7, 40) == (-1, -1)  # above every epoch
    assert c.end_offset_for(-1, 40) == (-1, -1)
    assert EpochCache().end_offset_for(2, 0) == (-1, -1)
    # assign drops entries a new epoch contradicts (a leader's epoch at an earlier offset)
    c.assign(7, 20)
    assert c.entries == [(1, 0), (3, 10), (7, 20)]
    c.assign(7, 22)  # same epoch, later offset: nothing changes
    assert c.entries == [(1, 0), (3, 10), (7, 20)]
    c.truncate_from_end(10)
    assert c.entries == [(1, 0)] and c.latest_epoch == 1


def test_epoch_cache_matches_the_storage_cache(tmp_path: Path) -> None:
    """The file-backed cache (samsa/storage/leader_epoch.py), where it exists, answers alike."""
    storage = pytest.importorskip("samsa.storage.leader_epoch")
    import random

    rng = random.Random(5)
    for trial in range(60):
        mine = EpochCache()
        theirs = storage.LeaderEpochCache(tmp_path / f"c{trial}")
        epoch = offset = 0
        for _ in range(12):
            op = rng.random()
            if op < 0.6:
                epoch += rng.randint(0, 2)
                offset += rng.randint(0, 5)
                mine.assign(epoch, offset)
                theirs.assign(epoch, offset)
            else:
                cut = rng.randint(0, offset + 1)
                mine.truncate_from_end(cut)
                theirs.truncate_from_end(cut)
                offset = min(offset, cut)
            assert list(theirs.entries) == mine.entries
            for asked in range(-1, epoch + 3):
                assert theirs.end_offset_for(asked, offset + 3) == mine.end_offset_for(
                    asked, offset + 3), (trial, asked, mine.entries)


def test_simulated_log_exposes_what_the_wiring_reads() -> None:
    """The pieces of PartitionLog the replication code uses, as the simulator models them."""
    lg = sim.SimLog()
    assert lg.high_watermark == 0
    lg.append(1, 0)
    lg.append(2, 0)
    assert lg.high_watermark == 2  # None-backed: follows the log end until first set
    lg.set_high_watermark(1)
    lg.append(3, 2)
    assert lg.high_watermark == 1 and lg.epochs.entries == [(0, 0), (2, 2)]
    lg.truncate_to(1)
    assert lg.entries == [(0, 1)] and lg.epochs.entries == [(0, 0)] and lg.high_watermark == 1
    lg.append_as_follower(1, [(4, 9), (4, 10)])
    assert lg.end_offset == 3 and lg.epochs.latest_epoch == 4
    with pytest.raises(ValueError):
        lg.append_as_follower(2, [(4, 11)])
