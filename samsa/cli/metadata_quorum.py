"""`samsa metadata-quorum describe --status | --replication`: the state of the KRaft metadata quorum,
printed the way Kafka's kafka-metadata-quorum.sh prints it (same labels, same table), so scripts
written for Kafka read Samsa's output unchanged."""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING

from ._common import CliError, UsageError, add_command_config, guarded

if TYPE_CHECKING:
    from ._cluster_wire import Connection, Quorum, Replica

PROG = "samsa metadata-quorum"


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("metadata-quorum", help="describe the KRaft metadata quorum",
                       description="Describe the metadata quorum (like Kafka's "
                                   "kafka-metadata-quorum.sh).")
    conn = p.add_mutually_exclusive_group(required=True)
    conn.add_argument("--bootstrap-server", metavar="HOST:PORT[,...]",
                      help="brokers to connect to")
    conn.add_argument("--bootstrap-controller", metavar="HOST:PORT[,...]",
                      help="controllers to connect to (their CONTROLLER listener)")
    add_command_config(p)
    msub = p.add_subparsers(dest="metadata_quorum_command", required=True, metavar="ACTION")
    d = msub.add_parser("describe", help="describe the metadata quorum info")
    d.add_argument("--status", action="store_true",
                   help="a short summary of the quorum status")
    d.add_argument("--replication", action="store_true",
                   help="detailed information about the status of replication")
    d.add_argument("--human-readable", action="store_true",
                   help="with --replication: timestamps as 'N ms ago'")
    d.set_defaults(func=guarded(f"{PROG} describe", describe))


def describe(args: argparse.Namespace) -> int:
    if args.status and args.replication:
        raise UsageError("Only one of --status or --replication should be specified with "
                         "describe sub-command")
    if not (args.status or args.replication):
        raise UsageError("One of --status or --replication must be specified with describe "
                         "sub-command")
    if args.status and args.human_readable:
        raise UsageError("The option --human-readable is only supported along with --replication")
    from . import _cluster_wire as w  # lazily: kio takes a while to import

    controllers = args.bootstrap_controller is not None
    if controllers:
        conn, quorum = _active_controller(args.bootstrap_controller)
    else:
        conn = w.connect(args.bootstrap_server)
        quorum = w.describe_quorum(conn)
    with conn:
        if args.replication:
            print_replication(quorum, args.human_readable)
        else:
            cluster_id = w.describe_cluster(conn, controllers=controllers).cluster_id
            print_status(cluster_id, quorum)
    return 0


def _active_controller(servers: str) -> tuple[Connection, Quorum]:
    """Only the quorum leader answers DescribeQuorum (a follower says NOT_LEADER_OR_FOLLOWER), so,
    as Kafka's admin client does with bootstrap controllers, ask each controller until the active
    one answers; the connection to it serves the rest of the command."""
    from . import _cluster_wire as w

    errors = []
    for host, port in w.parse_servers(servers):
        try:
            conn = w.connect(f"{host}:{port}")
        except CliError as e:
            errors.append(str(e))
            continue
        try:
            return conn, w.describe_quorum(conn)
        except CliError as e:
            conn.close()
            errors.append(str(e))
    raise CliError(errors[0] if len(errors) == 1 else "; ".join(errors))


def _leader(quorum: Quorum) -> Replica:
    for r in quorum.voters:
        if r.replica_id == quorum.leader_id:
            return r
    raise CliError(f"the quorum has no leader among its voters (leader id {quorum.leader_id}, "
                   f"epoch {quorum.leader_epoch})")


def _node(quorum: Quorum, r: Replica) -> str:
    """One voter or observer as Kafka prints it: {"id": 1, "directoryId": "...", "endpoints":
    ["CONTROLLER://host:port"]}, the directory id left out when it is zero."""
    from ._cluster_wire import kafka_uuid

    parts = [f'"id": {r.replica_id}']
    if r.directory_id is not None and r.directory_id.int != 0:
        parts.append(f'"directoryId": "{kafka_uuid(r.directory_id)}"')
    endpoints = quorum.endpoints.get(r.replica_id)
    if endpoints:
        parts.append('"endpoints": [' + ", ".join(f'"{e}"' for e in endpoints) + "]")
    return "{" + ", ".join(parts) + "}"


def status_lines(cluster_id: str, quorum: Quorum) -> list[str]:
    leader = _leader(quorum)
    laggard = min(quorum.voters, key=lambda r: r.log_end_offset)
    lag = leader.log_end_offset - laggard.log_end_offset
    if laggard is leader:
        lag_ms = 0
    elif leader.last_caught_up_timestamp >= 0 and laggard.last_caught_up_timestamp >= 0:
        lag_ms = leader.last_caught_up_timestamp - laggard.last_caught_up_timestamp
    else:
        lag_ms = -1
    fields = [("ClusterId", cluster_id), ("LeaderId", quorum.leader_id),
              ("LeaderEpoch", quorum.leader_epoch), ("HighWatermark", quorum.high_watermark),
              ("MaxFollowerLag", lag), ("MaxFollowerLagTimeMs", lag_ms),
              ("CurrentVoters", "[" + ", ".join(_node(quorum, r) for r in quorum.voters) + "]"),
              ("CurrentObservers",
               "[" + ", ".join(_node(quorum, r) for r in quorum.observers) + "]")]
    return [f"{name + ':':<24}{value}" for name, value in fields]


def print_status(cluster_id: str, quorum: Quorum) -> None:
    print("\n".join(status_lines(cluster_id, quorum)))


def _when(ms: int, human: bool, what: str) -> str:
    if ms < 0:
        return "-1"
    if not human:
        return str(ms)
    now = int(time.time() * 1000)
    if not 0 < ms <= now:
        raise CliError(f"Error while computing relative time, possible drift in system clock.\n"
                       f"Current timestamp is {now}, {what} timestamp is {ms}")
    return f"{now - ms} ms ago"


def replication_rows(quorum: Quorum, human: bool = False) -> list[list[str]]:
    from ._cluster_wire import kafka_uuid

    leader = _leader(quorum)
    ordered = ([(leader, "Leader")]
               + [(r, "Follower") for r in quorum.voters if r.replica_id != quorum.leader_id]
               + [(r, "Observer") for r in quorum.observers])
    return [[str(r.replica_id), kafka_uuid(r.directory_id), str(r.log_end_offset),
             str(leader.log_end_offset - r.log_end_offset),
             _when(r.last_fetch_timestamp, human, "last fetch"),
             _when(r.last_caught_up_timestamp, human, "last caught up"), status]
            for r, status in ordered]


REPLICATION_HEADER = ["NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp",
                      "LastCaughtUpTimestamp", "Status"]


def print_replication(quorum: Quorum, human: bool = False) -> None:
    """Kafka's table: each cell padded to its column's width and followed by a tab."""
    rows = [REPLICATION_HEADER] + replication_rows(quorum, human)
    widths = [max(len(r[i]) for r in rows) for i in range(len(REPLICATION_HEADER))]
    for row in rows:
        print("".join(c.ljust(w) + "\t" for c, w in zip(row, widths, strict=True)))
