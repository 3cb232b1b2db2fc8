"""KRaft's metadata record types, as Kafka defines them (metadata/src/main/resources/common/metadata).

Each record is a frozen dataclass whose fields are Kafka's field names in snake_case. On the wire
and on disk a record is framed as Kafka's ApiMessageAndVersion: unsigned varint frame version (1,
the only one Kafka reads), unsigned varint record type (the `API_KEY` below), unsigned varint
record version, then the record's body in the flexible (compact, tagged-field) encoding of that
version. Nothing may follow the body.

`encode(record) -> bytes` and `decode(data) -> Record` are the only entry points the rest of
Samsa uses; `decode` raises `MetadataRecordError` for anything malformed or unknown.

Versions: `encode` writes, per record, the lowest version of its type that holds every field set
(e.g. PartitionRecord v0, v1 once `directories` is set, v2 once the KIP-966 ELR fields are set;
RegisterBrokerRecord always v3, as Kafka 3.7+ writes). `decode` reads every version Kafka 3.7-4.0
writes (`MAX_VERSIONS`) and skips tagged fields it does not know, as Kafka's readers do.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar, TypeVar

from samsa.protocol.varint import uvarint

NO_LEADER = -1
NO_LEADER_CHANGE = -2  # PartitionChangeRecord.leader: "unchanged"

# ConfigRecord.resource_type, as in Kafka's ConfigResource.Type
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4

FRAME_VERSION = 1  # AbstractApiMessageSerde's frame version; Kafka rejects 0 (the 2.8 preview's)
MAX_STRING = 0x7FFF  # Kafka's limit on a string field's UTF-8 length
_T = TypeVar("_T")


class MetadataRecordError(ValueError):
    """Bytes that are not a metadata record Samsa knows (unknown type, bad version, truncated)."""


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    name: str  # listener name, e.g. PLAINTEXT
    host: str
    port: int
    security_protocol: int = 0  # 0 PLAINTEXT, 1 SSL, 2 SASL_PLAINTEXT, 3 SASL_SSL


@dataclass(frozen=True, slots=True)
class BrokerFeature:
    name: str
    min_supported_version: int
    max_supported_version: int


@dataclass(frozen=True, slots=True)
class RegisterBrokerRecord:
    API_KEY: ClassVar[int] = 0
    broker_id: int
    incarnation_id: uuid.UUID
    broker_epoch: int
    endpoints: tuple[BrokerEndpoint, ...] = ()
    features: tuple[BrokerFeature, ...] = ()
    rack: str | None = None
    fenced: bool = True
    in_controlled_shutdown: bool = False
    is_migrating_zk_broker: bool = False  # v2+
    log_dirs: tuple[uuid.UUID, ...] = ()  # v3+, tag 0


@dataclass(frozen=True, slots=True)
class UnregisterBrokerRecord:
    API_KEY: ClassVar[int] = 1
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class TopicRecord:
    API_KEY: ClassVar[int] = 2
    name: str
    topic_id: uuid.UUID


@dataclass(frozen=True, slots=True)
class PartitionRecord:
    API_KEY: ClassVar[int] = 3
    partition_id: int
    topic_id: uuid.UUID
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    leader_recovery_state: int = 0  # tag 0: 1 while recovering from an unclean election
    directories: tuple[uuid.UUID, ...] = ()  # v1+: the log dir of each replica (KIP-858)
    eligible_leader_replicas: tuple[int, ...] | None = None  # v2+, tag 1 (KIP-966)
    last_known_elr: tuple[int, ...] | None = None  # v2+, tag 2


@dataclass(frozen=True, slots=True)
class ConfigRecord:
    API_KEY: ClassVar[int] = 4
    resource_type: int  # TOPIC_RESOURCE or BROKER_RESOURCE
    resource_name: str  # topic name; broker id as a string, or "" for the cluster-wide default
    name: str
    value: str | None  # None deletes the setting


@dataclass(frozen=True, slots=True)
class PartitionChangeRecord:
    """A change to one partition; fields left at their defaults are unchanged."""

    API_KEY: ClassVar[int] = 5
    partition_id: int
    topic_id: uuid.UUID
    isr: tuple[int, ...] | None = None
    leader: int = NO_LEADER_CHANGE
    replicas: tuple[int, ...] | None = None
    removing_replicas: tuple[int, ...] | None = None
    adding_replicas: tuple[int, ...] | None = None
    leader_recovery_state: int = -1  # tag 5; -1 unchanged
    directories: tuple[uuid.UUID, ...] | None = None  # v1+, tag 8
    eligible_leader_replicas: tuple[int, ...] | None = None  # v2+, tag 6
    last_known_elr: tuple[int, ...] | None = None  # v2+, tag 7


@dataclass(frozen=True, slots=True)
class FenceBrokerRecord:
    API_KEY: ClassVar[int] = 7
    id: int
    epoch: int


@dataclass(frozen=True, slots=True)
class UnfenceBrokerRecord:
    API_KEY: ClassVar[int] = 8
    id: int
    epoch: int


@dataclass(frozen=True, slots=True)
class RemoveTopicRecord:
    API_KEY: ClassVar[int] = 9
    topic_id: uuid.UUID


@dataclass(frozen=True, slots=True)
class FeatureLevelRecord:
    API_KEY: ClassVar[int] = 12
    name: str
    feature_level: int


@dataclass(frozen=True, slots=True)
class ProducerIdsRecord:
    API_KEY: ClassVar[int] = 15
    broker_id: int
    broker_epoch: int
    next_producer_id: int


@dataclass(frozen=True, slots=True)
class BrokerRegistrationChangeRecord:
    """fenced: 1 fenced, -1 unfenced, 0 no change; in_controlled_shutdown: 1 entered, 0 no change
    (Kafka's BrokerRegistrationFencingChange / BrokerRegistrationInControlledShutdownChange)."""

    API_KEY: ClassVar[int] = 17
    broker_id: int
    broker_epoch: int
    fenced: int = 0  # tag 0
    in_controlled_shutdown: int = 0  # v1+, tag 1
    log_dirs: tuple[uuid.UUID, ...] = ()  # v2+, tag 2; empty: unchanged


# ---- ACLs (issue 17): Kafka's AccessControlEntryRecord / RemoveAccessControlEntryRecord
@dataclass(frozen=True, slots=True)
class AccessControlEntryRecord:
    API_KEY: ClassVar[int] = 18
    id: uuid.UUID
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


@dataclass(frozen=True, slots=True)
class RemoveAccessControlEntryRecord:
    API_KEY: ClassVar[int] = 19
    id: uuid.UUID
# ---- quotas (helper "quotas"): Kafka's ClientQuotaRecord ---------------------------------------
@dataclass(frozen=True, slots=True)
class ClientQuotaRecord:
    """One quota of one client entity: `entity` is ((type, name), ...) with type "user" or
    "client-id" and name None for the entity type's default; `remove` drops the quota."""

    API_KEY: ClassVar[int] = 14
    entity: tuple[tuple[str, str | None], ...]
    key: str
    value: float
    remove: bool = False


@dataclass(frozen=True, slots=True)
class NoOpRecord:
    API_KEY: ClassVar[int] = 20


# -- SASL/SCRAM credentials (KIP-554), as Kafka's UserScramCredentialRecord (11) and
# RemoveUserScramCredentialRecord (22); mechanism 1 SCRAM-SHA-256, 2 SCRAM-SHA-512 --
@dataclass(frozen=True, slots=True)
class UserScramCredentialRecord:
    API_KEY: ClassVar[int] = 11
    name: str
    mechanism: int
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


@dataclass(frozen=True, slots=True)
class RemoveUserScramCredentialRecord:
    API_KEY: ClassVar[int] = 22
    name: str
    mechanism: int


def _w_compact_bytes(w: _Writer, b: bytes) -> None:
    w.uvarint(len(b) + 1)
    w.out += b


def _r_compact_bytes(r: _Reader) -> bytes:
    n = r.uvarint()
    if n == 0:
        raise MetadataRecordError("null bytes field in a SCRAM credential record")
    return r._take(n - 1)


def _w_scram(w: _Writer, rec: UserScramCredentialRecord | RemoveUserScramCredentialRecord) -> None:
    w.string(rec.name)
    w.i8(rec.mechanism)
    if isinstance(rec, UserScramCredentialRecord):
        _w_compact_bytes(w, rec.salt)
        _w_compact_bytes(w, rec.stored_key)
        _w_compact_bytes(w, rec.server_key)
        w.i32(rec.iterations)


def _r_scram(r: _Reader) -> UserScramCredentialRecord:
    return UserScramCredentialRecord(r.string(), r.i8(), _r_compact_bytes(r), _r_compact_bytes(r),
                                     _r_compact_bytes(r), r.i32())


Record = (RegisterBrokerRecord | UnregisterBrokerRecord | TopicRecord | PartitionRecord
          | ConfigRecord | PartitionChangeRecord | FenceBrokerRecord | UnfenceBrokerRecord
          | RemoveTopicRecord | FeatureLevelRecord | ProducerIdsRecord
          | BrokerRegistrationChangeRecord | NoOpRecord | ClientQuotaRecord
          | UserScramCredentialRecord | RemoveUserScramCredentialRecord
          | AccessControlEntryRecord | RemoveAccessControlEntryRecord)

# highest version decode accepts per api key: what Kafka 3.7-4.0 write
MAX_VERSIONS: dict[int, int] = {0: 3, 1: 0, 2: 0, 3: 2, 4: 0, 5: 2, 7: 0, 8: 0, 9: 0, 12: 0,
                                15: 0, 17: 2, 20: 0, 14: 1, 11: 0, 22: 0,
                                18: 0, 19: 0}  # ACLs


# ---------------------------------------------------------------------------------------- writing
class _Writer:
    """Flexible-version primitives; every range error becomes a MetadataRecordError."""

    __slots__ = ("out",)

    def __init__(self) -> None:
        self.out = bytearray()

    def _pack(self, fmt: str, v: int) -> None:
        try:
            self.out += struct.pack(fmt, v)
        except struct.error:
            raise MetadataRecordError(f"value {v!r} out of range for {fmt}") from None

    def i8(self, v: int) -> None:
        self._pack(">b", v)

    def i16(self, v: int) -> None:
        self._pack(">h", v)

    def u16(self, v: int) -> None:
        self._pack(">H", v)

    def i32(self, v: int) -> None:
        self._pack(">i", v)

    def i64(self, v: int) -> None:
        self._pack(">q", v)

    def boolean(self, v: bool) -> None:
        self.out.append(1 if v else 0)

    def f64(self, v: float) -> None:
        self.out += struct.pack(">d", v)

    def uvarint(self, n: int) -> None:
        self.out += uvarint(n)

    def uid(self, v: uuid.UUID) -> None:
        self.out += v.bytes

    def string(self, v: str | None) -> None:
        if v is None:
            self.out.append(0)
            return
        b = v.encode()
        if len(b) > MAX_STRING:
            raise MetadataRecordError(f"string of {len(b)} bytes is longer than {MAX_STRING}")
        self.uvarint(len(b) + 1)
        self.out += b

    def i32s(self, v: tuple[int, ...] | None) -> None:
        if v is None:
            self.out.append(0)
            return
        self.uvarint(len(v) + 1)
        for x in v:
            self.i32(x)

    def uids(self, v: tuple[uuid.UUID, ...] | None) -> None:
        if v is None:
            self.out.append(0)
            return
        self.uvarint(len(v) + 1)
        for x in v:
            self.uid(x)

    def tags(self, fields: list[tuple[int, Callable[[_Writer], None]]]) -> None:
        """The tagged-field section: (tag, writer of its value) in ascending tag order."""
        self.uvarint(len(fields))
        for tag, write in fields:
            w = _Writer()
            write(w)
            self.uvarint(tag)
            self.uvarint(len(w.out))
            self.out += w.out


# ---------------------------------------------------------------------------------------- reading
class _Reader:
    """Bounds-checked flexible-version primitives: any overrun is a MetadataRecordError."""

    __slots__ = ("data", "pos", "end")

    def __init__(self, data: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None) -> None:
        self.data = data
        self.pos = pos
        self.end = len(data) if end is None else end

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > self.end:
            raise MetadataRecordError("truncated record")
        b = bytes(self.data[self.pos : self.pos + n])
        self.pos += n
        return b

    def _unpack(self, fmt: str, n: int) -> int:
        v: int = struct.unpack(fmt, self._take(n))[0]
        return v

    def i8(self) -> int:
        return self._unpack(">b", 1)

    def i16(self) -> int:
        return self._unpack(">h", 2)

    def u16(self) -> int:
        return self._unpack(">H", 2)

    def i32(self) -> int:
        return self._unpack(">i", 4)

    def i64(self) -> int:
        return self._unpack(">q", 8)

    def f64(self) -> float:
        v: float = struct.unpack(">d", self._take(8))[0]
        return v

    def boolean(self) -> bool:
        b = self._take(1)[0]
        if b > 1:
            raise MetadataRecordError(f"bad boolean byte {b}")
        return b == 1

    def uvarint(self) -> int:
        """An unsigned varint of at most 5 bytes (Kafka's readUnsignedVarint: a 32-bit value)."""
        v = shift = 0
        for _ in range(5):
            b = self._take(1)[0]
            v |= (b & 0x7F) << shift
            if not b & 0x80:
                if v > 0xFFFFFFFF:
                    break
                return v
            shift += 7
        raise MetadataRecordError("varint too long")

    def uid(self) -> uuid.UUID:
        return uuid.UUID(bytes=self._take(16))

    def _length(self, what: str, elem: int) -> int | None:
        """A compact length: None for null; checked against the bytes left."""
        n = self.uvarint()
        if n == 0:
            return None
        n -= 1
        if n * elem > self.end - self.pos:
            raise MetadataRecordError(f"{what} of {n} overruns the record")
        return n

    def string(self) -> str:
        s = self.nullable_string()
        if s is None:
            raise MetadataRecordError("null in a non-nullable string")
        return s

    def nullable_string(self) -> str | None:
        n = self._length("string", 1)
        if n is None:
            return None
        if n > MAX_STRING:
            raise MetadataRecordError(f"string of {n} bytes is longer than {MAX_STRING}")
        try:
            return self._take(n).decode()
        except UnicodeDecodeError:
            raise MetadataRecordError("string is not UTF-8") from None

    def i32s(self) -> tuple[int, ...]:
        v = self.nullable_i32s()
        if v is None:
            raise MetadataRecordError("null in a non-nullable array")
        return v

    def nullable_i32s(self) -> tuple[int, ...] | None:
        n = self._length("array", 4)
        if n is None:
            return None
        return struct.unpack(f">{n}i", self._take(4 * n))

    def uids(self) -> tuple[uuid.UUID, ...]:
        v = self.nullable_uids()
        if v is None:
            raise MetadataRecordError("null in a non-nullable array")
        return v

    def nullable_uids(self) -> tuple[uuid.UUID, ...] | None:
        n = self._length("array", 16)
        if n is None:
            return None
        return tuple(self.uid() for _ in range(n))

    def structs(self, read_one: Callable[[_Reader], _T], min_size: int) -> tuple[_T, ...]:
        n = self._length("array", min_size)
        if n is None:
            raise MetadataRecordError("null in a non-nullable array")
        return tuple(read_one(self) for _ in range(n))

    def tags(self, known: dict[int, Callable[[_Reader], None]]) -> None:
        """Read a tagged-field section: known tags parsed (each must fill exactly its size),
        unknown tags skipped; a repeated tag is malformed."""
        seen: set[int] = set()
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            size = self.uvarint()
            if tag in seen:
                raise MetadataRecordError(f"tagged field {tag} repeated")
            seen.add(tag)
            if size > self.end - self.pos:
                raise MetadataRecordError("tagged field overruns the record")
            read = known.get(tag)
            if read is not None:
                sub = _Reader(self.data, self.pos, self.pos + size)
                read(sub)
                if sub.pos != sub.end:
                    raise MetadataRecordError(f"tagged field {tag}: {sub.end - sub.pos} bytes left")
            self.pos += size


# ------------------------------------------------------------------------------ per-type codecs
# Each writer takes (writer, record) and returns nothing; `_version` picks the version written.
# Each reader takes (reader, version) and returns the record.

def _w_endpoint(w: _Writer, e: BrokerEndpoint) -> None:
    w.string(e.name)
    w.string(e.host)
    w.u16(e.port)
    w.i16(e.security_protocol)
    w.tags([])


def _r_endpoint(r: _Reader) -> BrokerEndpoint:
    e = BrokerEndpoint(r.string(), r.string(), r.u16(), r.i16())
    r.tags({})
    return e


def _w_feature(w: _Writer, f: BrokerFeature) -> None:
    w.string(f.name)
    w.i16(f.min_supported_version)
    w.i16(f.max_supported_version)
    w.tags([])


def _r_feature(r: _Reader) -> BrokerFeature:
    f = BrokerFeature(r.string(), r.i16(), r.i16())
    r.tags({})
    return f


def _w_register(w: _Writer, rec: RegisterBrokerRecord, v: int) -> None:
    w.i32(rec.broker_id)
    if v >= 2:
        w.boolean(rec.is_migrating_zk_broker)
    w.uid(rec.incarnation_id)
    w.i64(rec.broker_epoch)
    w.uvarint(len(rec.endpoints) + 1)
    for e in rec.endpoints:
        _w_endpoint(w, e)
    w.uvarint(len(rec.features) + 1)
    for f in rec.features:
        _w_feature(w, f)
    w.string(rec.rack)
    w.boolean(rec.fenced)
    if v >= 1:
        w.boolean(rec.in_controlled_shutdown)
    tags: list[tuple[int, Callable[[_Writer], None]]] = []
    if v >= 3 and rec.log_dirs:
        tags.append((0, lambda t: t.uids(rec.log_dirs)))
    w.tags(tags)


def _r_register(r: _Reader, v: int) -> RegisterBrokerRecord:
    broker_id = r.i32()
    migrating = r.boolean() if v >= 2 else False
    incarnation = r.uid()
    epoch = r.i64()
    endpoints = r.structs(_r_endpoint, 7)  # 2 strings, u16, i16, tags: >= 7 bytes
    features = r.structs(_r_feature, 6)
    rack = r.nullable_string()
    fenced = r.boolean()
    shutdown = r.boolean() if v >= 1 else False
    got: dict[str, tuple[uuid.UUID, ...]] = {}
    r.tags({0: lambda t: got.__setitem__("log_dirs", t.uids())} if v >= 3 else {})
    return RegisterBrokerRecord(broker_id, incarnation, epoch, endpoints, features, rack, fenced,
                                shutdown, migrating, got.get("log_dirs", ()))


def _w_partition(w: _Writer, rec: PartitionRecord, v: int) -> None:
    w.i32(rec.partition_id)
    w.uid(rec.topic_id)
    w.i32s(rec.replicas)
    w.i32s(rec.isr)
    w.i32s(rec.removing_replicas)
    w.i32s(rec.adding_replicas)
    w.i32(rec.leader)
    w.i32(rec.leader_epoch)
    w.i32(rec.partition_epoch)
    if v >= 1:
        w.uids(rec.directories)
    tags: list[tuple[int, Callable[[_Writer], None]]] = []
    if rec.leader_recovery_state != 0:
        tags.append((0, lambda t: t.i8(rec.leader_recovery_state)))
    if v >= 2 and rec.eligible_leader_replicas is not None:
        tags.append((1, lambda t: t.i32s(rec.eligible_leader_replicas)))
    if v >= 2 and rec.last_known_elr is not None:
        tags.append((2, lambda t: t.i32s(rec.last_known_elr)))
    w.tags(tags)


def _r_partition(r: _Reader, v: int) -> PartitionRecord:
    pid = r.i32()
    tid = r.uid()
    replicas = r.i32s()
    isr = r.i32s()
    removing = r.i32s()
    adding = r.i32s()
    leader = r.i32()
    leader_epoch = r.i32()
    partition_epoch = r.i32()
    dirs = r.uids() if v >= 1 else ()
    lrs: dict[int, int] = {}
    elr: dict[int, tuple[int, ...] | None] = {}
    known: dict[int, Callable[[_Reader], None]] = {0: lambda t: lrs.__setitem__(0, t.i8())}
    if v >= 2:
        known[1] = lambda t: elr.__setitem__(1, t.nullable_i32s())
        known[2] = lambda t: elr.__setitem__(2, t.nullable_i32s())
    r.tags(known)
    return PartitionRecord(pid, tid, replicas, isr, leader, leader_epoch, partition_epoch,
                           removing, adding, lrs.get(0, 0), dirs, elr.get(1), elr.get(2))


def _w_change(w: _Writer, rec: PartitionChangeRecord, v: int) -> None:
    w.i32(rec.partition_id)
    w.uid(rec.topic_id)
    tags: list[tuple[int, Callable[[_Writer], None]]] = []
    if rec.isr is not None:
        tags.append((0, lambda t: t.i32s(rec.isr)))
    if rec.leader != NO_LEADER_CHANGE:
        tags.append((1, lambda t: t.i32(rec.leader)))
    if rec.replicas is not None:
        tags.append((2, lambda t: t.i32s(rec.replicas)))
    if rec.removing_replicas is not None:
        tags.append((3, lambda t: t.i32s(rec.removing_replicas)))
    if rec.adding_replicas is not None:
        tags.append((4, lambda t: t.i32s(rec.adding_replicas)))
    if rec.leader_recovery_state != -1:
        tags.append((5, lambda t: t.i8(rec.leader_recovery_state)))
    if v >= 2 and rec.eligible_leader_replicas is not None:
        tags.append((6, lambda t: t.i32s(rec.eligible_leader_replicas)))
    if v >= 2 and rec.last_known_elr is not None:
        tags.append((7, lambda t: t.i32s(rec.last_known_elr)))
    if v >= 1 and rec.directories is not None:
        tags.append((8, lambda t: t.uids(rec.directories)))
    w.tags(tags)


def _r_change(r: _Reader, v: int) -> PartitionChangeRecord:
    pid = r.i32()
    tid = r.uid()
    got: dict[str, object] = {}

    def put(key: str, read: Callable[[_Reader], object]) -> Callable[[_Reader], None]:
        return lambda t: got.__setitem__(key, read(t))

    known = {0: put("isr", _Reader.nullable_i32s), 1: put("leader", _Reader.i32),
             2: put("replicas", _Reader.nullable_i32s),
             3: put("removing_replicas", _Reader.nullable_i32s),
             4: put("adding_replicas", _Reader.nullable_i32s),
             5: put("leader_recovery_state", _Reader.i8)}
    if v >= 1:
        known[8] = put("directories", _Reader.nullable_uids)
    if v >= 2:
        known[6] = put("eligible_leader_replicas", _Reader.nullable_i32s)
        known[7] = put("last_known_elr", _Reader.nullable_i32s)
    r.tags(known)
    return PartitionChangeRecord(pid, tid, **got)  # type: ignore[arg-type]


def _w_brc(w: _Writer, rec: BrokerRegistrationChangeRecord, v: int) -> None:
    w.i32(rec.broker_id)
    w.i64(rec.broker_epoch)
    tags: list[tuple[int, Callable[[_Writer], None]]] = []
    if rec.fenced != 0:
        tags.append((0, lambda t: t.i8(rec.fenced)))
    if v >= 1 and rec.in_controlled_shutdown != 0:
        tags.append((1, lambda t: t.i8(rec.in_controlled_shutdown)))
    if v >= 2 and rec.log_dirs:
        tags.append((2, lambda t: t.uids(rec.log_dirs)))
    w.tags(tags)


def _r_brc(r: _Reader, v: int) -> BrokerRegistrationChangeRecord:
    bid = r.i32()
    epoch = r.i64()
    got: dict[str, object] = {}
    known: dict[int, Callable[[_Reader], None]] = {0: lambda t: got.__setitem__("fenced", t.i8())}
    if v >= 1:
        known[1] = lambda t: got.__setitem__("in_controlled_shutdown", t.i8())
    if v >= 2:
        known[2] = lambda t: got.__setitem__("log_dirs", t.uids())
    r.tags(known)
    return BrokerRegistrationChangeRecord(bid, epoch, **got)  # type: ignore[arg-type]


def _version(rec: Record) -> int:
    """The version `encode` writes for `rec`: the lowest that holds its fields."""
    if isinstance(rec, RegisterBrokerRecord):
        return 3
    if isinstance(rec, PartitionRecord):
        if rec.eligible_leader_replicas is not None or rec.last_known_elr is not None:
            return 2
        return 1 if rec.directories else 0
    if isinstance(rec, PartitionChangeRecord):
        if rec.eligible_leader_replicas is not None or rec.last_known_elr is not None:
            return 2
        return 1 if rec.directories is not None else 0
    if isinstance(rec, BrokerRegistrationChangeRecord):
        if rec.log_dirs:
            return 2
        return 1 if rec.in_controlled_shutdown else 0
    return 0


def _w_body(w: _Writer, rec: Record, v: int) -> None:
    if isinstance(rec, RegisterBrokerRecord):
        _w_register(w, rec, v)
        return
    if isinstance(rec, PartitionRecord):
        _w_partition(w, rec, v)
        return
    if isinstance(rec, PartitionChangeRecord):
        _w_change(w, rec, v)
        return
    if isinstance(rec, BrokerRegistrationChangeRecord):
        _w_brc(w, rec, v)
        return
    if isinstance(rec, UnregisterBrokerRecord):
        w.i32(rec.broker_id)
        w.i64(rec.broker_epoch)
    elif isinstance(rec, TopicRecord):
        w.string(rec.name)
        w.uid(rec.topic_id)
    elif isinstance(rec, ConfigRecord):
        w.i8(rec.resource_type)
        w.string(rec.resource_name)
        w.string(rec.name)
        w.string(rec.value)
    elif isinstance(rec, FenceBrokerRecord | UnfenceBrokerRecord):
        w.i32(rec.id)
        w.i64(rec.epoch)
    elif isinstance(rec, RemoveTopicRecord):
        w.uid(rec.topic_id)
    elif isinstance(rec, FeatureLevelRecord):
        w.string(rec.name)
        w.i16(rec.feature_level)
    elif isinstance(rec, ClientQuotaRecord):
        _w_quota(w, rec)
        return  # v0: no tagged-field section
    elif isinstance(rec, ProducerIdsRecord):
        w.i32(rec.broker_id)
        w.i64(rec.broker_epoch)
        w.i64(rec.next_producer_id)
    elif isinstance(rec, AccessControlEntryRecord):
        w.uid(rec.id)
        w.i8(rec.resource_type)
        w.string(rec.resource_name)
        w.i8(rec.pattern_type)
        w.string(rec.principal)
        w.string(rec.host)
        w.i8(rec.operation)
        w.i8(rec.permission_type)
    elif isinstance(rec, RemoveAccessControlEntryRecord):
        w.uid(rec.id)
    elif isinstance(rec, UserScramCredentialRecord | RemoveUserScramCredentialRecord):
        _w_scram(w, rec)
    elif not isinstance(rec, NoOpRecord):
        raise MetadataRecordError(f"not a metadata record: {type(rec).__name__}")
    w.tags([])


def _r_plain(read: Callable[[_Reader], Record]) -> Callable[[_Reader, int], Record]:
    """A v0-only type: its fields, then a tagged-field section with no known tags."""
    def run(r: _Reader, v: int) -> Record:
        rec = read(r)
        r.tags({})
        return rec
    return run


# ClientQuotaRecord v0 is not a flexible version (Kafka: "flexibleVersions": "1+"): classic
# int16-length strings (-1: null), an int32-count array, no tagged fields. Kafka 3.7-4.0 write v0.
def _w_classic_string(w: _Writer, v: str | None) -> None:
    if v is None:
        w.i16(-1)
        return
    b = v.encode()
    if len(b) > MAX_STRING:
        raise MetadataRecordError(f"string of {len(b)} bytes is longer than {MAX_STRING}")
    w.i16(len(b))
    w.out += b


def _r_classic_string(r: _Reader) -> str | None:
    n = r.i16()
    if n < 0:
        return None
    try:
        return r._take(n).decode()
    except UnicodeDecodeError:
        raise MetadataRecordError("string is not UTF-8") from None


def _w_quota(w: _Writer, rec: ClientQuotaRecord) -> None:
    w.i32(len(rec.entity))
    for etype, ename in rec.entity:
        _w_classic_string(w, etype)
        _w_classic_string(w, ename)
    _w_classic_string(w, rec.key)
    w.f64(rec.value)
    w.boolean(rec.remove)


def _r_quota(r: _Reader, v: int) -> ClientQuotaRecord:
    def text(nullable: bool) -> str | None:
        s = r.nullable_string() if v >= 1 else _r_classic_string(r)
        if s is None and not nullable:
            raise MetadataRecordError("null in a non-nullable string")
        return s

    if v >= 1:
        n = r._length("array", 3)
    else:
        n = r.i32()
        if n * 4 > r.end - r.pos:
            raise MetadataRecordError(f"array of {n} overruns the record")
    if n is None or n < 0:
        raise MetadataRecordError("null in a non-nullable array")
    entity = []
    for _ in range(n):
        etype = text(False)
        entity.append((etype or "", text(True)))
        if v >= 1:
            r.tags({})
    key = text(False) or ""
    rec = ClientQuotaRecord(tuple(entity), key, r.f64(), r.boolean())
    if v >= 1:
        r.tags({})
    return rec


def _r_string_value(r: _Reader) -> ConfigRecord:
    return ConfigRecord(r.i8(), r.string(), r.string(), r.nullable_string())


_READERS: dict[int, Callable[[_Reader, int], Record]] = {
    0: _r_register,
    1: _r_plain(lambda r: UnregisterBrokerRecord(r.i32(), r.i64())),
    2: _r_plain(lambda r: TopicRecord(r.string(), r.uid())),
    3: _r_partition,
    4: _r_plain(_r_string_value),
    5: _r_change,
    7: _r_plain(lambda r: FenceBrokerRecord(r.i32(), r.i64())),
    8: _r_plain(lambda r: UnfenceBrokerRecord(r.i32(), r.i64())),
    9: _r_plain(lambda r: RemoveTopicRecord(r.uid())),
    12: _r_plain(lambda r: FeatureLevelRecord(r.string(), r.i16())),
    14: _r_quota,
    15: _r_plain(lambda r: ProducerIdsRecord(r.i32(), r.i64(), r.i64())),
    17: _r_brc,
    20: _r_plain(lambda r: NoOpRecord()),
    18: _r_plain(lambda r: AccessControlEntryRecord(r.uid(), r.i8(), r.string(), r.i8(),
                                                   r.string(), r.string(), r.i8(), r.i8())),
    19: _r_plain(lambda r: RemoveAccessControlEntryRecord(r.uid())),
    11: _r_plain(_r_scram),
    22: _r_plain(lambda r: RemoveUserScramCredentialRecord(r.string(), r.i8())),
}


def encode(record: Record) -> bytes:
    """ApiMessageAndVersion bytes of `record`; MetadataRecordError if a field is out of range."""
    v = _version(record)
    w = _Writer()
    w.uvarint(FRAME_VERSION)
    w.uvarint(record.API_KEY)
    w.uvarint(v)
    _w_body(w, record, v)
    return bytes(w.out)


def decode(data: bytes | bytearray | memoryview) -> Record:
    """The record in `data`; MetadataRecordError if malformed or of an unknown type/version."""
    r = _Reader(data)
    frame = r.uvarint()
    if frame != FRAME_VERSION:
        raise MetadataRecordError(f"unknown metadata record frame version {frame}")
    api_key = r.uvarint()
    version = r.uvarint()
    read = _READERS.get(api_key)
    if read is None:
        raise MetadataRecordError(f"unknown metadata record type {api_key}")
    if version > MAX_VERSIONS[api_key]:
        raise MetadataRecordError(f"metadata record type {api_key}: unknown version {version}")
    rec = read(r, version)
    if r.pos != r.end:
        raise MetadataRecordError(f"{r.end - r.pos} byte(s) after metadata record type {api_key}")
    return rec
