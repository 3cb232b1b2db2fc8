"""Read the topics out of a consumer-protocol subscription (the metadata consumers send in
JoinGroup), for OffsetDelete's 'is the group still subscribed' rule and describe output."""

from __future__ import annotations

import struct


def subscription_topics(metadata: bytes) -> set[str] | None:
    """Topics of a ConsumerProtocolSubscription (any version: version i16, then an array of
    strings is common to all). None when the bytes do not parse."""
    try:
        (_version, n) = struct.unpack_from(">hi", metadata, 0)
        pos = 6
        out = set()
        for _ in range(n):
            (ln,) = struct.unpack_from(">h", metadata, pos)
            pos += 2
            out.add(metadata[pos : pos + ln].decode())
            pos += ln
        return out
    except (struct.error, UnicodeDecodeError):
        return None


def assignment_partitions(assignment: bytes) -> list[tuple[str, int]] | None:
    """Partitions of a ConsumerProtocolAssignment (version i16, array of (topic, [partition]))."""
    try:
        (_version, n) = struct.unpack_from(">hi", assignment, 0)
        pos = 6
        out: list[tuple[str, int]] = []
        for _ in range(n):
            (ln,) = struct.unpack_from(">h", assignment, pos)
            pos += 2
            topic = assignment[pos : pos + ln].decode()
            pos += ln
            (k,) = struct.unpack_from(">i", assignment, pos)
            pos += 4
            parts = struct.unpack_from(f">{k}i", assignment, pos)
            pos += 4 * k
            out.extend((topic, p) for p in parts)
        return out
    except (struct.error, UnicodeDecodeError):
        return None
