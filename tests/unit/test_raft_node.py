"""Single transitions of the KRaft Raft core, driven message by message (no network, no disk)."""

from __future__ import annotations

import random

import pytest

from samsa.cluster.quorum import messages as m
from samsa.cluster.quorum.config import QuorumConfig
from samsa.cluster.quorum.log import Entry, MemoryLog, OffsetAndEpoch
from samsa.cluster.quorum.node import NotLeaderError, Output, RaftNode
from samsa.cluster.quorum.state import QuorumStateRecord

T0 = 10_000


def make_log(*epochs: int) -> MemoryLog:
    log = MemoryLog()
    for i, e in enumerate(epochs):
        log.append([Entry(e, b"x%d" % i)])
    log.flush()
    return log


class Cluster:
    """Nodes plus a FIFO of messages delivered instantly; persists and flushes as a driver must."""

    def __init__(self, n: int = 3, config: QuorumConfig | None = None, logs=None, records=None):
        self.config = config or QuorumConfig()
        self.ids = list(range(1, n + 1))
        self.logs = {i: (logs or {}).get(i) or MemoryLog() for i in self.ids}
        self.persisted: dict[int, QuorumStateRecord | None] = dict(records or {})
        self.nodes = {i: self._new(i, T0) for i in self.ids}
        self.queue: list[m.Message] = []
        self.down: set[int] = set()
        self.now = T0

    def _new(self, i: int, now: int) -> RaftNode:
        return RaftNode(i, self.ids, self.config, self.persisted.get(i), self.logs[i], random.Random(i), now)

    def apply(self, i: int, out: Output) -> Output:
        out.apply(lambda rec: self.persisted.__setitem__(i, rec), self.logs[i].flush, self.queue.append)
        return out

    def step(self, i: int, now: int | None = None, msgs=()) -> Output:
        if now is not None:
            self.now = now
        return self.apply(i, self.nodes[i].step(self.now, list(msgs)))

    def deliver(self, limit: int = 1000, drop=lambda msg: False) -> None:
        for _ in range(limit):
            if not self.queue:
                return
            msg = self.queue.pop(0)
            if msg.dst in self.down or drop(msg):
                continue
            self.step(msg.dst, msgs=[msg])
        raise AssertionError("messages did not settle")

    def elect(self, i: int) -> None:
        """Let node i's election timer fire (the others were created at T0, so theirs later)."""
        self.step(i, T0 + 2 * self.config.election_timeout_ms)
        self.deliver()
        assert self.nodes[i].role == "leader"

    def restart(self, i: int) -> None:
        self.logs[i].crash()
        self.nodes[i] = self._new(i, self.now)


def test_pre_vote_does_not_bump_the_epoch():
    c = Cluster()
    voter = c.nodes[2]
    c.step(2)  # start: persists the initial state
    req = m.VoteRequest(None, 5, 1, 2, 0, 0, pre_vote=True)
    out = c.step(2, msgs=[m.Message(1, 2, req)])
    (resp,) = [x.body for x in out.messages]
    assert isinstance(resp, m.VoteResponse) and resp.vote_granted and resp.pre_vote
    assert voter.epoch == 0 and voter.role == "unattached"
    assert out.persist is None  # nothing changed, nothing to persist
    # and the prospective itself stays in its epoch while asking
    c.queue.clear()
    c.step(1, T0 + 2000)
    assert c.nodes[1].role == "prospective" and c.nodes[1].epoch == 0
    pre = [x.body for x in c.queue]
    assert pre and all(isinstance(b, m.VoteRequest) and b.pre_vote and b.replica_epoch == 0 for b in pre)


def test_a_real_vote_is_persisted_in_the_same_output_that_answers_it():
    c = Cluster()
    req = m.VoteRequest(None, 1, 1, 2, 0, 0, pre_vote=False)
    out = c.step(2, msgs=[m.Message(1, 2, req)])
    assert out.persist == QuorumStateRecord(1, None, 1)
    assert any(isinstance(x.body, m.VoteResponse) and x.body.vote_granted for x in out.messages)
    # after a crash-restart the persisted vote still binds: another candidate of epoch 1 is refused
    c.restart(2)
    out = c.step(2, msgs=[m.Message(3, 2, m.VoteRequest(None, 1, 3, 2, 0, 0, pre_vote=False))])
    (resp,) = [x.body for x in out.messages]
    assert not resp.vote_granted


@pytest.mark.parametrize(
    "last_epoch, last_offset",
    [(1, 5), (2, 2)],  # an older last epoch (longer log), or the same epoch but shorter
)
def test_a_node_with_a_stale_log_is_refused(last_epoch, last_offset):
    c = Cluster(logs={2: make_log(1, 1, 2)})
    for pre_vote in (True, False):
        req = m.VoteRequest(None, 3, 1, 2, last_epoch, last_offset, pre_vote)
        out = c.step(2, msgs=[m.Message(1, 2, req)])
        (resp,) = [x.body for x in out.messages]
        assert not resp.vote_granted
    assert c.nodes[2].epoch == 3  # the real request still moved it to the newer epoch
    assert c.persisted[2] == QuorumStateRecord(3, None, None)


def test_an_older_epoch_is_fenced():
    c = Cluster(records={2: QuorumStateRecord(4, None, None)})
    out = c.step(2, msgs=[m.Message(1, 2, m.VoteRequest(None, 3, 1, 2, 9, 9, False))])
    (resp,) = [x.body for x in out.messages]
    assert resp.error_code == m.FENCED_LEADER_EPOCH and resp.leader_epoch == 4 and not resp.vote_granted


def test_election_pre_vote_then_vote_then_leader_change_record():
    c = Cluster()
    c.elect(1)
    leader = c.nodes[1]
    assert leader.epoch == 1
    assert c.logs[1].entry(0).control  # the LeaderChange record opens the epoch
    assert {c.nodes[2].leader_id, c.nodes[3].leader_id} == {1}
    c.deliver()
    assert leader.high_watermark == 1  # the followers fetched it: committed


def test_follower_truncates_on_diverging_epoch_and_does_not_take_the_high_watermark():
    log = make_log(1, 1, 2, 2)
    c = Cluster(logs={2: log}, records={2: QuorumStateRecord(3, 1, None)})
    out = c.step(2)
    (fetch,) = [x.body for x in out.messages]
    assert isinstance(fetch, m.FetchRequest) and (fetch.fetch_offset, fetch.last_fetched_epoch) == (4, 2)
    resp = m.FetchResponse(
        m.NONE, 1, 3, 3, 0, diverging_epoch=OffsetAndEpoch(2, 1), fetch_offset=4, last_fetched_epoch=2
    )
    out = c.step(2, msgs=[m.Message(1, 2, resp)])
    assert log.end_offset == 2 and out.flush_log
    # its remaining log is not yet known to match the leader's: no high watermark from this answer
    assert c.nodes[2].high_watermark == 0
    (fetch,) = [x.body for x in out.messages]
    assert (fetch.fetch_offset, fetch.last_fetched_epoch) == (2, 1)
    # a late answer to the old Fetch is ignored
    c.step(2, msgs=[m.Message(1, 2, resp)])
    assert log.end_offset == 2


def test_leader_answers_diverging_epoch_and_the_follower_converges():
    # node 1 leads with [1,1,3]; node 2 has [1,1,2,2] from a leader that lost epoch 2
    logs = {1: make_log(1, 1, 3), 2: make_log(1, 1, 2, 2), 3: make_log(1, 1, 3)}
    recs = {i: QuorumStateRecord(3, None, None) for i in (1, 2, 3)}
    c = Cluster(logs=logs, records=recs)
    c.elect(1)
    c.deliver()
    c.step(1, c.now + c.config.fetch_max_wait_ms)  # parked fetches answered with the new HW
    c.deliver()
    assert [e.epoch for e in c.logs[2].read(0, 10)] == [e.epoch for e in c.logs[1].read(0, 10)]
    assert c.nodes[2].high_watermark == c.nodes[1].high_watermark == c.logs[1].end_offset


def test_high_watermark_needs_an_entry_of_the_current_epoch_on_a_majority():
    cfg = QuorumConfig(fetch_max_entries=3)
    logs = {1: make_log(1, 1, 1)}
    recs = {i: QuorumStateRecord(1, None, None) for i in (1, 2, 3)}
    c = Cluster(config=cfg, logs=logs, records=recs)
    c.step(1, T0 + 2000)
    c.deliver(drop=lambda msg: msg.body.__class__ in (m.FetchRequest, m.FetchResponse))
    leader = c.nodes[1]
    assert leader.role == "leader" and leader.epoch == 2
    start = leader.state.epoch_start_offset
    assert start == 3
    fetch = lambda off, ep: m.Message(2, 1, m.FetchRequest(None, 2, 2, off, ep, 0))  # noqa: E731
    c.step(1, msgs=[fetch(0, 0)])
    c.step(1, msgs=[fetch(3, 1)])  # node 2 holds the three epoch-1 entries: a majority has them
    assert leader.high_watermark == 0  # ...but they are of an older epoch: not committed by count
    c.step(1, msgs=[fetch(4, 2)])  # the LeaderChange record of epoch 2 is on a majority
    assert leader.high_watermark == 4


def test_leader_resigns_on_check_quorum():
    c = Cluster()
    c.elect(1)
    c.deliver()
    t = c.now
    # follower 2 keeps fetching: a majority (1 and 2) -- the leader stays
    for k in range(1, 5):
        c.now = t + k * 1000
        c.queue.clear()
        c.step(1, msgs=[m.Message(2, 1, m.FetchRequest(None, 2, 1, 1, 1, 0))])
    assert c.nodes[1].role == "leader"
    # then nobody fetches for fetch.timeout * 1.5
    out = c.step(1, c.now + 3000)
    assert c.nodes[1].role == "resigned"
    ends = [x for x in out.messages if isinstance(x.body, m.EndQuorumEpochRequest)]
    assert {x.dst for x in ends} == {2, 3}


def test_resign_sends_end_quorum_epoch_and_preferred_successors_run_first():
    c = Cluster()
    c.elect(1)
    c.deliver()
    c.down.add(3)  # node 3 falls behind
    c.nodes[1].propose([b"a", b"b"])
    c.step(1)
    c.deliver()
    c.down.clear()
    out = c.apply(1, c.nodes[1].resign(c.now))
    assert c.nodes[1].role == "resigned"
    ends = {x.dst: x.body for x in out.messages if isinstance(x.body, m.EndQuorumEpochRequest)}
    assert set(ends) == {2, 3}
    assert ends[2].preferred_successors == (2, 3)  # best replicated first
    c.queue.clear()
    c.step(2, msgs=[m.Message(1, 2, ends[2])])
    assert c.nodes[2].role == "prospective"  # first choice: stands at once
    out3 = c.step(3, msgs=[m.Message(1, 3, ends[3])])
    assert c.nodes[3].role == "follower"  # second choice: after a shorter timeout than fetch's
    assert c.now < out3.next_timer_ms <= c.now + c.config.election_backoff_max_ms // 2
    c.deliver()
    assert c.nodes[2].role == "leader" and c.nodes[2].epoch == 2


def test_restarted_leader_comes_back_resigned_and_cannot_vote_in_its_epoch():
    c = Cluster()
    c.elect(1)
    c.restart(1)
    assert c.nodes[1].role == "resigned" and c.nodes[1].epoch == 1
    out = c.step(1, msgs=[m.Message(2, 1, m.VoteRequest(None, 1, 2, 1, 9, 9, False))])
    assert not [x for x in out.messages if isinstance(x.body, m.VoteResponse)][0].body.vote_granted


def test_fetch_below_the_log_start_gets_snapshot_id_then_fetch_snapshot():
    cfg = QuorumConfig(snapshot_chunk_bytes=4)
    c = Cluster(config=cfg)
    c.elect(1)
    c.deliver()
    c.nodes[1].propose([b"a", b"b", b"c"])
    c.step(1)
    c.deliver()
    leader = c.nodes[1]
    hw = leader.high_watermark
    assert hw == 4
    c.logs[1].take_snapshot(OffsetAndEpoch(hw, 1), b"state-machine-image")
    # node 3 loses its disk and comes back empty
    c.logs[3] = MemoryLog()
    c.persisted[3] = None
    c.nodes[3] = c._new(3, c.now)
    c.step(3, msgs=[m.Message(1, 3, m.BeginQuorumEpochRequest(None, 3, 1, 1))])
    seen = []
    for _ in range(50):
        if not c.queue:
            break
        msg = c.queue.pop(0)
        seen.append(type(msg.body).__name__)
        c.step(msg.dst, msgs=[msg])
    assert "FetchSnapshotRequest" in seen
    assert c.logs[3].snapshot_id == OffsetAndEpoch(4, 1)
    assert c.logs[3].read_snapshot(OffsetAndEpoch(4, 1)) == b"state-machine-image"
    assert c.nodes[3].high_watermark == 4 and c.logs[3].start_offset == 4


def test_propose_on_a_follower_names_the_leader():
    c = Cluster()
    c.elect(1)
    with pytest.raises(NotLeaderError) as e:
        c.nodes[2].propose([b"x"])
    assert e.value.leader_id == 1 and e.value.epoch == 1


def test_describe_quorum():
    c = Cluster()
    c.elect(1)
    c.deliver()
    d = c.nodes[1].describe()
    assert d.error_code == m.NONE and d.leader_id == 1 and d.high_watermark == 1
    assert [v.replica_id for v in d.current_voters] == [1, 2, 3]
    assert c.nodes[2].describe().error_code == m.NOT_LEADER_OR_FOLLOWER


def test_memory_log_loses_unflushed_writes_on_crash():
    log = make_log(1, 1)
    log.append([Entry(1, b"late")])
    log.truncate_to(1)
    log.crash()
    assert log.end_offset == 2


def test_output_apply_runs_persist_then_flush_then_send():
    c = Cluster()
    out = c.nodes[2].step(T0, [m.Message(1, 2, m.VoteRequest(None, 1, 1, 2, 0, 0, False))])
    order = []
    out.apply(
        lambda rec: order.append(("persist", rec.voted_id)),
        lambda: order.append(("flush", None)),
        lambda msg: order.append(("send", type(msg.body).__name__)),
        lambda hw: order.append(("commit", hw)),
    )
    assert order[0] == ("persist", 1) and ("send", "VoteResponse") in order
    assert order.index(("persist", 1)) < order.index(("send", "VoteResponse"))


def test_a_single_voter_elects_itself_and_commits_alone():
    log = MemoryLog()
    node = RaftNode(1, [1], QuorumConfig(), None, log, random.Random(1), 0)
    out = node.step(2000)
    assert node.role == "leader" and node.epoch == 1 and out.persist == QuorumStateRecord(1, 1, 1)
    node.propose([b"a"])
    out = node.step(2001)
    assert out.flush_log and out.high_watermark == 2 == node.high_watermark
    # no check-quorum for a quorum of one
    node.step(100_000)
    assert node.role == "leader"


def test_follower_fetch_timeout_makes_it_prospective_in_the_same_epoch():
    c = Cluster()
    c.elect(1)
    c.deliver()
    t = c.now
    cut = lambda msg: {msg.src, msg.dst} == {1, 2}  # noqa: E731  (node 2 loses the leader)
    for k in range(4):  # node 3 keeps fetching: the leader answers its long polls
        c.step(1, t + 500 * k + 500)
        c.deliver(drop=cut)
    c.step(2, t + c.config.fetch_timeout_ms - 1)
    assert c.nodes[2].role == "follower"
    c.step(2, t + c.config.fetch_timeout_ms + 1)
    assert c.nodes[2].role == "prospective" and c.nodes[2].epoch == 1
    # node 3 still hears from the leader: it refuses the pre-vote, so no epoch is burnt
    c.deliver(drop=cut)
    assert c.nodes[3].epoch == 1 and c.nodes[3].role == "follower"
    assert c.nodes[1].role == "leader" and c.nodes[2].epoch == 1


def test_rejected_candidate_backs_off_randomly_then_asks_for_pre_votes_again():
    recs = {i: QuorumStateRecord(1, None, None) for i in (1, 2, 3)}
    c = Cluster(logs={2: make_log(1, 1), 3: make_log(1, 1)}, records=recs)
    c.nodes[2], c.nodes[3] = c._new(2, T0 + 9000), c._new(3, T0 + 9000)  # their timers: later
    c.step(1, T0 + 2000)  # node 1 (empty log) stands; pre-votes are refused
    c.deliver()
    assert c.nodes[1].role == "unattached" and c.nodes[1].epoch == 1  # lost without burning an epoch
    # force a candidacy (as if pre-votes had been granted) and see the backoff after rejection
    c.nodes[1]._become_prospective()
    c.nodes[1]._become_candidate()
    c.queue.clear()
    c.apply(1, c.nodes[1].step(c.now))
    assert c.nodes[1].role == "candidate" and c.nodes[1].epoch == 2
    c.deliver()
    s = c.nodes[1].state
    assert s.backoff_until is not None
    assert c.now <= s.backoff_until <= c.now + c.config.election_backoff_max_ms
    c.step(1, s.backoff_until)
    assert c.nodes[1].role == "prospective" and c.nodes[1].epoch == 2


@pytest.mark.parametrize(
    "body",
    [
        m.FetchRequest(None, 2, 1, 0, 0, 0),
        m.BeginQuorumEpochRequest(None, 1, 2, 1),
        m.EndQuorumEpochRequest(None, 2, 1, ()),
    ],
    ids=["Fetch", "BeginQuorumEpoch", "EndQuorumEpoch"],
)
def test_requests_from_an_older_leader_epoch_are_fenced(body):
    c = Cluster(records={1: QuorumStateRecord(2, None, None)})
    c.step(1)
    log_end = c.logs[1].end_offset
    out = c.step(1, msgs=[m.Message(2, 1, body)])
    (resp,) = [x.body for x in out.messages]
    assert resp.error_code == m.FENCED_LEADER_EPOCH and resp.leader_epoch == 2
    assert c.nodes[1].epoch == 2 and c.nodes[1].role == "unattached" and out.persist is None
    assert c.logs[1].end_offset == log_end


def _add_observer(c: Cluster, oid: int = 9) -> RaftNode:
    c.logs[oid] = MemoryLog()
    c.nodes[oid] = RaftNode(oid, c.ids, c.config, None, c.logs[oid], random.Random(oid), c.now)
    return c.nodes[oid]


def test_an_observer_bootstraps_from_a_voter_follows_the_leader_and_never_votes():
    c = Cluster()
    c.elect(1)
    c.deliver()
    c.nodes[1].propose([b"a"])
    c.step(1)
    c.deliver()
    obs = _add_observer(c)
    c.step(9)  # no leader known: it asks a random voter
    asks = [msg for msg in c.queue if msg.src == 9]
    assert len(asks) == 1 and isinstance(asks[0].body, m.FetchRequest) and asks[0].dst in c.ids
    for k in range(1, 5):
        c.step(1, c.now + 500 * k)  # long polls come back
        c.deliver()
    assert obs.role == "follower" and obs.leader_id == 1 and obs.epoch == 1
    assert [e.data for e in c.logs[9].read(0, 10) if not e.control] == [b"a"]
    assert obs.high_watermark == c.nodes[1].high_watermark
    assert 9 in c.nodes[1].state.replicas and 9 not in c.nodes[1].voters
    # it never votes, and losing its leader makes it look for one, not stand for election
    c.step(9, msgs=[m.Message(2, 9, m.VoteRequest(None, 5, 2, 9, 1, 2, False))])
    answer = c.queue.pop()
    assert answer.body.error_code == m.INCONSISTENT_VOTER_SET and not answer.body.vote_granted
    c.queue.clear()
    c.step(9, c.now + c.config.fetch_timeout_ms + 1)
    assert obs.role == "unattached" and obs.epoch == 1
    sent = [msg for msg in c.queue if msg.src == 9]
    assert len(sent) == 1 and isinstance(sent[0].body, m.FetchRequest)
    assert sent[0].body.max_wait_ms == 0 and not any(isinstance(x.body, m.VoteRequest) for x in sent)


def test_a_candidate_that_cannot_reach_a_majority_backs_off_before_its_election_timeout():
    c = Cluster()
    votes: list[m.Message] = []

    def hold_votes(msg: m.Message) -> bool:
        if isinstance(msg.body, m.VoteRequest) and not msg.body.pre_vote:
            votes.append(msg)
            return True
        return False

    c.step(1, T0 + 2 * c.config.election_timeout_ms)  # node 1 asks for pre-votes
    c.deliver(drop=hold_votes)
    s = c.nodes[1].state
    assert c.nodes[1].role == "candidate" and s.backoff_until is None and len(votes) == 2
    # node 2 refuses (it voted for itself in this epoch), node 3 is unreachable
    c.step(1, msgs=[m.Message(2, 1, m.VoteResponse(m.NONE, -1, s.epoch, False, False))])
    assert s.backoff_until is None  # one refusal of three: not lost yet
    req3 = next(v.body for v in votes if v.dst == 3)
    c.step(1, msgs=[m.Message(3, 1, m.RequestFailed(req3))])
    assert s.backoff_until is not None and s.backoff_until < s.election_deadline


def test_a_lone_voter_elects_itself_at_once_also_after_a_restart():
    log = MemoryLog()
    node = RaftNode(1, [1], QuorumConfig(), None, log, random.Random(1), 0)
    out = node.step(0)  # nobody to wait for: no election timeout
    assert node.role == "leader" and node.epoch == 1
    log.flush()
    again = RaftNode(1, [1], QuorumConfig(), out.persist, log, random.Random(1), 50)
    again.step(50)  # it restarts resigned from epoch 1 and takes epoch 2 at once
    assert again.role == "leader" and again.epoch == 2


def test_a_fetch_response_is_bounded_in_bytes_but_carries_at_least_one_entry():
    c = Cluster(config=QuorumConfig(fetch_max_bytes=10))
    c.elect(1)
    c.deliver()
    leader = c.nodes[1]
    start = leader.log.end_offset
    leader.propose([b"0123456789ab", b"x", b"y"])
    c.step(1)
    sizes = []

    def watch(msg: m.Message) -> bool:
        if isinstance(msg.body, m.FetchResponse) and msg.body.records:
            sizes.append(len(msg.body.records))
        return False

    c.deliver(drop=watch)
    assert sizes and sizes[0] == 1  # the 12-byte entry alone passes the 10-byte bound
    assert c.logs[2].end_offset == c.logs[1].end_offset == start + 3


def test_a_commit_reaches_every_follower_without_waiting_for_parked_fetches_to_expire():
    """The fetch whose offset advances the high watermark is parked with the value its fetcher
    knows (the old one), so it is answered at once with the new one; the clock never moves here,
    so nothing may wait for fetch_max_wait_ms."""
    c = Cluster()
    c.elect(1)
    c.deliver()
    leader = c.nodes[1]
    for _ in range(3):
        end = leader.propose([b"record"]) + 1
        c.step(1)  # flush and answer the parked fetches with the new entry
        c.deliver()
        assert leader.high_watermark == end
        assert [c.nodes[i].high_watermark for i in (2, 3)] == [end, end]
