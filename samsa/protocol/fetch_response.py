"""Hand-written Fetch response encoder (v4–v17): struct packing instead of kio's generic writer, and
a partition's records may be a file slice rather than bytes, so the server can `sendfile` them.

The output is a list of chunks: bytes, and slice objects (anything with a `length`) standing for
that many record bytes. Byte-identical to kio's encoding once slices are materialised
(tests/unit/test_fetch_response.py). Per partition: a few struct packs, no per-record work.
Tagged fields are never set (diverging epoch, current leader, snapshot id, node endpoints): kio
omits default-valued tagged fields, so each tagged-field section is a single zero byte.
"""

from __future__ import annotations

import struct
import uuid
from typing import Protocol

from samsa.protocol.codec import uvarint as _uvarint
from samsa.protocol.leader_hint import NodeEndpoint, partition_tags, top_level_tags

_I32 = struct.Struct(">i")
_DIVERGING = struct.Struct(">iq")
_I16_I32 = struct.Struct(">hi")
_PART_V4 = struct.Struct(">ihqq")     # partition index, error, high watermark, last stable offset
_PART_V5 = struct.Struct(">ihqqq")    # + log start offset
_ABORTED = struct.Struct(">qq")       # producer id, first offset
_NULL_ARRAY = _I32.pack(-1)
_ZERO_UUID = bytes(16)
_INLINE_RECORDS = 8192                # records bytes up to this size are copied into the header run


class RecordsSlice(Protocol):
    """Stands for `length` record bytes the server sends from elsewhere (storage.FileSlice)."""

    @property
    def length(self) -> int: ...


Records = bytes | RecordsSlice


class FetchChunks(list[bytes | RecordsSlice]):
    """An encoded response whose chunks may include slices (the server sends those specially)."""


class FetchPartition:
    """One partition of a Fetch response; `aborted` is None or [(producer id, first offset)]."""

    __slots__ = ("index", "error_code", "high_watermark", "last_stable_offset", "log_start_offset",
                 "aborted", "preferred_read_replica", "records", "current_leader", "diverging")

    def __init__(self, index: int, error_code: int, high_watermark: int, last_stable_offset: int,
                 log_start_offset: int, aborted: list[tuple[int, int]] | None,
                 records: Records | None, preferred_read_replica: int = -1,
                 current_leader: tuple[int, int] | None = None,
                 diverging: tuple[int, int] | None = None) -> None:
        self.index = index
        self.error_code = error_code
        self.high_watermark = high_watermark
        self.last_stable_offset = last_stable_offset
        self.log_start_offset = log_start_offset
        self.aborted = aborted
        self.preferred_read_replica = preferred_read_replica
        self.records = records
        self.current_leader = current_leader  # KIP-951: (leader id, epoch) with NOT_LEADER
        self.diverging = diverging  # KIP-595 DivergingEpoch to a follower: (epoch, end offset)

    @property
    def records_size(self) -> int:
        r = self.records
        if r is None:
            return 0
        return len(r) if isinstance(r, bytes) else r.length


def encode_fetch_response(version: int, correlation_id: int,
                          topics: list[tuple[str | uuid.UUID | None, list[FetchPartition]]],
                          error_code: int = 0, session_id: int = 0,
                          throttle_time_ms: int = 0,
                          node_endpoints: list[NodeEndpoint] | None = None) -> FetchChunks:
    """Length-prefixed Fetch response frame. `topics` holds (name, or topic id from v13, partitions)."""
    flexible = version >= 12
    by_id = version >= 13
    part_struct = _PART_V5 if version >= 5 else _PART_V4
    with_replica = version >= 11
    out = FetchChunks([b""])  # the size prefix, filled in last
    size = 0
    buf = bytearray(_I32.pack(correlation_id))
    if flexible:
        buf += b"\x00"  # response header v1: no tagged fields
    buf += _I32.pack(throttle_time_ms)
    if version >= 7:
        buf += _I16_I32.pack(error_code, session_id)
    buf += _uvarint(len(topics) + 1) if flexible else _I32.pack(len(topics))
    for key, parts in topics:
        if by_id:
            buf += key.bytes if isinstance(key, uuid.UUID) else _ZERO_UUID
        else:
            name = (key if isinstance(key, str) else "").encode()
            buf += _uvarint(len(name) + 1) if flexible else struct.pack(">h", len(name))
            buf += name
        buf += _uvarint(len(parts) + 1) if flexible else _I32.pack(len(parts))
        for p in parts:
            if version >= 5:
                buf += part_struct.pack(p.index, p.error_code, p.high_watermark,
                                        p.last_stable_offset, p.log_start_offset)
            else:
                buf += part_struct.pack(p.index, p.error_code, p.high_watermark,
                                        p.last_stable_offset)
            aborted = p.aborted
            if aborted is None:
                buf += b"\x00" if flexible else _NULL_ARRAY
            else:
                buf += _uvarint(len(aborted) + 1) if flexible else _I32.pack(len(aborted))
                for producer_id, first_offset in aborted:
                    buf += _ABORTED.pack(producer_id, first_offset)
                    if flexible:
                        buf += b"\x00"
            if with_replica:
                buf += _I32.pack(p.preferred_read_replica)
            records = p.records
            if records is None:
                buf += b"\x00" if flexible else _NULL_ARRAY
            elif isinstance(records, bytes):
                n = len(records)
                buf += _uvarint(n + 1) if flexible else _I32.pack(n)
                if n <= _INLINE_RECORDS:
                    buf += records
                else:
                    size += len(buf) + n
                    out.append(bytes(buf))
                    out.append(records)
                    buf = bytearray()
            else:
                n = records.length
                buf += _uvarint(n + 1) if flexible else _I32.pack(n)
                size += len(buf) + n
                out.append(bytes(buf))
                out.append(records)
                buf = bytearray()
            if flexible:  # tagged fields: diverging_epoch (tag 0), current_leader (tag 1, v16+)
                leader = p.current_leader if version >= 16 else None
                if p.diverging is not None:
                    buf += _diverging_tags(p.diverging, leader)
                else:
                    buf += b"\x00" if leader is None else partition_tags(1, leader)
        if flexible:
            buf += b"\x00"  # topic tagged fields
    if flexible:  # top-level tagged fields: node_endpoints from v16 (KIP-951)
        buf += top_level_tags(node_endpoints if version >= 16 else None)
    size += len(buf)
    out.append(bytes(buf))
    out[0] = _I32.pack(size)
    return out


def _diverging_tags(diverging: tuple[int, int], leader: tuple[int, int] | None) -> bytes:
    """A partition's tagged fields with DivergingEpoch (tag 0: epoch int32, end offset int64) and,
    when given, current_leader (tag 1)."""
    body = _DIVERGING.pack(*diverging) + b"\x00"
    out = _uvarint(0) + _uvarint(len(body)) + body
    count = 1
    if leader is not None and leader != (-1, -1):
        out += partition_tags(1, leader)[1:]  # the same field without its own count
        count = 2
    return _uvarint(count) + out
