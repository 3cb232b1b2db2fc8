"""A deterministic simulator for the Raft core: one seed, one schedule, replayable exactly.

It drives `RaftNode`s as a driver would (persist, then flush, then send), through a network that
loses, delays and reorders messages and can be partitioned (both ways or one way), with nodes
that crash (`kill -9`: only fsynced state survives, and a crash may strike between the persist,
the flush and the sends of one output) and restart, clients proposing to whoever leads, and
followers taking snapshots. After every step it checks the safety invariants (see `Checker`);
after the faults heal it checks that a leader is elected and a new proposal commits in bounded
simulated time.
"""

from __future__ import annotations

import heapq
import random
import typing
from collections.abc import Callable
from dataclasses import dataclass, field

from samsa.cluster.quorum.config import QuorumConfig
from samsa.cluster.quorum.log import Entry, MemoryLog, OffsetAndEpoch
from samsa.cluster.quorum.messages import (
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchSnapshotRequest,
    Message,
    RequestFailed,
    VoteRequest,
    VoteResponse,
)
from samsa.cluster.quorum.node import NEVER, NotLeaderError, Output, RaftNode
from samsa.cluster.quorum.state import QuorumStateRecord

_REQUESTS = (VoteRequest, BeginQuorumEpochRequest, EndQuorumEpochRequest, FetchRequest, FetchSnapshotRequest)


def _grants_vote(out: Output) -> bool:
    return any(isinstance(m.body, VoteResponse) and m.body.vote_granted for m in out.messages)


class Violation(AssertionError):
    """A safety or liveness property failed; the message names it."""


NodeFactory = Callable[..., RaftNode]


def snapshot_bytes(entries: list[Entry]) -> bytes:
    """The simulated state machine's snapshot: every committed entry, in order."""
    return repr([(e.epoch, e.data, e.control) for e in entries]).encode()


@dataclass(slots=True)
class SimNode:
    node_id: int
    log: MemoryLog = field(default_factory=MemoryLog)
    persisted: QuorumStateRecord | None = None
    node: RaftNode | None = None
    incarnation: int = 0
    timer_at: int = NEVER
    verified: int = 0  # log[0:verified] equals the committed prefix (checked)
    last_hw: int = 0
    leader_epoch_seen: int = -1


@dataclass(slots=True)
class Faults:
    """How rough a schedule is; drawn from the seed."""

    loss: float
    max_delay_ms: int
    partition_every_ms: int
    crash_every_ms: int
    snapshot_every_ms: int
    propose_every_ms: int


@dataclass(slots=True)
class Result:
    seed: int
    nodes: int
    steps: int
    sim_ms: int
    committed: int
    epochs: int
    crashes: int
    partitions: int
    snapshots_installed: int
    liveness_ms: int


class Checker:
    """Safety invariants, checked after every step of every node.

    - election safety: at most one leader per leader epoch;
    - the committed prefix: `committed` is the log every node's high watermark has exposed so
      far; whenever a node's high watermark passes the end of it, the node's entries extend it;
      every node's entries below its high watermark must equal it (logs match up to the high
      watermark), and an entry once verified equal on a node is never truncated from it (a
      committed entry is never lost, changed or reordered);
    - leader completeness: a node that becomes leader holds the whole committed prefix;
    - high watermark: never decreases within one incarnation of a node, never exceeds the
      node's log end. The high watermark is not persisted (as in Kafka); after a crash-restart a
      node starts from its log start offset (0, or the end of its snapshot), which is <= every
      high watermark it exposed before, and climbs back as the leader tells it;
    - snapshots: an installed snapshot equals the committed prefix up to its end offset.
    """

    def __init__(self) -> None:
        self.committed: list[Entry] = []
        self.leaders: dict[int, int] = {}
        self.snapshots_installed = 0

    def after_step(self, sn: SimNode) -> None:
        node = sn.node
        assert node is not None
        log = sn.log
        nid = sn.node_id
        if node.role == "leader":
            other = self.leaders.setdefault(node.epoch, nid)
            if other != nid:
                raise Violation(f"two leaders in epoch {node.epoch}: {other} and {nid}")
        hw = node.high_watermark
        if hw < sn.last_hw:
            raise Violation(f"node {nid}: high watermark went back from {sn.last_hw} to {hw}")
        sn.last_hw = hw
        if hw > log.end_offset:
            raise Violation(f"node {nid}: high watermark {hw} beyond its log end {log.end_offset}")
        if log.end_offset < sn.verified:
            raise Violation(
                f"node {nid}: committed entries from offset {log.end_offset} were truncated"
                f" (had {sn.verified} verified)"
            )
        committed = self.committed
        if log.start_offset > sn.verified:
            start = log.start_offset
            if len(committed) < start:
                raise Violation(f"node {nid}: snapshot to {start} beyond the committed {len(committed)}")
            snap = log.snapshot_id
            assert snap is not None
            data = log.read_snapshot(snap)
            if data != snapshot_bytes(committed[:start]):
                raise Violation(f"node {nid}: snapshot {snap} differs from the committed prefix")
            self.snapshots_installed += 1
            sn.verified = start
        while len(committed) < hw:
            off = len(committed)
            if off < log.start_offset:
                raise Violation(f"node {nid}: high watermark {hw} covers offset {off} it cannot show")
            committed.append(log.entry(off))
        v = sn.verified
        end = min(log.end_offset, len(committed))
        while v < end and log.entry(v) == committed[v]:
            v += 1
        sn.verified = v
        if v < hw:
            raise Violation(
                f"node {nid}: offset {v} below its high watermark {hw} is {log.entry(v)},"
                f" committed is {committed[v]}"
            )
        if node.role == "leader" and sn.leader_epoch_seen != node.epoch:
            sn.leader_epoch_seen = node.epoch
            if v < len(committed):
                raise Violation(
                    f"node {nid} leads epoch {node.epoch} without committed offset {v}"
                    f" ({len(committed)} committed)"
                )


class Simulation:
    """One seeded schedule: chaos for `chaos_ms`, then calm until liveness or `live_bound_ms`."""

    def __init__(
        self,
        seed: int,
        n: int = 3,
        chaos_ms: int = 10000,
        live_bound_ms: int = 15000,
        config: QuorumConfig | None = None,
        node_factory: NodeFactory = RaftNode,
    ) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.n = n
        self.ids = list(range(1, n + 1))
        self.chaos_ms = chaos_ms
        self.live_bound_ms = live_bound_ms
        self.factory = node_factory
        r = self.rng
        self.faults = Faults(
            loss=r.choice((0.0, 0.02, 0.1, 0.25)),
            max_delay_ms=r.choice((2, 10, 40, 300)),
            partition_every_ms=r.choice((NEVER, 1500, 600)),
            crash_every_ms=r.choice((NEVER, 2000, 700, 250)),
            snapshot_every_ms=r.choice((NEVER, 800)),
            propose_every_ms=r.choice((30, 120)),
        )
        if config is None:
            # Kafka's defaults, or everything 4x faster (closer to the network's delays: more
            # contended elections); small fetches spread a leader's tail over many round trips
            fast = r.random() < 0.5
            config = QuorumConfig(
                election_timeout_ms=250 if fast else 1000,
                fetch_timeout_ms=500 if fast else 2000,
                election_backoff_max_ms=250 if fast else 1000,
                request_timeout_ms=500 if fast else 2000,
                fetch_max_wait_ms=125 if fast else 500,
                fetch_max_entries=r.choice((1, 3, 64)),
            )
        self.config = config
        self.nodes = {i: SimNode(i) for i in self.ids}
        self.checker = Checker()
        self.queue: list[tuple[int, int, str, object]] = []
        self.seq = 0
        self.now = 0
        self.blocked: set[tuple[int, int]] = set()
        self.steps = 0
        self.crashes = 0
        self.partitions = 0
        self.calm = False
        self.client_seq = 0
        self.markers: set[bytes] = set()
        self.scanned = 0
        self.max_steps = 200_000

    # ------------------------------------------------------------------ scheduling
    def _at(self, t: int, kind: str, payload: object) -> None:
        self.seq += 1
        heapq.heappush(self.queue, (t, self.seq, kind, payload))

    def _every(self, mean_ms: int) -> int:
        return 1 + int(self.rng.expovariate(1.0 / mean_ms))

    def _start(self, sn: SimNode) -> None:
        sn.incarnation += 1
        sn.timer_at = NEVER
        sn.last_hw = 0
        sn.leader_epoch_seen = -1
        node_rng = random.Random(self.rng.getrandbits(64))
        sn.node = self.factory(
            sn.node_id, self.ids, self.config, sn.persisted, sn.log, node_rng, self.now
        )
        self._step(sn, [])

    def _crash(self, sn: SimNode) -> None:
        sn.node = None
        sn.log.crash()
        sn.verified = min(sn.verified, sn.log.end_offset)
        sn.timer_at = NEVER
        self.crashes += 1

    # ------------------------------------------------------------------ driving
    def _step(self, sn: SimNode, inbound: list[Message]) -> None:
        node = sn.node
        assert node is not None
        out = node.step(self.now, inbound)
        self.steps += 1
        self._apply(sn, out)

    def _apply(self, sn: SimNode, out: Output) -> None:
        # the driver's contract: persist, then flush, then send; a crash can strike in between
        crash_at = -1
        quick = False
        if not self.calm and self.faults.crash_every_ms < NEVER:
            # crashes around an fsync are the interesting ones: strike there more often; a
            # voter that crashes just after answering comes back at once (a supervisor restart),
            # while the election it voted in is still running
            if _grants_vote(out):
                if self.rng.random() < 0.3:
                    crash_at = self.rng.choice((0, 1, 2, 3, 3, 3))
                    quick = True
            elif self.rng.random() < (0.15 if out.persist is not None else 0.01):
                crash_at = self.rng.randrange(4)
        if crash_at == 0:
            self._crash_and_schedule(sn, quick)
            return
        if out.persist is not None:
            sn.persisted = out.persist
        if crash_at == 1:
            self._crash_and_schedule(sn, quick)
            return
        if out.flush_log:
            sn.log.flush()
        if crash_at == 2:
            self._crash_and_schedule(sn, quick)
            return
        assert not sn.log.dirty, "the core left writes unflushed"
        self.checker.after_step(sn)
        for msg in out.messages:
            self._send(msg)
        if crash_at == 3:  # after the whole output: the messages are on their way
            self._crash_and_schedule(sn, quick)
            return
        if out.next_timer_ms < sn.timer_at or sn.timer_at <= self.now:
            sn.timer_at = out.next_timer_ms
            if sn.timer_at < NEVER:
                self._at(max(sn.timer_at, self.now), "timer", (sn.node_id, sn.incarnation, sn.timer_at))

    def _crash_and_schedule(self, sn: SimNode, quick: bool = False) -> None:
        self._crash(sn)
        pause = 1 + self.rng.randrange(5 if quick else self.rng.choice((20, 200, 1500)))
        self._at(self.now + pause, "restart", sn.node_id)

    def _send(self, msg: Message) -> None:
        f = self.faults
        if (msg.src, msg.dst) in self.blocked:
            return
        if not self.calm and self.rng.random() < f.loss:
            return
        delay = 1 + self.rng.randrange(f.max_delay_ms if not self.calm else 3)
        self._at(self.now + delay, "msg", msg)

    def _leader(self) -> SimNode | None:
        best = None
        for sn in self.nodes.values():
            if sn.node is not None and sn.node.role == "leader":
                if best is None or sn.node.epoch > best.node.epoch:  # type: ignore[union-attr]
                    best = sn
        return best

    # ------------------------------------------------------------------ faults
    def _partition(self) -> None:
        r = self.rng
        self.blocked.clear()
        ids = list(self.ids)
        r.shuffle(ids)
        kind = r.randrange(3)
        if kind == 0:  # split in two
            cut = r.randrange(1, len(ids))
            a, b = ids[:cut], ids[cut:]
            for x in a:
                for y in b:
                    self.blocked.add((x, y))
                    self.blocked.add((y, x))
        elif kind == 1:  # one node isolated
            x = ids[0]
            for y in ids[1:]:
                self.blocked.add((x, y))
                self.blocked.add((y, x))
        else:  # asymmetric: some directed links only
            for x in ids:
                for y in ids:
                    if x != y and r.random() < 0.35:
                        self.blocked.add((x, y))
        self.partitions += 1
        self._at(self.now + 200 + r.randrange(2500), "heal", self.partitions)

    def _take_snapshot(self) -> None:
        live = [sn for sn in self.nodes.values() if sn.node is not None]
        if not live:
            return
        sn = self.rng.choice(live)
        node = sn.node
        assert node is not None
        hw = node.high_watermark
        log = sn.log
        if hw <= log.start_offset or log.dirty:
            return
        sid = OffsetAndEpoch(hw, log.entry(hw - 1).epoch)
        log.take_snapshot(sid, snapshot_bytes(self.checker.committed[:hw]))

    def _propose(self) -> None:
        sn = self._leader()
        if sn is None or sn.node is None:
            return
        count = 1 + self.rng.randrange(3)
        records = []
        for _ in range(count):
            self.client_seq += 1
            data = b"c%d" % self.client_seq
            if self.calm:
                data = b"m%d" % self.client_seq
                self.markers.add(data)
            records.append(data)
        try:
            sn.node.propose(records)
        except NotLeaderError:
            return
        # the appends are buffered until the next step's output flushes them; a crash right now
        # loses them (appended, never flushed)
        if not self.calm and self.faults.crash_every_ms < NEVER and self.rng.random() < 0.02:
            self._crash_and_schedule(sn)
            return
        self._step(sn, [])

    def _heal_all(self) -> None:
        self.calm = True
        self.blocked.clear()
        for sn in self.nodes.values():
            if sn.node is None:
                self._start(sn)

    # ------------------------------------------------------------------ main loop
    def run(self) -> Result:
        f = self.faults
        for sn in self.nodes.values():
            self._start(sn)
        self._at(self._every(f.propose_every_ms), "propose", None)
        if f.partition_every_ms < NEVER:
            self._at(self._every(f.partition_every_ms), "partition", None)
        if f.crash_every_ms < NEVER:
            self._at(self._every(f.crash_every_ms), "crash", None)
        if f.snapshot_every_ms < NEVER:
            self._at(self._every(f.snapshot_every_ms), "snapshot", None)
        self._at(self.chaos_ms, "calm", None)
        deadline = self.chaos_ms + self.live_bound_ms
        live_at = -1
        while self.queue:
            t, _, kind, payload = heapq.heappop(self.queue)
            if t > deadline:
                break
            self.now = t
            if kind == "msg":
                msg = payload
                assert isinstance(msg, Message)
                sn = self.nodes[msg.dst]
                if (msg.src, msg.dst) in self.blocked:
                    pass
                elif sn.node is not None:
                    self._step(sn, [msg])
                elif isinstance(msg.body, _REQUESTS):
                    # connection refused: the sender's driver hears of it and tells the core
                    self._at(self.now + 1, "msg", Message(msg.dst, msg.src, RequestFailed(msg.body)))
            elif kind == "timer":
                nid, inc, at = typing.cast(tuple[int, int, int], payload)
                sn = self.nodes[nid]
                if sn.node is not None and sn.incarnation == inc and sn.timer_at == at:
                    self._step(sn, [])
            elif kind == "propose":
                self._propose()
                self._at(t + self._every(200 if self.calm else f.propose_every_ms), "propose", None)
            elif kind == "restart":
                sn = self.nodes[payload]  # type: ignore[index]
                if sn.node is None:
                    self._start(sn)
            elif kind == "calm":
                self._heal_all()
            elif self.calm:
                continue  # no new faults once calm
            elif kind == "partition":
                self._partition()
                self._at(t + self._every(f.partition_every_ms), "partition", None)
            elif kind == "heal":
                if payload == self.partitions:
                    self.blocked.clear()
            elif kind == "crash":
                live = [sn for sn in self.nodes.values() if sn.node is not None]
                leader = self._leader()
                if leader is not None and self.rng.random() < 0.5:
                    self._crash_and_schedule(leader)
                elif live:
                    self._crash_and_schedule(self.rng.choice(live))
                self._at(t + self._every(f.crash_every_ms), "crash", None)
            elif kind == "snapshot":
                self._take_snapshot()
                self._at(t + self._every(f.snapshot_every_ms), "snapshot", None)
            if self.steps > self.max_steps:
                raise Violation(f"runaway: more than {self.max_steps} steps")
            if self.calm and self._marker_committed():
                live_at = self.now - self.chaos_ms
                break
        if live_at < 0:
            raise Violation(
                f"liveness: no proposal committed within {self.live_bound_ms} ms after the faults healed"
            )
        return Result(
            self.seed, self.n, self.steps, self.now, len(self.checker.committed),
            len(self.checker.leaders), self.crashes, self.partitions,
            self.checker.snapshots_installed, live_at,
        )

    def _marker_committed(self) -> bool:
        c = self.checker.committed
        found = any(e.data in self.markers for e in c[self.scanned :])
        self.scanned = len(c)
        return found


def run_schedule(seed: int, n: int, **kw: object) -> Result:
    """Run one schedule; on a violation re-raise with the seed so it can be replayed."""
    try:
        return Simulation(seed, n, **kw).run()  # type: ignore[arg-type]
    except (Violation, AssertionError) as e:
        raise Violation(f"seed {seed} (n={n}): {e}  [replay: SAMSA_RAFT_SEED={seed}]") from e


def main(argv: list[str] | None = None) -> int:
    """`python -m samsa.cluster.quorum.sim [--n 3] [--seeds 100 | --seed S]`: run or replay."""
    import argparse

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--n", type=int, default=3)
    ap.add_argument("--seed", type=int)
    ap.add_argument("--seeds", type=int, default=100)
    args = ap.parse_args(argv)
    seeds = [args.seed] if args.seed is not None else list(range(args.seeds))
    for seed in seeds:
        try:
            r = run_schedule(seed, args.n)
        except Violation as e:
            print(e)
            return 1
        if args.seed is not None:
            print(r)
    print(f"{len(seeds)} schedule(s) of {args.n} voters: no violation")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
