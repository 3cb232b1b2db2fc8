"""A deterministic simulator for partition replication (Kafka's ISR, high watermark and leader
epochs): one seed, one schedule, replayable exactly.

It runs one partition over 3 or 4 brokers and a controller, through a network that loses, delays
and reorders messages and can be cut (broker from controller, broker from broker, one way or
both), with brokers that crash (`kill -9`: the log survives in the page cache, the in-memory
state does not, the high watermark comes back from its last checkpoint; optionally a power loss
that also takes the log's unflushed tail) or pause (SIGSTOP: no steps, messages wait), and
clients producing with acks=all (min.insync.replicas=2) and acks=1. Optionally the controller
elects unclean leaders.

The real pure pieces decide: `LeaderState` (follower positions, caught-up clock, the high
watermark over the maximal ISR, ISR expansion and shrink) and `divergence`/`truncation_offset`
(both sides of a Fetch). Around them, `SimBroker` mirrors the wiring of
`replication/manager.py` (roles from the broker's image, high watermark mode, acks=all waiters,
the ISR loop, AlterPartition answers), `replication/fetcher.py` (one Fetch in flight, answers
dropped when the follower's state moved, DivergingEpoch truncation) and the follower branch of
`broker/handlers/fetch.py` (leader epoch check, divergence check, the follower's position). The
controller applies Kafka's rules: AlterPartition validated as `validateAlterPartitionData`,
a broker without heartbeats fenced and removed from the ISR (kept if it is the last member),
the first unfenced ISR member in replica order leads, a returning broker leads an offline
partition it is in the ISR of. Brokers see the controller's state through a lagging metadata
fetch; a restarted broker waits until it has caught up before it takes a role.

After every step `Checker` verifies safety; after the faults heal, liveness (see `Checker` and
`Simulation.run`). A failure raises `Violation` naming the seed.
"""

from __future__ import annotations

import bisect
import functools
import heapq
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from samsa.cluster.replication import truncation
from samsa.cluster.replication.leader import IsrChange, LeaderState
from samsa.protocol.errors import Err

CONTROLLER = 0
NEVER = 1 << 60


class Violation(AssertionError):
    """A safety or liveness property failed; the message names it and the seed."""


# ---- the log and its leader-epoch cache (in memory) ------------------------------------------

class EpochCache:
    """Kafka's LeaderEpochFileCache in memory: (epoch, start offset) pairs, both increasing."""

    __slots__ = ("entries",)

    def __init__(self) -> None:
        self.entries: list[tuple[int, int]] = []

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else -1

    def assign(self, epoch: int, start_offset: int) -> None:
        e = self.entries
        if e and e[-1][0] == epoch and start_offset >= e[-1][1]:
            return
        while e and (e[-1][0] >= epoch or e[-1][1] >= start_offset):
            e.pop()
        e.append((epoch, start_offset))

    def end_offset_for(self, epoch: int, log_end: int) -> tuple[int, int]:
        e = self.entries
        if epoch < 0 or not e:
            return -1, -1
        if e[-1][0] == epoch:
            return epoch, log_end
        i = bisect.bisect_right(e, (epoch, 1 << 62))  # first entry with a larger epoch
        if i == len(e):
            return -1, -1  # larger than every known epoch
        if i == 0:
            return epoch, e[0][1]  # smaller than every known epoch: where the first starts
        return e[i - 1][0], e[i][1]

    def truncate_from_end(self, end_offset: int) -> None:
        e = self.entries
        while e and e[-1][1] >= end_offset:
            e.pop()


@dataclass(slots=True)
class SimLog:
    """What the replication code uses of a PartitionLog: entries are (epoch, value)."""

    entries: list[tuple[int, int]] = field(default_factory=list)
    epochs: EpochCache = field(default_factory=EpochCache)
    hw: int | None = None  # None-backed: equals the log end until first set
    leader_epoch: int = -1
    log_start_offset: int = 0
    flushed: int = 0  # entries below are on disk; a power loss keeps only those

    @property
    def end_offset(self) -> int:
        return len(self.entries)

    @property
    def high_watermark(self) -> int:
        return len(self.entries) if self.hw is None else self.hw

    def set_high_watermark(self, hw: int) -> bool:
        hw = max(self.log_start_offset, min(hw, len(self.entries)))
        moved = hw > self.high_watermark
        self.hw = hw
        return moved

    def follow_leo_hw(self) -> None:
        self.hw = None

    def append(self, value: int, leader_epoch: int) -> int:
        if leader_epoch >= 0:
            self.epochs.assign(leader_epoch, len(self.entries))
        self.entries.append((leader_epoch, value))
        return len(self.entries) - 1

    def append_as_follower(self, base: int, batch: list[tuple[int, int]]) -> None:
        if base < len(self.entries):
            raise ValueError(f"follower append at {base} below the log end {len(self.entries)}")
        for i, (epoch, value) in enumerate(batch):
            if epoch != self.epochs.latest_epoch:
                self.epochs.assign(epoch, base + i)
            self.entries.append((epoch, value))

    def truncate_to(self, offset: int) -> None:
        if offset >= len(self.entries):
            return
        del self.entries[offset:]
        self.epochs.truncate_from_end(offset)
        if self.hw is not None and self.hw > offset:
            self.hw = offset
        self.flushed = min(self.flushed, offset)

    def power_loss(self) -> int:
        """The unflushed tail is gone (the epoch cache file is written synchronously; the load
        trims it to the log end). Returns how many entries were lost."""
        lost = len(self.entries) - self.flushed
        del self.entries[self.flushed:]
        self.epochs.truncate_from_end(self.flushed)
        return lost


# ---- messages --------------------------------------------------------------------------------

@dataclass(slots=True)
class Fetch:
    fid: int
    replica: int
    broker_epoch: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int


@dataclass(slots=True)
class FetchAnswer:
    fid: int
    error: int
    high_watermark: int = -1
    diverging: tuple[int, int] | None = None
    records: list[tuple[int, int]] = field(default_factory=list)
    leader_end: int = -1  # OFFSET_OUT_OF_RANGE: the leader's log end (ListOffsets)


@dataclass(slots=True)
class AlterPartition:
    aid: int
    broker: int
    broker_epoch: int
    leader_epoch: int
    partition_epoch: int
    isr: tuple[tuple[int, int], ...]


@dataclass(slots=True)
class AlterAnswer:
    aid: int
    error: int
    isr: tuple[int, ...] = ()
    partition_epoch: int = -1


@dataclass(slots=True)
class Heartbeat:
    broker: int
    broker_epoch: int


@dataclass(slots=True)
class MetadataFetch:
    broker: int
    have: int


@dataclass(slots=True)
class MetadataAnswer:
    image: Image


# ---- the controller --------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Image:
    """One version of the committed metadata as a broker sees it."""

    version: int
    replicas: tuple[int, ...]
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int
    fenced: frozenset[int]
    broker_epochs: tuple[tuple[int, int], ...]


class Controller:
    """The authoritative partition state and broker registrations (the Raft quorum itself is
    proven by its own simulator: here it is one reliable node)."""

    def __init__(self, replicas: tuple[int, ...], session_ms: int, unclean: bool = False) -> None:
        self.replicas = replicas
        self.session_ms = session_ms
        self.unclean = unclean  # unclean.leader.election.enable
        self.unclean_elections = 0
        self.leader = replicas[0]
        self.leader_epoch = 0
        self.isr = replicas
        self.partition_epoch = 0
        self.fenced: set[int] = set()
        self.broker_epochs = dict.fromkeys(replicas, 0)
        self.last_heartbeat = dict.fromkeys(replicas, 0)
        self.images: list[Image] = []
        self.elections = 0
        self.trace: Callable[[str], None] | None = None
        self._publish()

    def _publish(self) -> None:
        if self.trace is not None:
            self.trace(f"controller v{len(self.images)}: leader {self.leader} epoch "
                       f"{self.leader_epoch} isr {self.isr} pe {self.partition_epoch} "
                       f"fenced {sorted(self.fenced)}")
        self.images.append(Image(len(self.images), self.replicas, self.leader, self.leader_epoch,
                                 self.isr, self.partition_epoch, frozenset(self.fenced),
                                 tuple(sorted(self.broker_epochs.items()))))

    @property
    def image(self) -> Image:
        return self.images[-1]

    def _elect(self) -> None:
        for r in self.replicas:
            if r in self.isr and r not in self.fenced:
                if r != self.leader:
                    self.leader = r
                    self.leader_epoch += 1
                    self.elections += 1
                return
        if self.unclean:
            # Kafka's unclean election: any live replica, which becomes the whole ISR
            for r in self.replicas:
                if r not in self.fenced:
                    self.leader, self.isr = r, (r,)
                    self.leader_epoch += 1
                    self.elections += 1
                    self.unclean_elections += 1
                    return
        if self.leader != -1:
            self.leader = -1
            self.leader_epoch += 1

    def tick(self, now: int) -> None:
        for b in self.replicas:
            if b not in self.fenced and now - self.last_heartbeat[b] > self.session_ms:
                self.fence(b)

    def fence(self, b: int) -> None:
        self.fenced.add(b)
        if b in self.isr and len(self.isr) > 1:
            self.isr = tuple(r for r in self.isr if r != b)
        if self.leader == b or self.leader == -1:
            self._elect()
        self.partition_epoch += 1
        self._publish()

    def heartbeat(self, hb: Heartbeat, now: int) -> None:
        b = hb.broker
        if hb.broker_epoch < self.broker_epochs[b]:
            return  # an old incarnation's
        if hb.broker_epoch > self.broker_epochs[b]:
            if b not in self.fenced:
                return  # Kafka: a new incarnation waits until the old session expired
            self.broker_epochs[b] = hb.broker_epoch
        self.last_heartbeat[b] = now
        if b in self.fenced:
            self.fenced.discard(b)
            if self.leader == -1:
                self._elect()
                self.partition_epoch += 1
            self._publish()

    def alter_partition(self, req: AlterPartition) -> AlterAnswer:
        """Kafka's validateAlterPartitionData, in its order."""
        if self.broker_epochs[req.broker] != req.broker_epoch:
            return AlterAnswer(req.aid, Err.STALE_BROKER_EPOCH)
        if req.leader_epoch < self.leader_epoch:
            return AlterAnswer(req.aid, Err.FENCED_LEADER_EPOCH)
        if req.broker != self.leader:
            return AlterAnswer(req.aid, Err.INVALID_REQUEST)
        if req.partition_epoch < self.partition_epoch:
            return AlterAnswer(req.aid, Err.INVALID_UPDATE_VERSION)
        ids = [b for b, _ in req.isr]
        if self.leader not in ids:
            return AlterAnswer(req.aid, Err.INVALID_REQUEST)
        for b, epoch in req.isr:
            if b in self.fenced or (epoch != -1 and epoch != self.broker_epochs[b]):
                return AlterAnswer(req.aid, Err.INELIGIBLE_REPLICA)
        self.isr = tuple(r for r in self.replicas if r in ids)
        self.partition_epoch += 1
        self._publish()
        return AlterAnswer(req.aid, Err.NONE, self.isr, self.partition_epoch)


# ---- a broker ---------------------------------------------------------------------------------

@dataclass(slots=True)
class Leadership:
    log: SimLog
    state: LeaderState
    min_isr: int
    # (end, value, deadline), in append order: both end and deadline increase
    waiters: deque[tuple[int, int, int]] = field(default_factory=deque)


@dataclass(slots=True)
class Following:
    leader: int
    leader_epoch: int
    log: SimLog
    delayed_until: int = 0
    in_flight: int = 0  # the fid of the Fetch awaiting an answer (0: none)
    asked_offset: int = -1


@dataclass(slots=True)
class Alter:
    """One ControllerClient.alter_partition call: attempts until an answer or the deadline."""

    lead: Leadership
    change: IsrChange
    deadline: int
    attempt: int = 0
    done: bool = False


@dataclass(slots=True)
class Config:
    lag_max_ms: int = 300
    min_isr: int = 2
    fetch_max_entries: int = 4
    fetch_poll_ms: int = 20
    socket_timeout_ms: int = 150
    backoff_ms: int = 40
    heartbeat_ms: int = 40
    session_ms: int = 200
    metadata_ms: int = 30
    alter_attempt_ms: int = 120
    alter_deadline_ms: int = 600
    produce_timeout_ms: int = 600
    # what a restarted replica's high watermark starts at: "kafka" = the last checkpointed value,
    # the log start when none was written (Kafka's replication-offset-checkpoint); "none-backed"
    # = the storage contract's None-backed high watermark: a log whose high watermark was never
    # written (or was following its log end) comes back with high watermark = log end
    hw_restore: str = "kafka"
    unclean_leader_election: bool = False
    # the share of crashes that are power losses (the log's unflushed tail is lost, not only the
    # process), and how often a log is flushed (Kafka's default is never: the OS writes back)
    power_loss: float = 0.0
    flush_ms: int = 200


class SimBroker:
    """One broker's replication: mirrors ReplicaManager + ReplicaFetcher + the Fetch handler's
    follower branch, with the simulator's clock and network."""

    def __init__(self, sim: Simulation, node_id: int) -> None:
        self.sim = sim
        self.node_id = node_id
        self.cfg = sim.cfg
        self.log = SimLog()
        self.hw_checkpoint: int | None = None
        self.alive = True
        self.paused_until = 0
        self.incarnation = 0
        self.broker_epoch = 0
        self.view: Image | None = None
        self.caught_up = True  # a restarted broker waits for the controller's image first
        self.lead: Leadership | None = None
        self.following: Following | None = None
        self.alters: dict[int, Alter] = {}

    # ---- lifecycle --------------------------------------------------------------------------
    def crash(self, power_loss: bool = False) -> None:
        if power_loss:
            lost = self.log.power_loss()
            self.sim.log(f"b{self.node_id} loses its unflushed tail ({lost} entries)")
            self.sim.checker.power_lost(self, lost)
        self.alive = False
        self.lead = None
        self.following = None
        self.alters.clear()
        self.log.leader_epoch = -1

    def restart(self, broker_epoch: int) -> None:
        self.alive = True
        self.incarnation += 1
        self.broker_epoch = broker_epoch
        lg = self.log
        if self.hw_checkpoint is not None:
            lg.hw = min(self.hw_checkpoint, lg.end_offset)
        else:
            lg.hw = None if self.cfg.hw_restore == "none-backed" else lg.log_start_offset
        self.caught_up = False

    def checkpoint_hw(self) -> None:
        lg = self.log
        self.hw_checkpoint = lg.hw if self.cfg.hw_restore == "none-backed" else lg.high_watermark

    # ---- the image decides roles (ReplicaManager.apply) ----------------------------------------
    def apply(self, img: Image) -> None:
        now = self.sim.now
        if self.node_id not in img.replicas:
            return
        if img.leader == self.node_id:
            self._lead(img, now)
        else:
            self._stop_leading()
            self._follow(img)

    def _lead(self, img: Image, now: int) -> None:
        lead = self.lead
        lg = self.log
        if lead is not None and lead.state.leader_epoch == img.leader_epoch:
            lead.state.update(img.replicas, img.isr, img.partition_epoch, now)
            self._hw_mode(lead)
            self._advance(lead)
            return
        if lead is not None:
            self._stop_leading()
        self.following = None
        leo = lg.end_offset
        lg.epochs.assign(img.leader_epoch, leo)
        lg.leader_epoch = img.leader_epoch
        state = LeaderState.elected(self.node_id, img.replicas, img.isr, img.leader_epoch,
                                    img.partition_epoch, leo, now)
        lead = self.lead = Leadership(lg, state, self.cfg.min_isr)
        self._hw_mode(lead)
        self.sim.log(f"b{self.node_id} leads epoch {img.leader_epoch} isr {img.isr} "
                     f"leo {leo} hw {lg.high_watermark} (image v{img.version})")
        self.sim.checker.became_leader(self, img.leader_epoch)

    def _stop_leading(self) -> None:
        lead = self.lead
        if lead is None:
            return
        self.lead = None
        lead.log.leader_epoch = -1
        lead.waiters.clear()  # NOT_LEADER_OR_FOLLOWER: not acknowledged
        _freeze_hw(lead.log)

    def _follow(self, img: Image) -> None:
        f = self.following
        if f is not None and f.leader == img.leader and f.leader_epoch == img.leader_epoch:
            return
        self.following = None
        _freeze_hw(self.log)
        if img.leader < 0:
            return
        self.following = Following(img.leader, img.leader_epoch, self.log)
        self.sim.log(f"b{self.node_id} follows b{img.leader} epoch {img.leader_epoch} "
                     f"(image v{img.version})")
        self.sim.later(self, self.sim.now, self.fetch_tick, self.following)

    # ---- leader side -------------------------------------------------------------------------
    def _hw_mode(self, lead: Leadership) -> None:
        if lead.state.maximal_isr() == (self.node_id,):
            lead.log.follow_leo_hw()
        else:
            _freeze_hw(lead.log)

    def on_follower_fetch(self, lead: Leadership, replica: int, fetch_offset: int,
                          broker_epoch: int) -> None:
        st = lead.state
        st.on_fetch(replica, fetch_offset, broker_epoch, lead.log.end_offset, self.sim.now)
        hw = self._advance(lead)
        change = st.expansion(hw, self._eligible())
        if change is not None:
            self._send_alter(lead, change)

    def _advance(self, lead: Leadership) -> int:
        lg = lead.log
        hw = lead.state.high_watermark(lg.end_offset)
        if hw is not None and hw > lg.high_watermark:
            lg.set_high_watermark(hw)
            self.sim.log(f"b{self.node_id} hw -> {hw} (leo {lg.end_offset}, isr "
                         f"{lead.state.isr} maximal {lead.state.maximal_isr()})")
        hw = lg.high_watermark
        waiters = lead.waiters
        now = self.sim.now
        while waiters and (waiters[0][0] <= hw or waiters[0][2] <= now):
            end, value, deadline = waiters.popleft()
            if deadline <= now:
                continue  # REQUEST_TIMED_OUT
            if len(lead.state.isr) >= lead.min_isr:  # else NOT_ENOUGH_REPLICAS_AFTER_APPEND
                self.sim.log(f"b{self.node_id} acks value {value} at {end - 1}")
                self.sim.checker.acked(self, value, end - 1)
        return hw

    def _eligible(self) -> set[int]:
        img = self.view
        assert img is not None
        return {b for b in img.replicas if b not in img.fenced}

    def isr_tick(self) -> None:
        lead = self.lead
        if lead is not None:
            change = lead.state.shrink(self.sim.now, self.cfg.lag_max_ms, lead.log.end_offset)
            if change is not None:
                self._send_alter(lead, change)

    def _send_alter(self, lead: Leadership, change: IsrChange) -> None:
        aid = self.sim.next_id()
        self.sim.log(f"b{self.node_id} AlterPartition {aid}: isr {change.isr} "
                     f"pe {change.partition_epoch} (hw {lead.log.high_watermark})")
        alter = self.alters[aid] = Alter(lead, change, self.sim.now + self.cfg.alter_deadline_ms)
        if self.sim.wiring.freeze_hw_on_propose:
            self._hw_mode(lead)
        self._alter_attempt(aid, alter)

    def _alter_attempt(self, aid: int, alter: Alter) -> None:
        if alter.done or self.alters.get(aid) is not alter:
            return
        if self.sim.now >= alter.deadline:
            self._alter_answered(aid, AlterAnswer(aid, Err.REQUEST_TIMED_OUT))
            return
        alter.attempt += 1
        ch = alter.change
        self.sim.send(self.node_id, CONTROLLER, AlterPartition(
            aid, self.node_id, self.broker_epoch, ch.leader_epoch, ch.partition_epoch,
            tuple(zip(ch.isr, ch.epochs, strict=True))))
        # the channel's timeout, then ControllerClient._remote retries until the deadline
        self.sim.later(self, self.sim.now + self.cfg.alter_attempt_ms, self._alter_retry, aid,
                       alter, alter.attempt)

    def _alter_retry(self, aid: int, alter: Alter, attempt: int) -> None:
        if not alter.done and alter.attempt == attempt:
            self._alter_attempt(aid, alter)

    def _alter_answered(self, aid: int, ans: AlterAnswer) -> None:
        alter = self.alters.pop(aid, None)
        if alter is None or alter.done:
            return
        alter.done = True
        self.sim.log(f"b{self.node_id} AlterPartition {aid} answered {ans.error} {ans.isr} "
                     f"pe {ans.partition_epoch}")
        lead = alter.lead
        if self.lead is not lead:
            return
        self.sim.wiring.alter_answered(self, lead, alter.change, ans)
        self._hw_mode(lead)
        self._advance(lead)

    def produce(self, value: int, acks_all: bool) -> None:
        """The produce handler: min.insync.replicas before the append, then (acks=all) wait for
        the high watermark."""
        lead = self.lead
        if lead is None:
            return
        lg = lead.log
        if acks_all and len(lead.state.isr) < lead.min_isr:
            return  # NOT_ENOUGH_REPLICAS
        offset = lg.append(value, lg.leader_epoch)
        self.sim.log(f"b{self.node_id} appends value {value} at {offset} epoch {lg.leader_epoch}"
                     f" acks={'all' if acks_all else 1}")
        self.sim.checker.appended(self, value, offset)
        if not acks_all:
            return
        if lg.high_watermark < lg.end_offset:
            lead.waiters.append((lg.end_offset, value, self.sim.now + self.cfg.produce_timeout_ms))
            self._advance(lead)
        elif len(lead.state.isr) >= lead.min_isr:
            self.sim.checker.acked(self, value, offset)

    # ---- the Fetch handler, follower branch ----------------------------------------------------
    def on_fetch(self, src: int, req: Fetch) -> None:
        lg = self.log
        lead = self.lead
        epoch_here = lg.leader_epoch
        code = 0
        if req.current_leader_epoch >= 0 and req.current_leader_epoch != epoch_here:
            code = (Err.FENCED_LEADER_EPOCH if req.current_leader_epoch < epoch_here
                    else Err.UNKNOWN_LEADER_EPOCH)
        if lead is None or req.replica not in lead.state.replicas:
            code = Err.NOT_LEADER_OR_FOLLOWER
        if code:
            self.sim.send(self.node_id, src, FetchAnswer(req.fid, code))
            return
        assert lead is not None
        div = self.sim.wiring.divergence(_end_offset_for(lg),
                                         req.last_fetched_epoch, req.fetch_offset)
        if div is not None:
            self.sim.send(self.node_id, src, FetchAnswer(req.fid, 0, lg.high_watermark,
                                                         diverging=div))
            return
        offset = req.fetch_offset
        if lg.log_start_offset <= offset <= lg.end_offset:
            self.on_follower_fetch(lead, req.replica, offset, req.broker_epoch)
        else:
            self.sim.send(self.node_id, src, FetchAnswer(req.fid, Err.OFFSET_OUT_OF_RANGE,
                                                         leader_end=lg.end_offset))
            return
        records = lg.entries[offset:offset + self.cfg.fetch_max_entries]
        self.sim.send(self.node_id, src, FetchAnswer(req.fid, 0, lg.high_watermark,
                                                     records=list(records)))

    # ---- the fetcher -----------------------------------------------------------------------------
    def fetch_tick(self, f: Following) -> None:
        if self.following is not f or f.in_flight:
            return
        now = self.sim.now
        if f.delayed_until > now:
            self.sim.later(self, f.delayed_until, self.fetch_tick, f)
            return
        lg = f.log
        fid = self.sim.next_id()
        f.in_flight = fid
        f.asked_offset = lg.end_offset
        self.sim.send(self.node_id, f.leader, Fetch(fid, self.node_id, self.broker_epoch,
                                                    f.leader_epoch, lg.end_offset,
                                                    lg.epochs.latest_epoch))
        self.sim.later(self, now + self.cfg.socket_timeout_ms, self._fetch_timeout, f, fid)

    def _fetch_timeout(self, f: Following, fid: int) -> None:
        if f.in_flight == fid:
            f.in_flight = 0
            self._delay(f, self.cfg.backoff_ms)

    def _delay(self, f: Following, ms: int) -> None:
        f.delayed_until = self.sim.now + ms
        self.sim.later(self, f.delayed_until, self.fetch_tick, f)

    def on_fetch_answer(self, ans: FetchAnswer) -> None:
        f = self.following
        if f is None or f.in_flight != ans.fid:
            return  # timed out, or left this leader/epoch while in flight
        f.in_flight = 0
        lg = f.log
        if lg.end_offset != f.asked_offset:
            self._delay(f, 0)
            return
        if ans.error == 0:
            div = ans.diverging
            if div is not None and div[0] >= 0 and div[1] >= 0:
                target = self.sim.wiring.truncation_offset(
                    _end_offset_for(lg), div[0], div[1],
                    lg.end_offset)
                self.truncate(target)
                self._delay(f, 0)
                return
            if ans.records:
                lg.append_as_follower(f.asked_offset, ans.records)
            hw = min(ans.high_watermark, lg.end_offset)
            if hw > lg.high_watermark:
                lg.set_high_watermark(hw)
            self._delay(f, 0 if ans.records else self.cfg.fetch_poll_ms)
        elif ans.error == Err.OFFSET_OUT_OF_RANGE:
            if f.asked_offset > ans.leader_end:
                self.truncate(ans.leader_end)
            self._delay(f, self.cfg.backoff_ms)
        else:
            self._delay(f, self.cfg.backoff_ms)

    def truncate(self, offset: int) -> None:
        if offset < self.log.end_offset:
            self.sim.log(f"b{self.node_id} truncates {self.log.end_offset} -> {offset}")
            self.sim.checker.truncating(self, offset)
            self.log.truncate_to(offset)
        elif self.sim.wiring.trim_epochs_at_log_end:
            self.log.epochs.truncate_from_end(self.log.end_offset)


def _end_offset_for(lg: SimLog) -> truncation.EndOffsetFor:
    """truncation.end_offset_for over a simulated log (it reads `epochs` and `end_offset`)."""
    log: Any = lg
    return functools.partial(truncation.end_offset_for, log)


def _freeze_hw(lg: SimLog) -> None:
    lg.set_high_watermark(lg.high_watermark)


# ---- the parts of the wiring a test may swap -------------------------------------------------

class Wiring:
    """How the broker uses the pure core. `Wiring.fixed()` mirrors manager.py/fetcher.py/fetch.py
    as they are; each flag is a fix this simulator showed to be needed (see the test module for
    the seeds), and `Wiring()` (every flag off) is the wiring before those fixes, kept so the
    regression tests show each defect again. Tests subclass it to plant bugs."""

    divergence = staticmethod(truncation.divergence)
    truncation_offset = staticmethod(truncation.truncation_offset)

    def __init__(self, freeze_hw_on_propose: bool = False, keep_pending: bool = False,
                 trim_epochs_at_log_end: bool = False, ignore_stale_answers: bool = False
                 ) -> None:
        # ReplicaManager._send_alter: an expansion makes the maximal ISR bigger than the one
        # the high watermark mode was chosen for; without re-choosing it (`_hw_mode`), a leader
        # alone in its ISR keeps moving the high watermark with its log end past the replica
        # the controller may already count (KIP-497)
        self.freeze_hw_on_propose = freeze_hw_on_propose
        # ReplicaManager._alter: only INELIGIBLE_REPLICA (or OPERATION_NOT_ATTEMPTED) proves the
        # change was not applied (Kafka's Partition.handleAlterPartitionError); any other answer
        # (INVALID_UPDATE_VERSION after a retried request that was applied, a timeout) must keep
        # the change pending until the image has a newer partition epoch, and a timeout retries
        self.keep_pending = keep_pending
        # ReplicaManager.truncate and PartitionLog.truncate_to return at once when the offset is
        # at or past the log end; Kafka's UnifiedLog.truncateTo still truncates the epoch cache
        # from the log end (a replica that led an epoch without appending keeps that epoch's
        # entry, sends it as last_fetched_epoch, and diverges again forever)
        self.trim_epochs_at_log_end = trim_epochs_at_log_end
        # ReplicaManager._alter applies any answer to whatever change is pending now: after an
        # image with a newer partition epoch cleared change A and the leader proposed B, A's
        # late answer clears B (Kafka's handleAlterPartitionUpdate ignores an answer whose
        # proposal is no longer the partition's state); LeaderState.change_done needs the change
        # it answers
        self.ignore_stale_answers = ignore_stale_answers

    @classmethod
    def fixed(cls) -> Wiring:
        return cls(True, True, True, True)

    def alter_answered(self, broker: SimBroker, lead: Leadership, change: IsrChange,
                       ans: AlterAnswer) -> None:
        if self.ignore_stale_answers and lead.state.pending is not change:
            return
        if not self.ignore_stale_answers:
            # the wiring before the fix: an answer cleared whatever change was pending
            lead.state.pending = change
        if ans.error == Err.NONE:
            lead.state.change_done(change, ans.isr, ans.partition_epoch)
        elif not self.keep_pending or ans.error == Err.INELIGIBLE_REPLICA:
            lead.state.change_done(change, None, -1)
        elif ans.error == Err.REQUEST_TIMED_OUT:
            broker._send_alter(lead, change)


# ---- the checker -------------------------------------------------------------------------------

class Checker:
    """Safety, after every step:

    - the committed prefix: `committed` is the log every replica's high watermark has exposed;
      each replica's entries below its high watermark equal it (any two replicas agree below
      both their high watermarks), and an entry once verified equal on a replica is never
      truncated from it (nothing below a high watermark is ever truncated);
    - a replica's high watermark never exceeds its log end and never decreases within one
      incarnation (so a leader's never decreases within its epoch);
    - leader completeness: the replica that starts leading the controller's current epoch holds
      the committed prefix;
    - acks=all: a value acknowledged at offset o is committed at o, and (at the end, after the
      faults healed and the replicas caught up) is in the leader's log exactly once, at o;
    - a value is appended once, so it is in any log at most once (checked at the end).
    """

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.committed: list[tuple[int, int]] = []
        self.acks: dict[int, int] = {}  # value -> offset (acks=all acknowledged)
        self.verified: dict[int, int] = {}
        self.last_hw: dict[int, tuple[int, int]] = {}  # broker -> (incarnation, hw)
        self.truncations = 0
        # power losses that took committed entries: (broker, was it the controller's whole ISR)
        self.committed_lost_on: list[tuple[int, bool]] = []

    def fail(self, what: str) -> None:
        raise Violation(f"seed {self.sim.seed}: at {self.sim.now} ms: {what} "
                        f"(replay: SAMSA_REPL_SEED={self.sim.seed})")

    def after_step(self, b: SimBroker) -> None:
        lg = b.log
        nid = b.node_id
        hw = lg.high_watermark
        leo = lg.end_offset
        if hw > leo:
            self.fail(f"broker {nid}: high watermark {hw} beyond its log end {leo}")
        inc, last = self.last_hw.get(nid, (b.incarnation, 0))
        if inc == b.incarnation and hw < last:
            self.fail(f"broker {nid}: high watermark went back from {last} to {hw}")
        self.last_hw[nid] = (b.incarnation, hw)
        v = self.verified.get(nid, 0)
        if leo < v:
            self.fail(f"broker {nid}: committed entries from {leo} truncated ({v} verified)")
        committed = self.committed
        entries = lg.entries
        while len(committed) < hw:
            committed.append(entries[len(committed)])
        end = min(leo, len(committed))
        while v < end and entries[v] == committed[v]:
            v += 1
        self.verified[nid] = v
        if v < hw:
            self.fail(f"broker {nid}: offset {v} below its high watermark {hw} is "
                      f"{entries[v]}, committed is {committed[v]}")

    def power_lost(self, b: SimBroker, lost: int) -> None:
        """A power loss may take committed entries from one replica (Kafka relies on the other
        replicas, not on fsync); they must come back from the leader, so the replica's verified
        prefix restarts at what it kept, and the loss is remembered for the report."""
        kept = b.log.end_offset
        if self.verified.get(b.node_id, 0) > kept:
            self.verified[b.node_id] = kept
            self.committed_lost_on.append((b.node_id, self.sim.controller.isr == (b.node_id,)))
        self.last_hw.pop(b.node_id, None)

    def truncating(self, b: SimBroker, offset: int) -> None:
        self.truncations += 1
        if offset < b.log.high_watermark:
            self.fail(f"broker {b.node_id}: truncating to {offset} below its high watermark "
                      f"{b.log.high_watermark}")

    def became_leader(self, b: SimBroker, epoch: int) -> None:
        """Leader completeness, for the controller's current leader (a broker acting on a stale
        image leads an epoch nobody follows any more: it can commit nothing)."""
        self.after_step(b)
        c = self.sim.controller
        if c.leader_epoch != epoch:
            return
        if self.verified.get(b.node_id, 0) < len(self.committed):
            self.fail(f"broker {b.node_id} leads epoch {epoch} without committed offset "
                      f"{self.verified.get(b.node_id, 0)} ({len(self.committed)} committed)")

    def appended(self, b: SimBroker, value: int, offset: int) -> None:
        pass

    def acked(self, b: SimBroker, value: int, offset: int) -> None:
        self.after_step(b)
        if offset >= len(self.committed) or self.committed[offset][1] != value:
            self.fail(f"broker {b.node_id} acknowledged value {value} at {offset}, which is not "
                      f"committed there")
        self.acks[value] = offset

    def at_end(self, leader: SimBroker) -> None:
        entries = leader.log.entries
        seen: dict[int, int] = {}
        for off, (_, value) in enumerate(entries):
            if value in seen:
                self.fail(f"value {value} twice in the leader's log: at {seen[value]} and {off}")
            seen[value] = off
        for value, off in self.acks.items():
            if seen.get(value) != off:
                self.fail(f"acknowledged value {value} at {off} lost: leader {leader.node_id} "
                          f"has it at {seen.get(value)}")


# ---- the simulation --------------------------------------------------------------------------

@dataclass(slots=True)
class Faults:
    """How rough a schedule is; drawn from the seed."""

    loss: float
    max_delay_ms: int
    cut_every_ms: int
    crash_every_ms: int
    pause_every_ms: int
    produce_every_ms: int
    acks_all: float


@dataclass(slots=True)
class Result:
    seed: int
    brokers: int
    steps: int
    sim_ms: int
    produced: int
    acked: int
    elections: int
    isr_changes: int
    truncations: int
    crashes: int
    cuts: int
    liveness_ms: int


class Simulation:
    """One seeded schedule: chaos for `chaos_ms`, then the faults heal and the replicas must
    converge (identical logs, the ISR back to every replica) within `live_bound_ms`."""

    def __init__(self, seed: int, n: int = 3, chaos_ms: int = 3000, live_bound_ms: int = 4000,
                 wiring: Wiring | None = None, cfg: Config | None = None) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.n = n
        self.cfg = cfg or Config()
        self.wiring = wiring or Wiring()
        self.chaos_ms = chaos_ms
        self.live_bound_ms = live_bound_ms
        r = self.rng
        self.faults = Faults(
            loss=r.choice((0.0, 0.02, 0.1, 0.3)),
            max_delay_ms=r.choice((2, 10, 40, 150)),
            cut_every_ms=r.choice((NEVER, 600, 250)),
            crash_every_ms=r.choice((NEVER, 800, 300)),
            pause_every_ms=r.choice((NEVER, 700)),
            produce_every_ms=r.choice((5, 20)),
            acks_all=r.choice((1.0, 0.7)),
        )
        self.ids = tuple(range(1, n + 1))
        self.controller = Controller(self.ids, self.cfg.session_ms,
                                     self.cfg.unclean_leader_election)
        self.brokers = {i: SimBroker(self, i) for i in self.ids}
        self.checker = Checker(self)
        self.now = 0
        self.steps = 0
        self._queue: list[tuple[int, int, Callable[..., None], tuple[Any, ...]]] = []
        self._seq = 0
        self._ids = 0
        self.cut: set[tuple[int, int]] = set()
        self.calm = False
        self.loss = self.faults.loss
        self.max_delay = self.faults.max_delay_ms
        self.produced = 0
        self.crashes = 0
        self.cuts = 0
        self.isr_changes = 0
        self._epoch_seq = 0
        self.trace: list[str] | None = None
        for b in self.brokers.values():
            b.view = self.controller.image
            b.apply(b.view)

    # ---- the event queue and the network ------------------------------------------------------
    def log(self, what: str) -> None:
        if self.trace is not None:
            self.trace.append(f"{self.now:6d} {what}")

    def next_id(self) -> int:
        self._ids += 1
        return self._ids

    def at(self, when: int, fn: Callable[..., None], *args: Any) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (when, self._seq, fn, args))

    def later(self, b: SimBroker, when: int, fn: Callable[..., None], *args: Any) -> None:
        """A timer of broker `b`'s process: gone if it crashes first, late if it is paused."""
        self.at(when, self._fire, b, b.incarnation, fn, args)

    def _fire(self, b: SimBroker, inc: int, fn: Callable[..., None], args: tuple[Any, ...]) -> None:
        if not b.alive or b.incarnation != inc:
            return
        if b.paused_until > self.now:
            self.at(b.paused_until + self.rng.randint(0, 3), self._fire, b, inc, fn, args)
            return
        fn(*args)
        self.checker.after_step(b)

    def send(self, src: int, dst: int, msg: Any) -> None:
        if (src, dst) in self.cut or (self.loss and self.rng.random() < self.loss):
            return
        inc = self.brokers[dst].incarnation if dst != CONTROLLER else 0
        self.at(self.now + self.rng.randint(1, self.max_delay), self._deliver, src, dst, msg, inc)

    def _deliver(self, src: int, dst: int, msg: Any, inc: int) -> None:
        if (src, dst) in self.cut:
            return
        if dst == CONTROLLER:
            self._controller_receive(src, msg)
            return
        b = self.brokers[dst]
        if not b.alive or b.incarnation != inc:
            return  # the connection died with the process
        if b.paused_until > self.now:
            self.at(b.paused_until + self.rng.randint(0, 3), self._deliver, src, dst, msg, inc)
            return
        if isinstance(msg, Fetch):
            b.on_fetch(src, msg)
        elif isinstance(msg, FetchAnswer):
            b.on_fetch_answer(msg)
        elif isinstance(msg, AlterAnswer):
            b._alter_answered(msg.aid, msg)
        elif isinstance(msg, MetadataAnswer):
            img = msg.image
            if b.view is None or img.version > b.view.version:
                b.view = img
                b.caught_up = True
                b.apply(img)
            elif not b.caught_up:
                b.caught_up = True
                b.apply(b.view)
        self.checker.after_step(b)

    def _controller_receive(self, src: int, msg: Any) -> None:
        c = self.controller
        if isinstance(msg, Heartbeat):
            c.heartbeat(msg, self.now)
        elif isinstance(msg, MetadataFetch):
            self.send(CONTROLLER, src, MetadataAnswer(c.image))
        elif isinstance(msg, AlterPartition):
            before = c.partition_epoch
            ans = c.alter_partition(msg)
            if c.partition_epoch != before:
                self.isr_changes += 1
            self.send(CONTROLLER, src, ans)

    # ---- periodic work ----------------------------------------------------------------------
    def _runs(self, b: SimBroker, inc: int, again: Callable[..., None], period: int) -> bool:
        """A broker timer: gone with a crash; a paused broker's timer fires on resume."""
        if not b.alive or b.incarnation != inc:
            return False
        if b.paused_until > self.now:
            self.at(b.paused_until + self.rng.randint(0, period), again, b, inc)
            return False
        self.at(self.now + period + self.rng.randint(0, period // 4), again, b, inc)
        return True

    def _heartbeat(self, b: SimBroker, inc: int) -> None:
        if self._runs(b, inc, self._heartbeat, self.cfg.heartbeat_ms):
            self.send(b.node_id, CONTROLLER, Heartbeat(b.node_id, b.broker_epoch))

    def _metadata(self, b: SimBroker, inc: int) -> None:
        if self._runs(b, inc, self._metadata, self.cfg.metadata_ms):
            self.send(b.node_id, CONTROLLER, MetadataFetch(b.node_id, b.view.version
                                                           if b.view else -1))

    def _isr(self, b: SimBroker, inc: int) -> None:
        if self._runs(b, inc, self._isr, self.cfg.lag_max_ms // 2):
            if b.caught_up:
                b.isr_tick()
            self.checker.after_step(b)

    def _checkpoint(self, b: SimBroker, inc: int) -> None:
        if self._runs(b, inc, self._checkpoint, 100):
            b.checkpoint_hw()

    def _flush(self, b: SimBroker, inc: int) -> None:
        if self._runs(b, inc, self._flush, self.cfg.flush_ms):
            b.log.flushed = b.log.end_offset

    def _timers(self, b: SimBroker) -> None:
        inc = b.incarnation
        timers = [(self._heartbeat, self.cfg.heartbeat_ms), (self._metadata, self.cfg.metadata_ms),
                  (self._isr, self.cfg.lag_max_ms // 2), (self._checkpoint, 100)]
        if self.cfg.power_loss > 0:
            timers.append((self._flush, self.cfg.flush_ms))
        for fn, period in timers:
            self.at(self.now + self.rng.randint(0, period), fn, b, inc)

    def _controller_tick(self) -> None:
        c = self.controller
        before = len(c.images)
        c.tick(self.now)
        if len(c.images) != before:
            self.isr_changes += 1
        self.at(self.now + 20, self._controller_tick)

    def _produce(self) -> None:
        leaders = [b for b in self.brokers.values()
                   if b.alive and b.lead is not None and b.paused_until <= self.now]
        if leaders:
            b = self.rng.choice(leaders)
            self.produced += 1
            b.produce(self.produced, self.calm or self.rng.random() < self.faults.acks_all)
            self.checker.after_step(b)
        if self.now < self.chaos_ms + self.live_bound_ms // 4:
            self.at(self.now + self.rng.randint(1, self.faults.produce_every_ms), self._produce)

    # ---- faults ---------------------------------------------------------------------------
    def _crash(self) -> None:
        if self.calm:
            return
        up = [b for b in self.brokers.values() if b.alive]
        if len(up) > 1:
            b = self.rng.choice(up)
            b.crash(self.cfg.power_loss > 0 and self.rng.random() < self.cfg.power_loss)
            self.log(f"b{b.node_id} crashes")
            self.crashes += 1
            self.at(self.now + self.rng.randint(50, 800), self._restart, b)
        self.at(self.now + self.rng.randint(1, 2 * self.faults.crash_every_ms), self._crash)

    def _restart(self, b: SimBroker) -> None:
        if b.alive:
            return
        self._epoch_seq += 1
        b.restart(self._epoch_seq)
        self.log(f"b{b.node_id} restarts (broker epoch {b.broker_epoch}, hw "
                 f"{b.log.high_watermark}, leo {b.log.end_offset})")
        self._timers(b)
        self.checker.after_step(b)

    def _pause(self) -> None:
        if self.calm:
            return
        b = self.rng.choice(list(self.brokers.values()))
        b.paused_until = max(b.paused_until, self.now + self.rng.randint(100, 900))
        self.log(f"b{b.node_id} paused until {b.paused_until}")
        self.at(self.now + self.rng.randint(1, 2 * self.faults.pause_every_ms), self._pause)

    def _cut(self) -> None:
        if self.calm:
            return
        r = self.rng
        b = r.choice(self.ids)
        kind = r.randrange(4)
        pairs: list[tuple[int, int]] = []
        if kind == 0:  # from the controller, both ways
            pairs = [(b, CONTROLLER), (CONTROLLER, b)]
        elif kind == 1:  # from the other brokers, both ways
            pairs = [p for o in self.ids if o != b for p in ((b, o), (o, b))]
        elif kind == 2:  # isolated
            pairs = [p for o in (*self.ids, CONTROLLER) if o != b for p in ((b, o), (o, b))]
        else:  # one way, anywhere
            o = r.choice([x for x in (*self.ids, CONTROLLER) if x != b])
            pairs = [(b, o)] if r.random() < 0.5 else [(o, b)]
        self.cut.update(pairs)
        self.log(f"cut {pairs}")
        self.cuts += 1
        self.at(self.now + r.randint(100, 1200), self._heal_cut, pairs)
        self.at(self.now + r.randint(1, 2 * self.faults.cut_every_ms), self._cut)

    def _heal_cut(self, pairs: list[tuple[int, int]]) -> None:
        self.cut.difference_update(pairs)
        self.log(f"heal {pairs}")

    def _heal(self) -> None:
        """The end of the chaos: every fault stops; the network is reliable and quick."""
        self.calm = True
        self.cut.clear()
        self.loss = 0.0
        self.max_delay = 5
        for b in self.brokers.values():
            b.paused_until = min(b.paused_until, self.now)
            if not b.alive:
                self._restart(b)

    # ---- the run ----------------------------------------------------------------------------
    def converged(self) -> SimBroker | None:
        c = self.controller
        if c.leader < 0 or c.isr != self.ids or c.fenced:
            return None
        leader = self.brokers[c.leader]
        if leader.lead is None or leader.lead.state.pending is not None:
            return None
        first = leader.log.entries
        for b in self.brokers.values():
            if (b.view is None or b.view.version != c.image.version or b.log.entries != first
                    or b.log.high_watermark != len(first)):
                return None
        return leader

    def run(self) -> Result:
        for b in self.brokers.values():
            self._timers(b)
        self.at(0, self._controller_tick)
        self.at(1, self._produce)
        f = self.faults
        for every, fn in ((f.crash_every_ms, self._crash), (f.cut_every_ms, self._cut),
                          (f.pause_every_ms, self._pause)):
            if every != NEVER:
                self.at(self.rng.randint(1, every), fn)
        self.at(self.chaos_ms, self._heal)
        end = self.chaos_ms + self.live_bound_ms
        queue = self._queue
        leader: SimBroker | None = None
        next_check = self.chaos_ms + self.live_bound_ms // 4
        while queue:
            when, _, fn, args = heapq.heappop(queue)
            if when > end:
                break
            self.now = when
            fn(*args)
            self.steps += 1
            if self.now >= next_check:
                next_check = self.now + 10
                leader = self.converged()
                if leader is not None:
                    break
        if leader is None:
            c = self.controller
            logs = {i: len(b.log.entries) for i, b in self.brokers.items()}
            self.checker.fail(f"no convergence {self.live_bound_ms} ms after the faults healed: "
                              f"controller leader {c.leader} epoch {c.leader_epoch} ISR {c.isr} "
                              f"fenced {sorted(c.fenced)}; log ends {logs}")
        assert leader is not None
        self.checker.at_end(leader)
        return Result(self.seed, self.n, self.steps, self.now, self.produced,
                      len(self.checker.acks), self.controller.elections, self.isr_changes,
                      self.checker.truncations, self.crashes, self.cuts,
                      self.now - self.chaos_ms)


def run_schedule(seed: int, n: int = 3, **kw: Any) -> Result:
    return Simulation(seed, n, **kw).run()


__all__ = ["Checker", "Config", "Controller", "EpochCache", "Result",
           "SimBroker", "SimLog", "Simulation", "Violation", "Wiring",
           "run_schedule"]
