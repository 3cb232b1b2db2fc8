"""`samsa storage random-uuid|format|info`, after Kafka's kafka-storage.sh.

Formatting only writes `meta.properties` in every log dir and the metadata log dir: the first
active controller writes the bootstrap metadata records itself.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from samsa.broker.listeners import roles, validate_node
from samsa.cluster import meta_properties as mp
from samsa.config import BrokerConfig, ConfigError, read_properties

EXIT_ERROR = 1


class StorageError(Exception):
    """A failure reported as one line on stderr, exit code 1 (kafka-storage.sh's TerseFailure)."""


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("storage", help="format and inspect data directories",
                       description="Format and inspect a node's data directories (like Kafka's "
                                   "kafka-storage.sh).")
    ssub = p.add_subparsers(dest="storage_command", required=True, metavar="ACTION")

    r = ssub.add_parser("random-uuid", help="print a new cluster id")
    r.set_defaults(func=_guard(random_uuid))

    f = ssub.add_parser("format", help="write meta.properties in every log directory")
    f.add_argument("-t", "--cluster-id", required=True, help="the cluster id (samsa storage "
                                                             "random-uuid makes one)")
    f.add_argument("-c", "--config", required=True, metavar="FILE",
                   help="the node's server.properties")
    f.add_argument("-g", "--ignore-formatted", action="store_true",
                   help="skip directories that are already formatted instead of failing")
    f.add_argument("-s", "--standalone", action="store_true",
                   help="this controller is the only voter of a new quorum")
    f.set_defaults(func=_guard(format_))

    i = ssub.add_parser("info", help="show what the log directories hold")
    i.add_argument("-c", "--config", required=True, metavar="FILE",
                   help="the node's server.properties")
    i.set_defaults(func=_guard(info))


def _guard(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        try:
            return int(fn(args))
        except (StorageError, ConfigError, mp.MetaPropertiesError) as e:
            print(str(e), file=sys.stderr)
            return EXIT_ERROR
    return run


def random_uuid(args: argparse.Namespace) -> int:
    print(mp.random_uuid())
    return 0


def _load(path: str) -> BrokerConfig:
    try:
        return BrokerConfig(read_properties(path))
    except OSError as e:
        raise StorageError(f"Unable to read config file {path}: {e.strerror or e}") from None


def _directories(config: BrokerConfig) -> tuple[Path, list[Path]]:
    """(metadata log dir, every directory to format: the metadata one first)."""
    log_dirs = config.log_dirs
    if not log_dirs:
        raise StorageError("No log directories found in the configuration.")
    meta_dir = Path(config.get("metadata.log.dir") or log_dirs[0])
    return meta_dir, list(dict.fromkeys([meta_dir, *log_dirs]))


def _check_node_config(config: BrokerConfig, standalone: bool) -> None:
    """Kafka's format builds the node's full configuration first: a node that could not start is
    not formatted either."""
    validate_node(config)
    if standalone:
        if "controller" not in roles(config):
            raise StorageError("--standalone can only be used on a node with the controller role.")
        if config.get("controller.quorum.voters"):
            raise StorageError("You cannot use --standalone with static voters: "
                               "controller.quorum.voters is set.")


def format_(args: argparse.Namespace) -> int:
    config = _load(args.config)
    try:
        mp.parse_uuid(args.cluster_id)
    except mp.MetaPropertiesError as e:
        raise StorageError(f"Cluster ID string {args.cluster_id} does not appear to be a valid "
                           f"UUID: {e}") from None
    _check_node_config(config, args.standalone)
    meta_dir, dirs = _directories(config)
    todo = []
    for d in dirs:
        existing = mp.read(d) if d.is_dir() else None
        if existing is None:
            todo.append(d)
            continue
        if not args.ignore_formatted:
            raise StorageError(f"Log directory {d} is already formatted. Use --ignore-formatted "
                               f"to ignore this directory and format the others.")
        if existing.cluster_id != args.cluster_id or existing.node_id != config.node_id:
            raise StorageError(f"Log directory {d} is formatted for cluster "
                               f"{existing.cluster_id}, node {existing.node_id}, not cluster "
                               f"{args.cluster_id}, node {config.node_id}.")
    if not todo:
        print("All of the log directories are already formatted.")
        return 0
    for d in todo:
        kind = "metadata" if d == meta_dir else "data"
        try:
            mp.format_dirs([d], args.cluster_id, config.node_id)
        except OSError as e:
            raise StorageError(f"Error while writing meta.properties file in {d}: "
                               f"{e.strerror or e}") from None
        print(f"Formatting {kind} directory {d}.")
    return 0


def info(args: argparse.Namespace) -> int:
    config = _load(args.config)
    _, dirs = _directories(config)
    found: list[Path] = []
    problems: list[str] = []
    metas: dict[Path, mp.MetaProperties] = {}
    for d in dirs:
        if not d.exists():
            problems.append(f"{d} does not exist")
            continue
        if not d.is_dir():
            problems.append(f"{d} is not a directory")
            continue
        found.append(d)
        try:
            meta = mp.read(d)
        except mp.MetaPropertiesError as e:
            problems.append(str(e))
            continue
        if meta is None:
            problems.append(f"{d} is not formatted.")
        else:
            metas[d] = meta
    first = next(iter(metas.values()), None)
    for d, meta in metas.items():
        if first is not None and (meta.cluster_id, meta.node_id) != (first.cluster_id,
                                                                      first.node_id):
            problems.append(f"Metadata for {d / mp.FILE_NAME} was {_show(meta)}, but other "
                            f"directories featured {_show(first)}")
    if found:
        print(f"Found log director{'y' if len(found) == 1 else 'ies'}:")
        for d in found:
            print(f"  {d}")
        print()
    if first is not None:
        print(f"Found metadata: {_show(first)}")
        print()
    if problems:
        print(f"Found problem{'' if len(problems) == 1 else 's'}:")
        for p in problems:
            print(f"  {p}")
        print()
        return EXIT_ERROR
    return 0


def _show(meta: mp.MetaProperties) -> str:
    items = [f"cluster.id={meta.cluster_id}"]
    if meta.directory_id is not None:
        items.append(f"directory.id={meta.directory_id}")
    items += [f"node.id={meta.node_id}", f"version={meta.version}"]
    return "{" + ", ".join(items) + "}"
