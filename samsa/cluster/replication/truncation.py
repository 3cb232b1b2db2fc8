"""Where a follower's log and its leader's part (KIP-101/KIP-279/KIP-595), as pure functions of
the leader-epoch caches so both sides of a Fetch and the tests share one rule.

`end_offset_for(epoch)` is Kafka's LeaderEpochFileCache.endOffsetFor over a log: (the largest
epoch <= `epoch` in that log, the offset where it ends), (-1, -1) when the log has none.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from samsa.storage.log import PartitionLog

EndOffsetFor = Callable[[int], tuple[int, int]]


def end_offset_for(lg: PartitionLog, epoch: int) -> tuple[int, int]:
    """A partition log's answer (its leader-epoch cache over its current log end)."""
    return lg.epochs.end_offset_for(epoch, lg.end_offset)


def divergence(end_offset_for: EndOffsetFor, last_fetched_epoch: int,
               fetch_offset: int) -> tuple[int, int] | None:
    """Leader side: the DivergingEpoch (epoch, end offset) to answer a follower whose last batch
    has `last_fetched_epoch` and whose log ends at `fetch_offset`; None when its log is a prefix
    of the leader's (or it sent no epoch)."""
    if last_fetched_epoch < 0:
        return None
    epoch, end = end_offset_for(last_fetched_epoch)
    if epoch < last_fetched_epoch or end < fetch_offset:
        return epoch, end
    return None


def truncation_offset(end_offset_for: EndOffsetFor, leader_epoch: int, leader_end: int,
                      log_end: int) -> int:
    """Follower side: where to cut its log after the leader answered DivergingEpoch
    (`leader_epoch`, `leader_end`). When the follower does not have the leader's epoch it cuts
    to the end of its own largest epoch below it (and the next Fetch narrows further)."""
    mine_epoch, mine_end = end_offset_for(leader_epoch)
    if mine_epoch < 0:
        return min(leader_end, log_end)
    if mine_epoch != leader_epoch:
        return min(mine_end, log_end)
    return min(leader_end, mine_end, log_end)
