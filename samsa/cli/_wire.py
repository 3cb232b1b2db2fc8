"""A minimal blocking Kafka protocol client (kio schemas, samsa's request builder) for the admin APIs
that confluent-kafka's AdminClient does not expose: ListTransactions, DescribeTransactions,
DescribeProducers, partition reassignments, ElectLeaders and DescribeLogDirs (with the configs calls
the reassignment tool makes alongside).

It negotiates versions with ApiVersions, finds brokers with Metadata and transaction coordinators
with FindCoordinator, so it routes requests the way Kafka's admin client does. Failures are CliErrors
with one-line messages."""

from __future__ import annotations

import datetime
import socket
import struct
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from samsa.client_security import encode_frame

from ._common import (
    CONNECT_TIMEOUT_S,
    REQUEST_TIMEOUT_S,
    CliError,
    UsageError,
    open_socket,
    tls_hint,
)

API_VERSIONS = 18
METADATA = 3
FIND_COORDINATOR = 10
DESCRIBE_PRODUCERS = 61
DESCRIBE_TRANSACTIONS = 65
LIST_TRANSACTIONS = 66
DESCRIBE_CONFIGS = 32
DESCRIBE_LOG_DIRS = 35
ELECT_LEADERS = 43
INCREMENTAL_ALTER_CONFIGS = 44
ALTER_PARTITION_REASSIGNMENTS = 45
LIST_PARTITION_REASSIGNMENTS = 46
OFFSET_DELETE = 47

API_NAMES = {API_VERSIONS: "ApiVersions", METADATA: "Metadata", FIND_COORDINATOR: "FindCoordinator",
             DESCRIBE_PRODUCERS: "DescribeProducers", DESCRIBE_TRANSACTIONS: "DescribeTransactions",
             LIST_TRANSACTIONS: "ListTransactions", DESCRIBE_CONFIGS: "DescribeConfigs",
             DESCRIBE_LOG_DIRS: "DescribeLogDirs", ELECT_LEADERS: "ElectLeaders",
             INCREMENTAL_ALTER_CONFIGS: "IncrementalAlterConfigs",
             ALTER_PARTITION_REASSIGNMENTS: "AlterPartitionReassignments",
             LIST_PARTITION_REASSIGNMENTS: "ListPartitionReassignments", OFFSET_DELETE: "OffsetDelete"}

# versions this client speaks: api key -> (min, max)
CLIENT_VERSIONS: dict[int, tuple[int, int]] = {
    METADATA: (1, 12),
    FIND_COORDINATOR: (1, 4),
    DESCRIBE_PRODUCERS: (0, 0),
    DESCRIBE_TRANSACTIONS: (0, 0),
    LIST_TRANSACTIONS: (0, 1),
    DESCRIBE_CONFIGS: (1, 4),
    DESCRIBE_LOG_DIRS: (1, 4),
    ELECT_LEADERS: (1, 2),
    INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ALTER_PARTITION_REASSIGNMENTS: (0, 0),
    LIST_PARTITION_REASSIGNMENTS: (0, 0),
    OFFSET_DELETE: (0, 0),
}

COORDINATOR_GROUP = 0  # FindCoordinator key types
COORDINATOR_TRANSACTION = 1
_RETRIABLE_COORDINATOR = {ErrorCode.coordinator_not_available, ErrorCode.coordinator_load_in_progress,
                          ErrorCode.not_coordinator}
COORDINATOR_WAIT_S = 10.0

_I32 = struct.Struct(">i")


def error_name(code: int) -> str:
    """Kafka's name of an error code, e.g. TRANSACTIONAL_ID_NOT_FOUND."""
    try:
        return ErrorCode(int(code)).name.upper()
    except ValueError:
        return f"error code {int(code)}"


def millis(value: Any) -> int:
    """A kio timestamp (aware datetime) or duration (timedelta) as Kafka's integer milliseconds;
    -1 (Kafka's "none") stays -1."""
    if value is None:
        return -1
    if isinstance(value, datetime.datetime):
        ms = round(value.timestamp() * 1000)
        return ms if ms >= 0 else -1
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    return int(value)


def parse_address(text: str) -> tuple[str, int]:
    """HOST:PORT (or [IPV6]:PORT) of a bootstrap server."""
    host, sep, port = text.strip().rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit():
        raise UsageError(f"bad bootstrap server {text.strip()!r}: expected HOST:PORT")
    return host, int(port)


# ---- a hand decoder for DescribeTransactions v0 -------------------------------------------------
# kio refuses a negative TransactionStartTimeMs ("Cannot parse negative timestamp"), but Kafka sends
# -1 for every transaction that has not started (state Empty, or an unknown id). So this one
# response is decoded here, into the same attribute names kio uses (times as integer ms).


@dataclass(frozen=True)
class TxnTopic:
    topic: str
    partitions: tuple[int, ...]


@dataclass(frozen=True)
class TxnDescription:
    error_code: int
    transactional_id: str
    transaction_state: str
    transaction_timeout: int  # ms
    transaction_start_time: int  # ms, -1 if none
    producer_id: int
    producer_epoch: int
    topics: tuple[TxnTopic, ...]


@dataclass(frozen=True)
class DescribeTransactionsAnswer:
    throttle_time: int
    transaction_states: tuple[TxnDescription, ...]


class _Reader:
    """Reads the primitive types of flexible (compact) Kafka messages."""

    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data = data
        self.pos = pos

    def _fixed(self, fmt: str) -> int:
        (v,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return int(v)

    def i16(self) -> int:
        return self._fixed(">h")

    def i32(self) -> int:
        return self._fixed(">i")

    def i64(self) -> int:
        return self._fixed(">q")

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            b = self.data[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 63:
                raise ValueError("varint too long")

    def compact_string(self) -> str:
        n = self.uvarint() - 1
        if n < 0:
            return ""
        if self.pos + n > len(self.data):
            raise ValueError("string past the end of the frame")
        text = self.data[self.pos:self.pos + n].decode()
        self.pos += n
        return text

    def compact_length(self) -> int:
        return max(0, self.uvarint() - 1)

    def skip_tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self.pos += self.uvarint()


def read_describe_transactions_v0(data: bytes, pos: int = 0) -> DescribeTransactionsAnswer:
    r = _Reader(data, pos)
    throttle = r.i32()
    states = []
    for _ in range(r.compact_length()):
        error_code = r.i16()
        tid = r.compact_string()
        state = r.compact_string()
        timeout = r.i32()
        start = r.i64()
        pid = r.i64()
        epoch = r.i16()
        topics = []
        for _ in range(r.compact_length()):
            topic = r.compact_string()
            parts = tuple(r.i32() for _ in range(r.compact_length()))
            r.skip_tagged_fields()
            topics.append(TxnTopic(topic, parts))
        r.skip_tagged_fields()
        states.append(TxnDescription(error_code, tid, state, timeout, start if start >= 0 else -1,
                                     pid, epoch, tuple(topics)))
    r.skip_tagged_fields()
    return DescribeTransactionsAnswer(throttle, tuple(states))


_BODY_READERS: dict[tuple[int, int], Any] = {(DESCRIBE_TRANSACTIONS, 0): read_describe_transactions_v0}


# the raw CLI connections frame requests as client_security does for its SASL exchange
encode_request = encode_frame


def decode_response(key: int, version: int, frame: bytes, correlation_id: int, peer: str,
                    custom: Any = None) -> Any:
    """The body of a response frame; CliError if it does not decode or answers another
    request. `custom` reads the body instead of kio when given."""
    name = API_NAMES.get(key, f"API {key}")
    resp_cls = load_response_schema(key, version)
    try:
        header, n = entity_reader(resp_cls.__header_schema__)(frame, 0)
        resp = custom(frame, n) if custom is not None else entity_reader(resp_cls)(frame, n)[0]
    except Exception as e:  # noqa: BLE001 - any decoding failure is a bad answer
        raise CliError(f"cannot decode the {name} answer of {peer}: {e}") from None
    if header.correlation_id != correlation_id:
        raise CliError(f"{peer} answered {name} out of order")
    return resp


class ConnectionLost(CliError):
    """The broker closed the connection instead of answering (it could not handle the request)."""


@dataclass(frozen=True)
class Node:
    node_id: int
    host: str
    port: int

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


class _Connection:
    def __init__(self, host: str, port: int, client_id: str) -> None:
        self.address = f"{host}:{port}"
        self.client_id = client_id
        self.correlation_id = 0
        try:
            self.sock: socket.socket = open_socket(host, port, CONNECT_TIMEOUT_S, client_id)
        except OSError as e:
            raise CliError(f"cannot reach broker at {self.address} ({e.strerror or e})") from None
        self.sock.settimeout(REQUEST_TIMEOUT_S)

    def close(self) -> None:
        self.sock.close()

    def request(self, key: int, version: int, body: dict[str, Any]) -> Any:
        self.correlation_id += 1
        request = encode_request(key, version, self.correlation_id, self.client_id, body)
        name = API_NAMES.get(key, f"API {key}")
        try:
            self.sock.sendall(request)
            (size,) = _I32.unpack(self._recv_exact(4))
            frame = self._recv_exact(size)
        except TimeoutError:
            raise CliError(f"no answer to {name} from broker at {self.address} within "
                           f"{REQUEST_TIMEOUT_S:.0f} s") from None
        except ConnectionLost:
            raise ConnectionLost(f"the broker at {self.address} closed the connection instead of "
                                 f"answering {name} v{version} (see the broker's log)"
                                 f"{tls_hint()}") from None
        except OSError as e:
            raise CliError(f"connection to broker at {self.address} failed during {name}: "
                           f"{e.strerror or e}") from None
        return decode_response(key, version, frame, self.correlation_id,
                               f"broker at {self.address}", _BODY_READERS.get((key, version)))

    def _recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionLost("closed")
            buf += chunk
        return bytes(buf)


class WireClient:
    """Connections to the cluster's brokers, API versions negotiated on the bootstrap broker."""

    def __init__(self, bootstrap: str, client_id: str = "samsa-cli") -> None:
        self.bootstrap = bootstrap
        self.client_id = client_id
        self._conns: dict[str, _Connection] = {}
        addresses = [parse_address(a) for a in bootstrap.split(",") if a.strip()]
        if not addresses:
            raise UsageError("no bootstrap server given")
        errors: list[str] = []
        for host, port in addresses:
            try:
                self._connection(host, port)
                self._boot_node = Node(-1, host, port)
                break
            except CliError as e:
                errors.append(str(e))
        else:
            if len(errors) == 1:
                raise CliError(errors[0])
            raise CliError(f"cannot reach any broker of {bootstrap}: {'; '.join(errors)}")
        resp = self.call(API_VERSIONS, {}, version=0)
        if resp.error_code != ErrorCode.none:
            raise CliError(f"broker at {self._boot_node.address} refused ApiVersions: "
                           f"{error_name(resp.error_code)}")
        self.broker_versions = {int(k.api_key): (int(k.min_version), int(k.max_version))
                                for k in resp.api_keys}

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        for c in self._conns.values():
            c.close()
        self._conns.clear()

    def _connection(self, host: str, port: int) -> _Connection:
        key = f"{host}:{port}"
        conn = self._conns.get(key)
        if conn is None:
            conn = self._conns[key] = _Connection(host, port, self.client_id)
        return conn

    def version(self, key: int) -> int:
        """The highest version of an API both sides speak."""
        name = API_NAMES.get(key, f"API {key}")
        lo, hi = CLIENT_VERSIONS[key]
        theirs = self.broker_versions.get(key)
        if theirs is None:
            raise CliError(f"the broker at {self._boot_node.address} does not support {name} "
                           f"(API key {key})")
        v = min(hi, theirs[1])
        if v < max(lo, theirs[0]):
            raise CliError(f"no common version of {name}: broker speaks {theirs[0]}-{theirs[1]}, "
                           f"this client {lo}-{hi}")
        return v

    def call(self, key: int, body: dict[str, Any], node: Node | None = None,
             version: int | None = None) -> Any:
        """Send a request to a node (default: the bootstrap broker) and return kio's response.
        A connection the broker closed is forgotten: the next call reconnects."""
        node = node or self._boot_node
        conn = self._connection(node.host, node.port)
        try:
            return conn.request(key, self.version(key) if version is None else version, body)
        except CliError:
            conn.close()
            self._conns.pop(conn.address, None)
            raise

    # ---- cluster layout ------------------------------------------------------------------------
    def metadata(self, topics: list[str] | None) -> Any:
        """Metadata of some topics ([] for none, None for all), never creating topics."""
        body: dict[str, Any] = {"topics": None if topics is None else [{"name": t} for t in topics],
                                "allow_auto_topic_creation": False}
        return self.call(METADATA, body)

    def brokers(self) -> list[Node]:
        md = self.metadata([])
        return [Node(int(b.node_id), b.host, int(b.port)) for b in md.brokers]

    def transaction_coordinator(self, transactional_id: str) -> Node:
        """The broker coordinating a transactional id."""
        return self.coordinator(COORDINATOR_TRANSACTION, transactional_id)

    def coordinator(self, key_type: int, key: str) -> Node:
        """The broker coordinating a group or transactional id (FindCoordinator, retried while
        the coordinator is loading or moving)."""
        what = "transaction" if key_type == COORDINATOR_TRANSACTION else "group"
        deadline = time.monotonic() + COORDINATOR_WAIT_S
        while True:
            v = self.version(FIND_COORDINATOR)
            if v >= 4:
                resp = self.call(FIND_COORDINATOR, {"key_type": key_type,
                                                    "coordinator_keys": [key]}, version=v)
                found = resp.coordinators[0]
            else:
                found = self.call(FIND_COORDINATOR, {"key_type": key_type, "key": key}, version=v)
            code = found.error_code
            if code == ErrorCode.none:
                return Node(int(found.node_id), found.host, int(found.port))
            if code not in _RETRIABLE_COORDINATOR or time.monotonic() > deadline:
                raise CliError(f"cannot find the {what} coordinator of {key!r}: "
                               f"{found.error_message or error_name(code)}")
            time.sleep(0.2)
