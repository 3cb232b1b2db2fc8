"""The log cleaner's inner loops over the records of a decompressed batch, in plain Python.

Every record of the cleaned range goes through one of these, so they decode only what they need
and inline the 1- and 2-byte varints that nearly all record fields use (a record's fields are
zigzag varints: length, attributes byte, timestamp delta, offset delta, key length, key, value
length, value, headers). The sign of a zigzag varint is the low bit of its first byte, which is
all that is needed of the key and value lengths' signs.
"""

from __future__ import annotations

from samsa.protocol.records import _uvarint_at


def _skip_varint(pl: bytes, p: int) -> int:
    while pl[p] & 0x80:
        p += 1
    return p + 1


def index_keys(pl: bytes, count: int, base: int, offsets: dict[bytes, int],
               long_key: object) -> None:
    """offsets[key] = offset for every keyed record (later records overwrite earlier ones).
    `long_key` maps keys longer than 32 bytes to their map key."""
    p = 0
    hashed = long_key
    for _ in range(count):
        b = pl[p]
        if b < 0x80:
            n = b
            p += 1
        else:
            c = pl[p + 1]
            if c < 0x80:
                n = (b & 0x7F) | (c << 7)
                p += 2
            else:
                n, p = _uvarint_at(pl, p)
        end = p + (n >> 1)
        p += 1  # attributes
        while pl[p] & 0x80:  # timestamp delta
            p += 1
        p += 1
        b = pl[p]
        if b < 0x80:
            n = b
            p += 1
        else:
            c = pl[p + 1]
            if c < 0x80:
                n = (b & 0x7F) | (c << 7)
                p += 2
            else:
                n, p = _uvarint_at(pl, p)
        off = base + ((n >> 1) ^ -(n & 1))
        b = pl[p]
        if not b & 1:  # the key is not null
            if b < 0x80:
                n = b
                p += 1
            else:
                c = pl[p + 1]
                if c < 0x80:
                    n = (b & 0x7F) | (c << 7)
                    p += 2
                else:
                    n, p = _uvarint_at(pl, p)
            klen = n >> 1
            if klen <= 32:
                offsets[pl[p : p + klen]] = off
            else:
                offsets[hashed(pl[p : p + klen])] = off  # type: ignore[operator]
        p = end
    if p != len(pl):
        raise ValueError("records do not fill their batch")


def select_records(pl: bytes, count: int, base: int, latest: int, offsets: dict[bytes, int],
                   retain_deletes: bool, long_key: object) -> tuple[list[int], bool, int]:
    """The records to keep: (flat [start, end, start, end, ...] of kept records, whether a kept
    record is a tombstone, number of keyless records dropped). A record stays when it is above the
    map's end (`latest`), or keyed, at least as new as its key's mapped offset, and either has a
    value or may still be a tombstone."""
    kept: list[int] = []
    tomb = False
    invalid = 0
    p = 0
    get = offsets.get
    hashed = long_key
    for _ in range(count):
        start = p
        b = pl[p]
        if b < 0x80:
            n = b
            p += 1
        else:
            c = pl[p + 1]
            if c < 0x80:
                n = (b & 0x7F) | (c << 7)
                p += 2
            else:
                n, p = _uvarint_at(pl, p)
        end = p + (n >> 1)
        p += 1
        while pl[p] & 0x80:
            p += 1
        p += 1
        b = pl[p]
        if b < 0x80:
            n = b
            p += 1
        else:
            c = pl[p + 1]
            if c < 0x80:
                n = (b & 0x7F) | (c << 7)
                p += 2
            else:
                n, p = _uvarint_at(pl, p)
        off = base + ((n >> 1) ^ -(n & 1))
        b = pl[p]
        if b & 1:  # no key
            if off > latest:
                p = _skip_varint(pl, p)
                vb = pl[p]
                kept.append(start)
                kept.append(end)
                tomb = tomb or bool(vb & 1)
            else:
                invalid += 1
            p = end
            continue
        if b < 0x80:
            n = b
            p += 1
        else:
            c = pl[p + 1]
            if c < 0x80:
                n = (b & 0x7F) | (c << 7)
                p += 2
            else:
                n, p = _uvarint_at(pl, p)
        klen = n >> 1
        vb = pl[p + klen]
        is_tomb = bool(vb & 1)
        if off > latest or (
                off >= get(pl[p : p + klen] if klen <= 32 else hashed(pl[p : p + klen]), -1)  # type: ignore[operator]
                and (retain_deletes or not is_tomb)):
            kept.append(start)
            kept.append(end)
            tomb = tomb or is_tomb
        p = end
    if p != len(pl):
        raise ValueError("records do not fill their batch")
    return kept, tomb, invalid


def timestamp_delta(pl: bytes, start: int) -> tuple[int, int]:
    """(timestamp delta, position after it) of the record at `start`."""
    p = _skip_varint(pl, start) + 1
    n, q = _uvarint_at(pl, p)
    return (n >> 1) ^ -(n & 1), q
