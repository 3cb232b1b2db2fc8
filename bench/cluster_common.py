"""Helpers shared by the cluster benchmarks (bench/cluster_failover.py, cluster_propagation.py):
raw-protocol CreateTopics / Metadata / DescribeQuorum over blocking sockets (no client library
retries or metadata caches between the bench and the broker), percentiles, run headers."""

from __future__ import annotations

import math
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from samsa.cli import _cluster_wire as w

ROOT = Path(__file__).resolve().parent.parent
CREATE_TOPICS = 19
METADATA = 3
CREATE_TOPICS_VERSION = 5  # flexible, answers per-topic errors with messages
METADATA_VERSION = 12      # topic ids, no cluster-authorized-operations fields


class Link:
    """One blocking connection to a node's listener that reopens itself after a failure; every
    call raises w.CliError (unreachable, closed, timed out, undecodable) instead of hanging."""

    def __init__(self, address: str, timeout: float = 5.0, client_id: str = "samsa-bench") -> None:
        host, _, port = address.rpartition(":")
        self.host, self.port, self.timeout, self.client_id = host, int(port), timeout, client_id
        self.address = address
        self.conn: w.Connection | None = None

    def _open(self) -> w.Connection:
        if self.conn is None:
            conn = w.Connection(self.host, self.port, self.timeout, self.client_id)
            conn.negotiate()
            self.conn = conn
        return self.conn

    def request(self, key: int, version: int, body: dict[str, Any]) -> Any:
        try:
            return self._open().request(key, version, body)
        except w.CliError:
            self.close()
            raise

    def describe_quorum(self) -> w.Quorum:
        try:
            return w.describe_quorum(self._open())
        except w.CliError:
            self.close()
            raise

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def create_topic(link: Link, name: str, partitions: int, replication: int,
                 timeout_ms: int = 30000) -> tuple[int, str]:
    """CreateTopics of one topic: (error code, message); 0 = created."""
    resp = link.request(CREATE_TOPICS, CREATE_TOPICS_VERSION, {
        "topics": [{"name": name, "num_partitions": partitions,
                    "replication_factor": replication, "assignments": [], "configs": []}],
        "timeout_ms": timeout_ms, "validate_only": False})
    t = resp.topics[0]
    return int(t.error_code), str(getattr(t, "error_message", "") or "")


def topic_ready(link: Link, name: str, partitions: int) -> bool:
    """Metadata for one topic: known (no error), all its partitions listed with a leader."""
    resp = link.request(METADATA, METADATA_VERSION, {
        "topics": [{"name": name}], "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False})
    if not resp.topics:
        return False
    t = resp.topics[0]
    return (int(t.error_code) == 0 and len(t.partitions) == partitions
            and all(int(p.leader_id) >= 0 for p in t.partitions))


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100): with 50 samples p99 is the largest."""
    s = sorted(values)
    return s[max(0, math.ceil(q / 100 * len(s)) - 1)]


def summary(values: list[float]) -> str:
    if not values:
        return "no samples"
    return (f"p50 {percentile(values, 50):.0f} ms, p99 {percentile(values, 99):.0f} ms, "
            f"max {max(values):.0f} ms, min {min(values):.0f} ms (n={len(values)})")


def run_header(title: str, command: str) -> list[str]:
    rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True, timeout=10).stdout.strip()
    la = os.getloadavg()
    return [f"# {title}", "", f"Command: `{command}`", "",
            f"Samsa at `{rev}`, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
            f"{os.cpu_count()} CPUs, load average at start {la[0]:.1f}/{la[1]:.1f}/{la[2]:.1f}. "
            "No Kafka broker can run on this machine: absolute figures against the issue's goals.",
            ""]


def cell(value: object) -> str:
    """A report table cell: a float as whole milliseconds, a missing value as –."""
    return f"{value:.0f}" if isinstance(value, float) else ("–" if value is None else str(value))


def write_report(out: str, text: str) -> None:
    """Write a report where --out says (making its directory) and print it."""
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(text)
    print(text)


def load_line() -> str:
    la = os.getloadavg()
    return f"load average at end {la[0]:.1f}/{la[1]:.1f}/{la[2]:.1f}"


def quorum_view(link: Link) -> tuple[int, int]:
    """(leader id, leader epoch) as this node sees them, from a raw DescribeQuorum on its
    CONTROLLER listener. A follower answers NOT_LEADER_OR_FOLLOWER with the leader and epoch it
    follows (as Kafka's does), so its answer counts as its view; -1 leader = none known."""
    try:
        conn = link._open()
        v = conn.version(w.DESCRIBE_QUORUM)
        resp = link.request(w.DESCRIBE_QUORUM, v, {"topics": [
            {"topic_name": w.METADATA_TOPIC, "partitions": [{"partition_index": 0}]}]})
    except w.CliError:
        link.close()
        raise
    if resp.error_code != 0 or not resp.topics or not resp.topics[0].partitions:
        raise w.CliError(f"{link.address}: DescribeQuorum error {resp.error_code}")
    p = resp.topics[0].partitions[0]
    return int(p.leader_id), int(p.leader_epoch)
