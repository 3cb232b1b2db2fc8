"""Unsigned varints (compact lengths, counts and tag numbers of the flexible protocol versions)."""

from __future__ import annotations

_SMALL_UVARINTS = [bytes((i,)) for i in range(0x80)]


def uvarint(n: int) -> bytes:
    """Encode n (>= 0) as an unsigned varint."""
    if n < 0x80:
        return _SMALL_UVARINTS[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)
