"""`samsa topics create|list|describe|alter|delete`, after Kafka's kafka-topics.sh."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicCollection, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ClusterMetadata,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

from ._common import (
    REQUEST_TIMEOUT_S,
    CliError,
    UsageError,
    add_bootstrap,
    admin_result,
    connect_admin,
    describe_error,
    error_of,
    guarded,
    key_value,
    unknown_topic,
)


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("topics", help="create, list, describe, alter and delete topics",
                       description="Manage topics (like Kafka's kafka-topics.sh).")
    tsub = p.add_subparsers(dest="topics_command", required=True, metavar="ACTION")

    c = tsub.add_parser("create", help="create a topic")
    c.add_argument("name")
    c.add_argument("--partitions", type=int, help="partition count (default: broker's "
                                                  "num.partitions)")
    c.add_argument("--replication-factor", type=int,
                   help="replication factor (default: broker's default.replication.factor)")
    c.add_argument("--config", type=key_value, action="append", default=[], metavar="KEY=VALUE",
                   help="topic config override, repeatable (e.g. retention.ms=86400000)")
    c.add_argument("--if-not-exists", action="store_true",
                   help="succeed without doing anything if the topic exists")
    add_bootstrap(c, command_config=True)
    c.set_defaults(func=guarded("samsa topics create", create))

    ls = tsub.add_parser("list", help="list topic names")
    add_bootstrap(ls, command_config=True)
    ls.set_defaults(func=guarded("samsa topics list", list_))

    d = tsub.add_parser("describe", help="show partitions, offsets and configs of topics")
    d.add_argument("names", nargs="*", metavar="NAME", help="topics (default: all)")
    d.add_argument("--under-replicated-partitions", action="store_true",
                   help="only partitions whose ISR is smaller than their replica set")
    d.add_argument("--unavailable-partitions", action="store_true",
                   help="only partitions without a leader, or led by a broker that is not live")
    d.add_argument("--under-min-isr-partitions", action="store_true",
                   help="only partitions whose ISR is smaller than min.insync.replicas")
    d.add_argument("--at-min-isr-partitions", action="store_true",
                   help="only partitions whose ISR is exactly min.insync.replicas")
    add_bootstrap(d, command_config=True)
    d.set_defaults(func=guarded("samsa topics describe", describe))

    a = tsub.add_parser("alter", help="add partitions or change topic configs")
    a.add_argument("name")
    a.add_argument("--partitions", type=int, help="new (larger) partition count")
    a.add_argument("--config", type=key_value, action="append", default=[], metavar="KEY=VALUE",
                   help="set a topic config, repeatable")
    a.add_argument("--delete-config", action="append", default=[], metavar="KEY",
                   help="remove a topic config override (back to the default), repeatable")
    add_bootstrap(a, command_config=True)
    a.set_defaults(func=guarded("samsa topics alter", alter))

    rm = tsub.add_parser("delete", help="delete a topic and its data")
    rm.add_argument("name")
    rm.add_argument("--if-exists", action="store_true",
                    help="succeed without doing anything if the topic does not exist")
    add_bootstrap(rm, command_config=True)
    rm.set_defaults(func=guarded("samsa topics delete", delete))



def _require_topic(md: ClusterMetadata, name: str) -> None:
    if name not in md.topics:
        raise unknown_topic(name)


def create(args: argparse.Namespace) -> int:
    admin, md = connect_admin(args.bootstrap_server)
    if args.if_not_exists and args.name in md.topics:
        return 0
    topic = NewTopic(args.name,
                     num_partitions=args.partitions if args.partitions is not None else -1,
                     replication_factor=(args.replication_factor
                                         if args.replication_factor is not None else -1),
                     config=dict(args.config))
    try:
        admin_result(admin.create_topics([topic], request_timeout=REQUEST_TIMEOUT_S)[args.name])
    except KafkaException as e:
        err = error_of(e)
        if err is not None and err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
            if args.if_not_exists:
                return 0
            raise CliError(f"topic {args.name!r} already exists") from None
        raise CliError(f"cannot create topic {args.name!r}: {describe_error(e)}") from None
    print(f"Created topic {args.name}.")
    return 0


def list_(args: argparse.Namespace) -> int:
    _, md = connect_admin(args.bootstrap_server)
    for name in sorted(md.topics):
        print(name)
    return 0


def _uuid_text(u: Any) -> str:
    """Kafka prints topic ids in URL-safe base64 (librdkafka's str() uses the standard alphabet)."""
    return str(u).replace("+", "-").replace("/", "_").rstrip("=")


def _rid(n: Any) -> int:
    return int(n.id if hasattr(n, "id") else n)


def _node_id(n: Any) -> int | None:
    """A librdkafka Node (or id) as an id; None for no node (no leader)."""
    if n is None:
        return None
    v = int(n.id if hasattr(n, "id") else n)
    return v if v >= 0 else None


@dataclass(frozen=True)
class _Part:
    """One partition as kafka-topics.sh --describe shows it."""

    index: int
    leader: int | None  # None: no leader
    replicas: list[int]
    isr: list[int]
    adding: list[int] | None = None  # set while the partition is being reassigned
    removing: list[int] | None = None

    @property
    def replication_factor(self) -> int:
        """Kafka's: while reassigning, the replicas that are not being added."""
        return len(self.replicas) - len(self.adding or ())

    def line(self, topic: str) -> str:
        text = (f"\tTopic: {topic}\tPartition: {self.index}\t"
                f"Leader: {'none' if self.leader is None else self.leader}\t"
                f"Replicas: {','.join(map(str, self.replicas))}\t"
                f"Isr: {','.join(map(str, self.isr))}")
        if self.adding is not None:
            text += (f"\tAdding Replicas: {','.join(map(str, self.adding))}"
                     f"\tRemoving Replicas: {','.join(map(str, self.removing or ()))}")
        return text


REPORTS = ("under_replicated_partitions", "unavailable_partitions", "under_min_isr_partitions",
           "at_min_isr_partitions")


def _reported(args: argparse.Namespace, p: _Part, min_isr: int, live: set[int]) -> bool:
    """kafka-topics.sh's report filters: a partition is shown if any chosen one matches."""
    no_leader = p.leader is None
    return ((args.under_replicated_partitions and p.replication_factor - len(p.isr) > 0)
            or (args.unavailable_partitions and (no_leader or p.leader not in live))
            or (args.under_min_isr_partitions and (no_leader or len(p.isr) < min_isr))
            or (args.at_min_isr_partitions and len(p.isr) == min_isr))


def _reassignments(bootstrap: str) -> dict[tuple[str, int], tuple[list[int], list[int], list[int]]]:
    """Partitions being reassigned (ListPartitionReassignments); none if it cannot be asked,
    as kafka-topics.sh treats an unsupported or refused request."""
    from . import partitions

    try:
        with partitions._connect(bootstrap) as client:
            return partitions.list_reassignments(client)
    except CliError:
        return {}


def describe(args: argparse.Namespace) -> int:
    admin, md = connect_admin(args.bootstrap_server)
    names = list(dict.fromkeys(args.names)) or sorted(md.topics)
    missing = [n for n in names if n not in md.topics]
    if missing:
        raise unknown_topic(missing[0])
    if not names:
        return 0
    report = any(getattr(args, r) for r in REPORTS)

    # Partition layout and topic ids (DescribeTopics); fall back to plain metadata without ids.
    layout: dict[str, tuple[str, list[_Part]]] = {}
    try:
        futures = admin.describe_topics(TopicCollection(names), request_timeout=REQUEST_TIMEOUT_S)
        for name in names:
            td = admin_result(futures[name])
            parts = [_Part(p.id, _node_id(p.leader), [_rid(r) for r in p.replicas],
                           [_rid(r) for r in p.isr])
                     for p in sorted(td.partitions, key=lambda p: p.id)]
            layout[name] = (_uuid_text(td.topic_id), parts)
    except KafkaException:
        for name in names:
            tm = md.topics[name]
            parts = [_Part(p.id, p.leader if p.leader >= 0 else None, list(p.replicas),
                           list(p.isrs))
                     for p in sorted(tm.partitions.values(), key=lambda p: p.id)]
            layout[name] = ("unknown", parts)
    moving = _reassignments(args.bootstrap_server)
    for name, (tid, parts) in layout.items():
        layout[name] = (tid, [replace(p, replicas=moving[(name, p.index)][0],
                                      adding=moving[(name, p.index)][1],
                                      removing=moving[(name, p.index)][2])
                              if (name, p.index) in moving else p for p in parts])

    # Topic configs: the ones that differ from the built-in defaults, and min.insync.replicas.
    resources = [ConfigResource(ResourceType.TOPIC, n) for n in names]
    cfutures = admin.describe_configs(resources, request_timeout=REQUEST_TIMEOUT_S)
    configs: dict[str, list[str]] = {}
    min_isr: dict[str, int] = {}
    for res, fut in cfutures.items():
        entries: dict[str, ConfigEntry] = admin_result(fut)
        shown = []
        for key, e in sorted(entries.items()):
            if key == "min.insync.replicas" and e.value is not None:
                min_isr[res.name] = int(e.value)
            if e.is_default or e.source in (ConfigSource.DEFAULT_CONFIG,
                                            ConfigSource.DEFAULT_CONFIG.value):
                continue
            value = "(sensitive)" if e.is_sensitive else e.value
            shown.append(f"{key}={value}")
        configs[res.name] = shown

    if report:
        live = set(md.brokers)
        for name in names:
            for p in layout[name][1]:
                if _reported(args, p, min_isr.get(name, 1), live):
                    print(p.line(name))
        return 0

    # Log start offset and high watermark of every partition.
    specs: dict[TopicPartition, OffsetSpec] = {}
    for name in names:
        for p in layout[name][1]:
            specs[TopicPartition(name, p.index)] = OffsetSpec.earliest()
    starts = _list_offsets(admin, specs)
    ends = _list_offsets(admin, {tp: OffsetSpec.latest() for tp in specs})

    for name in names:
        topic_id, parts = layout[name]
        rf = parts[0].replication_factor if parts else 0
        print(f"Topic: {name}\tTopicId: {topic_id}\tPartitionCount: {len(parts)}\t"
              f"ReplicationFactor: {rf}\tConfigs: {','.join(configs.get(name, []))}")
        for p in parts:
            print(f"{p.line(name)}\tLogStartOffset: {starts.get((name, p.index), '?')}\t"
                  f"HighWatermark: {ends.get((name, p.index), '?')}")
    return 0


def _list_offsets(admin: AdminClient,
                  specs: dict[TopicPartition, OffsetSpec]) -> dict[tuple[str, int], int]:
    if not specs:
        return {}
    out: dict[tuple[str, int], int] = {}
    for tp, fut in admin.list_offsets(specs, request_timeout=REQUEST_TIMEOUT_S).items():
        try:
            out[(tp.topic, tp.partition)] = int(admin_result(fut).offset)
        except KafkaException:
            pass  # shown as '?'
    return out


def alter(args: argparse.Namespace) -> int:
    if args.partitions is None and not args.config and not args.delete_config:
        raise UsageError("nothing to alter: give --partitions, --config or --delete-config")
    admin, md = connect_admin(args.bootstrap_server)
    _require_topic(md, args.name)
    done: list[str] = []
    if args.config or args.delete_config:
        entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
                   for k, v in args.config]
        entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE)
                    for k in args.delete_config]
        res = ConfigResource(ResourceType.TOPIC, args.name, incremental_configs=entries)
        try:
            for fut in admin.incremental_alter_configs(
                    [res], request_timeout=REQUEST_TIMEOUT_S).values():
                admin_result(fut)
        except KafkaException as e:
            raise CliError(f"cannot alter configs of {args.name!r}: {describe_error(e)}") from None
        done += [f"set {k}={v}" for k, v in args.config]
        done += [f"removed {k}" for k in args.delete_config]
    if args.partitions is not None:
        before = len(md.topics[args.name].partitions)
        try:
            admin_result(admin.create_partitions([NewPartitions(args.name, args.partitions)],
                                            request_timeout=REQUEST_TIMEOUT_S)[args.name])
        except KafkaException as e:
            raise CliError(f"cannot change partitions of {args.name!r}: "
                           f"{describe_error(e)}") from None
        done.append(f"partitions {before} -> {args.partitions}")
    print(f"Altered topic {args.name}: {'; '.join(done)}.")
    return 0


def delete(args: argparse.Namespace) -> int:
    admin, md = connect_admin(args.bootstrap_server)
    if args.name not in md.topics:
        if args.if_exists:
            return 0
        raise unknown_topic(args.name)
    try:
        admin_result(admin.delete_topics([args.name], request_timeout=REQUEST_TIMEOUT_S)[args.name])
    except KafkaException as e:
        err = error_of(e)
        if err is not None and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            if args.if_exists:
                return 0
            raise unknown_topic(args.name) from None
        raise CliError(f"cannot delete topic {args.name!r}: {describe_error(e)}") from None
    print(f"Deleted topic {args.name}.")
    return 0
