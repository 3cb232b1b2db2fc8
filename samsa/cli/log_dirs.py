"""`samsa log-dirs describe`: what each broker holds in its log directories (Kafka's
kafka-log-dirs.sh): DescribeLogDirs sent to every broker asked for, printed as the tool's JSON
(one entry per broker and log dir, each partition replica with its size and offset lag)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ._common import CliError, UsageError, add_bootstrap, guarded

PROG = "samsa log-dirs"


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("log-dirs", help="describe the log directories of brokers",
                       description="Query log directory usage on brokers (like Kafka's "
                                   "kafka-log-dirs.sh).")
    lsub = p.add_subparsers(dest="log_dirs_command", required=True, metavar="ACTION")
    d = lsub.add_parser("describe", help="describe the log directories of brokers")
    d.add_argument("--broker-list", default="", metavar="IDS",
                   help='brokers to query, e.g. "1,2,3" (default: every broker)')
    d.add_argument("--topic-list", default="", metavar="TOPICS",
                   help='topics to show, e.g. "t1,t2" (default: every topic)')
    add_bootstrap(d, command_config=True)
    d.set_defaults(func=guarded(f"{PROG} describe", describe))


def _ids(text: str) -> set[int]:
    out = set()
    for item in text.split(","):
        if not item.strip():
            continue
        try:
            out.add(int(item))
        except ValueError:
            raise UsageError(f'For input string: "{item}" (--broker-list expects ids like '
                             '"1,2,3")') from None
    return out


def _error(code: int) -> str | None:
    from .partitions import _exception_name

    return None if code == 0 else _exception_name(code)


def describe(args: argparse.Namespace) -> int:
    from ._wire import DESCRIBE_LOG_DIRS, WireClient

    topics = {t for t in args.topic_list.split(",") if t}
    wanted = _ids(args.broker_list)
    with WireClient(args.bootstrap_server, client_id="log-dirs-tool") as client:
        nodes = {n.node_id: n for n in client.brokers()}
        missing = wanted - set(nodes)
        if missing:
            raise CliError("ERROR: The given brokers do not exist from --broker-list: "
                           f"{','.join(map(str, sorted(missing)))}. Current existent brokers: "
                           f"{','.join(map(str, sorted(nodes)))}")
        ids = sorted(wanted or nodes)
        print("Querying brokers for log directories information")
        brokers: list[dict[str, Any]] = []
        for b in ids:
            resp = client.call(DESCRIBE_LOG_DIRS, {"topics": None}, node=nodes[b])
            if getattr(resp, "error_code", 0) != 0:
                raise CliError(f"broker {b} refused DescribeLogDirs: {_error(resp.error_code)}")
            dirs = []
            for r in resp.results:
                parts = [{"partition": f"{t.name}-{p.partition_index}",
                          "size": int(p.partition_size), "offsetLag": int(p.offset_lag),
                          "isFuture": bool(p.is_future_key)}
                         for t in r.topics if not topics or t.name in topics
                         for p in t.partitions]
                dirs.append({"partitions": parts, "error": _error(r.error_code),
                             "logDir": r.log_dir})
            brokers.append({"broker": b, "logDirs": dirs})
    print(f"Received log directory information from brokers {','.join(map(str, ids))}")
    print(json.dumps({"brokers": brokers, "version": 1}, separators=(",", ":")))
    return 0
