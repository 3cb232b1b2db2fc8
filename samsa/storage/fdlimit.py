"""The open-file budget: raise the soft RLIMIT_NOFILE to the hard limit at start-up and size the
segment-file LRU (segment.OPEN_SEGMENTS) from it, so a broker with many partitions neither fails
to restart with "Too many open files" nor runs out of descriptors for connections."""

from __future__ import annotations

import logging
import resource

from .segment import OPEN_SEGMENTS

log = logging.getLogger("samsa.storage")
FDS_PER_SEGMENT = 3  # .log, .index, .timeindex


def reserve_for(limit: int) -> int:
    """Descriptors kept out of the segment budget: connections, the metadata and internal logs'
    helpers, the cleaner's pipes, listening sockets."""
    return max(32, min(limit // 4, 1024))


def configure() -> tuple[int, int, int]:
    """Raise the soft limit to the hard one (as far as the OS allows) and set the number of
    segments that may hold open files at once. Returns (soft before, soft now, segments)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    before = soft
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as e:
            log.warning("could not raise RLIMIT_NOFILE from %d to %d: %s", soft, target, e)
    segments = max(8, (soft - reserve_for(soft)) // FDS_PER_SEGMENT)
    OPEN_SEGMENTS.limit = segments
    return before, soft, segments


def describe(before: int, soft: int, segments: int, partitions: int) -> str:
    raised = f"raised from {before} to {soft}" if soft != before else f"{soft}"
    more = ("; segment files beyond that are closed while idle and reopened on use"
            if partitions > segments else "")
    return (f"open files: RLIMIT_NOFILE soft limit {raised}; {segments} segments "
            f"({FDS_PER_SEGMENT} files each) can stay open, so {segments} partitions keep their "
            f"active segment open at once ({partitions} partitions here){more}")
