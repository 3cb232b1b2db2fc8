"""Quorum configuration: Kafka's `controller.quorum.*` names, defaults and voter-string parsing."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


class QuorumConfigError(ValueError):
    """A `controller.quorum.*` value that cannot be used; the message says which and why."""


@dataclass(frozen=True, slots=True)
class VoterEndpoint:
    node_id: int
    host: str
    port: int


def _parse_host_port(text: str, what: str) -> tuple[str, int]:
    """`host:port` or `[ipv6]:port`, with the port in 0..65535."""
    if text.startswith("["):
        close = text.find("]")
        if close < 0 or text[close + 1 : close + 2] != ":":
            raise QuorumConfigError(f"{what}: '{text}' is not [ipv6-host]:port")
        host, port_s = text[1:close], text[close + 2 :]
    else:
        host, sep, port_s = text.rpartition(":")
        if not sep:
            raise QuorumConfigError(f"{what}: '{text}' has no ':port'")
        if ":" in host:
            raise QuorumConfigError(f"{what}: '{text}': put an IPv6 host in brackets, [host]:port")
    if not host:
        raise QuorumConfigError(f"{what}: '{text}' has an empty host")
    if not port_s.isdigit() or not 0 <= int(port_s) <= 65535:
        raise QuorumConfigError(f"{what}: '{text}' has port '{port_s}', not a number in 0..65535")
    return host, int(port_s)


def parse_voters(value: str) -> dict[int, VoterEndpoint]:
    """Parse `controller.quorum.voters` (`id@host:port,...`), Kafka's static voter set.

    An empty string means "no static voters" (then `controller.quorum.bootstrap.servers` is used).
    """
    voters: dict[int, VoterEndpoint] = {}
    if not value.strip():
        return voters
    for raw in value.split(","):
        item = raw.strip()
        what = "controller.quorum.voters"
        if not item:
            raise QuorumConfigError(f"{what}: empty entry in '{value}'")
        id_s, at, rest = item.partition("@")
        if not at:
            raise QuorumConfigError(f"{what}: '{item}' is not of the form id@host:port")
        id_s = id_s.strip()
        if not id_s.isdigit():
            raise QuorumConfigError(f"{what}: '{item}' has node id '{id_s}', not a non-negative integer")
        node_id = int(id_s)
        if node_id in voters:
            raise QuorumConfigError(f"{what}: node id {node_id} appears twice")
        host, port = _parse_host_port(rest.strip(), what)
        voters[node_id] = VoterEndpoint(node_id, host, port)
    return voters


def parse_bootstrap_servers(value: str) -> list[tuple[str, int]]:
    """Parse `controller.quorum.bootstrap.servers` (`host:port,...`, KIP-853)."""
    out: list[tuple[str, int]] = []
    for raw in value.split(","):
        item = raw.strip()
        if item:
            out.append(_parse_host_port(item, "controller.quorum.bootstrap.servers"))
    return out


@dataclass(frozen=True, slots=True)
class QuorumConfig:
    """Timeouts of the quorum, with Kafka's defaults (milliseconds)."""

    election_timeout_ms: int = 1000  # controller.quorum.election.timeout.ms
    fetch_timeout_ms: int = 2000  # controller.quorum.fetch.timeout.ms
    election_backoff_max_ms: int = 1000  # controller.quorum.election.backoff.max.ms
    request_timeout_ms: int = 2000  # controller.quorum.request.timeout.ms
    retry_backoff_ms: int = 20  # controller.quorum.retry.backoff.ms
    fetch_max_wait_ms: int = 500  # how long the leader parks a Fetch with nothing new (Kafka: 500)
    fetch_max_entries: int = 1024  # entries per Fetch response, at most
    fetch_max_bytes: int = 1 << 20  # data bytes per Fetch response (at least one entry goes)
    snapshot_chunk_bytes: int = 1 << 20  # bytes per FetchSnapshot response
    check_quorum_factor: float = 1.5  # a leader resigns after fetch.timeout * this without a majority

    def __post_init__(self) -> None:
        for name in ("election_timeout_ms", "fetch_timeout_ms", "request_timeout_ms", "fetch_max_wait_ms"):
            if getattr(self, name) <= 0:
                raise QuorumConfigError(f"{name} must be > 0, got {getattr(self, name)}")
        if self.election_backoff_max_ms < 0 or self.retry_backoff_ms < 0:
            raise QuorumConfigError("backoffs must be >= 0")
        if self.fetch_max_entries <= 0 or self.snapshot_chunk_bytes <= 0 or self.fetch_max_bytes <= 0:
            raise QuorumConfigError(
                "fetch_max_entries, fetch_max_bytes and snapshot_chunk_bytes must be > 0"
            )

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> QuorumConfig:
        """Read Kafka's `controller.quorum.*` keys from a server.properties-style mapping."""
        names = {
            "controller.quorum.election.timeout.ms": "election_timeout_ms",
            "controller.quorum.fetch.timeout.ms": "fetch_timeout_ms",
            "controller.quorum.election.backoff.max.ms": "election_backoff_max_ms",
            "controller.quorum.request.timeout.ms": "request_timeout_ms",
            "controller.quorum.retry.backoff.ms": "retry_backoff_ms",
        }
        kwargs: dict[str, int] = {}
        for key, attr in names.items():
            if key in props:
                raw = str(props[key]).strip()
                try:
                    kwargs[attr] = int(raw)
                except ValueError:
                    raise QuorumConfigError(f"{key}: '{raw}' is not an integer") from None
        return cls(**kwargs)
