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
    shift = 0
    v = 0
    while True:
        b = buf[pos]
        pos += 1
        v |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")
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
) -> bytes:
    """Build a RecordBatch v2 from (key, value, headers, timestamp_ms) tuples."""
    if not records:
        raise ValueError("a batch holds at least one record")
    base_ts = min(r[3] for r in records)
    max_ts = max(r[3] for r in records)
    body = bytearray()
    for delta, (key, value, headers, ts) in enumerate(records):
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
    payload = codecs.compress(compression, bytes(body))
    attrs = (compression & 0x07) | attributes_extra
    after_crc = struct.pack(
        ">hiqqqhii",
        attrs,
        len(records) - 1,
        base_ts,
        max_ts,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
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


__all__ = ["ATTR_OFFSET", "Record", "decode_batch", "encode_batch", "iter_batches"]
