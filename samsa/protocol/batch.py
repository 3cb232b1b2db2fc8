"""A zero-copy view of RecordBatch v2 headers: validation and the few patches the broker makes.

Layout (61-byte header): baseOffset i64 @0, batchLength i32 @8, partitionLeaderEpoch i32 @12,
magic i8 @16, crc u32 @17 (CRC32C of bytes 21..end), attributes i16 @21, lastOffsetDelta i32 @23,
baseTimestamp i64 @27, maxTimestamp i64 @35, producerId i64 @43, producerEpoch i16 @51,
baseSequence i32 @53, recordsCount i32 @57.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import crc32c

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: bytes not counted by batchLength
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTR_OFFSET = 21

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20

_HEADER = struct.Struct(">qiibIhiqqqhii")
_I64 = struct.Struct(">q")
_PREFIX = struct.Struct(">qi")


@dataclass(slots=True)
class BatchHeader:
    base_offset: int
    batch_length: int
    leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)


def read_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    return BatchHeader(*_HEADER.unpack_from(buf, pos))


def read_prefix(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int]:
    """(baseOffset, batchLength) of the batch at pos."""
    return _PREFIX.unpack_from(buf, pos)  # type: ignore[return-value]


class InvalidBatch(Exception):
    """A produced batch that must be rejected; carries the Kafka error code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def validate_single_batch(data: bytes | memoryview) -> BatchHeader:
    """Check a produce payload holds exactly one well-formed, CRC-valid v2 batch (Kafka's rule for
    Produce v3+). Raises InvalidBatch with CORRUPT_MESSAGE (2) or INVALID_RECORD (87)."""
    n = len(data)
    if n < LOG_OVERHEAD + 5:
        raise InvalidBatch(2, "record set too short to hold a batch header")
    magic = data[MAGIC_OFFSET]
    if magic != 2:
        raise InvalidBatch(
            87, f"Produce requests v3+ only accept record batches with magic 2, got magic {magic}"
        )
    if n < HEADER_SIZE:
        raise InvalidBatch(2, "record batch shorter than its 61-byte header")
    h = read_header(data)
    if h.batch_length + LOG_OVERHEAD != n:
        if h.batch_length + LOG_OVERHEAD < n:
            raise InvalidBatch(
                87, "Produce requests v3+ must contain exactly one record batch"
            )
        raise InvalidBatch(2, f"batch length {h.batch_length} exceeds the {n} bytes sent")
    if h.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise InvalidBatch(2, f"batch length {h.batch_length} is below the header size")
    if crc32c.crc32c(memoryview(data)[ATTR_OFFSET:]) != h.crc:
        raise InvalidBatch(2, "record batch CRC32C mismatch")
    if h.records_count <= 0 or h.last_offset_delta != h.records_count - 1:
        raise InvalidBatch(
            87,
            f"record count {h.records_count} does not match last offset delta {h.last_offset_delta}",
        )
    if h.compression > 4:
        raise InvalidBatch(2, f"unknown compression codec {h.compression}")
    if h.is_control:
        raise InvalidBatch(87, "clients may not produce control batches")
    return h


def set_base_offset(buf: bytearray, base_offset: int) -> None:
    _I64.pack_into(buf, 0, base_offset)


def set_log_append_time(buf: bytearray, timestamp_ms: int) -> None:
    """Mark the batch LogAppendTime with the broker's clock and recompute its CRC (Kafka does the
    same; clients then report the batch's max timestamp for every record)."""
    attrs = struct.unpack_from(">h", buf, ATTR_OFFSET)[0] | TIMESTAMP_TYPE_BIT
    struct.pack_into(">h", buf, ATTR_OFFSET, attrs)
    _I64.pack_into(buf, 35, timestamp_ms)
    struct.pack_into(">I", buf, CRC_OFFSET, crc32c.crc32c(memoryview(buf)[ATTR_OFFSET:]))


def crc_ok(buf: bytes | memoryview, pos: int, size: int) -> bool:
    mv = memoryview(buf)
    stored = struct.unpack_from(">I", mv, pos + CRC_OFFSET)[0]
    return bool(crc32c.crc32c(mv[pos + ATTR_OFFSET : pos + size]) == stored)


def recompress(batch: bytes | bytearray, codec: int) -> bytearray:
    """Re-encode a batch's records payload with another codec (topic compression.type), keeping
    every header field but attributes' codec bits, length and CRC."""
    from . import codecs

    h = read_header(batch)
    payload = codecs.decompress(h.compression, memoryview(batch)[HEADER_SIZE:])
    body = codecs.compress(codec, payload)
    out = bytearray(batch[:HEADER_SIZE]) + body
    struct.pack_into(">i", out, 8, len(out) - LOG_OVERHEAD)
    struct.pack_into(">h", out, ATTR_OFFSET, (h.attributes & ~COMPRESSION_MASK) | codec)
    struct.pack_into(">I", out, CRC_OFFSET, crc32c.crc32c(memoryview(out)[ATTR_OFFSET:]))
    return out
