"""Decoding of PostgreSQL's `pgoutput` logical replication messages (protocol version 1), the
payload of each XLogData message of the streaming replication protocol.

Every message starts with a one-byte tag: B(egin), C(ommit), R(elation), Y (type), I(nsert),
U(pdate), D(elete), T(runcate), O(rigin), M(essage). Column values come in text format (the
type's output function), which `types.py` turns into Connect values."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

PG_EPOCH_US = 946_684_800_000_000  # 2000-01-01 in microseconds since 1970-01-01

UNCHANGED_TOAST = object()  # 'u': a TOASTed value the change did not touch (not sent)

_I8 = struct.Struct("!b")
_I16 = struct.Struct("!h")
_I32 = struct.Struct("!i")
_U32 = struct.Struct("!I")
_I64 = struct.Struct("!q")
_U64 = struct.Struct("!Q")


@dataclass(frozen=True)
class Column:
    name: str
    type_oid: int
    type_modifier: int
    is_key: bool  # part of the replica identity


@dataclass(frozen=True)
class Relation:
    oid: int
    namespace: str
    name: str
    replica_identity: str  # d(efault), n(othing), f(ull), i(ndex)
    columns: tuple[Column, ...]


@dataclass(frozen=True)
class Begin:
    final_lsn: int  # the LSN of the transaction's commit record
    commit_ts_us: int  # microseconds since 1970-01-01
    xid: int


@dataclass(frozen=True)
class Commit:
    flags: int
    commit_lsn: int
    end_lsn: int  # where the next transaction's data may start: what is confirmed to the slot
    commit_ts_us: int


@dataclass(frozen=True)
class TypeInfo:
    oid: int
    namespace: str
    name: str


@dataclass(frozen=True)
class Change:
    """An insert, update or delete. `old` is the old key ('K') or full old row ('O') when sent."""

    kind: str  # "I", "U" or "D"
    relation_oid: int
    new: list[object] | None = None
    old: list[object] | None = None
    old_is_key: bool = False


@dataclass(frozen=True)
class Truncate:
    relation_oids: tuple[int, ...]
    cascade: bool
    restart_identity: bool


@dataclass(frozen=True)
class Other:
    tag: str
    data: bytes = field(repr=False, default=b"")


Message = Begin | Commit | Relation | TypeInfo | Change | Truncate | Other


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 1  # after the tag

    def i8(self) -> int:
        v = self.buf[self.pos]
        self.pos += 1
        return v

    def i16(self) -> int:
        (v,) = _I16.unpack_from(self.buf, self.pos)
        self.pos += 2
        return int(v)

    def i32(self) -> int:
        (v,) = _I32.unpack_from(self.buf, self.pos)
        self.pos += 4
        return int(v)

    def u32(self) -> int:
        (v,) = _U32.unpack_from(self.buf, self.pos)
        self.pos += 4
        return int(v)

    def i64(self) -> int:
        (v,) = _I64.unpack_from(self.buf, self.pos)
        self.pos += 8
        return int(v)

    def u64(self) -> int:
        (v,) = _U64.unpack_from(self.buf, self.pos)
        self.pos += 8
        return int(v)

    def cstr(self) -> str:
        end = self.buf.index(0, self.pos)
        s = self.buf[self.pos:end].decode("utf-8")
        self.pos = end + 1
        return s

    def tuple_data(self) -> list[object]:
        n = self.i16()
        out: list[object] = []
        buf = self.buf
        for _ in range(n):
            kind = buf[self.pos]
            self.pos += 1
            if kind == 0x74:  # 't' text
                (length,) = _I32.unpack_from(buf, self.pos)
                start = self.pos + 4
                self.pos = start + length
                out.append(buf[start:self.pos].decode("utf-8"))
            elif kind == 0x6E:  # 'n' null
                out.append(None)
            elif kind == 0x75:  # 'u' unchanged TOAST
                out.append(UNCHANGED_TOAST)
            elif kind == 0x62:  # 'b' binary (protocol 2+, not requested)
                (length,) = _I32.unpack_from(buf, self.pos)
                start = self.pos + 4
                self.pos = start + length
                out.append(bytes(buf[start:self.pos]))
            else:
                raise ValueError(f"unknown pgoutput tuple column kind {chr(kind)!r}")
        return out


def decode(payload: bytes) -> Message:
    """One pgoutput message; ValueError on a malformed one."""
    if not payload:
        raise ValueError("empty pgoutput message")
    tag = chr(payload[0])
    r = _Reader(payload)
    try:
        if tag in "IUD":
            return _change(tag, r)
        if tag == "B":
            lsn, ts, xid = r.u64(), r.i64(), r.u32()
            return Begin(lsn, ts + PG_EPOCH_US, xid)
        if tag == "C":
            flags, lsn, end, ts = r.i8(), r.u64(), r.u64(), r.i64()
            return Commit(flags, lsn, end, ts + PG_EPOCH_US)
        if tag == "R":
            oid, ns, name, ident, n = r.u32(), r.cstr(), r.cstr(), chr(r.i8()), r.i16()
            cols = []
            for _ in range(n):
                flags = r.i8()
                cname = r.cstr()
                cols.append(Column(cname, r.u32(), r.i32(), bool(flags & 1)))
            return Relation(oid, ns, name, ident, tuple(cols))
        if tag == "Y":
            return TypeInfo(r.u32(), r.cstr(), r.cstr())
        if tag == "T":
            n, opts = r.i32(), r.i8()
            return Truncate(tuple(r.u32() for _ in range(n)), bool(opts & 1), bool(opts & 2))
    except (IndexError, struct.error) as e:
        raise ValueError(f"truncated pgoutput {tag!r} message") from e
    return Other(tag, payload)


def _change(tag: str, r: _Reader) -> Change:
    oid = r.u32()
    kind = chr(r.i8())
    if tag == "I":
        if kind != "N":
            raise ValueError(f"pgoutput insert without new tuple ({kind!r})")
        return Change("I", oid, new=r.tuple_data())
    old: list[object] | None = None
    old_is_key = False
    if kind in "KO":
        old_is_key = kind == "K"
        old = r.tuple_data()
        if tag == "D":
            return Change("D", oid, old=old, old_is_key=old_is_key)
        kind = chr(r.i8())
    if tag == "D":
        raise ValueError(f"pgoutput delete without old tuple ({kind!r})")
    if kind != "N":
        raise ValueError(f"pgoutput update without new tuple ({kind!r})")
    return Change("U", oid, new=r.tuple_data(), old=old, old_is_key=old_is_key)


def lsn_text(lsn: int) -> str:
    """PostgreSQL's X/X notation of an LSN."""
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def parse_lsn(text: str) -> int:
    hi, lo = text.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)
