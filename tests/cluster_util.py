"""Raw-wire questions to one cluster node at a time (no client library picking another broker):
CreateTopics, Metadata, DescribeConfigs and DescribeQuorum as that node alone answers them."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from tests.wire import Wire

METADATA_TOPIC = "__cluster_metadata"
TOPIC_RESOURCE = 2


@dataclass(frozen=True)
class TopicView:
    """A topic as one node's image shows it."""

    topic_id: str
    partitions: tuple[tuple[int, tuple[int, ...]], ...]  # (index, replicas)
    leaders: tuple[int, ...]


def create_topic(address: str, name: str, partitions: int, configs: dict[str, str],
                 timeout: float = 8.0) -> tuple[int, str | None]:
    """CreateTopics v7 sent to `address` itself: (error code, message). A connection failure is
    an OSError for the caller."""
    w = Wire(address, timeout=timeout)
    try:
        resp = w.request(19, 7, {"topics": [{
            "name": name, "num_partitions": partitions, "replication_factor": 1,
            "assignments": [], "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
            "timeout": int(timeout * 1000) - 2000, "validate_only": False})
    finally:
        w.close()
    t = resp.topics[0]
    return int(t.error_code), t.error_message


RETRIABLE = {7, 41}  # REQUEST_TIMED_OUT, NOT_CONTROLLER: a client retries these
TOPIC_ALREADY_EXISTS = 36


def create_topic_retrying(address: str, name: str, partitions: int, configs: dict[str, str],
                          timeout: float = 60.0) -> None:
    """CreateTopics at `address` as a client does it: retried on a connection failure or a
    retriable error (an election in progress) until acknowledged; TOPIC_ALREADY_EXISTS after a
    retry means an earlier attempt went through. Any other error fails the test."""
    deadline = time.monotonic() + timeout
    retried = False
    while True:
        try:
            code, message = create_topic(address, name, partitions, configs)
        except (OSError, ConnectionError) as e:
            code, message = -1, str(e)
        if code == 0 or (retried and code == TOPIC_ALREADY_EXISTS):
            return
        assert code in RETRIABLE or code == -1, (address, name, code, message)
        assert time.monotonic() < deadline, f"{name} not created via {address}: {code} {message}"
        retried = True
        time.sleep(0.2)


def topics(address: str, timeout: float = 5.0) -> dict[str, TopicView]:
    """Every topic in `address`'s Metadata (v12, all topics), internal ones left out."""
    w = Wire(address, timeout=timeout)
    try:
        resp = w.request(3, 12, {"topics": None, "allow_auto_topic_creation": False,
                                 "include_topic_authorized_operations": False})
    finally:
        w.close()
    out = {}
    for t in resp.topics:
        if t.is_internal or t.name.startswith("__"):
            continue
        assert t.error_code == 0, (address, t.name, t.error_code)
        parts = sorted(t.partitions, key=lambda p: p.partition_index)
        out[t.name] = TopicView(str(t.topic_id),
                                tuple((int(p.partition_index), tuple(p.replica_nodes)) for p in parts),
                                tuple(int(p.leader_id) for p in parts))
    return out


def topic_configs(address: str, names: list[str], keys: list[str],
                  timeout: float = 10.0) -> dict[str, dict[str, tuple[str | None, int]]]:
    """DescribeConfigs v4 of `names` at `address`: name -> key -> (value, config source)."""
    w = Wire(address, timeout=timeout)
    try:
        resp = w.request(32, 4, {"resources": [
            {"resource_type": TOPIC_RESOURCE, "resource_name": n, "configuration_keys": keys}
            for n in names], "include_synonyms": False, "include_documentation": False})
    finally:
        w.close()
    out = {}
    for r in resp.results:
        assert r.error_code == 0, (address, r.resource_name, r.error_code, r.error_message)
        out[r.resource_name] = {c.name: (c.value, int(c.config_source)) for c in r.configs}
    return out


def quorum_view(controller_address: str, timeout: float = 1.0) -> tuple[int, int, int] | None:
    """DescribeQuorum at a CONTROLLER listener, as that node itself sees the quorum:
    (error code, leader id, leader epoch); error 0 means the node answers as the leader. None if
    the node does not answer."""
    try:
        w = Wire(controller_address, timeout=timeout)
    except OSError:
        return None
    try:
        resp = w.request(55, 1, {"topics": [{"topic_name": METADATA_TOPIC,
                                             "partitions": [{"partition_index": 0}]}]})
    except (OSError, ConnectionError):
        return None
    finally:
        w.close()
    p = resp.topics[0].partitions[0]
    return int(p.error_code), int(p.leader_id), int(p.leader_epoch)


def quorum_members(controller_address: str, timeout: float = 5.0) -> tuple[list[int], list[int]]:
    """(voter ids, observer ids) in the DescribeQuorum answer of the leader at that address."""
    w = Wire(controller_address, timeout=timeout)
    try:
        resp = w.request(55, 1, {"topics": [{"topic_name": METADATA_TOPIC,
                                             "partitions": [{"partition_index": 0}]}]})
    finally:
        w.close()
    p = resp.topics[0].partitions[0]
    assert p.error_code == 0, (controller_address, p.error_code)
    return (sorted(int(r.replica_id) for r in p.current_voters),
            sorted(int(r.replica_id) for r in p.observers))


class LeaderClaims:
    """Every (epoch -> nodes answering DescribeQuorum as its leader) seen while polling: two
    nodes claiming one epoch is a split brain."""

    def __init__(self) -> None:
        self.by_epoch: dict[int, set[int]] = {}

    def poll(self, controllers: dict[int, str]) -> dict[int, tuple[int, int, int]]:
        views = {}
        for node_id, address in controllers.items():
            v = quorum_view(address)
            if v is None:
                continue
            views[node_id] = v
            if v[0] == 0:
                assert v[1] == node_id, f"node {node_id} answers as leader but names {v[1]}"
                self.by_epoch.setdefault(v[2], set()).add(node_id)
        return views

    def check(self) -> None:
        split = {e: ids for e, ids in self.by_epoch.items() if len(ids) > 1}
        assert not split, f"two leaders in one epoch: {split}"


def wait_until(what: str, fn: Any, timeout: float, interval: float = 0.1) -> Any:
    """fn() until it returns something truthy (exceptions count as not yet); bounded."""
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            got = fn()
            if got:
                return got
            last = got
        except (OSError, ConnectionError, AssertionError) as e:
            last = e
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not within {timeout}s (last: {last!r})")
        time.sleep(interval)
