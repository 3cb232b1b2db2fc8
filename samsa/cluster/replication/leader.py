"""The leader's view of one partition's replicas: where each follower is, which replicas are in sync,
and the high watermark. Pure (offsets and clock in, decisions out) so it can be tested without I/O.

Kafka's rules:
- a follower's log end offset is the fetch offset of its last Fetch that did not diverge;
- its `last caught up time` is the time of a Fetch whose offset reached the leader's log end offset
  at that moment, or the time of the previous Fetch if this one reached the log end offset the
  leader had then (the follower kept up during the interval);
- a follower joins the ISR once its log end offset reaches the high watermark and the start of the
  leader's current epoch; it leaves after `replica.lag.time.max.ms` without catching up;
- an ISR change is proposed to the controller (AlterPartition) one at a time; while one is in
  flight the high watermark counts the *maximal* ISR (committed plus any replica being added), so
  it never advances past a replica the controller may still count (KIP-497);
- high watermark = the smallest log end offset over that ISR, and it never moves back.
"""

from __future__ import annotations

from dataclasses import dataclass, field

UNKNOWN = -1


@dataclass(slots=True)
class FollowerState:
    leo: int = UNKNOWN
    broker_epoch: int = -1
    last_fetch_ms: int = 0
    last_fetch_leader_leo: int = UNKNOWN  # the leader's LEO when that fetch was answered
    last_caught_up_ms: int = 0


@dataclass(slots=True)
class IsrChange:
    """An AlterPartition to send: the new ISR with each member's broker epoch (-1: unknown)."""

    isr: tuple[int, ...]
    epochs: tuple[int, ...]
    partition_epoch: int
    leader_epoch: int


@dataclass(slots=True)
class LeaderState:
    node_id: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader_epoch: int
    partition_epoch: int
    epoch_start_offset: int  # the leader's LEO when it became leader in this epoch
    followers: dict[int, FollowerState] = field(default_factory=dict)
    pending: IsrChange | None = None

    @classmethod
    def elected(cls, node_id: int, replicas: tuple[int, ...], isr: tuple[int, ...],
                leader_epoch: int, partition_epoch: int, leo: int, now_ms: int) -> LeaderState:
        st = cls(node_id, replicas, isr, leader_epoch, partition_epoch, leo)
        for r in replicas:
            if r != node_id:
                # Kafka resets followers' state on election; members of the ISR start as caught
                # up now, so a slow first fetch does not shrink them at once
                st.followers[r] = FollowerState(last_caught_up_ms=now_ms if r in isr else 0)
        return st

    # ---- metadata -----------------------------------------------------------------------------
    def update(self, replicas: tuple[int, ...], isr: tuple[int, ...], partition_epoch: int,
               now_ms: int) -> None:
        """The image has a newer partition epoch (our AlterPartition, or the controller's own
        change: a fenced broker removed, a reassignment)."""
        if partition_epoch < self.partition_epoch:
            return
        self.replicas, self.isr, self.partition_epoch = replicas, isr, partition_epoch
        if self.pending is not None and self.pending.partition_epoch < partition_epoch:
            self.pending = None
        for r in replicas:
            if r != self.node_id and r not in self.followers:
                self.followers[r] = FollowerState(last_caught_up_ms=0)
        for r in list(self.followers):
            if r not in replicas:
                del self.followers[r]

    def maximal_isr(self) -> tuple[int, ...]:
        if self.pending is None:
            return self.isr
        return self.isr + tuple(r for r in self.pending.isr if r not in self.isr)

    # ---- follower fetches -----------------------------------------------------------------------
    def on_fetch(self, replica: int, fetch_offset: int, broker_epoch: int, leader_leo: int,
                 now_ms: int) -> None:
        """A follower's Fetch at `fetch_offset` (that did not diverge) was answered."""
        f = self.followers.get(replica)
        if f is None:
            return
        if fetch_offset >= leader_leo:
            f.last_caught_up_ms = now_ms
        elif f.last_fetch_leader_leo != UNKNOWN and fetch_offset >= f.last_fetch_leader_leo:
            f.last_caught_up_ms = max(f.last_caught_up_ms, f.last_fetch_ms)
        f.leo = fetch_offset
        f.broker_epoch = broker_epoch
        f.last_fetch_ms = now_ms
        f.last_fetch_leader_leo = leader_leo

    def high_watermark(self, leader_leo: int) -> int | None:
        """The smallest log end offset over the maximal ISR; None while an ISR member's position
        is unknown (it has not fetched in this epoch)."""
        hw = leader_leo
        for r in self.maximal_isr():
            if r == self.node_id:
                continue
            f = self.followers.get(r)
            if f is None or f.leo == UNKNOWN:
                return None
            hw = min(hw, f.leo)
        return hw

    # ---- ISR changes ------------------------------------------------------------------------
    def expansion(self, hw: int, eligible: set[int]) -> IsrChange | None:
        """A follower out of the ISR that has caught up (LEO >= HW and >= this epoch's start)."""
        if self.pending is not None:
            return None
        for r in self.replicas:
            f = self.followers.get(r)
            if (r in self.isr or f is None or f.leo == UNKNOWN or r not in eligible
                    or f.leo < hw or f.leo < self.epoch_start_offset):
                continue
            isr = tuple(x for x in self.replicas if x in self.isr or x == r)
            return self._change(isr)
        return None

    def shrink(self, now_ms: int, lag_max_ms: int, leader_leo: int) -> IsrChange | None:
        """ISR members that have not caught up for `lag_max_ms` leave (the leader stays)."""
        if self.pending is not None:
            return None
        out = set()
        for r in self.isr:
            if r == self.node_id:
                continue
            f = self.followers.get(r)
            if f is None:
                out.add(r)
                continue
            caught_up = f.leo != UNKNOWN and f.leo >= leader_leo
            if not caught_up and now_ms - f.last_caught_up_ms > lag_max_ms:
                out.add(r)
        if not out:
            return None
        return self._change(tuple(r for r in self.isr if r not in out))

    def _change(self, isr: tuple[int, ...]) -> IsrChange:
        epochs = tuple(self.followers[r].broker_epoch if r in self.followers else -1 for r in isr)
        self.pending = IsrChange(isr, epochs, self.partition_epoch, self.leader_epoch)
        return self.pending

    def change_done(self, change: IsrChange, isr: tuple[int, ...] | None,
                    partition_epoch: int) -> None:
        """The controller answered `change`: the new ISR and partition epoch, or None (it was
        not attempted: the next check proposes again from the image's state). An answer to a
        change that is no longer the pending one (the image moved on meanwhile) is ignored."""
        if self.pending is not change:
            return
        self.pending = None
        if isr is not None and partition_epoch >= self.partition_epoch:
            self.isr, self.partition_epoch = isr, partition_epoch
