"""Compression codecs for RecordBatch payloads, in the framings Kafka uses.

gzip: RFC 1952; snappy: xerial framing (Java client) or raw block (accepted on read); lz4: the LZ4
frame format; zstd: a zstd frame.
"""

from __future__ import annotations

import gzip
import struct

import cramjam
import lz4.frame
import zstandard

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
BY_NAME = {v: k for k, v in NAMES.items()}

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_zstd_c = zstandard.ZstdCompressor()


def decompress(codec: int, data: bytes | memoryview) -> bytes:
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        return gzip.decompress(data)
    if codec == SNAPPY:
        raw = bytes(data)
        if raw.startswith(_XERIAL_MAGIC):
            out = bytearray()
            pos = 16
            while pos < len(raw):
                (n,) = struct.unpack_from(">i", raw, pos)
                pos += 4
                out += bytes(cramjam.snappy.decompress_raw(raw[pos : pos + n]))
                pos += n
            return bytes(out)
        return bytes(cramjam.snappy.decompress_raw(raw))
    if codec == LZ4:
        return bytes(lz4.frame.decompress(bytes(data)))
    if codec == ZSTD:
        return bytes(zstandard.ZstdDecompressor().decompressobj().decompress(bytes(data)))
    raise ValueError(f"unknown compression codec {codec}")


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
