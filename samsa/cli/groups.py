"""`samsa groups list|describe|delete|reset-offsets`, after Kafka's kafka-consumer-groups.sh."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from confluent_kafka import (
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    ConsumerGroupType,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, ClusterMetadata, ConsumerGroupDescription, OffsetSpec

from ._common import (
    REQUEST_TIMEOUT_S,
    CliError,
    UsageError,
    add_bootstrap,
    admin_result,
    comma_names,
    connect_admin,
    error_of,
    guarded,
    is_unreachable,
    print_table,
    unknown_topic,
)

# Kafka's names for group states and types (what kafka-consumer-groups.sh prints and accepts).
STATE_NAMES: dict[ConsumerGroupState, str] = {
    ConsumerGroupState.UNKNOWN: "Unknown",
    ConsumerGroupState.PREPARING_REBALANCING: "PreparingRebalance",
    ConsumerGroupState.COMPLETING_REBALANCING: "CompletingRebalance",
    ConsumerGroupState.STABLE: "Stable",
    ConsumerGroupState.DEAD: "Dead",
    ConsumerGroupState.EMPTY: "Empty",
}
TYPE_NAMES: dict[ConsumerGroupType, str] = {
    ConsumerGroupType.UNKNOWN: "Unknown",
    ConsumerGroupType.CONSUMER: "Consumer",
    ConsumerGroupType.CLASSIC: "Classic",
}
_INACTIVE = {ConsumerGroupState.EMPTY, ConsumerGroupState.DEAD}
_REBALANCING = {ConsumerGroupState.PREPARING_REBALANCING, ConsumerGroupState.COMPLETING_REBALANCING}

TP = tuple[str, int]


# ---- argument types -----------------------------------------------------------------------------
def group_states(text: str) -> list[ConsumerGroupState]:
    """argparse type for --state: one or more comma-separated state names (any case)."""
    by_name = {name.lower(): state for state, name in STATE_NAMES.items()}
    return comma_names(text, by_name, "group state", ", ".join(STATE_NAMES.values()))


def group_types(text: str) -> list[ConsumerGroupType]:
    """argparse type for --type: classic or consumer (comma-separated, any case)."""
    by_name = {name.lower(): t for t, name in TYPE_NAMES.items() if t != ConsumerGroupType.UNKNOWN}
    return comma_names(text, by_name, "group type", "classic, consumer")


def topic_partitions(text: str) -> tuple[str, list[int]]:
    """argparse type for --topic: TOPIC or TOPIC:P,P,... (Kafka's syntax)."""
    topic, sep, parts = text.partition(":")
    topic = topic.strip()
    if not topic:
        raise argparse.ArgumentTypeError(f"expected TOPIC or TOPIC:PARTITION,..., got {text!r}")
    if not sep:
        return topic, []
    try:
        partitions = [int(p) for p in parts.split(",") if p.strip()]
    except ValueError:
        partitions = []
    if not partitions or any(p < 0 for p in partitions):
        raise argparse.ArgumentTypeError(f"expected TOPIC:PARTITION,... with partition numbers "
                                         f">= 0, got {text!r}")
    return topic, partitions


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def datetime_ms(text: str) -> int:
    """argparse type for --to-datetime: ISO-8601 like 2026-11-22T10:00:00.000, UTC unless the text
    carries an offset (Z, +02:00, ...). Returns epoch milliseconds."""
    try:
        dt = datetime.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected an ISO-8601 date/time like 2026-11-22T10:00:00.000 (UTC unless an offset "
            f"such as +02:00 is given), got {text!r}") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return (dt - _EPOCH) // timedelta(milliseconds=1)


# ---- parsers ------------------------------------------------------------------------------------
def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("groups", help="list, describe, delete consumer groups and reset their offsets",
                       description="Manage consumer groups (like Kafka's kafka-consumer-groups.sh).")
    gsub = p.add_subparsers(dest="groups_command", required=True, metavar="ACTION")

    ls = gsub.add_parser("list", help="list consumer groups with their type and state",
                         description="One row per consumer group: GROUP, TYPE, STATE, laid out as "
                                     "kafka-consumer-groups.sh --list --type --state prints them.")
    ls.add_argument("--state", type=group_states, nargs="*", action="extend", default=[],
                    metavar="STATE", help="only groups in these states (Stable, Empty, "
                                          "PreparingRebalance, CompletingRebalance, Dead; "
                                          "space- or comma-separated; none given: all)")
    ls.add_argument("--type", type=group_types, nargs="*", action="extend", default=[],
                    metavar="TYPE", help="only groups of these types (classic, consumer; "
                                         "none given: all)")
    ls.add_argument("--json", action="store_true",
                    help="print a JSON list of {group, state, type} objects")
    add_bootstrap(ls, command_config=True)
    ls.set_defaults(func=guarded("samsa groups list", list_))

    d = gsub.add_parser("describe", help="show members, committed offsets and lag of groups",
                        description="For each group: its state and coordinator, then one row per "
                                    "partition with the committed offset (CURRENT-OFFSET), the log "
                                    "end offset, the lag and the member the partition is assigned to "
                                    "('-' if none).")
    d.add_argument("groups", nargs="*", metavar="GROUP")
    d.add_argument("--all-groups", action="store_true", help="describe every group")
    view = d.add_mutually_exclusive_group()
    view.add_argument("--members", action="store_true", help="show the members only")
    view.add_argument("--state", action="store_true",
                      help="show only the state, coordinator, assignment strategy and member count")
    d.add_argument("--verbose", action="store_true",
                   help="with --members: also the group instance id and the assigned partitions")
    d.add_argument("--json", action="store_true",
                   help="print a JSON list of rows with the same fields (numbers as integers, "
                        "'-' as null)")
    add_bootstrap(d, command_config=True)
    d.set_defaults(func=guarded("samsa groups describe", describe))

    rm = gsub.add_parser("delete", help="delete inactive groups and their committed offsets")
    rm.add_argument("groups", nargs="+", metavar="GROUP")
    add_bootstrap(rm, command_config=True)
    rm.set_defaults(func=guarded("samsa groups delete", delete))

    r = gsub.add_parser(
        "reset-offsets", help="change the committed offsets of an inactive group",
        description="Compute new committed offsets for an inactive group (state Empty or Dead) and "
                    "print them; apply them only with --execute (like kafka-consumer-groups.sh, "
                    "the default is a dry run).")
    r.add_argument("group", metavar="GROUP")
    scope = r.add_mutually_exclusive_group(required=True)
    scope.add_argument("--topic", type=topic_partitions, action="append", metavar="TOPIC[:P,P]",
                       help="a topic (all its partitions) or some of its partitions, repeatable")
    scope.add_argument("--all-topics", action="store_true",
                       help="every partition the group has a committed offset for")
    target = r.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-earliest", action="store_true", help="the oldest retained offset")
    target.add_argument("--to-latest", action="store_true", help="the log end offset")
    target.add_argument("--to-current", action="store_true",
                        help="the current committed offset (log end if none)")
    target.add_argument("--to-offset", type=int, metavar="N",
                        help="offset N (clamped to the partition's earliest..latest)")
    target.add_argument("--to-datetime", type=datetime_ms, metavar="ISO8601",
                        help="the first offset at or after this time, e.g. 2026-11-22T10:00:00.000 "
                             "(UTC unless an offset like +02:00 is given; log end if none)")
    target.add_argument("--shift-by", type=int, metavar="N",
                        help="the committed offset plus N (may be negative; clamped to "
                             "earliest..latest)")
    mode = r.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="only show the new offsets (default)")
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    r.add_argument("--json", action="store_true",
                   help="print a JSON list of {group, topic, partition, new_offset} objects")
    add_bootstrap(r, command_config=True)
    r.set_defaults(func=guarded("samsa groups reset-offsets", reset_offsets))


# ---- helpers ------------------------------------------------------------------------------------

def _flatten(values: Iterable[Sequence[Any]]) -> list[Any]:
    return list(dict.fromkeys(v for vs in values for v in vs))


def _message(e: BaseException) -> str:
    """Kafka's wording of an error plus its name: 'The group is not empty. (NON_EMPTY_GROUP)'."""
    err = error_of(e)
    if err is None:
        return str(e)
    text = (err.str() or "").removeprefix("Broker: ").strip()
    if text and not text.endswith("."):
        text += "."
    name = err.name()
    return f"{text} ({name})" if text and name not in text else (text or name)


def _code(e: BaseException) -> int | None:
    err = error_of(e)
    return err.code() if err is not None else None


def _state_name(state: Any) -> str:
    return STATE_NAMES.get(state, str(getattr(state, "name", state)))


def _type_name(t: Any) -> str:
    return TYPE_NAMES.get(t, str(getattr(t, "name", t)))




def _print_json(rows: Iterable[Any]) -> None:
    print(json.dumps([asdict(r) if not isinstance(r, dict) else r for r in rows], indent=2))


def _describe_groups(admin: AdminClient, groups: list[str]
                     ) -> dict[str, ConsumerGroupDescription | None]:
    """Descriptions by group id; None for a group that does not exist (Dead / GROUP_ID_NOT_FOUND)."""
    out: dict[str, ConsumerGroupDescription | None] = {}
    futures = admin.describe_consumer_groups(groups, request_timeout=REQUEST_TIMEOUT_S)
    for g in groups:
        try:
            desc = admin_result(futures[g])
        except KafkaException as e:
            if _code(e) == KafkaError.GROUP_ID_NOT_FOUND:
                out[g] = None
                continue
            if is_unreachable(e):
                raise
            raise CliError(f"cannot describe group {g!r}: {_message(e)}") from None
        out[g] = None if desc.state == ConsumerGroupState.DEAD else desc
    return out


def _committed(admin: AdminClient, group: str) -> dict[TP, int]:
    """The group's committed offsets (partitions without one are left out)."""
    req = [ConsumerGroupTopicPartitions(group)]
    try:
        res = admin_result(admin.list_consumer_group_offsets(req, request_timeout=REQUEST_TIMEOUT_S)[group])
    except KafkaException as e:
        if _code(e) == KafkaError.GROUP_ID_NOT_FOUND:
            return {}
        if is_unreachable(e):
            raise
        raise CliError(f"cannot fetch the committed offsets of group {group!r}: {_message(e)}") from None
    return {(tp.topic, tp.partition): int(tp.offset) for tp in res.topic_partitions or []
            if tp.error is None and tp.offset >= 0}


def _partition_exists(md: ClusterMetadata, tp: TP) -> bool:
    tm = md.topics.get(tp[0])
    return tm is not None and tm.error is None and tp[1] in tm.partitions


def _list_offsets(admin: AdminClient, tps: Iterable[TP], spec: OffsetSpec,
                  strict: bool) -> dict[TP, int]:
    """Offsets of partitions by ListOffsets; a failing partition is left out (or an error if
    strict)."""
    specs = {TopicPartition(t, p): spec for t, p in tps}
    if not specs:
        return {}
    out: dict[TP, int] = {}
    for tp, fut in admin.list_offsets(specs, request_timeout=REQUEST_TIMEOUT_S).items():
        try:
            out[(tp.topic, tp.partition)] = int(admin_result(fut).offset)
        except KafkaException as e:
            if is_unreachable(e):
                raise
            if strict:
                raise CliError(f"cannot look up offsets of {tp.topic}/{tp.partition}: "
                               f"{_message(e)}") from None
    return out


# ---- list ---------------------------------------------------------------------------------------
def list_(args: argparse.Namespace) -> int:
    admin, _ = connect_admin(args.bootstrap_server)
    kwargs: dict[str, Any] = {"request_timeout": REQUEST_TIMEOUT_S}
    states = _flatten(args.state)
    types = _flatten(args.type)
    if states:
        kwargs["states"] = set(states)
    if types:
        kwargs["types"] = set(types)
    res = admin_result(admin.list_consumer_groups(**kwargs))
    for e in res.errors or []:
        print(f"samsa groups list: warning: {_message(e)}", file=sys.stderr)
    rows = sorted(({"group": g.group_id, "state": _state_name(getattr(g, "state", None)),
                    "type": _type_name(getattr(g, "type", None))} for g in res.valid or []),
                  key=lambda r: r["group"])
    if args.json:
        _print_json(rows)
        return 0
    # Kafka's layout: GROUP padded to its longest name (at least 15) plus 10, then TYPE and
    # STATE padded to 20, one space apart
    width = max([15, *(len(r["group"]) for r in rows)]) + 10
    for group, gtype, state in [("GROUP", "TYPE", "STATE"),
                                *((r["group"], r["type"], r["state"]) for r in rows)]:
        print(f"{group:<{width}} {gtype:<20} {state:<20}")
    if not rows:
        print("No consumer groups found" + (" matching the filters." if states or types else "."),
              file=sys.stderr)
    return 0


# ---- describe -----------------------------------------------------------------------------------
@dataclass
class OffsetRow:
    group: str
    topic: str | None
    partition: int | None
    current_offset: int | None
    log_end_offset: int | None
    lag: int | None
    consumer_id: str | None
    host: str | None
    client_id: str | None


@dataclass
class MemberRow:
    group: str
    consumer_id: str
    group_instance_id: str | None
    host: str
    client_id: str
    partitions: int
    assignment: list[dict[str, Any]]


@dataclass
class StateRow:
    group: str
    coordinator: str | None
    coordinator_id: int | None
    assignment_strategy: str | None
    state: str
    type: str
    members: int


def _state_row(g: str, desc: ConsumerGroupDescription) -> StateRow:
    node = desc.coordinator
    return StateRow(group=g, coordinator=f"{node.host}:{node.port}" if node is not None else None,
                    coordinator_id=node.id if node is not None else None,
                    assignment_strategy=desc.partition_assignor or None,
                    state=_state_name(desc.state), type=_type_name(getattr(desc, "type", None)),
                    members=len(desc.members))


def _member_rows(g: str, desc: ConsumerGroupDescription) -> list[MemberRow]:
    rows = []
    for m in sorted(desc.members, key=lambda m: m.member_id):
        tps = sorted((tp.topic, tp.partition) for tp in m.assignment.topic_partitions)
        rows.append(MemberRow(group=g, consumer_id=m.member_id, group_instance_id=m.group_instance_id,
                              host=m.host, client_id=m.client_id, partitions=len(tps),
                              assignment=[{"topic": t, "partition": p} for t, p in tps]))
    return rows


def _offset_rows(g: str, desc: ConsumerGroupDescription, committed: dict[TP, int],
                 ends: dict[TP, int]) -> list[OffsetRow]:
    owner = {(tp.topic, tp.partition): m for m in desc.members
             for tp in m.assignment.topic_partitions}
    rows = []
    for tp in sorted(set(owner) | set(committed)):
        cur, end = committed.get(tp), ends.get(tp)
        m = owner.get(tp)
        rows.append(OffsetRow(group=g, topic=tp[0], partition=tp[1], current_offset=cur,
                              log_end_offset=end,
                              lag=end - cur if cur is not None and end is not None else None,
                              consumer_id=m.member_id if m else None, host=m.host if m else None,
                              client_id=m.client_id if m else None))
    for m in sorted(desc.members, key=lambda m: m.member_id):
        if not m.assignment.topic_partitions:
            rows.append(OffsetRow(g, None, None, None, None, None, m.member_id, m.host, m.client_id))
    return rows


def _assignment_text(assignment: list[dict[str, Any]]) -> str:
    by_topic: dict[str, list[int]] = {}
    for a in assignment:
        by_topic.setdefault(a["topic"], []).append(a["partition"])
    return ",".join(f"{t}({','.join(map(str, ps))})" for t, ps in sorted(by_topic.items())) or "-"


def describe(args: argparse.Namespace) -> int:
    if args.all_groups and args.groups:
        raise UsageError("give group names or --all-groups, not both")
    if not args.all_groups and not args.groups:
        raise UsageError("give at least one GROUP (or --all-groups)")
    if args.verbose and not args.members:
        raise UsageError("--verbose only goes with --members")
    admin, md = connect_admin(args.bootstrap_server)
    if args.all_groups:
        listed = admin_result(admin.list_consumer_groups(request_timeout=REQUEST_TIMEOUT_S))
        groups = sorted(g.group_id for g in listed.valid or [])
    else:
        groups = list(dict.fromkeys(args.groups))
    descs = _describe_groups(admin, groups) if groups else {}
    found = {g: d for g, d in descs.items() if d is not None}

    committed: dict[str, dict[TP, int]] = {}
    ends: dict[TP, int] = {}
    if not args.members and not args.state:
        committed = {g: _committed(admin, g) for g in found}
        wanted = {tp for offs in committed.values() for tp in offs}
        wanted |= {(tp.topic, tp.partition) for d in found.values() for m in d.members
                   for tp in m.assignment.topic_partitions}
        ends = _list_offsets(admin, sorted(tp for tp in wanted if _partition_exists(md, tp)),
                             OffsetSpec.latest(), strict=False)

    rows: list[Any] = []
    first = True
    for g, desc in found.items():
        if args.state:
            group_rows: list[Any] = [_state_row(g, desc)]
        elif args.members:
            group_rows = _member_rows(g, desc)
        else:
            group_rows = _offset_rows(g, desc, committed[g], ends)
        if args.json:
            rows += group_rows
            continue
        if not first:
            print()
        first = False
        if not desc.members and not args.state:
            print(f"Consumer group '{g}' has no active members.")
            if args.members:
                continue
            print()
        elif desc.state in _REBALANCING:
            print(f"Warning: Consumer group '{g}' is rebalancing.")
            print()
        if args.state:
            s = group_rows[0]
            coord = f"{s.coordinator} ({s.coordinator_id})" if s.coordinator else None
            print_table(["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
                         [[g, coord, s.assignment_strategy, s.state, s.members]])
        elif args.members:
            if args.verbose:
                print_table(["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID",
                              "#PARTITIONS", "ASSIGNMENT"],
                             [[r.group, r.consumer_id, r.group_instance_id, r.host, r.client_id,
                               r.partitions, _assignment_text(r.assignment)] for r in group_rows])
            else:
                print_table(["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"],
                             [[r.group, r.consumer_id, r.host, r.client_id, r.partitions]
                              for r in group_rows])
        else:
            s = _state_row(g, desc)
            print(f"Group: {g}\tState: {s.state}\tCoordinator: {s.coordinator} "
                  f"({s.coordinator_id})\tMembers: {s.members}")
            print()
            print_table(["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                          "CONSUMER-ID", "HOST", "CLIENT-ID"],
                         [[r.group, r.topic, r.partition, r.current_offset, r.log_end_offset, r.lag,
                           r.consumer_id, r.host, r.client_id] for r in group_rows])
    if args.json:
        _print_json(rows)
    missing = [g for g, d in descs.items() if d is None]
    for g in missing:
        print(f"samsa groups describe: error: Consumer group '{g}' does not exist.", file=sys.stderr)
    return 1 if missing else 0


# ---- delete -------------------------------------------------------------------------------------
def delete(args: argparse.Namespace) -> int:
    admin, _ = connect_admin(args.bootstrap_server)
    groups = list(dict.fromkeys(args.groups))
    futures = admin.delete_consumer_groups(groups, request_timeout=REQUEST_TIMEOUT_S)
    deleted, failed = [], []
    for g in groups:
        try:
            admin_result(futures[g])
            deleted.append(g)
        except KafkaException as e:
            failed.append((g, _message(e)))
    if deleted:
        names = ", ".join(f"'{g}'" for g in deleted)
        print(f"Deletion of requested consumer groups ({names}) was successful.")
    for g, why in failed:
        print(f"samsa groups delete: error: Group '{g}' could not be deleted due to: {why}",
              file=sys.stderr)
    return 1 if failed else 0


# ---- reset-offsets ------------------------------------------------------------------------------
def _partitions_to_reset(args: argparse.Namespace, md: ClusterMetadata,
                         committed: dict[TP, int]) -> list[TP]:
    if args.all_topics:
        return sorted(committed)
    out: list[TP] = []
    for topic, partitions in args.topic:
        tm = md.topics.get(topic)
        if tm is None or tm.error is not None:
            raise unknown_topic(topic)
        existing = sorted(tm.partitions)
        for p in partitions or existing:
            if p not in tm.partitions:
                raise CliError(f"topic {topic!r} has no partition {p} "
                               f"(it has {len(existing)}: 0..{len(existing) - 1})")
            out.append((topic, p))
    return sorted(dict.fromkeys(out))


def _clamp(requested: dict[TP, int], earliest: dict[TP, int], latest: dict[TP, int]) -> dict[TP, int]:
    """Kafka's checkOffsetsRange: keep requested offsets within [log start, log end]."""
    out = {}
    for tp, off in requested.items():
        lo, hi = earliest[tp], latest[tp]
        name = f"{tp[0]}-{tp[1]}"
        if off < lo:
            print(f"New offset ({off}) is lower than earliest offset for topic partition {name}. "
                  f"Value will be set to {lo}", file=sys.stderr)
            off = lo
        elif off > hi:
            print(f"New offset ({off}) is higher than latest offset for topic partition {name}. "
                  f"Value will be set to {hi}", file=sys.stderr)
            off = hi
        out[tp] = off
    return out


def _new_offsets(args: argparse.Namespace, admin: AdminClient, tps: list[TP],
                 committed: dict[TP, int]) -> dict[TP, int]:
    def offsets(spec: OffsetSpec) -> dict[TP, int]:
        return _list_offsets(admin, tps, spec, strict=True)

    if args.to_earliest:
        return offsets(OffsetSpec.earliest())
    if args.to_latest:
        return offsets(OffsetSpec.latest())
    if args.to_current:
        latest = offsets(OffsetSpec.latest())
        return {tp: committed.get(tp, latest[tp]) for tp in tps}
    if args.to_datetime is not None:
        found = offsets(OffsetSpec.for_timestamp(args.to_datetime))
        missing = [tp for tp in tps if found.get(tp, -1) < 0]
        latest = _list_offsets(admin, missing, OffsetSpec.latest(), strict=True)
        return {tp: found[tp] if found.get(tp, -1) >= 0 else latest[tp] for tp in tps}
    if args.to_offset is not None:
        requested = {tp: args.to_offset for tp in tps}
    else:
        for tp in tps:
            if tp not in committed:
                raise CliError(f"Cannot shift offset for partition {tp[0]}-{tp[1]} since there is "
                               f"no current committed offset")
        requested = {tp: committed[tp] + args.shift_by for tp in tps}
    return _clamp(requested, offsets(OffsetSpec.earliest()), offsets(OffsetSpec.latest()))


def reset_offsets(args: argparse.Namespace) -> int:
    group = args.group
    admin, md = connect_admin(args.bootstrap_server)
    desc = _describe_groups(admin, [group])[group]
    state = desc.state if desc is not None else ConsumerGroupState.DEAD
    if state not in _INACTIVE:
        raise CliError(f"Assignments can only be reset if the group '{group}' is inactive, but the "
                       f"current state is {_state_name(state)}.")
    committed = _committed(admin, group)
    tps = _partitions_to_reset(args, md, committed)
    new = _new_offsets(args, admin, tps, committed)

    if args.execute and tps:
        req = [ConsumerGroupTopicPartitions(group, [TopicPartition(t, p, new[(t, p)])
                                                    for t, p in tps])]
        try:
            res = admin_result(admin.alter_consumer_group_offsets(
                req, request_timeout=REQUEST_TIMEOUT_S)[group])
        except KafkaException as e:
            if is_unreachable(e):
                raise
            raise CliError(f"cannot reset the offsets of group '{group}': {_message(e)}") from None
        bad = [tp for tp in res.topic_partitions or [] if tp.error is not None]
        if bad:
            tp = bad[0]
            raise CliError(f"cannot reset the offset of {tp.topic}/{tp.partition} for group "
                           f"'{group}': {_message(KafkaException(tp.error))}")
    elif not args.execute and not args.dry_run:
        print("WARN: No action will be performed as the --execute option is missing. Add --execute "
              "to commit the new offsets (or --dry-run to just show them).", file=sys.stderr)

    rows = [{"group": group, "topic": t, "partition": p, "new_offset": new[(t, p)]} for t, p in tps]
    if args.json:
        _print_json(rows)
    else:
        print_table(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
                     [[r["group"], r["topic"], r["partition"], r["new_offset"]] for r in rows])
    return 0
