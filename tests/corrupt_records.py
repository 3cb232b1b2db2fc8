"""Batches whose header and CRC are valid but whose records are not: one builder per corruption
class, shared by the unit tests (samsa/protocol/recordcheck.py) and the broker-level test."""

from __future__ import annotations

import functools
import gzip
import struct
from collections.abc import Callable

import lz4.frame
import zstandard

from samsa.protocol import codecs
from samsa.protocol.records import encode_raw_batch, write_varint
from samsa.protocol.varint import uvarint as _uvarint

TS = 1_700_000_000_000
CORRUPT_MESSAGE, INVALID_RECORD = 2, 87


def varint(n: int) -> bytes:
    out = bytearray()
    write_varint(out, n)
    return bytes(out)


def record(delta: int, *, key: bytes | None = b"k", value: bytes | None = b"v",
           headers: tuple[tuple[bytes, bytes | None], ...] = (), klen: int | None = None,
           vlen: int | None = None, hcount: int | None = None, length: int | None = None,
           extra: bytes = b"", raw_body: bytes | None = None) -> bytes:
    """One record; the keyword overrides write a chosen (wrong) length or count in its place."""
    if raw_body is None:
        b = bytearray(b"\x00") + varint(0) + varint(delta)
        b += varint(klen if klen is not None else (-1 if key is None else len(key))) + (key or b"")
        b += varint(vlen if vlen is not None else (-1 if value is None else len(value))) + (value or b"")
        b += varint(len(headers) if hcount is None else hcount)
        for hk, hv in headers:
            b += varint(len(hk)) + hk + varint(-1 if hv is None else len(hv)) + (hv or b"")
        b += extra
        raw_body = bytes(b)
    return varint(len(raw_body) if length is None else length) + raw_body


def batch(body: bytes, count: int, codec: int = codecs.NONE, *, payload: bytes | None = None,
          last_offset_delta: int | None = None) -> bytes:
    """A CRC-valid v2 batch around `body` (compressed with codec) or around a raw `payload`."""
    b = encode_raw_batch(base_offset=0, leader_epoch=0, attributes=codec,
                         last_offset_delta=count - 1 if last_offset_delta is None else last_offset_delta,
                         base_timestamp=TS, max_timestamp=TS, producer_id=-1, producer_epoch=-1,
                         base_sequence=-1, count=count, records_body=body)
    if payload is None:
        return b
    return _with_payload(b, payload)


def _with_payload(b: bytes, payload: bytes) -> bytes:
    import crc32c
    out = bytearray(b[:61]) + payload
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


def good_body(n: int = 3) -> bytes:
    return b"".join(record(i, value=b"v" * 20) for i in range(n))


BOMB_SIZE = 100 << 20  # past the 64 MiB decompression limit of the default max.message.bytes


@functools.cache
def _bomb(codec: int) -> bytes:
    """A valid stream of BOMB_SIZE zero bytes (snappy: a block that only declares that size)."""
    chunk, n = bytes(1 << 20), BOMB_SIZE >> 20
    if codec == codecs.GZIP:
        import zlib
        z = zlib.compressobj(9, zlib.DEFLATED, 31)
        return b"".join([z.compress(chunk) for _ in range(n)] + [z.flush()])
    if codec == codecs.ZSTD:
        c = zstandard.ZstdCompressor(level=1).compressobj(size=BOMB_SIZE)
        return b"".join([c.compress(chunk) for _ in range(n)] + [c.flush()])
    if codec == codecs.LZ4:
        f = lz4.frame.LZ4FrameCompressor()
        return f.begin() + b"".join(f.compress(chunk) for _ in range(n)) + f.flush()
    return _uvarint(BOMB_SIZE) + b"\x00"




def _gz(data: bytes) -> bytes:
    return gzip.compress(data)


def cases() -> list[tuple[str, Callable[[], bytes], int]]:
    """(class name, builder of the corrupt batch, the error code Samsa answers)."""
    g3 = good_body(3)
    xerial = codecs.compress(codecs.SNAPPY, g3)
    lz = lz4.frame.compress(g3)
    zs = zstandard.ZstdCompressor().compress(g3)
    gz = _gz(g3)
    out: list[tuple[str, Callable[[], bytes], int]] = [
        ("record-length-negative", lambda: batch(record(0, length=-5) + good_body(0), 1), INVALID_RECORD),
        ("record-length-past-batch", lambda: batch(record(0, length=1000), 1), INVALID_RECORD),
        ("record-length-short", lambda: batch(record(0, length=3), 1), INVALID_RECORD),
        ("key-length-past-record", lambda: batch(record(0, klen=100), 1), INVALID_RECORD),
        ("key-length-below-minus-one", lambda: batch(record(0, klen=-7), 1), INVALID_RECORD),
        ("value-length-past-record", lambda: batch(record(0, vlen=500), 1), INVALID_RECORD),
        ("value-length-below-minus-one", lambda: batch(record(0, vlen=-2), 1), INVALID_RECORD),
        ("header-count-huge", lambda: batch(record(0, hcount=2_000_000_000), 1), INVALID_RECORD),
        ("header-count-negative", lambda: batch(record(0, hcount=-1), 1), INVALID_RECORD),
        ("header-key-length-negative",
         lambda: batch(record(0, raw_body=b"\x00" + varint(0) + varint(0) + varint(1) + b"k"
                              + varint(1) + b"v" + varint(1) + varint(-3) + varint(-1)), 1),
         INVALID_RECORD),
        ("header-value-length-past-record",
         lambda: batch(record(0, raw_body=b"\x00" + varint(0) + varint(0) + varint(1) + b"k"
                              + varint(1) + b"v" + varint(1) + varint(1) + b"h" + varint(90)), 1),
         INVALID_RECORD),
        ("varint-unterminated", lambda: batch(good_body(1) + b"\xff\xff", 2), INVALID_RECORD),
        ("varint-too-long", lambda: batch(b"\xff\xff\xff\xff\xff\x01", 1), INVALID_RECORD),
        ("varint-unterminated-in-record",
         lambda: batch(record(0, raw_body=b"\x00\x80\x80"), 1), INVALID_RECORD),
        ("count-above-records", lambda: batch(good_body(2), 5), INVALID_RECORD),
        ("count-below-records", lambda: batch(good_body(4), 2), INVALID_RECORD),
        ("count-huge", lambda: batch(good_body(2), 2_000_000_000), INVALID_RECORD),
        ("trailing-bytes", lambda: batch(good_body(2) + b"\x00\x00\x00", 2), INVALID_RECORD),
        ("bytes-left-in-record", lambda: batch(record(0, extra=b"zz"), 1), INVALID_RECORD),
        ("offset-deltas-not-consecutive",
         lambda: batch(record(0) + record(5) + record(2), 3), INVALID_RECORD),
        ("last-offset-delta-mismatch",
         lambda: batch(good_body(3), 3, last_offset_delta=2_000_000_000), INVALID_RECORD),
        ("empty-records-section", lambda: batch(b"", 1), INVALID_RECORD),
    ]
    for name, codec, stream in (("gzip", codecs.GZIP, gz), ("snappy", codecs.SNAPPY, xerial),
                                ("lz4", codecs.LZ4, lz), ("zstd", codecs.ZSTD, zs)):
        out += [
            (f"{name}-garbage", lambda c=codec: batch(b"", 3, c, payload=b"\x13garbage-not-a-stream" * 3),
             CORRUPT_MESSAGE),
            (f"{name}-empty", lambda c=codec: batch(b"", 3, c, payload=b""), CORRUPT_MESSAGE),
            (f"{name}-truncated", lambda c=codec, s=stream: batch(b"", 3, c, payload=s[: len(s) * 2 // 3]),
             CORRUPT_MESSAGE),
            (f"{name}-stray-bytes", lambda c=codec, s=stream: batch(b"", 3, c, payload=s + b"\x07junk"),
             CORRUPT_MESSAGE),
            (f"{name}-bomb", lambda c=codec: batch(b"", 3, c, payload=_bomb(c)), CORRUPT_MESSAGE),
            (f"{name}-bad-records-inside",
             lambda c=codec: batch(record(0) + record(0, length=900), 2, c), INVALID_RECORD),
        ]
    out += [
        ("snappy-xerial-header-truncated",
         lambda: batch(b"", 3, codecs.SNAPPY, payload=xerial[:12]), CORRUPT_MESSAGE),
        ("snappy-xerial-block-overrun",
         lambda: batch(b"", 3, codecs.SNAPPY, payload=xerial[:16] + struct.pack(">i", 10_000) + xerial[20:]),
         CORRUPT_MESSAGE),
        ("snappy-xerial-block-negative",
         lambda: batch(b"", 3, codecs.SNAPPY, payload=xerial[:16] + struct.pack(">i", -4) + xerial[20:]),
         CORRUPT_MESSAGE),
    ]
    return out
