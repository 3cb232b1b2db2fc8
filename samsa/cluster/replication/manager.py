"""The ReplicaManager: this broker's part in partition replication.

For each partition the image gives this broker a replica of, it is either
- the leader: it stamps its leader epoch on appended batches, tracks each follower's position
  from their Fetch requests (LeaderState), moves the high watermark, completes acks=all produces
  once the high watermark passes them, and asks the controller (AlterPartition) to shrink or
  expand the ISR; or
- a follower: a ReplicaFetcher fetches from the leader and appends verbatim, truncating where
  the leader's log diverges.
The image (committed metadata records) decides roles; a role change is applied as soon as the
broker applies the records, never from a Fetch answer alone.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from samsa.protocol.errors import Err

from .fetcher import Following, ReplicaFetcher
from .leader import IsrChange, LeaderState
from .throttle import UNLIMITED, ReplicationQuota, is_throttled, throttled_partitions

if TYPE_CHECKING:
    from samsa.cluster.metadata.image import MetadataImage, PartitionState
    from samsa.storage.log import PartitionLog

log = logging.getLogger("samsa.replication")

TP = tuple[str, int]
LEADER_RATE, FOLLOWER_RATE = "leader.replication.throttled.rate", "follower.replication.throttled.rate"
ALTER_RETRY_S = 0.1
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
LeadershipCallback = Callable[[str, int, int, bool], None]


@dataclass(frozen=True, slots=True)
class ReplicationConfig:
    lag_max_ms: int
    fetch_wait_ms: int
    fetch_min_bytes: int
    fetch_max_bytes: int
    fetch_response_max_bytes: int
    backoff_s: float
    socket_timeout_s: float
    num_fetchers: int

    @property
    def fetch_wait(self) -> datetime.timedelta:
        return datetime.timedelta(milliseconds=self.fetch_wait_ms)

    @property
    def fetch_wait_s(self) -> float:
        return self.fetch_wait_ms / 1000

    @classmethod
    def from_broker(cls, get_int: Callable[[str], int]) -> ReplicationConfig:
        return cls(get_int("replica.lag.time.max.ms"), get_int("replica.fetch.wait.max.ms"),
                   get_int("replica.fetch.min.bytes"), get_int("replica.fetch.max.bytes"),
                   get_int("replica.fetch.response.max.bytes"),
                   get_int("replica.fetch.backoff.ms") / 1000,
                   get_int("replica.socket.timeout.ms") / 1000, get_int("num.replica.fetchers"))


@dataclass(slots=True)
class Leadership:
    topic: str
    partition: int
    log: PartitionLog
    state: LeaderState
    min_isr: int
    waiters: list[tuple[int, asyncio.Future[int]]] = field(default_factory=list)


class ReplicaManager:
    def __init__(self, node_id: int, cfg: ReplicationConfig, image: Callable[[], MetadataImage],
                 listener: str, broker_epoch: Callable[[], int],
                 alter_partition: Callable[..., Any],
                 min_isr: Callable[[str], int]) -> None:
        self.node_id = node_id
        self.cfg = cfg
        self._image = image
        self.listener = listener  # the inter-broker listener: where followers fetch
        self.security: Any = None  # its TLS / SASL (cluster.node_security.NodeSecurity), if any
        self.broker_epoch = broker_epoch
        self._alter_partition = alter_partition
        self._min_isr = min_isr
        # tiered storage: the broker's RemoteLogManager (None without remote.log.storage.
        # system.enable); a follower bootstraps from the remote tier with it (tiered.py)
        self.remote_log_manager: Any = None
        self.leaders: dict[TP, Leadership] = {}
        self.following: dict[TP, Following] = {}
        self.isr_shrinks = 0  # ISR changes the controller accepted (ops-metrics)
        self.isr_expands = 0
        self.replication_bytes_in = 0  # bytes followers appended (ReplicationBytesInPerSec)
        self.fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        self._subscribers: list[LeadershipCallback] = []
        self._isr_task: asyncio.Task[None] | None = None
        self._alters: set[asyncio.Task[None]] = set()
        self._closed = False
        self.rack_aware = False  # replica.selector.class names RackAwareReplicaSelector
        # replication throttles: dynamic broker settings and topic settings as the image has
        # them (set by the broker)
        self.broker_setting: Callable[[str], str | None] = lambda name: None
        self.topic_setting: Callable[[str, str], str | None] = lambda topic, name: None
        self.leader_quota = ReplicationQuota(lambda: self._rate(LEADER_RATE))
        self.follower_quota = ReplicationQuota(lambda: self._rate(FOLLOWER_RATE))
        self._throttles: dict[tuple[str, str], frozenset[int] | bool] = {}

    # ---- lifecycle ----------------------------------------------------------------------------
    def start(self) -> None:
        if self._isr_task is None:
            self._isr_task = asyncio.create_task(self._isr_loop())

    async def stop(self) -> None:
        self._closed = True
        if self._isr_task is not None:
            self._isr_task.cancel()
        for t in list(self._alters):
            t.cancel()
        for lead in self.leaders.values():
            self._fail_waiters(lead, Err.NOT_LEADER_OR_FOLLOWER)
        await asyncio.gather(*(f.stop() for f in self.fetchers.values()),
                             return_exceptions=True)
        self.fetchers.clear()

    def subscribe_leadership(self, cb: LeadershipCallback) -> None:
        self._subscribers.append(cb)

    def _notify(self, topic: str, partition: int, epoch: int, leader: bool) -> None:
        for cb in self._subscribers:
            try:
                cb(topic, partition, epoch, leader)
            except Exception:
                log.exception("leadership callback failed for %s-%d", topic, partition)

    # ---- the image decides roles ------------------------------------------------------------
    def apply(self, image: MetadataImage, logs: Callable[[str, int], PartitionLog | None]) -> None:
        """Make this broker's roles match the image: lead what it leads, follow the rest of its
        replicas, drop what it no longer holds."""
        if self._closed:
            return
        now = _now_ms()
        seen: set[TP] = set()
        for name, t in image.topics.items():
            for p, st in t.partitions.items():
                if self.node_id not in st.replicas:
                    continue
                lg = logs(name, p)
                if lg is None:
                    continue
                tp = (name, p)
                seen.add(tp)
                if st.leader == self.node_id:
                    self._lead(tp, st, lg, now)
                else:
                    self._stop_leading(tp, st.leader_epoch)
                    self._follow(tp, t.topic_id, st, lg)
        for tp in [tp for tp in self.leaders if tp not in seen]:
            self._stop_leading(tp, -1)
        for tp in [tp for tp in self.following if tp not in seen]:
            self._stop_following(tp)

    def _lead(self, tp: TP, st: PartitionState, lg: PartitionLog, now: int) -> None:
        lead = self.leaders.get(tp)
        if lead is not None and lead.log is lg and lead.state.leader_epoch == st.leader_epoch:
            was = len(lead.state.isr)
            lead.state.update(st.replicas, st.isr, st.partition_epoch, now)
            self._count_isr_change(was, len(lead.state.isr))  # ops-metrics
            self._hw_mode(lead)
            self._advance(lead)
            return
        if lead is not None:
            self._stop_leading(tp, st.leader_epoch)
        self._stop_following(tp)
        leo = lg.end_offset
        lg.epochs.assign(st.leader_epoch, leo)
        lg.leader_epoch = st.leader_epoch
        state = LeaderState.elected(self.node_id, st.replicas, st.isr, st.leader_epoch,
                                    st.partition_epoch, leo, now)
        lead = Leadership(tp[0], tp[1], lg, state, self._min_isr(tp[0]))
        self.leaders[tp] = lead
        self._hw_mode(lead)
        log.info("%s-%d: leader at epoch %d (ISR %s, log end %d, high watermark %d)", tp[0],
                 tp[1], st.leader_epoch, list(st.isr), leo, lg.high_watermark)
        self._notify(tp[0], tp[1], st.leader_epoch, True)

    def _count_isr_change(self, was: int, now: int) -> None:
        """kafka_server_replicamanager_isrshrinks/isrexpands_total: ISR changes of partitions
        led here, whether this leader asked for them (AlterPartition) or the image brought them
        (counted once: the second path sees the ISR already changed)."""
        if now < was:
            self.isr_shrinks += 1
        elif now > was:
            self.isr_expands += 1

    def _stop_leading(self, tp: TP, new_epoch: int) -> None:
        lead = self.leaders.pop(tp, None)
        if lead is None:
            return
        lead.log.leader_epoch = -1
        self._fail_waiters(lead, Err.NOT_LEADER_OR_FOLLOWER)
        _freeze_hw(lead.log)
        log.info("%s-%d: no longer leader (epoch %d)", tp[0], tp[1], new_epoch)
        self._notify(tp[0], tp[1], new_epoch, False)

    def _follow(self, tp: TP, topic_id: Any, st: PartitionState, lg: PartitionLog) -> None:
        f = self.following.get(tp)
        if (f is not None and f.leader == st.leader and f.leader_epoch == st.leader_epoch
                and f.log is lg):
            return
        self._stop_following(tp)
        _freeze_hw(lg)
        if st.leader < 0:
            return  # offline: nobody to follow until a leader is elected
        f = Following(tp[0], tp[1], topic_id, st.leader, st.leader_epoch, lg)
        self.following[tp] = f
        self._fetcher_for(st.leader, tp).add(f)

    def _stop_following(self, tp: TP) -> None:
        f = self.following.pop(tp, None)
        if f is None:
            return
        fetcher = self.fetchers.get((f.leader, self._fetcher_index(tp)))
        if fetcher is not None:
            fetcher.remove(tp)

    def _fetcher_index(self, tp: TP) -> int:
        return zlib.crc32(f"{tp[0]}-{tp[1]}".encode()) % self.cfg.num_fetchers

    def _fetcher_for(self, leader: int, tp: TP) -> ReplicaFetcher:
        key = (leader, self._fetcher_index(tp))
        fetcher = self.fetchers.get(key)
        if fetcher is None:
            fetcher = self.fetchers[key] = ReplicaFetcher(self, leader, key[1])
            fetcher.start()
        return fetcher

    def endpoint_of(self, broker_id: int) -> tuple[str, int] | None:
        reg = self._image().brokers.get(broker_id)
        return None if reg is None else reg.endpoints.get(self.listener)

    # ---- leader side -----------------------------------------------------------------------------
    def leadership(self, topic: str, partition: int) -> Leadership | None:
        return self.leaders.get((topic, partition))

    def _hw_mode(self, lead: Leadership) -> None:
        """A leader alone in its ISR moves the high watermark with every append (no follower to
        wait for); otherwise followers' fetches move it."""
        if lead.state.maximal_isr() == (self.node_id,):
            lead.log.follow_leo_hw()
        else:
            _freeze_hw(lead.log)

    def on_follower_fetch(self, lead: Leadership, replica: int, fetch_offset: int,
                          broker_epoch: int) -> None:
        """A follower's Fetch (that did not diverge) is being answered."""
        st = lead.state
        st.on_fetch(replica, fetch_offset, broker_epoch, lead.log.end_offset, _now_ms())
        hw = self._advance(lead)
        change = st.expansion(hw, self._eligible())
        if change is not None:
            self._send_alter(lead, change)

    def _advance(self, lead: Leadership) -> int:
        lg = lead.log
        hw = lead.state.high_watermark(lg.end_offset)
        if hw is not None and hw > lg.high_watermark:
            lg.set_high_watermark(hw)
        hw = lg.high_watermark
        if lead.waiters:
            self._complete(lead, hw)
        return hw

    def _complete(self, lead: Leadership, hw: int) -> None:
        keep = []
        short = len(lead.state.isr) < lead.min_isr
        for offset, fut in lead.waiters:
            if fut.done():
                continue
            if hw >= offset:
                fut.set_result(Err.NOT_ENOUGH_REPLICAS_AFTER_APPEND if short else Err.NONE)
            else:
                keep.append((offset, fut))
        lead.waiters = keep

    def _fail_waiters(self, lead: Leadership, code: int) -> None:
        for _, fut in lead.waiters:
            if not fut.done():
                fut.set_result(code)
        lead.waiters = []

    def preferred_read_replica(self, lead: Leadership, rack: str, fetch_offset: int) -> int:
        """KIP-392 with replica.selector.class = RackAwareReplicaSelector: the replica in the
        consumer's rack that holds `fetch_offset` (the leader if it is in that rack, else the
        follower furthest ahead); -1 for no other replica (read here)."""
        if not self.rack_aware:
            return -1
        brokers = self._image().brokers
        leader = brokers.get(self.node_id)
        if leader is not None and leader.rack == rack:
            return -1
        best, best_leo = -1, -1
        for r, f in lead.state.followers.items():
            reg = brokers.get(r)
            if (reg is None or reg.fenced or reg.rack != rack or f.leo < fetch_offset
                    or f.leo <= best_leo):
                continue
            best, best_leo = r, f.leo
        return best

    def min_isr_error(self, topic: str, partition: int) -> int:
        """acks=all is refused before the append when the ISR is smaller than
        min.insync.replicas (Kafka: NOT_ENOUGH_REPLICAS)."""
        lead = self.leaders.get((topic, partition))
        if lead is None:
            return Err.NOT_LEADER_OR_FOLLOWER
        return Err.NOT_ENOUGH_REPLICAS if len(lead.state.isr) < lead.min_isr else Err.NONE

    # ---- throttles ----------------------------------------------------------------------------
    def _rate(self, name: str) -> int:
        try:
            return int(self.broker_setting(name) or UNLIMITED)
        except ValueError:
            return UNLIMITED

    def _throttle_spec(self, topic: str, prop: str) -> frozenset[int] | bool:
        key = (topic, prop)
        spec = self._throttles.get(key)
        if spec is None:
            spec = self._throttles[key] = throttled_partitions(self.topic_setting(topic, prop),
                                                               self.node_id)
        return spec

    def leader_throttled(self, lead: Leadership, replica: int) -> bool:
        """Sending to this follower counts against leader.replication.throttled.rate (it is not
        in the ISR and the topic lists this broker's replica of the partition)."""
        return (replica not in lead.state.isr and self.leader_quota.enabled
                and is_throttled(self._throttle_spec(lead.topic, LEADER_REPLICAS),
                                 lead.partition))

    def follower_throttled(self, f: Following) -> bool:
        if not self.follower_quota.enabled:
            return False
        t = self._image().topics.get(f.topic)
        st = t.partitions.get(f.partition) if t is not None else None
        return ((st is None or self.node_id not in st.isr)
                and is_throttled(self._throttle_spec(f.topic, FOLLOWER_REPLICAS), f.partition))

    def config_changed(self, topic: str) -> None:
        """A topic's (or the brokers') configs changed: min.insync.replicas and the throttled
        replica lists may have."""
        self._throttles = {k: v for k, v in self._throttles.items() if k[0] != topic}
        value = self._min_isr(topic)
        for lead in self.leaders.values():
            if lead.topic == topic:
                lead.min_isr = value

    async def wait_replicated(self, lg: PartitionLog, end_offset: int, timeout_s: float) -> int:
        """acks=all: wait until the high watermark reaches `end_offset` (Kafka's DelayedProduce):
        NONE, NOT_ENOUGH_REPLICAS_AFTER_APPEND (reached, but the ISR is below
        min.insync.replicas), REQUEST_TIMED_OUT, or NOT_LEADER_OR_FOLLOWER (leadership lost)."""
        lead = self.leaders.get((lg.topic, lg.partition))
        if lead is None or lead.log is not lg:
            return Err.NOT_LEADER_OR_FOLLOWER
        hw = self._advance(lead)
        if hw >= end_offset:
            return (Err.NOT_ENOUGH_REPLICAS_AFTER_APPEND
                    if len(lead.state.isr) < lead.min_isr else Err.NONE)
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        lead.waiters.append((end_offset, fut))
        try:
            return await asyncio.wait_for(fut, timeout_s)
        except TimeoutError:
            return Err.REQUEST_TIMED_OUT

    def _eligible(self) -> set[int]:
        """Brokers the controller accepts into an ISR: registered, unfenced, not shutting down."""
        return {b.broker_id for b in self._image().brokers.values()
                if not b.fenced and not b.in_controlled_shutdown}

    async def _isr_loop(self) -> None:
        """Kafka's isr-expiration task: every replica.lag.time.max.ms / 2, followers that have not
        caught up for replica.lag.time.max.ms leave the ISR."""
        interval = max(self.cfg.lag_max_ms / 2000, 0.05)
        while True:
            await asyncio.sleep(interval)
            now = _now_ms()
            for lead in list(self.leaders.values()):
                change = lead.state.shrink(now, self.cfg.lag_max_ms, lead.log.end_offset)
                if change is not None:
                    self._send_alter(lead, change)

    def _send_alter(self, lead: Leadership, change: IsrChange) -> None:
        # while the change is pending the high watermark counts the maximal ISR, so a leader
        # alone in its ISR stops moving it with its log end at once
        self._hw_mode(lead)
        if self._closed:
            return
        task = asyncio.create_task(self._alter(lead, change))
        self._alters.add(task)
        task.add_done_callback(self._alters.discard)

    async def _alter(self, lead: Leadership, change: IsrChange) -> None:
        """Send one ISR change until the controller answers it (Kafka's AlterPartitionManager):
        accepted -> the new ISR; INELIGIBLE_REPLICA / OPERATION_NOT_ATTEMPTED -> not attempted,
        the pending change is dropped; FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION and unknown
        partitions -> the change stays pending until the image brings a newer partition epoch
        (LeaderState.update drops it then); anything else (timeouts, no controller) -> sent
        again. Dropping a change on a timeout would be unsafe: the controller may have applied
        it while the answer was lost."""
        tp = (lead.topic, lead.partition)
        while self.leaders.get(tp) is lead and lead.state.pending is change and not self._closed:
            t = self._image().topics.get(lead.topic)
            if t is None:
                return
            log.info("%s-%d: asking the controller for ISR %s (was %s, partition epoch %d)",
                     tp[0], tp[1], list(change.isr), list(lead.state.isr),
                     change.partition_epoch)
            try:
                code, new = await self._alter_partition(
                    t.topic_id, lead.partition, change.leader_epoch, change.partition_epoch,
                    list(zip(change.isr, change.epochs, strict=True)))
            except Exception as e:
                log.warning("%s-%d: AlterPartition failed: %s", tp[0], tp[1], e)
                code, new = Err.REQUEST_TIMED_OUT, None
            if self.leaders.get(tp) is not lead or lead.state.pending is not change:
                return  # the image moved on meanwhile
            if code == Err.NONE and new is not None:
                was = len(lead.state.isr)
                lead.state.change_done(change, tuple(new.isr), new.partition_epoch)
                self._count_isr_change(was, len(lead.state.isr))  # ops-metrics
            elif code in (Err.INELIGIBLE_REPLICA, Err.OPERATION_NOT_ATTEMPTED):
                log.info("%s-%d: AlterPartition to ISR %s answered %s", tp[0], tp[1],
                         list(change.isr), Err.name_of(code))
                lead.state.change_done(change, None, -1)
            elif code in (Err.FENCED_LEADER_EPOCH, Err.INVALID_UPDATE_VERSION,
                          Err.UNKNOWN_TOPIC_OR_PARTITION, Err.UNKNOWN_TOPIC_ID,
                          Err.NOT_LEADER_OR_FOLLOWER, Err.INVALID_REQUEST):
                log.info("%s-%d: AlterPartition to ISR %s answered %s; waiting for the "
                         "metadata", tp[0], tp[1], list(change.isr), Err.name_of(code))
                return
            else:
                await asyncio.sleep(ALTER_RETRY_S)
                continue
            self._hw_mode(lead)
            self._advance(lead)
            return

    # ---- follower side ---------------------------------------------------------------------------
    def follower_fetched(self, f: Following, leader_hw: int, leader_log_start: int) -> None:
        lg = f.log
        hw = min(leader_hw, lg.end_offset)
        if hw > lg.high_watermark:  # Kafka: a follower's high watermark only moves up
            lg.set_high_watermark(hw)
        if leader_log_start >= 0 and lg.tiered:
            # the leader's start across tiers (its DeleteRecords / remote retention): kept
            # (persisted, never backwards), so it holds if this replica becomes the leader
            lg.set_global_log_start_offset(leader_log_start)
        if leader_log_start > lg.log_start_offset:
            # the leader's log start moved (retention, DeleteRecords): ours follows
            lg.delete_records(min(leader_log_start, lg.high_watermark))

    def truncate(self, f: Following, offset: int, why: str) -> None:
        lg = f.log
        if offset >= lg.end_offset:
            # nothing to cut, but an epoch this replica started without appending (it led
            # briefly) must go, or it would diverge at its own log end forever (Kafka's
            # UnifiedLog.truncateTo trims the epoch cache in this case too)
            lg.epochs.truncate_from_end(offset)
            return
        log.info("%s-%d: truncating to %d (log end %d, high watermark %d): %s", f.topic,
                 f.partition, offset, lg.end_offset, lg.high_watermark, why)
        if offset < lg.log_start_offset:
            lg.truncate_fully_and_start_at(offset)
        else:
            lg.truncate_to(offset)

    def restart_at(self, f: Following, offset: int) -> None:
        log.info("%s-%d: fetch offset %d is below the leader's log start; the replica restarts "
                 "at %d", f.topic, f.partition, f.log.end_offset, offset)
        f.log.truncate_fully_and_start_at(offset)


def _freeze_hw(lg: PartitionLog) -> None:
    """The high watermark stops following the log end (followers' positions move it now)."""
    lg.set_high_watermark(lg.high_watermark)


def _now_ms() -> int:
    return int(time.monotonic() * 1000)
