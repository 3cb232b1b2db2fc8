"""The bytes of a metadata snapshot: what FileRaftLog stores in `<offset>-<epoch>.checkpoint` and
FetchSnapshot ships to a node that fell behind.

Layout (Samsa's own): the 8-byte magic `SMSNAP\\x00\\x01`, a 4-byte big-endian record count, each
record as an unsigned varint length then its `records.encode` bytes (ApiMessageAndVersion), and a
CRC32C (4 bytes, big-endian) of everything before it. Kafka's own `.checkpoint` files are record
batches framed by SnapshotHeader/SnapshotFooter control records; Samsa's differ, so a Kafka
node cannot load a Samsa snapshot (nor the other way round). The records inside are Kafka's.
"""

from __future__ import annotations

import struct

import crc32c

from samsa.protocol.varint import uvarint

from .image import MetadataImage
from .records import MetadataRecordError, Record, decode, encode

MAGIC = b"SMSNAP\x00\x01"
_COUNT = struct.Struct(">I")


def encode_snapshot(image: MetadataImage) -> bytes:
    """The image as snapshot bytes: the records that rebuild it from empty."""
    out = bytearray(MAGIC)
    recs = image.to_records()
    out += _COUNT.pack(len(recs))
    for r in recs:
        b = encode(r)
        out += uvarint(len(b))
        out += b
    out += _COUNT.pack(crc32c.crc32c(bytes(out)))
    return bytes(out)


def decode_snapshot(data: bytes) -> list[Record]:
    """The records of a snapshot, in order; MetadataRecordError if it is damaged or not one."""
    view = memoryview(data)
    if len(view) < len(MAGIC) + 8 or bytes(view[: len(MAGIC)]) != MAGIC:
        raise MetadataRecordError("not a Samsa metadata snapshot")
    body = len(view) - 4
    (crc,) = _COUNT.unpack_from(view, body)
    if crc32c.crc32c(view[:body]) != crc:
        raise MetadataRecordError("metadata snapshot fails its CRC")
    (count,) = _COUNT.unpack_from(view, len(MAGIC))
    pos = len(MAGIC) + 4
    out: list[Record] = []
    for _ in range(count):
        size, pos = _uvarint(view, pos, body)
        if size > body - pos:
            raise MetadataRecordError("snapshot record overruns the snapshot")
        out.append(decode(view[pos : pos + size]))
        pos += size
    if pos != body:
        raise MetadataRecordError(f"{body - pos} byte(s) after the snapshot's records")
    return out


def _uvarint(view: memoryview, pos: int, end: int) -> tuple[int, int]:
    v = shift = 0
    for _ in range(5):
        if pos >= end:
            break
        b = view[pos]
        pos += 1
        v |= (b & 0x7F) << shift
        if not b & 0x80:
            return v, pos
        shift += 7
    raise MetadataRecordError("bad record length in snapshot")
