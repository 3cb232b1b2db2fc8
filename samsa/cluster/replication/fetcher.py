"""A follower's fetcher: one task per (leader broker, fetcher index) that sends Fetch requests with
this broker's replica id to the leader and appends what comes back verbatim.

Truncation follows KIP-595's DivergingEpoch: every Fetch carries the epoch of the follower's last
batch (`last_fetched_epoch`); a leader whose log differs answers with the end offset of that
epoch in its own log instead of data, and the follower truncates there (when the follower does not
know the leader's epoch at all, it truncates to the end of its own epoch below it and asks again).
A fetch offset outside the leader's log (OFFSET_OUT_OF_RANGE) is resolved with ListOffsets: behind
the leader's log start, the follower's log restarts there; past its end, it truncates to it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from samsa.cluster.channel import ChannelError, NodeChannel
from samsa.protocol.errors import Err

from .truncation import end_offset_for, truncation_offset

if TYPE_CHECKING:
    from samsa.storage.log import PartitionLog

    from .manager import ReplicaManager

log = logging.getLogger("samsa.replication")

FETCH, LIST_OFFSETS = 1, 2
FETCH_VERSION = 15  # ReplicaState (replica id + broker epoch), topic ids, DivergingEpoch
LIST_OFFSETS_VERSION = 4
EARLIEST, LATEST = -2, -1
THROTTLE_PAUSE_S = 0.1
METADATA_WAIT_S = 0.05  # a leader behind on the metadata that made it leader catches up quickly
TP = tuple[str, int]


@dataclass(slots=True)
class Following:
    """This broker follows `leader` for one partition at `leader_epoch`."""

    topic: str
    partition: int
    topic_id: uuid.UUID
    leader: int
    leader_epoch: int
    log: PartitionLog
    delayed_until: float = 0.0  # monotonic: after an error, wait replica.fetch.backoff.ms


class ReplicaFetcher:
    def __init__(self, manager: ReplicaManager, leader: int, index: int) -> None:
        self.manager = manager
        self.leader = leader
        self.index = index
        self.partitions: dict[TP, Following] = {}
        self._wake = asyncio.Event()
        self._channel: NodeChannel | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopped = False

    def __repr__(self) -> str:
        return f"ReplicaFetcher(leader={self.leader}, index={self.index})"

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=repr(self))

    def add(self, f: Following) -> None:
        self.partitions[(f.topic, f.partition)] = f
        self._wake.set()

    def remove(self, tp: TP) -> Following | None:
        return self.partitions.pop(tp, None)

    async def stop(self) -> None:
        self._stopped = True
        self._wake.set()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
        if self._channel is not None:
            await self._channel.close()

    # ---- the loop -------------------------------------------------------------------------
    async def _run(self) -> None:
        cfg = self.manager.cfg
        while not self._stopped:
            now = time.monotonic()
            ready = [f for f in self.partitions.values() if f.delayed_until <= now]
            if not ready:
                self._wake.clear()
                wait = min((f.delayed_until for f in self.partitions.values()), default=now + 1)
                try:
                    await asyncio.wait_for(self._wake.wait(), max(0.01, wait - now))
                except TimeoutError:
                    pass
                continue
            quota = self.manager.follower_quota
            held = [f for f in ready if self.manager.follower_throttled(f)]
            if held and quota.exceeded():  # KIP-73: throttled replicas wait for the quota
                self._delay(held, THROTTLE_PAUSE_S)
                ready = [f for f in ready if f not in held]
                if not ready:
                    continue
            channel = self._channel_to_leader()
            if channel is None:
                self._delay(ready, cfg.backoff_s)
                continue
            try:
                await self._fetch_once(channel, ready)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                task = asyncio.current_task()
                if self._stopped or (task is not None and task.cancelling()):
                    # a cancel that raced the failure it caused (the channel closed under the
                    # request) must not be lost, or this task outlives the broker
                    raise asyncio.CancelledError from e
                if isinstance(e, ChannelError):
                    log.debug("%r: fetch failed: %s", self, e)
                else:
                    log.exception("%r: fetch failed", self)
                self._delay(ready, cfg.backoff_s)

    def _delay(self, parts: list[Following], seconds: float) -> None:
        until = time.monotonic() + seconds
        for f in parts:
            f.delayed_until = until

    def _channel_to_leader(self) -> NodeChannel | None:
        ep = self.manager.endpoint_of(self.leader)
        if ep is None:
            return None
        ch = self._channel
        if ch is None or (ch.host, ch.port) != ep:
            if ch is not None:
                asyncio.ensure_future(ch.close())
            ch = self._channel = NodeChannel(
                ep[0], ep[1], client_id=f"samsa-replica-fetcher-{self.manager.node_id}-"
                f"{self.leader}-{self.index}", timeout_s=self.manager.cfg.socket_timeout_s,
                security=getattr(self.manager, "security", None))  # inter-broker TLS / SASL
        return ch

    async def _fetch_once(self, channel: NodeChannel, ready: list[Following]) -> None:
        cfg = self.manager.cfg
        topics: dict[uuid.UUID, list[dict[str, Any]]] = {}
        asked: dict[TP, tuple[Following, int]] = {}
        for f in ready:
            lg = f.log
            offset = lg.end_offset
            asked[(f.topic, f.partition)] = (f, offset)
            topics.setdefault(f.topic_id, []).append({
                "partition": f.partition, "current_leader_epoch": f.leader_epoch,
                "fetch_offset": offset, "last_fetched_epoch": lg.epochs.latest_epoch,
                "log_start_offset": lg.log_start_offset,
                "partition_max_bytes": cfg.fetch_max_bytes})
        body = {
            "replica_state": {"replica_id": self.manager.node_id,
                              "replica_epoch": self.manager.broker_epoch()},
            "max_wait": cfg.fetch_wait, "min_bytes": cfg.fetch_min_bytes,
            "max_bytes": cfg.fetch_response_max_bytes, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1,
            "topics": [{"topic_id": tid, "partitions": parts} for tid, parts in topics.items()],
            "forgotten_topics_data": [], "rack_id": ""}
        resp = await channel.request(FETCH, FETCH_VERSION, body,
                                     timeout_s=cfg.socket_timeout_s + cfg.fetch_wait_s)
        if resp.error_code:
            log.info("%r: fetch answered %s", self, Err.name_of(resp.error_code))
            self._delay(ready, cfg.backoff_s)
            return
        by_id = {f.topic_id: f.topic for f in ready}
        for rt in resp.responses:
            name = by_id.get(rt.topic_id)
            if name is None:
                continue
            for p in rt.partitions:
                entry = asked.get((name, p.partition_index))
                if entry is None:
                    continue
                f, offset = entry
                if self.partitions.get((name, p.partition_index)) is not f:
                    continue  # left this fetcher (a new leader or epoch) while in flight
                await self._on_partition(channel, f, offset, p)

    async def _on_partition(self, channel: NodeChannel, f: Following, offset: int, p: Any) -> None:
        lg = f.log
        if lg.deleted or lg.end_offset != offset:
            return
        code = p.error_code
        if code == Err.NONE:
            div = p.diverging_epoch
            if div is not None and div.epoch >= 0 and div.end_offset >= 0:
                self._truncate_diverging(f, div.epoch, div.end_offset)
                return
            records = p.records
            if records:
                if self.manager.follower_throttled(f):
                    self.manager.follower_quota.record(len(records))
                try:
                    lg.append_as_follower(records)
                except Exception as e:
                    log.error("%s-%d: cannot append the leader's batches at %d: %s", f.topic,
                              f.partition, offset, e)
                    self._delay([f], self.manager.cfg.backoff_s)
                    return
            self.manager.follower_fetched(f, p.high_watermark, p.log_start_offset)
            if lg.flush_due:
                await lg.flush()
        elif code == Err.OFFSET_OUT_OF_RANGE:
            await self._out_of_range(channel, f, offset)
        elif code in (Err.NOT_LEADER_OR_FOLLOWER, Err.UNKNOWN_LEADER_EPOCH):
            # the leader has not applied the election yet (or we are behind): it will soon
            self._delay([f], min(self.manager.cfg.backoff_s, METADATA_WAIT_S))
        else:
            if code != Err.FENCED_LEADER_EPOCH:
                log.info("%s-%d: fetch from leader %d answered %s", f.topic, f.partition,
                         self.leader, Err.name_of(code))
            self._delay([f], self.manager.cfg.backoff_s)

    def _truncate_diverging(self, f: Following, leader_epoch: int, leader_end: int) -> None:
        lg = f.log
        target = truncation_offset(functools.partial(end_offset_for, lg), leader_epoch,
                                   leader_end, lg.end_offset)
        self.manager.truncate(f, target, f"diverging epoch {leader_epoch} ending at {leader_end}")

    async def _out_of_range(self, channel: NodeChannel, f: Following, offset: int) -> None:
        earliest = await self._list_offset(channel, f, EARLIEST)
        latest = await self._list_offset(channel, f, LATEST)
        if earliest is None or latest is None:
            self._delay([f], self.manager.cfg.backoff_s)
            return
        if offset > latest:
            self.manager.truncate(f, latest, f"fetch offset {offset} past the leader's end {latest}")
        elif offset < earliest:
            self.manager.restart_at(f, earliest)
        else:
            self._delay([f], self.manager.cfg.backoff_s)

    async def _list_offset(self, channel: NodeChannel, f: Following, ts: int) -> int | None:
        body = {"replica_id": self.manager.node_id, "isolation_level": 0, "topics": [
            {"name": f.topic, "partitions": [{"partition_index": f.partition,
                                              "current_leader_epoch": f.leader_epoch,
                                              "timestamp": ts}]}]}
        try:
            resp = await channel.request(LIST_OFFSETS, LIST_OFFSETS_VERSION, body,
                                         timeout_s=self.manager.cfg.socket_timeout_s)
        except ChannelError:
            return None
        for t in resp.topics:
            for p in t.partitions:
                if p.error_code == 0:
                    return int(p.offset)
        return None
