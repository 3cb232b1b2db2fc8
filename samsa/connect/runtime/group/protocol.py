"""Connect's group sub-protocol: the bytes a worker puts in JoinGroup (its metadata) and the bytes
the leader hands each worker through SyncGroup (its assignment), exactly as Kafka's workers write
them, so a Samsa worker could share a group with Kafka's.

Layouts (big-endian; string = int16 length + UTF-8; arrays = int32 count, -1 = null):
- metadata v0 ("default"): version int16, url string, config offset int64.
- metadata v1 ("compatible") / v2 ("sessioned"): the same, then the worker's current assignment as
  nullable bytes (an encoded assignment of the same version, null when it has none).
- assignment v0: version, error int16, leader string, leader url string, config offset int64,
  [connector string, [task int32]] where task -1 stands for the connector itself.
- assignment v1/v2: the v0 fields, then a nullable revoked array of the same shape and the
  scheduled delay int32. Missing trailing fields read as their defaults, as Kafka reads them.

Decoding checks every length against the bytes left, so garbage raises ConnectProtocolError and
never allocates more than the input's size or loops past its end.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..status import ConnectorTaskId

EAGER = "default"
COMPATIBLE = "compatible"
SESSIONED = "sessioned"
PROTOCOL_VERSIONS = {EAGER: 0, COMPATIBLE: 1, SESSIONED: 2}
PROTOCOL_TYPE = "connect"

CONNECT_PROTOCOL_V0 = 0
CONNECT_PROTOCOL_V1 = 1
CONNECT_PROTOCOL_V2 = 2
CONNECTOR_TASK = -1  # the task id that means "the connector instance"

NO_ERROR = 0
CONFIG_MISMATCH = 1  # the leader is behind the config topic: members re-read it and rejoin

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class ConnectProtocolError(ValueError):
    """Bytes that are not a Connect group metadata or assignment."""


@dataclass(frozen=True)
class Assignment:
    """One worker's assignment. In a SyncGroup of the cooperative protocols `connectors`/`tasks`
    are what the worker starts now and `revoked_*` what it stops; the member keeps the sum."""

    error: int = NO_ERROR
    leader: str = ""
    leader_url: str = ""
    config_offset: int = -1
    connectors: tuple[str, ...] = ()
    tasks: tuple[ConnectorTaskId, ...] = ()
    revoked_connectors: tuple[str, ...] = ()
    revoked_tasks: tuple[ConnectorTaskId, ...] = ()
    delay_ms: int = 0
    version: int = CONNECT_PROTOCOL_V1

    @property
    def failed(self) -> bool:
        return self.error != NO_ERROR

    @property
    def empty(self) -> bool:
        return not (self.connectors or self.tasks or self.revoked_connectors
                    or self.revoked_tasks)


@dataclass(frozen=True)
class WorkerState:
    """What a worker tells the group when it joins: where its REST API is, how far it has read
    the config topic and (cooperative protocols) what it runs now."""

    url: str
    config_offset: int
    assignment: Assignment | None = None
    version: int = field(default=CONNECT_PROTOCOL_V1, compare=False)


# ---- encoding -------------------------------------------------------------------------------

def _string(out: bytearray, s: str) -> None:
    data = s.encode()
    if len(data) > 0x7FFF:
        raise ConnectProtocolError(f"string of {len(data)} bytes is longer than 32767")
    out += _I16.pack(len(data))
    out += data


def _grouped(connectors: Iterable[str], tasks: Iterable[ConnectorTaskId]) -> dict[str, list[int]]:
    """{connector: [task ids]}, -1 first for the connector itself, in first-seen order."""
    out: dict[str, list[int]] = {}
    for c in dict.fromkeys(connectors):
        out.setdefault(c, []).append(CONNECTOR_TASK)
    for t in tasks:
        out.setdefault(t.connector, []).append(t.task)
    return out


def _connector_assignments(out: bytearray, groups: dict[str, list[int]]) -> None:
    out += _I32.pack(len(groups))
    for name, ids in groups.items():
        _string(out, name)
        out += _I32.pack(len(ids))
        for i in ids:
            out += _I32.pack(i)


def encode_assignment(a: Assignment, version: int | None = None) -> bytes:
    """The SyncGroup bytes of `a` in protocol `version` (default: a.version). Version 0 has no
    revocations or delay."""
    v = a.version if version is None else version
    out = bytearray(_I16.pack(v))
    out += _I16.pack(a.error)
    _string(out, a.leader)
    _string(out, a.leader_url)
    out += _I64.pack(a.config_offset)
    _connector_assignments(out, _grouped(a.connectors, a.tasks))
    if v >= CONNECT_PROTOCOL_V1:
        _connector_assignments(out, _grouped(a.revoked_connectors, a.revoked_tasks))
        out += _I32.pack(a.delay_ms)
    return bytes(out)


def encode_metadata(state: WorkerState, version: int) -> bytes:
    """The JoinGroup metadata of a worker for protocol `version` (0, 1 or 2)."""
    out = bytearray(_I16.pack(version))
    _string(out, state.url)
    out += _I64.pack(state.config_offset)
    if version >= CONNECT_PROTOCOL_V1:
        if state.assignment is None:
            out += _I32.pack(-1)
        else:
            data = encode_assignment(state.assignment, version)
            out += _I32.pack(len(data))
            out += data
    return bytes(out)


def join_protocols(state: WorkerState, mode: str = SESSIONED) -> list[tuple[str, bytes]]:
    """JoinGroup's protocols for a worker in `connect.protocol` mode `mode`, most preferred
    first. Kafka's workers also offer "default" (eager); Samsa's members do not, so a group never
    settles on eager rebalancing (see docs/compatibility.md)."""
    order = {SESSIONED: (SESSIONED, COMPATIBLE), COMPATIBLE: (COMPATIBLE,)}
    try:
        names = order[mode]
    except KeyError:
        raise ValueError(f"unsupported connect.protocol {mode!r}: expected one of "
                         f"{sorted(order)}") from None
    return [(n, encode_metadata(state, PROTOCOL_VERSIONS[n])) for n in names]


# ---- decoding -------------------------------------------------------------------------------

class _Reader:
    def __init__(self, data: bytes, what: str) -> None:
        self.data = memoryview(bytes(data))
        self.pos = 0
        self.what = what

    def remaining(self) -> int:
        return len(self.data) - self.pos

    def _fail(self, why: str) -> ConnectProtocolError:
        return ConnectProtocolError(f"malformed Connect {self.what} at byte {self.pos}: {why}")

    def _take(self, n: int) -> memoryview:
        if n > self.remaining():
            raise self._fail(f"needs {n} bytes, {self.remaining()} left")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def i16(self) -> int:
        return int(_I16.unpack(self._take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self._take(4))[0])

    def i64(self) -> int:
        return int(_I64.unpack(self._take(8))[0])

    def string(self) -> str:
        n = self.i16()
        if n < 0:
            raise self._fail(f"string length {n}")
        try:
            return bytes(self._take(n)).decode()
        except UnicodeDecodeError as e:
            raise self._fail(f"string is not UTF-8: {e}") from None

    def nullable_bytes(self) -> bytes | None:
        n = self.i32()
        if n == -1:
            return None
        if n < 0:
            raise self._fail(f"bytes length {n}")
        return bytes(self._take(n))

    def count(self, min_item_size: int) -> int | None:
        """An array's element count, -1 meaning null; bounded by the bytes left."""
        n = self.i32()
        if n == -1:
            return None
        if n < 0 or n * min_item_size > self.remaining():
            raise self._fail(f"array of {n} elements in {self.remaining()} bytes")
        return n


def _read_connector_assignments(r: _Reader) -> tuple[list[str], list[ConnectorTaskId]]:
    n = r.count(6)  # a connector entry: its name (>= 2 bytes) and its task count (4 bytes)
    connectors: list[str] = []
    tasks: list[ConnectorTaskId] = []
    for _ in range(n or 0):
        name = r.string()
        m = r.count(4)
        for _ in range(m or 0):
            task = r.i32()
            if task == CONNECTOR_TASK:
                connectors.append(name)
            else:
                tasks.append(ConnectorTaskId(name, task))
    return connectors, tasks


def _version(r: _Reader) -> int:
    v = r.i16()
    if v < CONNECT_PROTOCOL_V0:
        raise ConnectProtocolError(f"unsupported Connect protocol version {v} in {r.what}")
    return v


def decode_assignment(data: bytes) -> Assignment:
    """An assignment of any version (later versions read as v1: Kafka's rule)."""
    r = _Reader(data, "assignment")
    version = _version(r)
    error = r.i16()
    leader = r.string()
    leader_url = r.string()
    offset = r.i64()
    connectors, tasks = _read_connector_assignments(r) if r.remaining() else ([], [])
    revoked_c, revoked_t = _read_connector_assignments(r) if r.remaining() else ([], [])
    delay = r.i32() if r.remaining() else 0
    return Assignment(error=error, leader=leader, leader_url=leader_url, config_offset=offset,
                      connectors=tuple(connectors), tasks=tuple(tasks),
                      revoked_connectors=tuple(revoked_c), revoked_tasks=tuple(revoked_t),
                      delay_ms=delay, version=version)


def decode_metadata(data: bytes) -> WorkerState:
    """A worker's JoinGroup metadata of any version (v0 has no assignment)."""
    r = _Reader(data, "worker metadata")
    version = _version(r)
    url = r.string()
    offset = r.i64()
    assignment = None
    if r.remaining():
        raw = r.nullable_bytes()
        if raw is not None:
            assignment = decode_assignment(raw)
    return WorkerState(url=url, config_offset=offset, assignment=assignment, version=version)
