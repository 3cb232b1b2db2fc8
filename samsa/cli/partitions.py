"""`samsa partitions reassign` (Kafka's kafka-reassign-partitions.sh: --generate, --execute,
--verify, --cancel, --list, with its JSON files, throttles and output) and `samsa partitions
elect-leaders` (kafka-leader-election.sh), over the raw protocol: AlterPartitionReassignments,
ListPartitionReassignments and ElectLeaders, which confluent-kafka does not expose, with Metadata
for the current layout and IncrementalAlterConfigs for throttles."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import _reassign as R
from ._common import CliError, UsageError, add_bootstrap, guarded

if TYPE_CHECKING:
    from ._wire import Node, WireClient

PROG = "samsa partitions"
REQUEST_TIMEOUT_MS = 30_000
ELECTION_TYPES = {"PREFERRED": 0, "UNCLEAN": 1}
ELECTION_NOT_NEEDED = 84
TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
SET, DELETE = 0, 1
WAIT_POLL_S = 0.5

CANNOT_EXECUTE = ("Cannot execute because there is an existing partition assignment.  Use "
                  "--additional to override this and create a new partition assignment in "
                  "addition to the existing one. The --additional flag can also be used to change "
                  "the throttle by resubmitting the current reassignment.")
RUN_VERIFY = ("Warning: You must run --verify periodically, until the reassignment completes, to "
              "ensure the throttle is removed.")


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("partitions", help="reassign partitions, elect leaders",
                       description="Move partition replicas between brokers and elect leaders "
                                   "(like Kafka's kafka-reassign-partitions.sh and "
                                   "kafka-leader-election.sh).")
    psub = p.add_subparsers(dest="partitions_command", required=True, metavar="ACTION")

    r = psub.add_parser("reassign", help="generate, execute, verify or cancel a reassignment",
                        description="Move partition replicas between brokers "
                                    "(kafka-reassign-partitions.sh).")
    actions = r.add_mutually_exclusive_group(required=True)
    actions.add_argument("--generate", action="store_true",
                         help="propose a plan moving the topics of --topics-to-move-json-file "
                              "onto --broker-list")
    actions.add_argument("--execute", action="store_true",
                         help="start the reassignment of --reassignment-json-file")
    actions.add_argument("--verify", action="store_true",
                         help="report whether the reassignment of --reassignment-json-file is "
                              "done; once it is, remove the throttles")
    actions.add_argument("--cancel", action="store_true",
                         help="cancel the active reassignments of --reassignment-json-file")
    actions.add_argument("--list", action="store_true",
                         help="list the reassignments in progress")
    r.add_argument("--topics-to-move-json-file", metavar="FILE",
                   help='with --generate: {"topics": [{"topic": "foo"}], "version": 1}')
    r.add_argument("--broker-list", metavar="IDS",
                   help='with --generate: the brokers to place replicas on, e.g. "1,2,3"')
    r.add_argument("--disable-rack-aware", action="store_true",
                   help="with --generate: accepted; Samsa places replicas without racks")
    r.add_argument("--reassignment-json-file", metavar="FILE",
                   help="with --execute, --verify, --cancel: the plan (the format --generate "
                        "prints)")
    r.add_argument("--additional", action="store_true",
                   help="with --execute: start even though other reassignments are in progress")
    r.add_argument("--throttle", type=int, default=-1, metavar="B/S",
                   help="with --execute: limit replication of the moving replicas to this many "
                        "bytes/s per broker (until --verify sees the reassignment done)")
    r.add_argument("--preserve-throttles", action="store_true",
                   help="with --verify or --cancel: do not remove the throttles")
    r.add_argument("--wait", action="store_true",
                   help="with --verify: poll until the reassignment is done, showing progress "
                        "(Samsa addition)")
    r.add_argument("--wait-timeout", type=float, default=600.0, metavar="S",
                   help="with --wait: give up after this many seconds (default 600)")
    add_bootstrap(r, command_config=True)
    r.set_defaults(func=guarded(f"{PROG} reassign", reassign))

    e = psub.add_parser("elect-leaders", help="run preferred or unclean leader elections",
                        description="Elect partition leaders (kafka-leader-election.sh).")
    e.add_argument("--election-type", required=True, type=str.upper, metavar="TYPE",
                   choices=sorted(ELECTION_TYPES),
                   help="PREFERRED (move leadership back to the first replica) or UNCLEAN (let an "
                        "out-of-sync replica lead a partition that has no leader: acknowledged "
                        "records may be lost)")
    e.add_argument("--topic", help="the topic of --partition")
    e.add_argument("--partition", type=int, help="the partition to elect a leader for")
    e.add_argument("--all-topic-partitions", action="store_true",
                   help="every partition eligible for this election type")
    e.add_argument("--path-to-json-file", metavar="FILE",
                   help='{"partitions": [{"topic": "foo", "partition": 1}]}')
    add_bootstrap(e, command_config=True)
    e.set_defaults(func=guarded(f"{PROG} elect-leaders", elect_leaders))


# ---- requests ------------------------------------------------------------------------------------
def _connect(bootstrap: str) -> WireClient:
    from ._wire import WireClient  # lazily: kio takes a while to import

    return WireClient(bootstrap, client_id="reassign-partitions-tool")


def _error_name(code: int) -> str:
    from ._wire import error_name

    return error_name(code)


def _exception_name(code: int) -> str:
    """The class name of the Java exception Kafka's tools print for an error code."""
    name = _error_name(code)
    if name.startswith("error code"):
        return name
    words = name.lower().split("_")
    if words[-1] == "exception":
        words = words[:-1]
    return "org.apache.kafka.common.errors." + "".join(w.capitalize() for w in words) + "Exception"


@dataclass(frozen=True)
class PartitionInfo:
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


def live_brokers(client: WireClient) -> dict[int, Node]:
    """The brokers Metadata lists (Kafka's describeCluster nodes: registered and unfenced)."""
    return {n.node_id: n for n in client.brokers()}


def describe_topics(client: WireClient, topics: Iterable[str]) -> dict[str, dict[int, PartitionInfo]]:
    """Partitions of each topic; an unknown topic is Kafka's "Topic t not found."."""
    names = sorted(set(topics))
    if not names:
        return {}
    md = client.metadata(names)
    out: dict[str, dict[int, PartitionInfo]] = {}
    for t in md.topics:
        if t.error_code == 3:  # UNKNOWN_TOPIC_OR_PARTITION
            raise CliError(f"Topic {t.name} not found.")
        if t.error_code != 0:
            raise CliError(f"cannot describe topic {t.name}: {_error_name(t.error_code)}")
        out[t.name] = {int(p.partition_index): PartitionInfo(
            int(p.leader_id), tuple(int(r) for r in p.replica_nodes),
            tuple(int(r) for r in p.isr_nodes)) for p in t.partitions}
    return out


Ongoing = dict[R.TopicPartition, tuple[list[int], list[int], list[int]]]


def list_reassignments(client: WireClient,
                       tps: Iterable[R.TopicPartition] | None = None) -> Ongoing:
    """tp -> (replicas, adding, removing) of the reassignments in progress (all, or of `tps`)."""
    from ._wire import LIST_PARTITION_REASSIGNMENTS

    topics: list[dict[str, Any]] | None = None
    if tps is not None:
        by_topic: dict[str, list[int]] = {}
        for t, p in R.sorted_tps(tps):
            by_topic.setdefault(t, []).append(p)
        topics = [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]
    resp = client.call(LIST_PARTITION_REASSIGNMENTS,
                       {"timeout": REQUEST_TIMEOUT_MS, "topics": topics})
    if resp.error_code != 0:
        raise CliError(f"cannot list partition reassignments: "
                       f"{resp.error_message or _error_name(resp.error_code)}")
    return {(t.name, int(p.partition_index)): ([int(r) for r in p.replicas],
                                               [int(r) for r in p.adding_replicas],
                                               [int(r) for r in p.removing_replicas])
            for t in resp.topics for p in t.partitions}


def alter_reassignments(client: WireClient,
                        targets: Mapping[R.TopicPartition, Sequence[int] | None]
                        ) -> dict[R.TopicPartition, str]:
    """Start (replicas) or cancel (None) reassignments; the partitions that failed, with why."""
    from ._wire import ALTER_PARTITION_REASSIGNMENTS

    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (t, p) in R.sorted_tps(targets):
        replicas = targets[(t, p)]
        by_topic.setdefault(t, []).append(
            {"partition_index": p, "replicas": None if replicas is None else list(replicas)})
    resp = client.call(ALTER_PARTITION_REASSIGNMENTS, {
        "timeout": REQUEST_TIMEOUT_MS,
        "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]})
    if resp.error_code != 0:
        why = resp.error_message or _error_name(resp.error_code)
        return {tp: why for tp in targets}
    errors = {}
    for t in resp.responses:
        for p in t.partitions:
            if p.error_code != 0:
                errors[(t.name, int(p.partition_index))] = \
                    f"{_exception_name(p.error_code)}: {p.error_message or _error_name(p.error_code)}"
    return errors


def alter_configs(client: WireClient, resources: Sequence[tuple[int, str, list[tuple[str, int, str | None]]]],
                  nodes: Mapping[int, Node] | None = None) -> None:
    """IncrementalAlterConfigs; a broker resource goes to that broker when it is live (as Kafka's
    admin client sends it), everything else to the bootstrap broker."""
    from ._wire import INCREMENTAL_ALTER_CONFIGS

    groups: dict[int | None, list[dict[str, Any]]] = {}
    for rtype, name, ops in resources:
        target = int(name) if rtype == BROKER_RESOURCE and nodes and name.isdigit() \
            and int(name) in nodes else None
        groups.setdefault(target, []).append({
            "resource_type": rtype, "resource_name": name,
            "configs": [{"name": k, "config_operation": op, "value": v} for k, op, v in ops]})
    for target, res in groups.items():
        node = nodes[target] if nodes is not None and target is not None else None
        resp = client.call(INCREMENTAL_ALTER_CONFIGS, {"resources": res, "validate_only": False},
                           node=node)
        for r in resp.responses:
            if r.error_code != 0:
                kind = "topic" if r.resource_type == TOPIC_RESOURCE else "broker"
                raise CliError(f"cannot change the configs of {kind} {r.resource_name!r}: "
                               f"{r.error_message or _error_name(r.error_code)}")


# ---- reassign ------------------------------------------------------------------------------------
def _read(path: str | None, option: str) -> str:
    if not path:
        raise UsageError(f"Missing required argument \"[{option}]\"")
    try:
        return Path(path).read_text()
    except OSError as e:
        raise CliError(f"cannot read {path}: {e.strerror or e}") from None


_ALLOWED = {
    "generate": {"topics_to_move_json_file", "broker_list", "disable_rack_aware"},
    "execute": {"reassignment_json_file", "additional", "throttle"},
    "verify": {"reassignment_json_file", "preserve_throttles", "wait", "wait_timeout"},
    "cancel": {"reassignment_json_file", "preserve_throttles"},
    "list": set(),
}
_DEFAULTS = {"topics_to_move_json_file": None, "broker_list": None, "disable_rack_aware": False,
             "reassignment_json_file": None, "additional": False, "throttle": -1,
             "preserve_throttles": False, "wait": False, "wait_timeout": 600.0}


def _check_options(args: argparse.Namespace, action: str) -> None:
    """Kafka's rule: an option another action needs is an error, not silently ignored."""
    for name, default in _DEFAULTS.items():
        if getattr(args, name) != default and name not in _ALLOWED[action]:
            raise UsageError(f'Option "--{name.replace("_", "-")}" can\'t be used with action '
                             f'"--{action}"')


def reassign(args: argparse.Namespace) -> int:
    action = next(a for a in _ALLOWED if getattr(args, a))
    _check_options(args, action)
    if action == "generate":
        topics_json = _read(args.topics_to_move_json_file, "topics-to-move-json-file")
        if args.broker_list is None:
            raise UsageError('Missing required argument "[broker-list]"')
        brokers = R.parse_broker_list(args.broker_list)
        topics = R.parse_topics_to_move(topics_json)
        with _connect(args.bootstrap_server) as client:
            return generate(client, topics, brokers)
    if action == "list":
        with _connect(args.bootstrap_server) as client:
            print(_ongoing_text(list_reassignments(client)))
        return 0
    text = _read(args.reassignment_json_file, "reassignment-json-file")
    f = R.parse_reassignment(text)
    if f.log_dirs:
        raise CliError("Samsa does not move replicas between log directories: give \"any\" as "
                       "every log dir of the reassignment")
    if action == "execute":
        plan = R.check_execute(f)
        with _connect(args.bootstrap_server) as client:
            return execute(client, plan, args.additional, args.throttle)
    with _connect(args.bootstrap_server) as client:
        if action == "verify":
            return verify(client, f.partitions, args.preserve_throttles,
                          args.wait_timeout if args.wait else None)
        return cancel(client, f.partitions, args.preserve_throttles)


def _assignment(info: Mapping[str, Mapping[int, PartitionInfo]]) -> R.Plan:
    return {(t, p): list(pi.replicas) for t, parts in info.items() for p, pi in parts.items()}


def generate(client: WireClient, topics: list[str], brokers: list[int]) -> int:
    current = _assignment(describe_topics(client, topics))
    live = live_brokers(client)
    usable = [b for b in sorted(live) if b in set(brokers)]  # unknown ids are left out, as Kafka
    proposed = R.propose(current, usable)
    print("Current partition replica assignment")
    print(R.format_plan(current))
    print()
    print("Proposed partition reassignment configuration")
    print(R.format_plan(proposed))
    return 0


def execute(client: WireClient, plan: R.Plan, additional: bool, throttle: int) -> int:
    ongoing = list_reassignments(client)
    if ongoing and not additional:
        raise CliError(CANNOT_EXECUTE)
    live = live_brokers(client)
    unknown = sorted({b for replicas in plan.values() for b in replicas} - set(live))
    if unknown:
        raise CliError(f"Unknown broker id {unknown[0]}")
    info = describe_topics(client, {t for t, _ in plan})
    current = _assignment(info)
    missing = [tp for tp in R.sorted_tps(plan) if tp not in current]
    if missing:
        raise CliError("Unable to find partition: " + ", ".join(R.tp_text(tp) for tp in missing))
    print("Current partition replica assignment")
    print()
    print(R.format_plan({tp: current[tp] for tp in plan}))
    print()
    print("Save this to use as the --reassignment-json-file option during rollback")
    if throttle >= 0:
        print(RUN_VERIFY)
        moves = R.move_map({tp: (r, a) for tp, (r, a, _) in ongoing.items()}, plan, current)
        set_throttles(client, moves, throttle, live)
        print(f"The inter-broker throttle limit was set to {throttle} B/s")
    errors = alter_reassignments(client, plan)
    if errors:
        raise CliError("Error reassigning partition(s):\n" + "\n".join(
            f"{R.tp_text(tp)}: {errors[tp]}" for tp in R.sorted_tps(errors)))
    print(f"Successfully started partition reassignment{'' if len(plan) == 1 else 's'} for "
          + ",".join(R.tp_text(tp) for tp in R.sorted_tps(plan)))
    return 0


def set_throttles(client: WireClient, moves: R.MoveMap, rate: int,
                  live: Mapping[int, Node]) -> None:
    """Kafka's modifyReassignmentThrottle: the moving replicas listed in each topic's
    leader/follower throttled-replica configs, the rate on every broker involved."""
    leaders, followers = R.leader_throttles(moves), R.follower_throttles(moves)
    alter_configs(client, [(TOPIC_RESOURCE, t, [(R.LEADER_REPLICAS, SET, leaders[t]),
                                                 (R.FOLLOWER_REPLICAS, SET, followers[t])])
                           for t in sorted(moves)])
    alter_configs(client, [(BROKER_RESOURCE, str(b), [(R.LEADER_RATE, SET, str(rate)),
                                                      (R.FOLLOWER_RATE, SET, str(rate))])
                           for b in R.reassigning_brokers(moves)], live)


def clear_throttles(client: WireClient, targets: Sequence[tuple[R.TopicPartition, list[int]]],
                    live: Mapping[int, Node]) -> None:
    """Kafka's clearAllThrottles: every live broker and every target replica's broker loses its
    rates, every topic of the file its throttled-replica lists."""
    brokers = sorted(set(live) | {b for _, replicas in targets for b in replicas})
    print(f"Clearing broker-level throttles on broker{'' if len(brokers) == 1 else 's'} "
          + ",".join(map(str, brokers)))
    alter_configs(client, [(BROKER_RESOURCE, str(b), [(k, DELETE, None)
                                                      for k in R.BROKER_THROTTLES])
                           for b in brokers], live)
    topics = sorted({t for (t, _), _ in targets})
    print(f"Clearing topic-level throttles on topic{'' if len(topics) == 1 else 's'} "
          + ",".join(topics))
    alter_configs(client, [(TOPIC_RESOURCE, t, [(k, DELETE, None) for k in R.TOPIC_THROTTLES])
                           for t in topics])


@dataclass(frozen=True)
class PartitionState:
    current: list[int]
    target: list[int]
    done: bool


def reassignment_states(client: WireClient,
                        targets: Sequence[tuple[R.TopicPartition, list[int]]]
                        ) -> tuple[dict[R.TopicPartition, PartitionState], bool]:
    """Kafka's findPartitionReassignmentStates: a partition still reassigning is in progress;
    any other is done, with the replicas it has now (none if the topic is gone). The flag: any
    reassignment at all is still going on in the cluster."""
    ongoing = list_reassignments(client)
    states: dict[R.TopicPartition, PartitionState] = {}
    rest = [(tp, target) for tp, target in targets if tp not in ongoing]
    info: dict[str, dict[int, PartitionInfo]] = {}
    if rest:
        md = client.metadata(sorted({t for (t, _), _ in rest}))
        for t in md.topics:
            if t.error_code == 0:
                info[t.name] = {int(p.partition_index): PartitionInfo(
                    int(p.leader_id), tuple(p.replica_nodes), tuple(p.isr_nodes))
                    for p in t.partitions}
            elif t.error_code != 3:
                raise CliError(f"cannot describe topic {t.name}: {_error_name(t.error_code)}")
    for tp, target in targets:
        if tp in ongoing:
            states[tp] = PartitionState(ongoing[tp][0], target, False)
        else:
            pi = info.get(tp[0], {}).get(tp[1])
            states[tp] = PartitionState(list(pi.replicas) if pi else [], target, True)
    return states, bool(ongoing)


def states_text(states: Mapping[R.TopicPartition, PartitionState]) -> str:
    lines = ["Status of partition reassignment:"]
    for tp in R.sorted_tps(states):
        s = states[tp]
        name = R.tp_text(tp)
        if not s.done:
            lines.append(f"Reassignment of partition {name} is still in progress.")
        elif s.current == s.target:
            lines.append(f"Reassignment of partition {name} is completed.")
        else:
            lines.append(f"There is no active reassignment of partition {name}, but replica set "
                         f"is {','.join(map(str, s.current))} rather than "
                         f"{','.join(map(str, s.target))}.")
    return "\n".join(lines)


def _progress(done: int, total: int, elapsed: float, tty: bool) -> None:
    width = 30
    filled = width * done // total if total else width
    line = f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total} partitions reassigned " \
           f"({elapsed:.0f} s)"
    if tty:
        print(f"\r{line}", end="", file=sys.stderr, flush=True)
    else:
        print(line, file=sys.stderr, flush=True)


def verify(client: WireClient, targets: Sequence[tuple[R.TopicPartition, list[int]]],
           preserve: bool, wait_s: float | None) -> int:
    states, ongoing = reassignment_states(client, targets)
    if wait_s is not None:
        tty = sys.stderr.isatty()
        start = time.monotonic()
        shown = -1
        while True:
            done = sum(1 for s in states.values() if s.done)
            if done != shown or tty:
                _progress(done, len(states), time.monotonic() - start, tty)
                shown = done
            if done == len(states):
                break
            if time.monotonic() - start > wait_s:
                if tty:
                    print(file=sys.stderr)
                print(states_text(states))
                raise CliError(f"the reassignment is not done after {wait_s:g} s "
                               f"({done} of {len(states)} partitions)")
            time.sleep(WAIT_POLL_S)
            states, ongoing = reassignment_states(client, targets)
        if tty:
            print(file=sys.stderr)
    print(states_text(states))
    if not ongoing and not preserve:
        clear_throttles(client, targets, live_brokers(client))
    return 0


def cancel(client: WireClient, targets: Sequence[tuple[R.TopicPartition, list[int]]],
           preserve: bool) -> int:
    tps = [tp for tp, _ in targets]
    # a partition moving replicas in or out (Kafka's tool; its Java port lost the negation on
    # adding replicas until apache/kafka#20003)
    active = [tp for tp, (_, adding, removing) in list_reassignments(client, tps).items()
              if adding or removing]
    if active:
        errors = alter_reassignments(client, {tp: None for tp in active})
        if errors:
            raise CliError(f"Error cancelling partition reassignment{'' if len(errors) == 1 else 's'}"
                           " for:\n" + "\n".join(f"{R.tp_text(tp)}: {errors[tp]}"
                                                  for tp in R.sorted_tps(errors)))
        print(f"Successfully cancelled partition reassignment{'' if len(active) == 1 else 's'} "
              f"for: {','.join(R.tp_text(tp) for tp in R.sorted_tps(active))}")
    else:
        print("None of the specified partition reassignments are active.")
    print("None of the specified partition moves are active.")
    if not preserve:
        clear_throttles(client, targets, live_brokers(client))
    return 0


def _ongoing_text(ongoing: Ongoing) -> str:
    if not ongoing:
        return "No partition reassignments found."
    lines = ["Current partition reassignments:"]
    for tp in R.sorted_tps(ongoing):
        replicas, adding, removing = ongoing[tp]
        line = f"{R.tp_text(tp)}: replicas: {','.join(map(str, replicas))}."
        if adding:
            line += f" adding: {','.join(map(str, adding))}."
        if removing:
            line += f" removing: {','.join(map(str, removing))}."
        lines.append(line)
    return "\n".join(lines)


# ---- elect-leaders -------------------------------------------------------------------------------
def parse_election_file(text: str) -> list[R.TopicPartition]:
    """{"partitions": [{"topic": "foo", "partition": 1}]} with Kafka's checks and messages."""
    import json

    try:
        data = json.loads(text)
    except ValueError:
        raise CliError("Replica election data is empty") from None  # Kafka: parseFull gave None
    if not isinstance(data, dict):
        raise CliError("Replica election data is not a JSON object")
    if "partitions" not in data:
        raise CliError('Replica election data is missing "partitions" field')
    items = data["partitions"]
    if not isinstance(items, list):
        raise CliError(f"Expected JSON array of partitions, received {json.dumps(items)}")
    tps: list[R.TopicPartition] = []
    for item in items:
        if not isinstance(item, dict):
            raise CliError(f"Expected JSON object for a partition, received {json.dumps(item)}")
        for key in ("topic", "partition"):
            if key not in item:
                raise CliError(f"No such field exists: `{key}`")
        topic, part = item["topic"], item["partition"]
        if not isinstance(topic, str):
            raise CliError(f"Expected `string` value, received {json.dumps(topic)}")
        if isinstance(part, bool) or not isinstance(part, int):
            raise CliError(f"Expected `int` value, received {json.dumps(part)}")
        tps.append((topic, part))
    dups = R.sorted_tps({tp for tp in tps if tps.count(tp) > 1})
    if dups:
        raise CliError("Replica election data contains duplicate partitions: "
                       f"[{', '.join(R.tp_text(tp) for tp in dups)}]")
    return tps


def elect_leaders(args: argparse.Namespace) -> int:
    chosen = [o for o, given in (("topic", args.topic is not None),
                                 ("all-topic-partitions", args.all_topic_partitions),
                                 ("path-to-json-file", args.path_to_json_file is not None))
              if given]
    if len(chosen) != 1:
        raise UsageError("One and only one of the following options is required: topic, "
                         "all-topic-partitions, path-to-json-file")
    if args.topic is not None and args.partition is None:
        raise UsageError("Missing required option(s): partition")
    if args.topic is None and args.partition is not None:
        raise UsageError("Option partition is only allowed if topic is used")
    tps: list[R.TopicPartition] | None
    if args.path_to_json_file is not None:
        tps = parse_election_file(_read(args.path_to_json_file, "path-to-json-file"))
    elif args.topic is not None:
        tps = [(args.topic, args.partition)]
    else:
        tps = None
    election = args.election_type
    from ._wire import ELECT_LEADERS

    with _connect(args.bootstrap_server) as client:
        topics = None
        if tps is not None:
            by_topic: dict[str, list[int]] = {}
            for t, p in R.sorted_tps(tps):
                by_topic.setdefault(t, []).append(p)
            topics = [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]
        resp = client.call(ELECT_LEADERS, {"election_type": ELECTION_TYPES[election],
                                           "topic_partitions": topics,
                                           "timeout": REQUEST_TIMEOUT_MS})
    if getattr(resp, "error_code", 0) != 0:
        raise CliError(f"leader election ({election}) failed: {_error_name(resp.error_code)}")
    succeeded, noop, failed = [], [], {}
    for t in resp.replica_election_results:
        for p in t.partition_result:
            tp = (t.topic, int(p.partition_id))
            if p.error_code == 0:
                succeeded.append(tp)
            elif p.error_code == ELECTION_NOT_NEEDED:
                noop.append(tp)
            else:
                failed[tp] = (f"{_exception_name(p.error_code)}: "
                              f"{p.error_message or _error_name(p.error_code)}")
    if succeeded:
        print(f"Successfully completed leader election ({election}) for partitions "
              + ", ".join(R.tp_text(tp) for tp in R.sorted_tps(succeeded)))
    if noop:
        print("Valid replica already elected for partitions "
              + ", ".join(R.tp_text(tp) for tp in R.sorted_tps(noop)))
    if failed:
        for tp in R.sorted_tps(failed):
            print(f"Error completing leader election ({election}) for partition: "
                  f"{R.tp_text(tp)}: {failed[tp]}")
        raise CliError(f"{len(failed)} replica(s) could not be elected")
    return 0
