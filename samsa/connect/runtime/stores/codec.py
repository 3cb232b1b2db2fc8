"""The bytes of the internal topics: Kafka Connect writes keys as UTF-8 strings (config and status
topics) or schemaless JSON (offsets), and values with JsonConverter, schemas.enable=false, which
emits compact JSON (Jackson's default: no spaces, non-ASCII as UTF-8). Also Kafka's murmur2, the
default partitioner's hash, which places offsets records."""

from __future__ import annotations

import base64
import json
from typing import Any


def _default(o: object) -> Any:
    if isinstance(o, bytes | bytearray):
        return base64.b64encode(o).decode("ascii")  # Jackson writes a binary node as base64
    raise TypeError(f"{type(o).__name__} is not JSON serializable")


def dumps(value: Any) -> bytes:
    """A value as JsonConverter(schemas.enable=false) serializes it; None is a tombstone."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False,
                      default=_default).encode("utf-8")


def loads(data: bytes | None) -> Any:
    """The inverse of `dumps`; None (a tombstone) stays None."""
    if data is None:
        return None
    return json.loads(data.decode("utf-8"))


def canonical(value: Any) -> bytes:
    """One spelling for equal JSON values (sorted object keys): two writers that put a source
    partition's keys in a different order still name the same partition."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True,
                      default=_default).encode("utf-8")


def key_str(key: bytes | str | None) -> str | None:
    if key is None or isinstance(key, str):
        return key
    return key.decode("utf-8", errors="replace")


def murmur2(data: bytes) -> int:
    """Kafka's Utils.murmur2 (seed 0x9747b28c) as a signed 32-bit int."""
    m = 0x5BD1E995
    length = len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    n4 = length // 4
    for i in range(n4):
        k = int.from_bytes(data[4 * i:4 * i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> 24
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    rest = length % 4
    tail = data[4 * n4:]
    if rest == 3:
        h ^= tail[2] << 16
    if rest >= 2:
        h ^= tail[1] << 8
    if rest >= 1:
        h ^= tail[0]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def default_partition(key: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner picks for a keyed record."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions
