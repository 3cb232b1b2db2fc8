"""The data side of `samsa partitions reassign`, kept apart from the requests: the JSON files of
Kafka's kafka-reassign-partitions.sh (topics to move, reassignment plans) read with Kafka's checks
and messages, the plan --generate proposes, and the throttle settings --execute --throttle makes
(which replicas of which topics are throttled on the leader and on the follower side)."""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from samsa.cluster.controller.placement import place_replicas

from ._common import CliError

ANY_LOG_DIR = "any"
JSON_VERSION = 1

TopicPartition = tuple[str, int]
Plan = dict[TopicPartition, list[int]]

# Broker and topic configs the reassignment tool sets for --throttle and clears afterwards
# (Kafka's QuotaConfigs names).
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LOG_DIRS_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
BROKER_THROTTLES = (LEADER_RATE, FOLLOWER_RATE, LOG_DIRS_RATE)
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
TOPIC_THROTTLES = (LEADER_REPLICAS, FOLLOWER_REPLICAS)


def tp_text(tp: TopicPartition) -> str:
    """Kafka's TopicPartition.toString: topic-partition."""
    return f"{tp[0]}-{tp[1]}"


def sorted_tps(tps: Iterable[TopicPartition]) -> list[TopicPartition]:
    return sorted(tps, key=lambda tp: (tp[0], tp[1]))


# ---- JSON reading, with the checks and wording of Kafka's Json/DecodeJson ------------------------
def _load(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as e:
        raise CliError(f"The input string is not a valid JSON ({e})") from None


def _obj(v: Any, what: str) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise CliError(f"Expected JSON object for {what}, received {json.dumps(v)}")
    return v


def _field(o: dict[str, Any], name: str) -> Any:
    if name not in o:
        raise CliError(f"No such field exists: `{name}`")
    return o[name]


def _int(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise CliError(f"Expected `int` value, received {json.dumps(v)}")
    if not -(1 << 31) <= v < 1 << 31:
        raise CliError(f"Expected `int` value, received {v} (out of range)")
    return v


def _str(v: Any) -> str:
    if not isinstance(v, str):
        raise CliError(f"Expected `string` value, received {json.dumps(v)}")
    return v


def _list(v: Any, item: str) -> list[Any]:
    if not isinstance(v, list):
        raise CliError(f"Expected JSON array of {item}, received {json.dumps(v)}")
    return v


def _version(o: dict[str, Any]) -> None:
    version = _int(o["version"]) if "version" in o else JSON_VERSION
    if version != JSON_VERSION:
        raise CliError(f"Not supported version field value {version}")


def parse_topics_to_move(text: str) -> list[str]:
    """{"topics": [{"topic": "foo"}], "version": 1}: the topic names, duplicates refused."""
    o = _obj(_load(text), "the topics to move")
    _version(o)
    topics = [_str(_field(_obj(t, "a topic"), "topic"))
              for t in _list(o.get("topics", []), "topics")]
    dups = sorted({t for t in topics if topics.count(t) > 1})
    if dups:
        raise CliError("List of topics to reassign contains duplicate entries: "
                       f"{', '.join(dups)}")
    return topics


@dataclass(frozen=True)
class ReassignmentFile:
    """A reassignment plan as written: partitions in file order (duplicates kept for the checks)
    and the log dirs named per replica ("any" means: wherever the broker puts it)."""

    partitions: list[tuple[TopicPartition, list[int]]]
    log_dirs: dict[tuple[str, int, int], str]

    @property
    def plan(self) -> Plan:
        return dict(self.partitions)


def parse_reassignment(text: str) -> ReassignmentFile:
    """{"version": 1, "partitions": [{"topic", "partition", "replicas", "log_dirs"?}]}."""
    o = _obj(_load(text), "the reassignment")
    _version(o)
    parts: list[tuple[TopicPartition, list[int]]] = []
    dirs: dict[tuple[str, int, int], str] = {}
    for item in _list(o.get("partitions", []), "partitions"):
        p = _obj(item, "a partition")
        tp = (_str(_field(p, "topic")), _int(_field(p, "partition")))
        replicas = [_int(r) for r in _list(_field(p, "replicas"), "replicas")]
        if "log_dirs" in p:
            log_dirs = [_str(d) for d in _list(p["log_dirs"], "log dirs")]
        else:
            log_dirs = [ANY_LOG_DIR] * len(replicas)
        if len(log_dirs) != len(replicas):
            raise CliError(f"Size of replicas list {_jlist(replicas)} is different from size of "
                           f"log dirs list {_jlist(log_dirs)} for partition {tp_text(tp)}")
        parts.append((tp, replicas))
        for r, d in zip(replicas, log_dirs, strict=True):
            if d != ANY_LOG_DIR:
                dirs[(tp[0], tp[1], r)] = d
    return ReassignmentFile(parts, dirs)


def _jlist(items: Sequence[Any]) -> str:
    """A Java List's toString: [a, b]."""
    return "[" + ", ".join(str(i) for i in items) + "]"


def check_execute(f: ReassignmentFile) -> Plan:
    """Kafka's parseExecuteAssignmentArgs checks: something to do, no empty replica list, no
    partition twice, no broker twice in one replica list."""
    if not f.partitions:
        raise CliError("Partition reassignment list cannot be empty")
    if any(not replicas for _, replicas in f.partitions):
        raise CliError("Partition replica list cannot be empty")
    tps = [tp for tp, _ in f.partitions]
    dup_tps = sorted_tps({tp for tp in tps if tps.count(tp) > 1})
    if dup_tps:
        raise CliError("Partition reassignment contains duplicate topic partitions: "
                       + ",".join(tp_text(tp) for tp in dup_tps))
    dup_replicas = []
    for tp, replicas in f.partitions:
        dups = sorted({r for r in replicas if replicas.count(r) > 1})
        if dups:
            dup_replicas.append(f"{tp_text(tp)} contains multiple entries for "
                                + ",".join(map(str, dups)))
    if dup_replicas:
        raise CliError("Partition replica lists may not contain duplicate entries: "
                       + ". ".join(dup_replicas))
    return f.plan


def parse_broker_list(text: str) -> list[int]:
    """--broker-list "1,2,3": ids, duplicates refused (Kafka's wording)."""
    out = []
    for item in text.split(","):
        try:
            out.append(int(item.strip()))
        except ValueError:
            raise CliError(f'For input string: "{item}" (--broker-list expects ids like '
                           '"1,2,3")') from None
    dups = sorted({b for b in out if out.count(b) > 1})
    if dups:
        raise CliError(f"Broker list contains duplicate entries: {_set_text(dups)}")
    return out


def _set_text(items: Iterable[Any]) -> str:
    return "[" + ", ".join(str(i) for i in items) + "]"


# ---- JSON writing --------------------------------------------------------------------------------
def format_plan(plan: Mapping[TopicPartition, Sequence[int]],
                log_dirs: Mapping[tuple[str, int, int], str] | None = None) -> str:
    """Kafka's formatAsReassignmentJson: compact JSON, partitions sorted by topic then index."""
    dirs = log_dirs or {}
    parts = [{"topic": t, "partition": p, "replicas": list(plan[(t, p)]),
              "log_dirs": [dirs.get((t, p, r), ANY_LOG_DIR) for r in plan[(t, p)]]}
             for t, p in sorted_tps(plan)]
    return json.dumps({"version": JSON_VERSION, "partitions": parts}, separators=(",", ":"))


# ---- --generate ----------------------------------------------------------------------------------
def propose(current: Mapping[TopicPartition, Sequence[int]], brokers: Sequence[int],
            rng: random.Random | None = None) -> Plan:
    """A new plan for whole topics over `brokers` (Kafka's calculateAssignment): each topic keeps
    its partition count and replication factor (its first partition's), placed as new partitions
    are placed, from a random start."""
    rng = rng or random.Random()
    by_topic: dict[str, dict[int, Sequence[int]]] = {}
    for (t, p), replicas in current.items():
        by_topic.setdefault(t, {})[p] = replicas
    ids = sorted(brokers)
    out: Plan = {}
    for topic, parts in sorted(by_topic.items()):
        rf = len(parts[min(parts)])
        if rf <= 0:
            raise CliError("Replication factor must be larger than 0.")
        if rf > len(ids):
            raise CliError(f"Replication factor: {rf} larger than available brokers: "
                           f"{len(ids)}.")
        n = len(ids)
        placed = place_replicas(ids, len(parts), rf, rng.randrange(n), rng.randrange(n))
        for p, replicas in enumerate(placed):
            out[(topic, p)] = list(replicas)
    return out


# ---- --throttle ----------------------------------------------------------------------------------
@dataclass
class Move:
    sources: set[int]
    destinations: set[int]


MoveMap = dict[str, dict[int, Move]]


def move_map(ongoing: Mapping[TopicPartition, tuple[Sequence[int], Sequence[int]]],
             proposed: Mapping[TopicPartition, Sequence[int]],
             current: Mapping[TopicPartition, Sequence[int]]) -> MoveMap:
    """Kafka's calculateProposedMoveMap: for every reassigning partition (the ongoing ones, given
    as (replicas, adding), and the proposed ones) the brokers it moves from and to."""
    moves: MoveMap = {}
    for (t, p), (replicas, adding) in ongoing.items():
        moves.setdefault(t, {})[p] = Move(set(replicas) - set(adding), set(adding))
    for (t, p), replicas in proposed.items():
        parts = moves.setdefault(t, {})
        if p in parts:
            sources = set(parts[p].sources)
        elif (t, p) in current:
            sources = set(current[(t, p)])
        else:
            raise CliError(f"Trying to reassign a topic partition {t}-{p} with 0 replicas")
        parts[p] = Move(sources, set(replicas) - sources)
    return moves


def leader_throttles(moves: MoveMap) -> dict[str, str]:
    """topic -> "partition:source,..." (sorted as text, as Kafka's TreeSet of strings)."""
    return {t: ",".join(sorted({f"{p}:{s}" for p, m in parts.items() for s in m.sources}))
            for t, parts in moves.items()}


def follower_throttles(moves: MoveMap) -> dict[str, str]:
    """topic -> "partition:destination,..." for destinations that are not also sources."""
    return {t: ",".join(sorted({f"{p}:{d}" for p, m in parts.items() for d in m.destinations
                                if d not in m.sources}))
            for t, parts in moves.items()}


def reassigning_brokers(moves: MoveMap) -> list[int]:
    return sorted({b for parts in moves.values() for m in parts.values()
                   for b in m.sources | m.destinations})
