"""Validate the records inside a produced RecordBatch v2 before it is stored.

The batch header and CRC are checked by batch.validate_single_batch; a CRC only proves the bytes
arrived as sent, not that they are records. This module decompresses the payload (bounded) and
walks every record, checking each length, varint and count against the bytes present, like
Kafka's DefaultRecord/LogValidator reading them:

- a varint is at most 5 bytes, a varlong 10; none may run past its record;
- a record's length must fit in the batch, and its fields must fill it exactly;
- offset deltas must be 0, 1, ... n-1 (Samsa stores batches verbatim, so it cannot rewrite them as
  Kafka does for compressed batches);
- key/value lengths are -1 (null) or fit in the record; header counts and header key lengths are
  non-negative and fit; header value lengths are -1 or fit;
- the batch holds exactly recordsCount records and no byte after the last.

The walk is C (samsa/protocol/_recordcheck.c, built by `pip install -e .`); `check_py` below is the
reference implementation with the same results and messages, for the differential tests and as a
fallback when the extension is missing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from . import codecs
from .batch import HEADER_SIZE, BatchHeader, InvalidBatch

log = logging.getLogger(__name__)

CORRUPT_MESSAGE = 2
INVALID_RECORD = 87

# Decompressed records may be this many times max.message.bytes, within [1 MiB, 256 MiB]: far
# above what real producers' data compresses by, low enough that a zip bomb costs bounded memory.
DECOMPRESSION_RATIO = 64
MIN_DECOMPRESSED = 1 << 20
MAX_DECOMPRESSED = 256 << 20


def decompression_limit(max_message_bytes: int) -> int:
    return min(max(DECOMPRESSION_RATIO * max_message_bytes, MIN_DECOMPRESSED), MAX_DECOMPRESSED)


def _varint(buf: bytes | memoryview, p: int, end: int, i: int, field: str) -> tuple[int, int]:
    v = 0
    for k in range(5):
        if p >= end:
            raise ValueError(f"record {i}: {field} varint truncated")
        b = buf[p]
        p += 1
        v |= (b & 0x7F) << (7 * k)
        if not b & 0x80:
            v &= 0xFFFFFFFF  # Kafka keeps the low 32 bits of a 5-byte varint
            n = (v >> 1) ^ -(v & 1)
            return n, p
    raise ValueError(f"record {i}: {field} varint too long")


def _skip_varlong(buf: bytes | memoryview, p: int, end: int, i: int, field: str) -> int:
    for _ in range(10):
        if p >= end:
            raise ValueError(f"record {i}: {field} varint truncated")
        b = buf[p]
        p += 1
        if not b & 0x80:
            return p
    raise ValueError(f"record {i}: {field} varint too long")


def check_py(payload: bytes | memoryview, count: int, want_keyless: bool) -> list[int] | None:
    """Reference of _recordcheck.check: ValueError on the first malformed part; the indexes of
    keyless records when want_keyless, else None."""
    if count <= 0:
        raise ValueError(f"invalid record count {count}")
    buf = payload
    n = len(buf)
    keyless: list[int] | None = [] if want_keyless else None
    p = 0
    for i in range(count):
        if p >= n:
            raise ValueError(f"batch declares {count} records but holds {i}")
        length, p = _varint(buf, p, n, i, "length")
        if length < 0 or length > n - p:
            raise ValueError(f"record {i}: length {length} outside the {n - p} bytes left")
        rend = p + length
        if p >= rend:
            raise ValueError(f"record {i}: truncated before its attributes")
        p += 1
        p = _skip_varlong(buf, p, rend, i, "timestamp delta")
        delta, p = _varint(buf, p, rend, i, "offset delta")
        if delta != i:
            raise ValueError(f"record {i}: offset delta {delta}, expected {i}")
        klen, p = _varint(buf, p, rend, i, "key length")
        if klen < -1 or klen > rend - p:
            raise ValueError(f"record {i}: key length {klen} out of range")
        if klen > 0:
            p += klen
        elif klen < 0 and keyless is not None:
            keyless.append(i)
        vlen, p = _varint(buf, p, rend, i, "value length")
        if vlen < -1 or vlen > rend - p:
            raise ValueError(f"record {i}: value length {vlen} out of range")
        if vlen > 0:
            p += vlen
        nh, p = _varint(buf, p, rend, i, "header count")
        if nh < 0 or nh > rend - p:
            raise ValueError(f"record {i}: header count {nh} out of range")
        for _ in range(nh):
            hk, p = _varint(buf, p, rend, i, "header key length")
            if hk < 0 or hk > rend - p:
                raise ValueError(f"record {i}: header key length {hk} out of range")
            p += hk
            hv, p = _varint(buf, p, rend, i, "header value length")
            if hv < -1 or hv > rend - p:
                raise ValueError(f"record {i}: header value length {hv} out of range")
            if hv > 0:
                p += hv
        if p != rend:
            raise ValueError(f"record {i}: {rend - p} bytes left over after its headers")
    if p != n:
        raise ValueError(f"{n - p} bytes after the last of {count} records")
    return keyless


Check = Callable[[bytes | memoryview, int, bool], "list[int] | None"]

try:
    from ._recordcheck import check as check_c
except ImportError:  # pragma: no cover - depends on the build
    check_c = None
    log.warning("samsa.protocol._recordcheck is not built (run `pip install -e .`): produced "
                "batches are validated by the slower pure-Python reference")

check: Check = check_c if check_c is not None else check_py


def validate_records(batch: bytes | memoryview, h: BatchHeader, *, max_message_bytes: int,
                     want_keyless: bool = False) -> list[int] | None:
    """Decompress (bounded) and walk the records of a batch that passed validate_single_batch.
    Raises InvalidBatch: CORRUPT_MESSAGE when the payload does not decompress, INVALID_RECORD
    when the records do not parse. Returns the keyless record indexes when want_keyless."""
    body = memoryview(batch)[HEADER_SIZE : h.size]
    if h.compression:
        try:
            body = codecs.decompress_view(h.compression, body, decompression_limit(max_message_bytes))
        except codecs.CorruptPayload as e:
            raise InvalidBatch(CORRUPT_MESSAGE, str(e)) from None
    try:
        return check(body, h.records_count, want_keyless)
    except ValueError as e:
        raise InvalidBatch(INVALID_RECORD, f"Found invalid record structure: {e}") from None
