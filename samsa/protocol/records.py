"""Encoding and decoding of the records inside a RecordBatch v2.

Used off the hot path only: the broker's own internal logs (metadata), timestamp lookups inside one
batch, and tests. Produce and fetch never decode records.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import crc32c

from . import codecs
from .batch import ATTR_OFFSET, HEADER_SIZE, read_header

Header = tuple[str, bytes | None]


@dataclass(slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[Header] = field(default_factory=list)


def _zigzag(n: int) -> int:
    return (n << 1) ^ (n >> 63)


def write_varint(out: bytearray, n: int) -> None:
    v = _zigzag(n) & 0xFFFFFFFFFFFFFFFF
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def read_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """Signed (zigzag) varint at pos: (value, next position)."""
    v, pos = _uvarint_at(buf, pos)  # type: ignore[arg-type]
    return (v >> 1) ^ -(v & 1), pos


def _write_bytes(out: bytearray, b: bytes | None) -> None:
    if b is None:
        write_varint(out, -1)
    else:
        write_varint(out, len(b))
        out += b


def encode_batch(
    records: list[tuple[bytes | None, bytes | None, list[Header], int]],
    *,
    base_offset: int = 0,
    compression: int = codecs.NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    attributes_extra: int = 0,
    leader_epoch: int = 0,
    offset_deltas: list[int] | None = None,
    last_offset_delta: int | None = None,
) -> bytes:
    """Build a RecordBatch v2 from (key, value, headers, timestamp_ms) tuples. `offset_deltas` and
    `last_offset_delta` give records explicit offsets (batches with gaps, as compaction leaves)."""
    if not records:
        raise ValueError("a batch holds at least one record")
    deltas = offset_deltas if offset_deltas is not None else list(range(len(records)))
    base_ts = min(r[3] for r in records)
    max_ts = max(r[3] for r in records)
    body = bytearray()
    for delta, (key, value, headers, ts) in zip(deltas, records, strict=True):
        rec = bytearray([0])
        write_varint(rec, ts - base_ts)
        write_varint(rec, delta)
        _write_bytes(rec, key)
        _write_bytes(rec, value)
        write_varint(rec, len(headers))
        for hk, hv in headers:
            _write_bytes(rec, hk.encode())
            _write_bytes(rec, hv)
        write_varint(body, len(rec))
        body += rec
    return encode_raw_batch(
        base_offset=base_offset,
        leader_epoch=leader_epoch,
        attributes=(compression & 0x07) | attributes_extra,
        last_offset_delta=deltas[-1] if last_offset_delta is None else last_offset_delta,
        base_timestamp=base_ts,
        max_timestamp=max_ts,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        count=len(records),
        records_body=bytes(body),
    )


def encode_raw_batch(*, base_offset: int, leader_epoch: int, attributes: int, last_offset_delta: int,
                     base_timestamp: int, max_timestamp: int, producer_id: int, producer_epoch: int,
                     base_sequence: int, count: int, records_body: bytes) -> bytes:
    """A RecordBatch v2 around already-encoded records (compressed here with the codec in
    `attributes`): every header field is the caller's, so a rewritten batch (the log cleaner's)
    keeps its offsets, producer state and flags."""
    payload = codecs.compress(attributes & 0x07, records_body) if count else b""
    after_crc = struct.pack(
        ">hiqqqhii",
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    ) + payload
    crc = crc32c.crc32c(after_crc)
    batch_length = 4 + 1 + 4 + len(after_crc)
    return struct.pack(">qiibI", base_offset, batch_length, leader_epoch, 2, crc) + after_crc


def decode_batch(buf: bytes | memoryview, pos: int = 0) -> list[Record]:
    """Records of the batch at pos (decompressed)."""
    h = read_header(buf, pos)
    end = pos + h.size
    payload = codecs.decompress(h.compression, memoryview(buf)[pos + HEADER_SIZE : end])
    log_append = bool(h.attributes & 0x08)
    out: list[Record] = []
    p = 0
    for _ in range(h.records_count):
        length, p = read_varint(payload, p)
        rec_end = p + length
        p += 1  # attributes
        ts_delta, p = read_varint(payload, p)
        off_delta, p = read_varint(payload, p)
        klen, p = read_varint(payload, p)
        key = None if klen < 0 else payload[p : p + klen]
        p += max(klen, 0)
        vlen, p = read_varint(payload, p)
        value = None if vlen < 0 else payload[p : p + vlen]
        p += max(vlen, 0)
        nh, p = read_varint(payload, p)
        headers: list[Header] = []
        for _h in range(nh):
            hkl, p = read_varint(payload, p)
            hk = payload[p : p + hkl].decode()
            p += hkl
            hvl, p = read_varint(payload, p)
            hv = None if hvl < 0 else payload[p : p + hvl]
            p += max(hvl, 0)
            headers.append((hk, hv))
        ts = h.max_timestamp if log_append else h.base_timestamp + ts_delta
        out.append(Record(h.base_offset + off_delta, ts, key, value, headers))
        p = rec_end
    return out


def _uvarint_at(buf: bytes, pos: int) -> tuple[int, int]:
    """Unsigned (still zigzagged) varint at pos: (raw value, next position)."""
    shift = 0
    v = 0
    while True:
        b = buf[pos]
        pos += 1
        v |= (b & 0x7F) << shift
        if not b & 0x80:
            return v, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


RawRecord = tuple[int, int, int, int, int, bytes | None, bool]


def scan_records(payload: bytes, count: int) -> list[RawRecord]:
    """Walk the (decompressed) records of a batch without building Record objects: per record
    (start, body, end, timestamp delta, offset delta, key, has value), where payload[start:end] is
    the whole record and payload[body:end] everything after the timestamp delta. The log cleaner's
    and the compacted-topic key check's inner loop, so varints are decoded inline."""
    out: list[RawRecord] = []
    p = 0
    for _ in range(count):
        start = p
        b = payload[p]
        if b < 0x80:
            n = b
            p += 1
        else:
            n, p = _uvarint_at(payload, p)
        end = p + ((n >> 1) ^ -(n & 1))
        p += 1  # record attributes
        b = payload[p]
        if b < 0x80:
            n = b
            p += 1
        else:
            n, p = _uvarint_at(payload, p)
        ts_delta = (n >> 1) ^ -(n & 1)
        body = p
        b = payload[p]
        if b < 0x80:
            n = b
            p += 1
        else:
            n, p = _uvarint_at(payload, p)
        off_delta = (n >> 1) ^ -(n & 1)
        b = payload[p]
        if b < 0x80:
            n = b
            p += 1
        else:
            n, p = _uvarint_at(payload, p)
        klen = (n >> 1) ^ -(n & 1)
        if klen >= 0:
            key: bytes | None = payload[p : p + klen]
            p += klen
        else:
            key = None
        b = payload[p]
        if b < 0x80:
            n = b
        else:
            n, _ = _uvarint_at(payload, p)
        if end > len(payload) or end <= body:
            raise ValueError("record overruns its batch")
        out.append((start, body, end, ts_delta, off_delta, key, not n & 1))
        p = end
    return out


def iter_batches(buf: bytes | memoryview) -> list[tuple[int, int]]:
    """(position, size) of each complete batch in buf."""
    out = []
    pos = 0
    n = len(buf)
    while pos + 12 <= n:
        (length,) = struct.unpack_from(">i", buf, pos + 8)
        size = length + 12
        if length <= 0 or pos + size > n:
            break
        out.append((pos, size))
        pos += size
    return out


__all__ = ["ATTR_OFFSET", "Record", "decode_batch", "encode_batch", "encode_raw_batch", "iter_batches",
           "scan_records"]


CONTROL_ABORT, CONTROL_COMMIT = 0, 1


def encode_control_batch(producer_id: int, producer_epoch: int, marker_type: int,
                         coordinator_epoch: int, timestamp_ms: int) -> bytes:
    """A transaction marker: a control batch (transactional + control attributes) holding one
    record whose key is (version 0, type: 0 abort / 1 commit) and value (version 0, coordinator
    epoch), as Kafka writes them."""
    key = struct.pack(">hh", 0, marker_type)
    value = struct.pack(">hi", 0, coordinator_epoch)
    return encode_batch([(key, value, [], timestamp_ms)], producer_id=producer_id,
                        producer_epoch=producer_epoch, base_sequence=-1, attributes_extra=0x30)


def control_marker(batch: bytes | memoryview) -> tuple[int, int] | None:
    """(marker type, coordinator epoch) of a control batch, None if it is not a marker."""
    recs = decode_batch(batch)
    if not recs or recs[0].key is None or len(recs[0].key) < 4:
        return None
    _version, kind = struct.unpack_from(">hh", recs[0].key, 0)
    if kind not in (CONTROL_ABORT, CONTROL_COMMIT):
        return None
    epoch = struct.unpack_from(">i", recs[0].value, 2)[0] if recs[0].value and \
        len(recs[0].value) >= 6 else -1
    return kind, epoch
