"""A follower's bootstrap from the remote tier (KIP-405's follower path, Kafka's TierStateMachine).

When a follower asks its leader for an offset the leader keeps only in the remote tier, the leader
answers OFFSET_MOVED_TO_TIERED_STORAGE instead of data. The follower then does not copy that
history from the leader: it asks the leader for its local log start offset (ListOffsets -4,
EARLIEST_LOCAL_TIMESTAMP) and the epoch there, finds in the remote log metadata (which every
broker replays) the copied segment holding the offset just below it, and rebuilds from that
segment's copies what a replica needs to continue at the segment's end:
- the leader-epoch cache (the segment's leader-epoch checkpoint),
- the producer state (the producer snapshot taken at the segment's end),
- its log, emptied and restarted at the segment's end + 1, with the log start across tiers set
  to the leader's.
Then it fetches the local tail from the leader as usual. Until the metadata has the segment (the
follower's replay may lag) or while the store fails, it retries after replica.fetch.backoff.ms.
The store is read on worker threads, never on the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from samsa.cluster.channel import ChannelError, NodeChannel
from samsa.protocol.errors import Err
from samsa.storage import fsio
from samsa.storage.leader_epoch import MalformedCheckpoint, parse
from samsa.storage.remote.rsm import (
    IndexType,
    RemoteLogSegmentMetadata,
    RemoteResourceNotFound,
    RemoteStorageError,
    TopicIdPartition,
)

if TYPE_CHECKING:
    from .fetcher import Following, ReplicaFetcher

log = logging.getLogger("samsa.replication")

OFFSET_MOVED_TO_TIERED_STORAGE = 109
LIST_OFFSETS, OFFSET_FOR_LEADER_EPOCH = 2, 23
LIST_OFFSETS_V = 8  # the first version with EARLIEST_LOCAL_TIMESTAMP (KIP-405)
OFFSET_FOR_LEADER_EPOCH_V = 4
EARLIEST, EARLIEST_LOCAL = -2, -4


class NotReady(Exception):
    """The bootstrap cannot be done yet (leader unreachable, metadata behind, store failing)."""


@dataclass(frozen=True)
class AuxState:
    """What the remote tier gave: where the follower's log restarts and the state below it."""
    next_offset: int
    leader_log_start: int
    epochs: list[tuple[int, int]]
    producer_snapshot: bytes | None
    segment: RemoteLogSegmentMetadata


async def _list_offset(channel: NodeChannel, node_id: int, f: Following, ts: int
                       ) -> tuple[int, int]:
    body = {"replica_id": node_id, "isolation_level": 0, "topics": [
        {"name": f.topic, "partitions": [{"partition_index": f.partition,
                                          "current_leader_epoch": f.leader_epoch,
                                          "timestamp": ts}]}]}
    try:
        resp = await channel.request(LIST_OFFSETS, LIST_OFFSETS_V, body)
    except ChannelError as e:
        raise NotReady(f"ListOffsets {ts} to the leader failed: {e}") from e
    for t in resp.topics:
        for p in t.partitions:
            if p.error_code:
                raise NotReady(f"ListOffsets {ts} answered {Err.name_of(p.error_code)}")
            return int(p.offset), int(p.leader_epoch)
    raise NotReady(f"ListOffsets {ts}: no answer for the partition")


async def _epoch_end(channel: NodeChannel, node_id: int, f: Following, epoch: int
                     ) -> tuple[int, int]:
    """The leader's (epoch, end offset) for `epoch` (the largest epoch <= it and where it ends)."""
    body = {"replica_id": node_id, "topics": [{"topic": f.topic, "partitions": [
        {"partition": f.partition, "current_leader_epoch": f.leader_epoch,
         "leader_epoch": epoch}]}]}
    try:
        resp = await channel.request(OFFSET_FOR_LEADER_EPOCH, OFFSET_FOR_LEADER_EPOCH_V, body)
    except ChannelError as e:
        raise NotReady(f"OffsetForLeaderEpoch to the leader failed: {e}") from e
    for t in resp.topics:
        for p in t.partitions:
            if p.error_code:
                raise NotReady(f"OffsetForLeaderEpoch answered {Err.name_of(p.error_code)}")
            return int(p.leader_epoch), int(p.end_offset)
    raise NotReady("OffsetForLeaderEpoch: no answer for the partition")


def _find_segment(rlmm: Any, tp: TopicIdPartition, epoch: int, offset: int
                  ) -> RemoteLogSegmentMetadata | None:
    """The copied segment with records of `epoch` holding `offset` (Kafka's lookup); failing
    that, any copied segment holding it (a leader that reported its latest epoch for -4)."""
    found: RemoteLogSegmentMetadata | None = rlmm.remote_log_segment_metadata(tp, epoch, offset)
    if found is not None:
        return found
    for m in rlmm.segments(tp):
        if m.start_offset <= offset <= m.end_offset:
            return m
    return None


async def fetch_aux_state(fetcher: ReplicaFetcher, channel: NodeChannel, f: Following,
                          rlm: Any) -> AuxState:
    """Ask the leader and the remote tier for what the follower needs; changes nothing."""
    node_id = fetcher.manager.node_id
    local_start, epoch = await _list_offset(channel, node_id, f, EARLIEST_LOCAL)
    leader_start, _ = await _list_offset(channel, node_id, f, EARLIEST)
    if local_start <= 0 or local_start <= leader_start:
        raise NotReady(f"the leader's local log starts at {local_start} (log start "
                       f"{leader_start}): nothing to take from the remote tier")
    below = local_start - 1
    target = max(epoch, 0)
    if epoch > 0:
        # the epoch of the offset below the local start may be an earlier one (gaps in epochs)
        prev_epoch, prev_end = await _epoch_end(channel, node_id, f, epoch - 1)
        if prev_end > below:
            target = prev_epoch
    tp = TopicIdPartition(f.topic_id, f.topic, f.partition)
    seg = _find_segment(rlm.rlmm, tp, target, below)
    if seg is None:
        raise NotReady(f"no copied remote segment holds offset {below} (epoch {target}) yet")
    loop = asyncio.get_running_loop()
    pool = getattr(rlm, "reader_pool", None)
    try:
        raw_epochs = await loop.run_in_executor(pool, rlm.rsm.fetch_index, seg,
                                                IndexType.LEADER_EPOCH)
        try:
            snapshot: bytes | None = await loop.run_in_executor(
                pool, rlm.rsm.fetch_index, seg, IndexType.PRODUCER_SNAPSHOT)
        except RemoteResourceNotFound:
            snapshot = None  # no producers: an empty state
    except RemoteStorageError as e:
        raise NotReady(f"the remote store failed: {e}") from e
    try:
        epochs = parse(raw_epochs.decode())
    except (MalformedCheckpoint, UnicodeDecodeError) as e:
        raise NotReady(f"segment {seg.id}: unreadable leader-epoch checkpoint: {e}") from e
    nxt = seg.end_offset + 1
    return AuxState(nxt, leader_start, [(e, o) for e, o in epochs if o < nxt], snapshot, seg)


def apply_aux_state(f: Following, st: AuxState) -> None:
    """Restart the follower's log at st.next_offset with the remote tier's epochs and producer
    state (synchronous: nothing else touches the log meanwhile)."""
    lg = f.log
    lg.truncate_fully_and_start_at(st.next_offset)
    lg.set_global_log_start_offset(st.leader_log_start)
    lg.epochs.rebuild(st.epochs)
    if st.producer_snapshot is not None:
        path = lg.dir / f"{st.next_offset:020d}.snapshot"
        fsio.replace_file(path, st.producer_snapshot, sync=True)
        lg.producers.load_snapshot(lg.end_offset)
    log.info("%s-%d: built from the remote tier up to %d (segment %s: %d leader epochs, %s); "
             "fetching the rest from the leader", f.topic, f.partition, st.next_offset,
             st.segment.id, len(st.epochs),
             "producer snapshot" if st.producer_snapshot is not None else "no producers")


async def bootstrap_from_remote(fetcher: ReplicaFetcher, channel: NodeChannel,
                                f: Following) -> bool:
    """Handle OFFSET_MOVED_TO_TIERED_STORAGE for one partition; True when the log now continues
    where the leader's local log can serve it."""
    rlm = fetcher.manager.remote_log_manager
    if rlm is None:
        log.warning("%s-%d: the leader keeps this offset in the remote tier, but this broker has "
                    "remote.log.storage.system.enable=false", f.topic, f.partition)
        return False
    offset = f.log.end_offset
    try:
        st = await fetch_aux_state(fetcher, channel, f, rlm)
    except NotReady as e:
        log.info("%s-%d: cannot build from the remote tier yet: %s", f.topic, f.partition, e)
        return False
    if fetcher.partitions.get((f.topic, f.partition)) is not f or f.log.deleted \
            or f.log.end_offset != offset:
        return False  # the partition moved on while the store was read
    apply_aux_state(f, st)
    return True
