"""The Raft core of KRaft as a pure state machine: messages and time in, effects out.

`RaftNode.step(now_ms, inbound)` handles messages, fires due timers, and returns an `Output`
whose effects a driver must apply IN THIS ORDER:

1. `persist`: write and fsync the quorum-state record (epoch, leader, vote);
2. `flush_log`: fsync the log's buffered writes (appends, truncations, an installed snapshot);
3. only then send `messages` and expose `high_watermark` (commit) to the state machine.

That order is what makes a vote binding (it is on disk before the candidate hears of it) and what
lets the leader count a follower's fetch offset as replicated (the follower flushed before asking).
A crash anywhere before step 3 loses the whole output, which is equivalent to losing the messages.

Names follow KRaft: leader epoch (Raft's term), high watermark (commit index: everything below it
is committed), fencing (a request carrying an older leader epoch is answered with
FENCED_LEADER_EPOCH and changes nothing), DivergingEpoch (the follower's log forked from the
leader's; it truncates and fetches again), SnapshotId (the follower fetches below the log start
and must load the leader's snapshot with FetchSnapshot).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from samsa.cluster.quorum import messages as m
from samsa.cluster.quorum.config import QuorumConfig
from samsa.cluster.quorum.log import Entry, OffsetAndEpoch, RaftLog
from samsa.cluster.quorum.state import (
    Candidate,
    EpochState,
    Follower,
    Leader,
    Parked,
    Prospective,
    QuorumStateRecord,
    ReplicaProgress,
    Resigned,
    Unattached,
)

NEVER = 1 << 62


class NotLeaderError(Exception):
    """`propose` on a node that is not the leader; carries who it believes leads."""

    def __init__(self, leader_id: int | None, epoch: int) -> None:
        super().__init__(f"not the leader (leader {leader_id}, epoch {epoch})")
        self.leader_id = leader_id
        self.epoch = epoch


@dataclass(slots=True)
class Output:
    """The effects of one `step`; apply in field order (see the module docstring)."""

    persist: QuorumStateRecord | None = None
    flush_log: bool = False
    messages: list[m.Message] = field(default_factory=list)
    high_watermark: int | None = None  # new high watermark, when it moved
    next_timer_ms: int = NEVER  # call `step` again at this time at the latest

    def apply(
        self,
        persist: Callable[[QuorumStateRecord], None],
        flush_log: Callable[[], None],
        send: Callable[[m.Message], None],
        commit: Callable[[int], None] | None = None,
    ) -> None:
        """Run the effects in the only safe order; each callable returns once it is durable."""
        if self.persist is not None:
            persist(self.persist)
        if self.flush_log:
            flush_log()
        for msg in self.messages:
            send(msg)
        if commit is not None and self.high_watermark is not None:
            commit(self.high_watermark)


class RaftNode:
    """One voter (or observer) of the `__cluster_metadata` quorum."""

    def __init__(
        self,
        node_id: int,
        voters: Iterable[int],
        config: QuorumConfig,
        persisted: QuorumStateRecord | None,
        log: RaftLog,
        rng: random.Random,
        now_ms: int,
        cluster_id: str | None = None,
    ) -> None:
        self.node_id = node_id
        self.voters = frozenset(voters)
        if not self.voters:
            raise ValueError("the voter set is empty")
        self.config = config
        self.log = log
        self.rng = rng
        self.cluster_id = cluster_id
        self.majority = len(self.voters) // 2 + 1
        self._now = now_ms
        self._out: list[m.Message] = []
        self._log_dirty = False
        # the high watermark is not persisted (as in Kafka): a restart starts at the log start
        # offset (everything in a snapshot is committed) and learns the rest from the leader
        self.high_watermark = log.start_offset
        self._reported_hw = -1
        # the high watermark each fetcher last heard from this leader: a parked fetch is answered
        # as soon as the high watermark moves past what its fetcher knows
        self._hw_told: dict[int, int] = {}
        self._persisted = persisted
        self.state: EpochState = self._initial_state(persisted)
        if self.voters == {node_id} and isinstance(self.state, Unattached | Candidate | Resigned):
            self.state.election_deadline = now_ms  # a lone voter has nobody to wait for

    # ------------------------------------------------------------------ public API
    @property
    def is_voter(self) -> bool:
        return self.node_id in self.voters

    @property
    def epoch(self) -> int:
        return self.state.epoch

    @property
    def role(self) -> str:
        return self.state.name

    @property
    def leader_id(self) -> int | None:
        s = self.state
        if isinstance(s, Leader):
            return self.node_id
        if isinstance(s, Follower | Prospective):
            return s.leader_id
        return None

    def step(self, now_ms: int, inbound: Sequence[m.Message] = ()) -> Output:
        """Handle `inbound`, fire due timers, and return the effects (persist, flush, send)."""
        if now_ms > self._now:
            self._now = now_ms
        for msg in inbound:
            if msg.dst == self.node_id:
                self._handle(msg)
        self._poll()
        return self._finish()

    def propose(self, records: Sequence[bytes]) -> int:
        """Append `records` as the leader; returns the offset of the last one.

        The entries are buffered: the next `step`'s output flushes them and replicates them; they
        are committed once the high watermark passes that offset.
        """
        s = self.state
        if not isinstance(s, Leader):
            raise NotLeaderError(self.leader_id, self.epoch)
        if records:
            self._append([Entry(s.epoch, bytes(r)) for r in records])
        return self.log.end_offset - 1

    def resign(self, now_ms: int) -> Output:
        """Graceful shutdown: a leader resigns with EndQuorumEpoch, naming preferred successors.

        The driver keeps stepping the node until the voters acknowledged or a timeout, then exits.
        """
        self._now = max(self._now, now_ms)
        if isinstance(self.state, Leader):
            self._become_resigned()
        self._poll()
        return self._finish()

    def describe(self) -> m.DescribeQuorumResponse:
        """DescribeQuorum from the leader's point of view (what api key 55 answers)."""
        s = self.state
        if not isinstance(s, Leader):
            return m.DescribeQuorumResponse(
                m.NOT_LEADER_OR_FOLLOWER, self._leader_or_nil(), self.epoch, -1
            )
        voters = [m.ReplicaState(self.node_id, self.log.end_offset, self._now, self._now)]
        observers: list[m.ReplicaState] = []
        for rid, p in sorted(s.replicas.items()):
            rs = m.ReplicaState(rid, p.end_offset, p.last_fetch_ms, p.last_caught_up_ms)
            (voters if rid in self.voters else observers).append(rs)
        return m.DescribeQuorumResponse(
            m.NONE, self.node_id, s.epoch, self.high_watermark, tuple(voters), tuple(observers)
        )

    # ------------------------------------------------------------------ overridable rules
    def _quorum_record(self) -> QuorumStateRecord:
        """The record that must be durable for the current state (Kafka's ElectionState)."""
        s = self.state
        if isinstance(s, Unattached):
            return QuorumStateRecord(s.epoch, None, s.voted_id)
        if isinstance(s, Prospective):
            return QuorumStateRecord(s.epoch, s.leader_id, s.voted_id)
        if isinstance(s, Candidate):
            return QuorumStateRecord(s.epoch, None, self.node_id)
        if isinstance(s, Follower):
            return QuorumStateRecord(s.epoch, s.leader_id, None)
        return QuorumStateRecord(s.epoch, self.node_id, self.node_id)

    def _may_commit(self, offset: int, leader: Leader) -> bool:
        """The high-watermark rule: only an offset past the start of the current leader epoch.

        Entries of older epochs are committed indirectly, when an entry of this epoch (at first
        the LeaderChange control record) is on a majority; counting replicas of an old-epoch
        entry is not enough (Raft's figure 8).
        """
        return offset > leader.epoch_start_offset

    def _epoch_opening_entries(self, epoch: int) -> list[Entry]:
        """The LeaderChange control record that opens an epoch: once it is on a majority the
        high watermark may move, which commits the tail left by earlier epochs with it."""
        return [Entry(epoch, b"LeaderChange:%d" % self.node_id, control=True)]

    # ------------------------------------------------------------------ state
    def _initial_state(self, rec: QuorumStateRecord | None) -> EpochState:
        rec = rec or QuorumStateRecord(0, None, None)
        if rec.epoch < self.log.last_epoch:
            return Unattached(self.log.last_epoch, None, self._election_deadline())
        if rec.leader_id == self.node_id:
            # a leader restarts resigned: it must not vote again in an epoch it led
            others = self.voters - {self.node_id}
            return Resigned(rec.epoch, self._election_deadline(), (), set(others), {})
        if rec.voted_id == self.node_id and rec.leader_id is None:
            c = Candidate(rec.epoch, self._election_deadline(), 1, {self.node_id})
            return c
        if rec.leader_id is not None:
            return Follower(rec.epoch, rec.leader_id, self._now + self.config.fetch_timeout_ms)
        return Unattached(rec.epoch, rec.voted_id, self._election_deadline())

    def _election_deadline(self) -> int:
        if not self.is_voter:
            return NEVER
        t = self.config.election_timeout_ms
        return self._now + t + self.rng.randrange(t)

    def _set_state(self, new: EpochState) -> None:
        old = self.state
        if isinstance(old, Leader):
            # answer parked fetches so followers learn at once that this epoch is over
            for rid, p in old.parked.items():
                self._send(rid, self._fetch_error(m.NOT_LEADER_OR_FOLLOWER, p.request))
        self.state = new

    def _leader_or_nil(self) -> int:
        lid = self.leader_id
        return m.NO_LEADER if lid is None else lid

    def _become_unattached(self, epoch: int, voted_id: int | None = None) -> None:
        self._set_state(Unattached(epoch, voted_id, self._election_deadline()))

    def _become_follower(self, epoch: int, leader_id: int) -> None:
        self._set_state(Follower(epoch, leader_id, self._now + self.config.fetch_timeout_ms))

    def _become_prospective(self) -> None:
        s = self.state
        leader = s.leader_id if isinstance(s, Follower) else None
        voted: int | None
        if isinstance(s, Unattached):
            voted = s.voted_id
        elif isinstance(s, Candidate | Resigned):
            voted = self.node_id
        else:
            voted = None
        p = Prospective(s.epoch, leader, voted, self._election_deadline(), {self.node_id})
        self._set_state(p)
        if len(p.granted) >= self.majority:
            self._become_candidate()
            return
        for v in sorted(self.voters - {self.node_id}):
            self._send(v, self._vote_request(v, p.epoch, pre_vote=True))

    def _become_candidate(self) -> None:
        s = self.state
        retries = s.retries + 1 if isinstance(s, Candidate) else 1
        c = Candidate(s.epoch + 1, self._election_deadline(), retries, {self.node_id})
        self._set_state(c)
        if len(c.granted) >= self.majority:
            self._become_leader()
            return
        for v in sorted(self.voters - {self.node_id}):
            self._send(v, self._vote_request(v, c.epoch, pre_vote=False))

    def _become_leader(self) -> None:
        s = self.state
        assert isinstance(s, Candidate)
        others = self.voters - {self.node_id}
        leader = Leader(
            epoch=s.epoch,
            epoch_start_offset=self.log.end_offset,
            replicas={v: ReplicaProgress() for v in others},
            unacked=set(others),
            sent_at={},
            check_quorum_deadline=self._now + self._check_quorum_ms(),
        )
        self._set_state(leader)
        self._append(self._epoch_opening_entries(leader.epoch))
        self._update_high_watermark(leader)

    def _become_resigned(self) -> None:
        s = self.state
        assert isinstance(s, Leader)
        progress = sorted(
            ((p.end_offset, v) for v, p in s.replicas.items() if v in self.voters),
            key=lambda t: (-t[0], t[1]),
        )
        preferred = tuple(v for _, v in progress)
        others = set(self.voters - {self.node_id})
        self._set_state(Resigned(s.epoch, self._election_deadline(), preferred, others, {}))

    def _check_quorum_ms(self) -> int:
        return int(self.config.fetch_timeout_ms * self.config.check_quorum_factor)

    def _observe(self, epoch: int, leader_id: int) -> bool:
        """React to a (leader, epoch) seen in any message. True if it moved us to a newer epoch."""
        if epoch > self.epoch:
            if leader_id >= 0 and leader_id != self.node_id:
                self._become_follower(epoch, leader_id)
            else:
                self._become_unattached(epoch)
            return True
        s = self.state
        if (
            epoch == self.epoch
            and leader_id >= 0
            and leader_id != self.node_id
            and isinstance(s, Unattached | Prospective | Candidate)
            # a prospective that left this very leader (fetch timeout) does not go back to it
            and not (isinstance(s, Prospective) and s.leader_id == leader_id)
        ):
            self._become_follower(epoch, leader_id)
        return False

    # ------------------------------------------------------------------ helpers
    def _send(self, dst: int, body: m.Body) -> None:
        self._out.append(m.Message(self.node_id, dst, body))

    def _append(self, entries: list[Entry]) -> None:
        self.log.append(entries)
        self._log_dirty = True

    def _vote_request(self, dst: int, epoch: int, pre_vote: bool) -> m.VoteRequest:
        return m.VoteRequest(
            self.cluster_id, epoch, self.node_id, dst,
            self.log.last_epoch, self.log.end_offset, pre_vote,
        )

    def _log_up_to_date(self, last_epoch: int, end_offset: int) -> bool:
        return (last_epoch, end_offset) >= (self.log.last_epoch, self.log.end_offset)

    def _fetch_error(self, code: int, req: m.FetchRequest) -> m.FetchResponse:
        return m.FetchResponse(
            code, self._leader_or_nil(), self.epoch, -1, self.log.start_offset,
            fetch_offset=req.fetch_offset, last_fetched_epoch=req.last_fetched_epoch,
        )

    def _finish(self) -> Output:
        out = Output(messages=self._out)
        self._out = []
        rec = self._quorum_record()
        if rec != self._persisted:
            out.persist = rec
            self._persisted = rec
        if self._log_dirty:
            out.flush_log = True
            self._log_dirty = False
        if self.high_watermark != self._reported_hw:
            out.high_watermark = self.high_watermark
            self._reported_hw = self.high_watermark
        out.next_timer_ms = self._next_deadline()
        return out

    def _next_deadline(self) -> int:
        s = self.state
        if isinstance(s, Unattached):
            return s.election_deadline if self.is_voter else s.bootstrap_at
        if isinstance(s, Prospective):
            return min(s.election_deadline, *s.retry_at.values(), NEVER)
        if isinstance(s, Candidate):
            if s.backoff_until is not None:
                return s.backoff_until
            return min(s.election_deadline, *s.retry_at.values(), NEVER)
        rt = self.config.request_timeout_ms
        if isinstance(s, Leader):
            t = s.check_quorum_deadline if len(self.voters) > 1 else NEVER
            for v in s.unacked:
                t = min(t, s.sent_at.get(v, self._now) + rt)
            for p in s.parked.values():
                t = min(t, p.deadline)
            return t
        if isinstance(s, Follower):
            t = s.fetch_deadline
            if s.inflight is None:
                t = min(t, max(s.retry_at, self._now))
            else:
                t = min(t, s.inflight_until)
            return t
        t = s.election_deadline
        for v in s.unacked:
            t = min(t, s.sent_at.get(v, self._now) + rt)
        return t

    # ------------------------------------------------------------------ timers
    def _poll(self) -> None:
        now = self._now
        s = self.state
        if isinstance(s, Unattached):
            if not self.is_voter:
                if now >= s.bootstrap_at:
                    self._bootstrap_fetch(s)
            elif now >= s.election_deadline:
                self._become_prospective()
        elif isinstance(s, Prospective):
            if now >= s.election_deadline:
                self._prospective_lost()
            else:
                self._retry_votes(s, pre_vote=True)
        elif isinstance(s, Candidate):
            if s.backoff_until is not None:
                if now >= s.backoff_until:
                    self._become_prospective()
            elif now >= s.election_deadline:
                self._candidate_backoff()
            else:
                self._retry_votes(s, pre_vote=False)
        elif isinstance(s, Leader):
            if len(self.voters) > 1 and now >= s.check_quorum_deadline:
                # check-quorum: no fetch from a majority for fetch.timeout * 1.5: step down
                self._become_resigned()
                self._poll()
                return
            for v in sorted(s.unacked):
                if now >= s.sent_at.get(v, -NEVER) + self.config.request_timeout_ms:
                    s.sent_at[v] = now
                    self._send(v, m.BeginQuorumEpochRequest(self.cluster_id, v, self.node_id, s.epoch))
            self._update_high_watermark(s)
            for rid in sorted(s.parked):
                p = s.parked[rid]
                if (
                    now >= p.deadline
                    or self.log.end_offset > p.request.fetch_offset
                    or self.high_watermark != p.high_watermark
                ):
                    del s.parked[rid]
                    self._send(rid, self._fetch_answer(s, p.request))
                    self._hw_told[rid] = self.high_watermark
        elif isinstance(s, Follower):
            if now >= s.fetch_deadline:
                if self.is_voter:
                    self._become_prospective()
                else:
                    # an observer that lost its leader asks the voters who leads now
                    self._become_unattached(s.epoch)
                    self._poll()
                return
            if (s.inflight is None and now >= s.retry_at) or (
                s.inflight is not None and now >= s.inflight_until
            ):
                self._send_fetch(s)
        else:  # Resigned
            for v in sorted(s.unacked):
                if now >= s.sent_at.get(v, -NEVER) + self.config.request_timeout_ms:
                    s.sent_at[v] = now
                    self._send(
                        v,
                        m.EndQuorumEpochRequest(
                            self.cluster_id, self.node_id, s.epoch, s.preferred_successors
                        ),
                    )
            if now >= s.election_deadline:
                self._become_prospective()

    def _bootstrap_fetch(self, s: Unattached) -> None:
        """An observer without a leader fetches from a random voter: the answer (an error naming
        the leader and epoch, or records from the leader itself) makes it a follower."""
        s.bootstrap_at = self._now + self.config.request_timeout_ms
        voter = self.rng.choice(sorted(self.voters))
        self._send(
            voter,
            m.FetchRequest(
                self.cluster_id, self.node_id, s.epoch, self.log.end_offset, self.log.last_epoch, 0
            ),
        )

    def _retry_votes(self, s: Prospective | Candidate, pre_vote: bool) -> None:
        for v in sorted(s.retry_at):
            if self._now >= s.retry_at[v]:
                del s.retry_at[v]
                if v not in s.granted and v not in s.rejected:
                    self._send(v, self._vote_request(v, s.epoch, pre_vote))

    def _prospective_lost(self) -> None:
        s = self.state
        assert isinstance(s, Prospective)
        if s.leader_id is not None:
            self._become_follower(s.epoch, s.leader_id)
        else:
            # keep the vote: a vote given in this epoch binds for the whole epoch
            self._become_unattached(s.epoch, s.voted_id)

    def _candidate_backoff(self) -> None:
        s = self.state
        assert isinstance(s, Candidate)
        cap = min(
            self.config.election_backoff_max_ms,
            self.config.retry_backoff_ms * (1 << min(s.retries, 20)),
        )
        s.backoff_until = self._now + self.rng.randrange(cap + 1)

    def _send_fetch(self, f: Follower) -> None:
        rt = self.config.request_timeout_ms
        f.inflight_until = self._now + rt
        if f.snapshot is not None:
            sid, buf = f.snapshot
            f.inflight = (-1, -1)
            self._send(
                f.leader_id,
                m.FetchSnapshotRequest(
                    self.cluster_id, self.node_id, f.epoch, sid, len(buf),
                    self.config.snapshot_chunk_bytes,
                ),
            )
            return
        f.inflight = (self.log.end_offset, self.log.last_epoch)
        self._send(
            f.leader_id,
            m.FetchRequest(
                self.cluster_id, self.node_id, f.epoch, self.log.end_offset,
                self.log.last_epoch, self.config.fetch_max_wait_ms,
            ),
        )

    # ------------------------------------------------------------------ high watermark
    def _update_high_watermark(self, leader: Leader) -> None:
        offsets = [self.log.end_offset]
        for v in self.voters:
            if v != self.node_id:
                offsets.append(max(0, leader.replicas[v].end_offset))
        offsets.sort(reverse=True)
        candidate = offsets[self.majority - 1]
        if candidate > self.high_watermark and self._may_commit(candidate, leader):
            self.high_watermark = candidate

    # ------------------------------------------------------------------ dispatch
    def _handle(self, msg: m.Message) -> None:
        b = msg.body
        src = msg.src
        if isinstance(b, m.RequestFailed):
            self._on_request_failed(src, b.request)
        elif isinstance(b, m.FetchRequest):
            self._on_fetch(src, b)
        elif isinstance(b, m.FetchResponse):
            self._on_fetch_response(src, b)
        elif isinstance(b, m.VoteRequest):
            self._on_vote(src, b)
        elif isinstance(b, m.VoteResponse):
            self._on_vote_response(src, b)
        elif isinstance(b, m.BeginQuorumEpochRequest):
            self._on_begin(src, b)
        elif isinstance(b, m.BeginQuorumEpochResponse):
            if not self._observe(b.leader_epoch, b.leader_id):
                s = self.state
                if isinstance(s, Leader) and b.leader_epoch == s.epoch and b.error_code == m.NONE:
                    s.unacked.discard(src)
        elif isinstance(b, m.EndQuorumEpochRequest):
            self._on_end(src, b)
        elif isinstance(b, m.EndQuorumEpochResponse):
            if not self._observe(b.leader_epoch, b.leader_id):
                s = self.state
                if isinstance(s, Resigned) and b.leader_epoch == s.epoch:
                    s.unacked.discard(src)
        elif isinstance(b, m.FetchSnapshotRequest):
            self._on_fetch_snapshot(src, b)
        elif isinstance(b, m.FetchSnapshotResponse):
            self._on_fetch_snapshot_response(src, b)
        elif isinstance(b, m.DescribeQuorumRequest):
            self._send(src, self.describe())

    def _on_request_failed(self, dst: int, req: object) -> None:
        """A request of ours did not arrive: ask again after the retry backoff."""
        s = self.state
        retry = self._now + self.config.retry_backoff_ms
        if isinstance(req, m.VoteRequest):
            if (
                isinstance(s, Prospective | Candidate)
                and req.replica_epoch == s.epoch
                and req.pre_vote == isinstance(s, Prospective)
                and dst not in s.granted
                and dst not in s.rejected
            ):
                s.retry_at[dst] = retry
                if isinstance(s, Candidate) and s.backoff_until is None:
                    s.unreachable.add(dst)
                    self._candidate_check_lost(s)
        elif isinstance(req, m.FetchRequest | m.FetchSnapshotRequest):
            if isinstance(s, Unattached) and not self.is_voter and req.current_leader_epoch == s.epoch:
                s.bootstrap_at = min(s.bootstrap_at, retry)
            elif isinstance(s, Follower) and req.current_leader_epoch == s.epoch and s.inflight is not None:
                s.inflight = None
                s.retry_at = retry
        elif isinstance(req, m.BeginQuorumEpochRequest | m.EndQuorumEpochRequest):
            if isinstance(s, Leader | Resigned) and req.leader_epoch == s.epoch and dst in s.unacked:
                s.sent_at[dst] = retry - self.config.request_timeout_ms

    def _cluster_ok(self, cluster_id: str | None) -> bool:
        return cluster_id is None or self.cluster_id is None or cluster_id == self.cluster_id

    # ------------------------------------------------------------------ Vote
    def _on_vote(self, src: int, req: m.VoteRequest) -> None:
        def answer(code: int, granted: bool) -> None:
            self._send(
                src,
                m.VoteResponse(code, self._leader_or_nil(), self.epoch, granted, req.pre_vote),
            )

        if not self._cluster_ok(req.cluster_id):
            answer(m.INCONSISTENT_CLUSTER_ID, False)
            return
        if not self.is_voter or req.replica_id not in self.voters or req.voter_id != self.node_id:
            answer(m.INCONSISTENT_VOTER_SET, False)
            return
        if req.replica_epoch < self.epoch:
            answer(m.FENCED_LEADER_EPOCH, False)  # fencing: an old epoch changes nothing here
            return
        log_ok = self._log_up_to_date(req.last_offset_epoch, req.last_offset)
        if req.pre_vote:
            if req.replica_epoch > self.epoch:
                granted = log_ok  # a pre-vote never moves our epoch
            else:
                granted = log_ok and self._grants_pre_vote()
            answer(m.NONE, granted)
            return
        if req.replica_epoch > self.epoch:
            self._become_unattached(req.replica_epoch)
        s = self.state
        granted = False
        if isinstance(s, Unattached | Prospective):
            leader = s.leader_id if isinstance(s, Prospective) else None
            if leader is None and s.voted_id in (None, src) and log_ok:
                granted = True
                if s.voted_id is None or isinstance(s, Prospective):
                    # binding: the record (epoch, voted) is persisted before this answer leaves
                    self._set_state(Unattached(s.epoch, src, self._election_deadline()))
        answer(m.NONE, granted)

    def _grants_pre_vote(self) -> bool:
        """Would we vote in our current epoch? Not while a leader is alive and serving us."""
        s = self.state
        if isinstance(s, Leader | Resigned):
            return False
        if isinstance(s, Follower):
            return not s.has_fetched or s.leader_resigned
        return True

    def _on_vote_response(self, src: int, resp: m.VoteResponse) -> None:
        if self._observe(resp.leader_epoch, resp.leader_id):
            return
        if resp.leader_epoch != self.epoch or resp.error_code != m.NONE:
            return
        s = self.state
        if resp.pre_vote and isinstance(s, Prospective):
            (s.granted if resp.vote_granted else s.rejected).add(src)
            if len(s.granted) >= self.majority:
                self._become_candidate()
            elif len(s.rejected) >= self.majority:
                self._prospective_lost()
        elif not resp.pre_vote and isinstance(s, Candidate) and s.backoff_until is None:
            (s.granted if resp.vote_granted else s.rejected).add(src)
            s.unreachable.discard(src)
            if len(s.granted) >= self.majority:
                self._become_leader()
            else:
                self._candidate_check_lost(s)

    def _candidate_check_lost(self, s: Candidate) -> None:
        """Back off at once when a majority refused or cannot be reached, instead of waiting
        for the election timeout: two followers that time out together (their leader answered
        both parked fetches at once) split the vote, and would otherwise both wait it out.
        Unreachable voters are still asked again; this only shortens a lost election."""
        if len(s.rejected | s.unreachable) >= self.majority:
            self._candidate_backoff()

    # ------------------------------------------------------------------ Begin/EndQuorumEpoch
    def _on_begin(self, src: int, req: m.BeginQuorumEpochRequest) -> None:
        if req.leader_epoch < self.epoch:
            code = m.FENCED_LEADER_EPOCH
        else:
            code = m.NONE
            s = self.state
            if req.leader_epoch > self.epoch or not (
                isinstance(s, Follower) and s.leader_id == req.leader_id
            ):
                if isinstance(s, Leader | Resigned) and req.leader_epoch == self.epoch:
                    raise AssertionError(f"two leaders in epoch {self.epoch}")
                self._become_follower(req.leader_epoch, req.leader_id)
            f = self.state
            assert isinstance(f, Follower)
            f.fetch_deadline = max(f.fetch_deadline, self._now + self.config.fetch_timeout_ms)
        self._send(src, m.BeginQuorumEpochResponse(code, self._leader_or_nil(), self.epoch))

    def _on_end(self, src: int, req: m.EndQuorumEpochRequest) -> None:
        if req.leader_epoch < self.epoch:
            self._send(
                src, m.EndQuorumEpochResponse(m.FENCED_LEADER_EPOCH, self._leader_or_nil(), self.epoch)
            )
            return
        self._observe(req.leader_epoch, req.leader_id)
        s = self.state
        if isinstance(s, Follower) and s.leader_id == req.leader_id and s.epoch == req.leader_epoch:
            s.leader_resigned = True
            s.fetch_deadline = min(
                s.fetch_deadline, self._now + self._successor_backoff(req.preferred_successors)
            )
        self._send(src, m.EndQuorumEpochResponse(m.NONE, self._leader_or_nil(), self.epoch))

    def _successor_backoff(self, preferred: tuple[int, ...]) -> int:
        """The resigned leader's first choice runs at once, later ones exponentially later."""
        cap = self.config.election_backoff_max_ms
        if self.node_id not in preferred:
            return cap
        pos = preferred.index(self.node_id)
        if pos == 0:
            return 0
        return max(1, cap >> (len(preferred) - pos))

    # ------------------------------------------------------------------ Fetch (leader side)
    def _on_fetch(self, src: int, req: m.FetchRequest) -> None:
        s = self.state
        if not self._cluster_ok(req.cluster_id):
            self._send(src, self._fetch_error(m.INCONSISTENT_CLUSTER_ID, req))
            return
        if req.current_leader_epoch < self.epoch:
            self._send(src, self._fetch_error(m.FENCED_LEADER_EPOCH, req))
            return
        if req.current_leader_epoch > self.epoch:
            self._send(src, self._fetch_error(m.UNKNOWN_LEADER_EPOCH, req))
            return
        if not isinstance(s, Leader):
            self._send(src, self._fetch_error(m.NOT_LEADER_OR_FOLLOWER, req))
            return
        told = self._hw_told.get(src, -1)
        answer = self._fetch_answer(s, req)
        if answer.records or answer.diverging_epoch or answer.snapshot_id or req.max_wait_ms <= 0:
            s.parked.pop(src, None)
            self._send(src, answer)
            self._hw_told[src] = self.high_watermark
        else:
            # parked with the high watermark the fetcher knows, not the current one: this very
            # fetch may have advanced it (its offset acknowledges entries)
            s.parked[src] = Parked(req, self._now + req.max_wait_ms, told)

    def _fetch_answer(self, s: Leader, req: m.FetchRequest) -> m.FetchResponse:
        """Validate (offset, last fetched epoch) against our log, record progress, read."""
        log = self.log
        off, last = req.fetch_offset, req.last_fetched_epoch

        def reply(**kw: object) -> m.FetchResponse:
            return m.FetchResponse(
                m.NONE, self.node_id, s.epoch,
                self.high_watermark if self.high_watermark > s.epoch_start_offset else -1,
                log.start_offset, fetch_offset=off, last_fetched_epoch=last, **kw,  # type: ignore[arg-type]
            )

        snap = log.snapshot_id
        if off < log.start_offset or (snap is not None and last < snap.epoch):
            assert snap is not None
            return reply(snapshot_id=snap)
        oe = log.end_offset_for_epoch(last)
        if oe.epoch != last or off > oe.offset:
            return reply(diverging_epoch=oe)
        # a valid position: the follower's log matches ours up to `off`, and it is durable there
        rid = req.replica_id
        p = s.replicas.get(rid)
        if p is None:
            p = s.replicas[rid] = ReplicaProgress()
        p.end_offset = off
        p.last_fetch_ms = self._now
        if off >= log.end_offset:
            p.last_caught_up_ms = self._now
        if rid in self.voters:
            s.unacked.discard(rid)
            s.fetched.add(rid)
            if len(s.fetched) + 1 >= self.majority:
                s.check_quorum_deadline = self._now + self._check_quorum_ms()
                s.fetched.clear()
            self._update_high_watermark(s)
        entries = log.read(off, self.config.fetch_max_entries)
        size = 0
        for i, e in enumerate(entries):
            size += len(e.data)
            if size > self.config.fetch_max_bytes and i > 0:
                entries = entries[:i]  # the frame stays well below FETCH_MAX_BYTES
                break
        return reply(records=tuple(entries))

    def _on_fetch_snapshot(self, src: int, req: m.FetchSnapshotRequest) -> None:
        s = self.state
        code = m.NONE
        if req.current_leader_epoch < self.epoch:
            code = m.FENCED_LEADER_EPOCH
        elif req.current_leader_epoch > self.epoch:
            code = m.UNKNOWN_LEADER_EPOCH
        elif not isinstance(s, Leader):
            code = m.NOT_LEADER_OR_FOLLOWER
        data = self.log.read_snapshot(req.snapshot_id) if code == m.NONE else None
        if code == m.NONE and data is None:
            code = m.SNAPSHOT_NOT_FOUND
        if data is not None and not 0 <= req.position <= len(data):
            code = m.POSITION_OUT_OF_RANGE
        if code != m.NONE or data is None:
            self._send(
                src,
                m.FetchSnapshotResponse(
                    code, self._leader_or_nil(), self.epoch, req.snapshot_id, -1, req.position
                ),
            )
            return
        chunk = data[req.position : req.position + req.max_bytes]
        self._send(
            src,
            m.FetchSnapshotResponse(
                m.NONE, self.node_id, self.epoch, req.snapshot_id, len(data), req.position, chunk
            ),
        )

    # ------------------------------------------------------------------ Fetch (follower side)
    def _on_fetch_response(self, src: int, resp: m.FetchResponse) -> None:
        if self._observe(resp.leader_epoch, resp.leader_id):
            return
        f = self.state
        if isinstance(f, Unattached) and not self.is_voter:
            f.bootstrap_at = min(f.bootstrap_at, self._now + self.config.retry_backoff_ms)
            return  # that voter knows no leader in our epoch: ask (another) one again
        if not isinstance(f, Follower) or resp.leader_epoch != f.epoch or src != f.leader_id:
            return
        if f.inflight != (resp.fetch_offset, resp.last_fetched_epoch):
            return  # an answer to an older Fetch: our log has moved since
        f.inflight = None
        if resp.error_code != m.NONE:
            f.retry_at = self._now + self.config.retry_backoff_ms
            return
        f.has_fetched = True
        f.fetch_deadline = self._now + self.config.fetch_timeout_ms
        log = self.log
        if resp.diverging_epoch is not None:
            d = resp.diverging_epoch
            local = log.end_offset_for_epoch(d.epoch)
            cut = min(d.offset, local.offset)
            if cut < log.start_offset:
                raise AssertionError(f"DivergingEpoch {d} below our snapshot {log.snapshot_id}")
            log.truncate_to(cut)
            self._log_dirty = True
        elif resp.snapshot_id is not None:
            f.snapshot = (resp.snapshot_id, bytearray())
        else:
            if resp.records:
                self._append(list(resp.records))
            # only a validated position says our log matches the leader's up to its end: after a
            # DivergingEpoch truncation the rest of our log may still differ (the next Fetch
            # checks it), so the leader's high watermark is not ours to take yet
            if resp.high_watermark >= 0:
                hw = min(resp.high_watermark, log.end_offset)
                if hw > self.high_watermark:
                    self.high_watermark = hw
        self._send_fetch(f)

    def _on_fetch_snapshot_response(self, src: int, resp: m.FetchSnapshotResponse) -> None:
        if self._observe(resp.leader_epoch, resp.leader_id):
            return
        f = self.state
        if (
            not isinstance(f, Follower)
            or resp.leader_epoch != f.epoch
            or src != f.leader_id
            or f.snapshot is None
            or f.inflight != (-1, -1)
        ):
            return
        sid, buf = f.snapshot
        f.inflight = None
        if resp.error_code != m.NONE or resp.snapshot_id != sid or resp.position != len(buf):
            f.snapshot = None  # fetch again: the leader names its current snapshot
            f.retry_at = self._now + self.config.retry_backoff_ms
            return
        f.fetch_deadline = self._now + self.config.fetch_timeout_ms
        f.has_fetched = True
        buf += resp.unaligned_records
        if len(buf) >= resp.size:
            self.log.install_snapshot(sid, bytes(buf))
            self._log_dirty = True
            f.snapshot = None
            # a snapshot holds committed entries only
            if sid.offset > self.high_watermark:
                self.high_watermark = sid.offset
        self._send_fetch(f)


__all__ = ["NEVER", "NotLeaderError", "OffsetAndEpoch", "Output", "RaftNode"]
