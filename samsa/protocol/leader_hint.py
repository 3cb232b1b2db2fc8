"""KIP-951 tagged fields: a NOT_LEADER_OR_FOLLOWER answer in Produce (v10+) and Fetch (v16+)
names the partition's current leader and epoch, and the response lists that leader's endpoint,
so a client can retry at once without a Metadata round trip. Encoded for the hand-written
Produce and Fetch response encoders."""

from __future__ import annotations

import struct

from samsa.protocol.codec import uvarint

_LEADER = struct.Struct(">ii")
_I32 = struct.Struct(">i")

# (node id, host, port, rack)
NodeEndpoint = tuple[int, str, int, str | None]


def _compact_str(s: str | None) -> bytes:
    if s is None:
        return b"\x00"
    b = s.encode()
    return uvarint(len(b) + 1) + b


def partition_tags(tag: int, leader: tuple[int, int] | None) -> bytes:
    """A partition's tagged-field section: the current_leader field (LeaderIdAndEpoch) under
    `tag` when known (an all -1 leader is the field's default, not sent), else none."""
    if leader is None or leader == (-1, -1):
        return b"\x00"
    body = _LEADER.pack(*leader) + b"\x00"
    return b"\x01" + uvarint(tag) + uvarint(len(body)) + body


def top_level_tags(endpoints: list[NodeEndpoint] | None) -> bytes:
    """The response's tagged-field section: node_endpoints (tag 0) when there are any."""
    if not endpoints:
        return b"\x00"
    body = bytearray(uvarint(len(endpoints) + 1))
    for node_id, host, port, rack in endpoints:
        body += _I32.pack(node_id) + _compact_str(host) + _I32.pack(port) + _compact_str(rack)
        body += b"\x00"
    return b"\x01" + uvarint(0) + uvarint(len(body)) + bytes(body)
