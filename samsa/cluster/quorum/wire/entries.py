"""The core's log entries as RecordBatch v2 batches, as they travel in a Fetch response's records.

Consecutive entries of one epoch share a batch whose partitionLeaderEpoch is that epoch; a control
entry is a control batch of one record (key: control record version 0, type 2, LeaderChange).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import crc32c

from samsa.cluster.quorum.log import Entry
from samsa.cluster.quorum.wire.errors import WireError
from samsa.protocol.batch import CONTROL_BIT, HEADER_SIZE, read_header
from samsa.protocol.records import decode_batch, encode_batch

LEADER_CHANGE_KEY = struct.pack(">hh", 0, 2)  # control record key: version 0, type 2 (LeaderChange)


def encode_entries(entries: Sequence[Entry], base_offset: int, timestamp_ms: int = 0) -> bytes:
    """Entries from `base_offset` on as RecordBatch v2 batches (empty bytes for none)."""
    out = bytearray()
    i = 0
    while i < len(entries):
        first = entries[i]
        j = i + 1
        if not first.control:
            while j < len(entries) and entries[j].epoch == first.epoch and not entries[j].control:
                j += 1
        group = entries[i:j]
        key = LEADER_CHANGE_KEY if first.control else None
        out += encode_batch(
            [(key, e.data, [], timestamp_ms) for e in group],
            base_offset=base_offset + i,
            leader_epoch=first.epoch,
            attributes_extra=CONTROL_BIT if first.control else 0,
        )
        i = j
    return bytes(out)


def decode_entries(records: bytes | None, base_offset: int) -> tuple[Entry, ...]:
    """Entries of a Fetch response's `records`, which must start at `base_offset` and be contiguous.
    A trailing partial batch is ignored (Kafka's readers do the same); a bad CRC, a magic other than
    2, a gap or a record without a value raise WireError."""
    if not records:
        return ()
    buf = bytes(records)
    out: list[Entry] = []
    pos = 0
    expect = base_offset
    while len(buf) - pos >= HEADER_SIZE:
        try:
            h = read_header(buf, pos)
        except Exception as e:
            raise WireError(f"unreadable batch header at byte {pos}: {e}") from e
        if h.batch_length < HEADER_SIZE - 12:
            raise WireError(f"batch at byte {pos} declares length {h.batch_length}")
        if pos + h.size > len(buf):
            break
        if h.magic != 2:
            raise WireError(f"batch at byte {pos} has magic {h.magic}, not 2")
        if crc32c.crc32c(memoryview(buf)[pos + 21 : pos + h.size]) != h.crc:
            raise WireError(f"batch at byte {pos} fails its CRC")
        if h.base_offset != expect:
            raise WireError(f"batch at byte {pos} starts at offset {h.base_offset}, expected {expect}")
        try:
            recs = decode_batch(buf, pos)
        except Exception as e:
            raise WireError(f"undecodable records in batch at byte {pos}: {e}") from e
        if len(recs) != h.records_count or h.last_offset_delta != len(recs) - 1:
            raise WireError(f"batch at byte {pos} does not hold {h.records_count} contiguous records")
        control = bool(h.attributes & CONTROL_BIT)
        for r in recs:
            if r.offset != expect:
                raise WireError(f"record offset {r.offset}, expected {expect}")
            if r.value is None:
                raise WireError(f"record at offset {r.offset} has no value")
            out.append(Entry(h.leader_epoch, bytes(r.value), control))
            expect += 1
        pos += h.size
    return tuple(out)
