"""Compression codecs for RecordBatch payloads, in the framings Kafka uses.

gzip: RFC 1952; snappy: xerial framing (Java client) or raw block (accepted on read); lz4: the LZ4
frame format; zstd: a zstd frame.
"""

from __future__ import annotations

import gzip
import struct
import threading
import zlib

import cramjam
import lz4.frame
import zstandard

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
BY_NAME = {v: k for k, v in NAMES.items()}

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_zstd_c = zstandard.ZstdCompressor()


# Decompressed size used when the caller gives no bound (the broker's own logs, tools, tests).
DEFAULT_LIMIT = 1 << 30


class CorruptPayload(ValueError):
    """A compressed records payload that does not decompress (garbage, empty, truncated or
    followed by stray bytes) or that would decompress past the caller's limit."""


def decompress(codec: int, data: bytes | memoryview, limit: int = DEFAULT_LIMIT) -> bytes:
    """The records section of a batch compressed with `codec`, at most `limit` bytes long.
    Every failure is a CorruptPayload; memory use is bounded by `limit` whatever the input."""
    if codec == NONE:
        return bytes(data)
    if len(data) == 0:
        raise CorruptPayload(f"empty {NAMES.get(codec, codec)} payload")
    try:
        if codec == GZIP:
            return _gunzip(data, limit)
        if codec == SNAPPY:
            return _unsnappy(bytes(data), limit)
        if codec == LZ4:
            return _unlz4(data, limit)
        if codec == ZSTD:
            return _unzstd(bytes(data), limit)
    except CorruptPayload:
        raise
    except Exception as e:  # each library has its own error types; all mean corrupt input
        raise CorruptPayload(f"{NAMES[codec]} payload does not decompress: {e}") from None
    raise CorruptPayload(f"unknown compression codec {codec}")


# decompress_view's output buffers, one per thread, reused: on this kind of host allocating and
# faulting in a fresh 1 MiB output costs three times the lz4 decompression itself.
_scratch = threading.local()
_FIRST_SCRATCH = 1 << 20
_KEEP_SCRATCH = 8 << 20  # a buffer grown past this (a huge batch, a bomb) is not kept
_INTO = {GZIP: cramjam.gzip, LZ4: cramjam.lz4, ZSTD: cramjam.zstd}
_FULL = "failed to write whole buffer"


def decompress_view(codec: int, data: bytes | memoryview, limit: int) -> memoryview:
    """Like decompress, for a caller that only reads the records and drops them (the produce
    path's validator): the result is a view of a per-thread buffer, valid until this thread's next
    call. The buffer grows by 4x up to limit + 1 when the output does not fit; more is refused."""
    if codec == NONE:
        return memoryview(data)
    if codec == SNAPPY or codec not in _INTO:
        return memoryview(decompress(codec, data, limit))
    if len(data) == 0:
        raise CorruptPayload(f"empty {NAMES[codec]} payload")
    buf: bytearray = getattr(_scratch, "buf", None) or bytearray(_FIRST_SCRATCH)
    while True:
        try:
            n = int(_INTO[codec].decompress_into(data, buf))
            break
        except cramjam.DecompressionError as e:
            if _FULL not in str(e):
                raise CorruptPayload(f"{NAMES[codec]} payload does not decompress: {e}") from None
            if len(buf) > limit:
                raise _too_big(NAMES[codec], limit) from None
            buf = bytearray(min(4 * len(buf), limit + 1))
    _scratch.buf = buf if len(buf) <= _KEEP_SCRATCH else None
    if n > limit:
        raise _too_big(NAMES[codec], limit)
    return memoryview(buf)[:n]


def _too_big(codec: str, limit: int) -> CorruptPayload:
    return CorruptPayload(f"{codec} payload decompresses to more than {limit} bytes")


def _gunzip(data: bytes | memoryview, limit: int) -> bytes:
    out = bytearray()
    rest = bytes(data)
    while True:  # concatenated members are one stream (as Java's GZIPInputStream reads them)
        d = zlib.decompressobj(31)
        out += d.decompress(rest, limit + 1 - len(out))
        if len(out) > limit or d.unconsumed_tail:
            raise _too_big("gzip", limit)
        if not d.eof:
            raise CorruptPayload("gzip payload is truncated")
        rest = d.unused_data
        if not rest:
            return bytes(out)
        if not rest.startswith(b"\x1f\x8b"):
            raise CorruptPayload(f"{len(rest)} stray bytes after the gzip payload")


def _unsnappy(raw: bytes, limit: int) -> bytes:
    if not raw.startswith(_XERIAL_MAGIC):
        return _snappy_block(raw, limit)
    if len(raw) < 16:
        raise CorruptPayload("snappy xerial header is truncated")
    out = bytearray()
    pos = 16
    while pos < len(raw):
        if pos + 4 > len(raw):
            raise CorruptPayload("snappy xerial block length is truncated")
        (n,) = struct.unpack_from(">i", raw, pos)
        pos += 4
        if n < 0 or pos + n > len(raw):
            raise CorruptPayload(f"snappy xerial block of {n} bytes overruns the payload")
        out += _snappy_block(raw[pos : pos + n], limit - len(out))
        pos += n
    return bytes(out)


def _snappy_block(block: bytes, limit: int) -> bytes:
    if int(cramjam.snappy.decompress_raw_len(block)) > limit:  # the block's declared size
        raise _too_big("snappy", limit)
    return bytes(cramjam.snappy.decompress_raw(block))


def _unlz4(data: bytes | memoryview, limit: int) -> bytes:
    raw = bytes(data)
    declared = lz4.frame.get_frame_info(raw)["content_size"]  # 0: not given
    if declared > limit:
        raise _too_big("lz4", limit)
    d = lz4.frame.LZ4FrameDecompressor()
    # The output buffer is allocated at max_length up front: start at the declared size (or a
    # guess) and grow by doubling, so memory follows the real output, never past the limit.
    step = declared + 1 if declared else max(64 << 10, 4 * len(raw))
    parts = [d.decompress(raw, max_length=min(step, limit + 1))]
    total = len(parts[0])
    while not d.eof and not d.needs_input and total <= limit:
        step *= 2
        parts.append(d.decompress(b"", max_length=min(step, limit + 1 - total)))
        total += len(parts[-1])
    if total > limit:
        raise _too_big("lz4", limit)
    if not d.eof:
        raise CorruptPayload("lz4 payload is truncated")
    if d.unused_data:
        raise CorruptPayload(f"{len(d.unused_data)} stray bytes after the lz4 frame")
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _unzstd(raw: bytes, limit: int) -> bytes:
    size = zstandard.frame_content_size(raw)  # -1: not in the header (Java, librdkafka streams)
    if size > limit:
        raise _too_big("zstd", limit)
    dctx = zstandard.ZstdDecompressor(max_window_size=max(1 << 20, min(limit, 1 << 27)))
    out = dctx.decompress(raw, max_output_size=limit)  # whole frame or an error; bounded
    if size < 0 and len(out) > limit:
        raise _too_big("zstd", limit)
    end = _zstd_frame_end(raw)
    if end != len(raw):
        raise CorruptPayload(f"{len(raw) - end} stray bytes after the zstd frame")
    return bytes(out)


def _zstd_frame_end(raw: bytes) -> int:
    """Where the first zstd frame of raw ends (RFC 8878 3.1.1), from its header and block
    headers; called once the frame has decompressed, so the structure is known to be sound."""
    fhd = raw[4]
    did = (0, 1, 2, 4)[fhd & 3]
    single = (fhd >> 5) & 1
    fcs = (1 if single else 0, 2, 4, 8)[fhd >> 6]
    pos = 5 + (0 if single else 1) + did + fcs
    while True:
        (hdr,) = struct.unpack_from("<I", raw[pos : pos + 3] + b"\x00")
        kind, bsize = (hdr >> 1) & 3, hdr >> 3
        pos += 3 + (1 if kind == 1 else bsize)
        if hdr & 1:
            break
    return pos + (4 if fhd & 4 else 0)


def compress(codec: int, data: bytes) -> bytes:
    if codec == NONE:
        return data
    if codec == GZIP:
        return gzip.compress(data, compresslevel=6)
    if codec == SNAPPY:
        out = bytearray(_XERIAL_MAGIC + struct.pack(">ii", 1, 1))
        for i in range(0, max(len(data), 1), 32 * 1024):
            block = bytes(cramjam.snappy.compress_raw(data[i : i + 32 * 1024]))
            out += struct.pack(">i", len(block)) + block
        return bytes(out)
    if codec == LZ4:
        return bytes(lz4.frame.compress(data))
    if codec == ZSTD:
        return bytes(_zstd_c.compress(data))
    raise ValueError(f"unknown compression codec {codec}")
