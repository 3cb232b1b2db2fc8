"""The CDC source's pure parts: pgoutput message decoding (bytes laid out as PostgreSQL's
protocol documentation describes them) and text -> Debezium value conversions."""

from __future__ import annotations

import struct

import pytest

from samsa.connect.connectors.postgres_cdc.pgoutput import (
    PG_EPOCH_US,
    UNCHANGED_TOAST,
    Begin,
    Change,
    Commit,
    Relation,
    Truncate,
    decode,
    lsn_text,
    parse_lsn,
)
from samsa.connect.connectors.postgres_cdc.types import (
    interval_micros,
    micro_timestamp,
    parse_array,
    time_micros,
    zoned_time,
    zoned_timestamp,
)


def _tuple(*cols: bytes | None | str) -> bytes:
    out = struct.pack("!h", len(cols))
    for c in cols:
        if c is None:
            out += b"n"
        elif c == "u":
            out += b"u"
        else:
            assert isinstance(c, bytes)
            out += b"t" + struct.pack("!i", len(c)) + c
    return out


def test_begin_commit_relation() -> None:
    b = decode(b"B" + struct.pack("!QqI", 0x1_0000_0010, 5, 77))
    assert b == Begin(0x1_0000_0010, 5 + PG_EPOCH_US, 77)
    c = decode(b"C" + struct.pack("!bQQq", 0, 100, 120, 9))
    assert c == Commit(0, 100, 120, 9 + PG_EPOCH_US)
    rel = decode(b"R" + struct.pack("!I", 16384) + b"public\0items\0" + b"d" + struct.pack("!h", 2)
                 + b"\x01id\0" + struct.pack("!Ii", 23, -1)
                 + b"\x00note\0" + struct.pack("!Ii", 25, -1))
    assert isinstance(rel, Relation)
    assert (rel.namespace, rel.name, rel.replica_identity) == ("public", "items", "d")
    assert [(c.name, c.type_oid, c.is_key) for c in rel.columns] == \
        [("id", 23, True), ("note", 25, False)]


def test_insert_update_delete_truncate() -> None:
    ins = decode(b"I" + struct.pack("!I", 7) + b"N" + _tuple(b"1", None))
    assert ins == Change("I", 7, new=["1", None])
    upd = decode(b"U" + struct.pack("!I", 7) + b"K" + _tuple(b"1", None) + b"N"
                 + _tuple(b"2", "u"))
    assert isinstance(upd, Change) and upd.old == ["1", None] and upd.old_is_key
    assert upd.new == ["2", UNCHANGED_TOAST]
    full = decode(b"U" + struct.pack("!I", 7) + b"O" + _tuple(b"1", b"a") + b"N" + _tuple(b"1", b"b"))
    assert isinstance(full, Change) and full.old == ["1", "a"] and not full.old_is_key
    assert decode(b"U" + struct.pack("!I", 7) + b"N" + _tuple(b"3", b"c")) == \
        Change("U", 7, new=["3", "c"])
    dele = decode(b"D" + struct.pack("!I", 7) + b"K" + _tuple(b"1", None))
    assert dele == Change("D", 7, old=["1", None], old_is_key=True)
    tr = decode(b"T" + struct.pack("!ib", 2, 1) + struct.pack("!II", 7, 8))
    assert tr == Truncate((7, 8), True, False)
    with pytest.raises(ValueError):
        decode(b"I" + struct.pack("!I", 7) + b"N" + struct.pack("!h", 1) + b"t\0\0")


def test_lsn_text_round_trip() -> None:
    assert lsn_text(0x1_0000_00A0) == "1/A0"
    assert parse_lsn("16/B374D848") == (0x16 << 32) | 0xB374D848


def test_text_conversions() -> None:
    assert parse_array('{1,2,NULL}', int) == [1, 2, None]
    assert parse_array('{"a b","c\\"d",e}', str) == ["a b", 'c"d', "e"]
    assert parse_array('{{1,2},{3,4}}', int) == [[1, 2], [3, 4]]
    assert parse_array("{}", int) == []
    assert zoned_timestamp("2024-01-02 03:04:05.120000+02") == "2024-01-02T01:04:05.12Z"
    assert zoned_timestamp("2024-01-02 03:04:05+00") == "2024-01-02T03:04:05Z"
    assert micro_timestamp("1970-01-01 00:00:01.5") == 1_500_000
    assert time_micros("01:02:03.25") == 3_723_250_000
    assert zoned_time("10:00:00+02") == "08:00:00Z"
    assert interval_micros("P1DT2H") == (26 * 3600) * 1_000_000
    assert interval_micros("PT-1.5S") == -1_500_000
    assert interval_micros("P1M") == int(30.4375 * 86_400_000_000)
