"""The file Kafka Connect's standalone worker keeps its offsets in (`offset.storage.file.filename`):
a `java.util.HashMap<byte[], byte[]>` written with Java object serialization. Writing and reading
that one shape (Java's Object Serialization Stream Protocol, only the parts it uses) lets a
standalone worker's offsets move between Kafka Connect and Samsa in both directions."""

from __future__ import annotations

import struct

MAGIC = b"\xac\xed\x00\x05"
TC_NULL, TC_REFERENCE, TC_CLASSDESC, TC_OBJECT = 0x70, 0x71, 0x72, 0x73
TC_ARRAY, TC_BLOCKDATA, TC_ENDBLOCKDATA, TC_BLOCKDATALONG = 0x75, 0x77, 0x78, 0x7A
BASE_HANDLE = 0x7E0000
SC_WRITE_METHOD, SC_SERIALIZABLE = 0x01, 0x02
HASHMAP_UID = 362498820763181265
BYTE_ARRAY_UID = -5984413125824719648


class JavaSerError(ValueError):
    """Not a serialized HashMap of byte arrays (or a truncated one)."""


def _utf(s: str) -> bytes:
    b = s.encode("utf-8")
    return struct.pack(">H", len(b)) + b


def dump_byte_map(entries: list[tuple[bytes | None, bytes | None]]) -> bytes:
    """What ObjectOutputStream.writeObject(HashMap<byte[], byte[]>) writes for these entries."""
    size = len(entries)
    capacity = 16
    while capacity * 0.75 < size:
        capacity *= 2
    out = bytearray(MAGIC)
    out += bytes([TC_OBJECT, TC_CLASSDESC]) + _utf("java.util.HashMap")
    out += struct.pack(">qB", HASHMAP_UID, SC_WRITE_METHOD | SC_SERIALIZABLE)
    out += struct.pack(">H", 2)  # fields, primitives sorted by name
    out += b"F" + _utf("loadFactor") + b"I" + _utf("threshold")
    out += bytes([TC_ENDBLOCKDATA, TC_NULL])  # no annotations, no serializable superclass
    # handles: 0 the class descriptor, 1 the map, 2 the byte[] descriptor, then each array
    out += struct.pack(">fi", 0.75, int(capacity * 0.75) if size else 0)
    out += bytes([TC_BLOCKDATA, 8]) + struct.pack(">ii", capacity, size)
    desc_written = False
    for pair in entries:
        for item in pair:
            if item is None:
                out.append(TC_NULL)
                continue
            out.append(TC_ARRAY)
            if not desc_written:
                out += bytes([TC_CLASSDESC]) + _utf("[B")
                out += struct.pack(">qBH", BYTE_ARRAY_UID, SC_SERIALIZABLE, 0)
                out += bytes([TC_ENDBLOCKDATA, TC_NULL])
                desc_written = True
            else:
                out += bytes([TC_REFERENCE]) + struct.pack(">i", BASE_HANDLE + 2)
            out += struct.pack(">i", len(item)) + item
    out.append(TC_ENDBLOCKDATA)
    return bytes(out)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0
        self.handles: list[object] = []

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise JavaSerError("truncated")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def u8(self) -> int:
        return self.take(1)[0]

    def unpack(self, fmt: str) -> tuple[int | float, ...]:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))

    def utf(self) -> str:
        (n,) = self.unpack(">H")
        return self.take(int(n)).decode("utf-8", errors="replace")

    def class_desc(self) -> tuple[str, list[tuple[str, str]]]:
        tc = self.u8()
        if tc == TC_NULL:
            return ("", [])
        if tc == TC_REFERENCE:
            return self._ref(tuple)  # type: ignore[return-value]
        if tc != TC_CLASSDESC:
            raise JavaSerError(f"expected a class descriptor, found 0x{tc:02x}")
        name = self.utf()
        self.take(8 + 1)  # serialVersionUID, flags
        desc: tuple[str, list[tuple[str, str]]] = (name, [])
        self.handles.append(desc)
        (nfields,) = self.unpack(">H")
        for _ in range(int(nfields)):
            code = chr(self.u8())
            fname = self.utf()
            if code in "L[":
                self.value()  # the field's type name, a string object
            desc[1].append((code, fname))
        if self.u8() != TC_ENDBLOCKDATA:  # class annotations: none expected
            raise JavaSerError("class annotations are not supported")
        self.class_desc()  # superclass
        return desc

    def _ref(self, kind: type) -> object:
        (h,) = self.unpack(">i")
        i = int(h) - BASE_HANDLE
        if not 0 <= i < len(self.handles) or not isinstance(self.handles[i], kind):
            raise JavaSerError(f"bad handle 0x{int(h):x}")
        return self.handles[i]

    def value(self) -> object:
        tc = self.u8()
        if tc == TC_NULL:
            return None
        if tc == TC_REFERENCE:
            return self._ref(object)
        if tc == 0x74:  # TC_STRING
            s = self.utf()
            self.handles.append(s)
            return s
        if tc == TC_ARRAY:
            name, _ = self.class_desc()
            if name != "[B":
                raise JavaSerError(f"expected byte[], found {name}")
            (n,) = self.unpack(">i")
            self.handles.append(b"")
            idx = len(self.handles) - 1
            arr = self.take(int(n))
            self.handles[idx] = arr
            return arr
        raise JavaSerError(f"unexpected type code 0x{tc:02x}")

    def block(self) -> bytes:
        tc = self.u8()
        if tc == TC_BLOCKDATA:
            return self.take(self.u8())
        if tc == TC_BLOCKDATALONG:
            (n,) = self.unpack(">i")
            return self.take(int(n))
        raise JavaSerError(f"expected block data, found 0x{tc:02x}")


def load_byte_map(data: bytes) -> list[tuple[bytes | None, bytes | None]]:
    """The entries of a serialized HashMap<byte[], byte[]>."""
    r = _Reader(data)
    if r.take(4) != MAGIC:
        raise JavaSerError("not a Java serialization stream")
    if r.u8() != TC_OBJECT:
        raise JavaSerError("not an object")
    name, fields = r.class_desc()
    if name != "java.util.HashMap":
        raise JavaSerError(f"expected java.util.HashMap, found {name}")
    r.handles.append("map")
    for code, _ in fields:
        r.take({"F": 4, "I": 4}.get(code, 0) or _bad_field(code))
    blk = r.block()
    if len(blk) < 8:
        raise JavaSerError("short HashMap header")
    (size,) = struct.unpack(">i", blk[4:8])
    if size < 0:
        raise JavaSerError("negative size")
    out: list[tuple[bytes | None, bytes | None]] = []
    for _ in range(size):
        k, v = r.value(), r.value()
        if not isinstance(k, bytes | None) or not isinstance(v, bytes | None):
            raise JavaSerError("entries must be byte arrays")
        out.append((k, v))
    return out


def _bad_field(code: str) -> int:
    raise JavaSerError(f"unexpected HashMap field type {code}")
