"""DescribeQuorum and DescribeCluster over the raw protocol, for `samsa metadata-quorum`,
`samsa cluster describe` and the SamsaCluster test harness.

One short-lived connection per question, with a caller-chosen timeout (the harness polls nodes
that may be SIGSTOPped), versions negotiated with ApiVersions. A CONTROLLER listener that does not
answer ApiVersions is asked with the highest versions this client speaks."""

from __future__ import annotations

import base64
import socket
import struct
import uuid
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from ._common import CliError, UsageError, open_socket
from ._wire import decode_response, encode_request

API_VERSIONS = 18
DESCRIBE_QUORUM = 55
DESCRIBE_CLUSTER = 60
METADATA_TOPIC = "__cluster_metadata"
ENDPOINT_BROKERS = 1  # DescribeCluster v1+ EndpointType
ENDPOINT_CONTROLLERS = 2

CLIENT_VERSIONS = {DESCRIBE_QUORUM: (0, 2), DESCRIBE_CLUSTER: (0, 2)}
_NAMES = {API_VERSIONS: "ApiVersions", DESCRIBE_QUORUM: "DescribeQuorum",
          DESCRIBE_CLUSTER: "DescribeCluster"}
_I32 = struct.Struct(">i")


class Closed(CliError):
    """The node closed the connection instead of answering."""


def error_name(code: int) -> str:
    try:
        return ErrorCode(int(code)).name.upper()
    except ValueError:
        return f"error code {int(code)}"


def kafka_uuid(value: uuid.UUID | None) -> str:
    """Kafka's text form of a Uuid: URL-safe base64 of the 16 bytes, no padding."""
    raw = (value or uuid.UUID(int=0)).bytes
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def parse_servers(text: str) -> list[tuple[str, int]]:
    """A comma-separated HOST:PORT list."""
    out = []
    for item in text.split(","):
        host, sep, port = item.strip().rpartition(":")
        host = host.strip("[]")
        if not sep or not host or not port.isdigit():
            raise UsageError(f"bad server address {item.strip()!r}: expected HOST:PORT")
        out.append((host, int(port)))
    if not out:
        raise UsageError("no server address given")
    return out


class Connection:
    """One blocking connection; every call has the connection's timeout."""

    def __init__(self, host: str, port: int, timeout: float = 5.0,
                 client_id: str = "samsa-cli") -> None:
        self.host, self.port, self.timeout = host, port, timeout
        self.address = f"{host}:{port}"
        self.client_id = client_id
        self.correlation_id = 0
        self.versions: dict[int, tuple[int, int]] | None = None
        self.sock = self._open()

    def _open(self) -> socket.socket:
        try:
            sock: socket.socket = open_socket(self.host, self.port, self.timeout, self.client_id)
        except OSError as e:
            raise CliError(f"cannot reach {self.address} ({e.strerror or e})") from None
        sock.settimeout(self.timeout)
        return sock

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def negotiate(self) -> None:
        """ApiVersions v0; a listener that closes the connection instead (a Raft-only CONTROLLER
        listener) leaves `versions` None, and a new connection is opened for the next call."""
        try:
            resp = self.request(API_VERSIONS, 0, {})
        except Closed:
            self.sock.close()
            self.sock = self._open()
            return
        if resp.error_code == ErrorCode.none:
            self.versions = {int(k.api_key): (int(k.min_version), int(k.max_version))
                             for k in resp.api_keys}

    def version(self, key: int) -> int:
        lo, hi = CLIENT_VERSIONS[key]
        if self.versions is None:
            return hi
        theirs = self.versions.get(key)
        if theirs is None:
            raise CliError(f"{self.address} does not support {_NAMES[key]} (API key {key})")
        v = min(hi, theirs[1])
        if v < max(lo, theirs[0]):
            raise CliError(f"no common version of {_NAMES[key]}: {self.address} speaks "
                           f"{theirs[0]}-{theirs[1]}, this client {lo}-{hi}")
        return v

    def request(self, key: int, version: int, body: dict[str, Any]) -> Any:
        self.correlation_id += 1
        request = encode_request(key, version, self.correlation_id, self.client_id, body)
        name = _NAMES.get(key, f"API {key}")
        try:
            self.sock.sendall(request)
            (size,) = _I32.unpack(self._recv_exact(4))
            frame = self._recv_exact(size)
        except TimeoutError:
            raise CliError(f"no answer to {name} from {self.address}") from None
        except ConnectionResetError:
            raise Closed(f"{self.address} closed the connection instead of answering "
                         f"{name} v{version}") from None
        except OSError as e:
            raise CliError(f"connection to {self.address} failed during {name}: "
                           f"{e.strerror or e}") from None
        return decode_response(key, version, frame, self.correlation_id, self.address)

    def _recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise Closed(f"{self.address} closed the connection")
            buf += chunk
        return bytes(buf)


# ---- answers ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Replica:
    replica_id: int
    directory_id: uuid.UUID | None
    log_end_offset: int
    last_fetch_timestamp: int  # ms, -1 if unknown
    last_caught_up_timestamp: int  # ms, -1 if unknown


@dataclass(frozen=True)
class Quorum:
    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[Replica, ...]
    observers: tuple[Replica, ...]
    endpoints: dict[int, tuple[str, ...]]  # node id -> ("CONTROLLER://host:port", ...), v2 only


@dataclass(frozen=True)
class BrokerInfo:
    broker_id: int
    host: str
    port: int
    rack: str | None
    fenced: bool | None  # None: the node's DescribeCluster version cannot say (v0/v1)


@dataclass(frozen=True)
class ClusterInfo:
    cluster_id: str
    controller_id: int
    brokers: tuple[BrokerInfo, ...]


def _ms(value: Any) -> int:
    if value is None:
        return -1
    if hasattr(value, "timestamp"):
        return round(value.timestamp() * 1000)
    return int(value)


def _replica(r: Any) -> Replica:
    return Replica(int(r.replica_id), getattr(r, "replica_directory_id", None),
                   int(r.log_end_offset), _ms(getattr(r, "last_fetch_timestamp", -1)),
                   _ms(getattr(r, "last_caught_up_timestamp", -1)))


def _endpoint(name: str, host: str, port: int) -> str:
    return f"{name}://{f'[{host}]' if ':' in host else host}:{port}"


def describe_quorum(conn: Connection) -> Quorum:
    """DescribeQuorum of __cluster_metadata-0; a top-level or partition error is a CliError."""
    v = conn.version(DESCRIBE_QUORUM)
    resp = conn.request(DESCRIBE_QUORUM, v, {"topics": [
        {"topic_name": METADATA_TOPIC, "partitions": [{"partition_index": 0}]}]})
    if resp.error_code != ErrorCode.none:
        msg = getattr(resp, "error_message", None) or error_name(resp.error_code)
        raise CliError(f"DescribeQuorum failed at {conn.address}: {msg}")
    try:
        part = resp.topics[0].partitions[0]
    except IndexError:
        raise CliError(f"{conn.address} answered DescribeQuorum without the metadata "
                       "partition") from None
    if part.error_code != ErrorCode.none:
        msg = getattr(part, "error_message", None) or error_name(part.error_code)
        raise CliError(f"DescribeQuorum failed at {conn.address}: {msg}")
    endpoints = {int(n.node_id): tuple(_endpoint(li.name, li.host, int(li.port))
                                       for li in n.listeners)
                 for n in getattr(resp, "nodes", ())}
    return Quorum(int(part.leader_id), int(part.leader_epoch), int(part.high_watermark),
                  tuple(_replica(r) for r in part.current_voters),
                  tuple(_replica(r) for r in part.observers), endpoints)


def describe_cluster(conn: Connection, controllers: bool = False) -> ClusterInfo:
    """DescribeCluster, fenced brokers included (v2) so their state can be shown."""
    v = conn.version(DESCRIBE_CLUSTER)
    body: dict[str, Any] = {"include_cluster_authorized_operations": False}
    if v >= 1:
        body["endpoint_type"] = ENDPOINT_CONTROLLERS if controllers else ENDPOINT_BROKERS
    elif controllers:
        raise CliError(f"{conn.address} cannot describe controllers (DescribeCluster v{v})")
    if v >= 2:
        body["include_fenced_brokers"] = True
    resp = conn.request(DESCRIBE_CLUSTER, v, body)
    if resp.error_code != ErrorCode.none:
        raise CliError(f"DescribeCluster failed at {conn.address}: "
                       f"{resp.error_message or error_name(resp.error_code)}")
    brokers = tuple(BrokerInfo(int(b.broker_id), b.host, int(b.port), b.rack,
                               bool(b.is_fenced) if v >= 2 else None)
                    for b in resp.brokers)
    return ClusterInfo(resp.cluster_id, int(resp.controller_id), brokers)


def connect(servers: str, timeout: float = 5.0) -> Connection:
    """A negotiated connection to the first reachable server of a comma-separated list."""
    errors = []
    for host, port in parse_servers(servers):
        try:
            conn = Connection(host, port, timeout)
        except CliError as e:
            errors.append(str(e))
            continue
        try:
            conn.negotiate()
        except CliError as e:
            conn.close()
            errors.append(str(e))
            continue
        return conn
    raise CliError(errors[0] if len(errors) == 1 else "; ".join(errors))
