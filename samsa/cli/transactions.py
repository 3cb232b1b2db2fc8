"""`samsa transactions list|describe|describe-producers|abort`, after Kafka's kafka-transactions.sh.

confluent-kafka's AdminClient has no ListTransactions, DescribeTransactions or DescribeProducers, so
these go over the raw protocol (`_wire.py`). `abort` fences the transactional id with InitProducerId
(a confluent-kafka producer with the same transactional.id calling init_transactions), which makes
the coordinator abort the open transaction and bump the producer epoch, as in Kafka."""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaException, Producer

from ._common import (
    REQUEST_TIMEOUT_S,
    CliError,
    UsageError,
    add_bootstrap,
    base_config,
    comma_names,
    describe_error,
    guarded,
    is_unreachable,
    print_table,
    unknown_topic,
    unreachable,
)

if TYPE_CHECKING:
    from ._wire import WireClient

# Kafka error codes
NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
TRANSACTIONAL_ID_NOT_FOUND = 105

# Kafka's transaction states (what ListTransactions filters on and DescribeTransactions reports).
STATES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort",
          "Dead", "PrepareEpochFence")
ONGOING = "Ongoing"


# ---- argument types -----------------------------------------------------------------------------
def txn_states(text: str) -> list[str]:
    """argparse type for --state: one or more comma-separated state names (any case)."""
    return comma_names(text, {s.lower(): s for s in STATES}, "transaction state", ", ".join(STATES))


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("transactions", help="list, describe and abort transactions",
                       description="Inspect and abort transactions (like Kafka's "
                                   "kafka-transactions.sh).")
    tsub = p.add_subparsers(dest="transactions_command", required=True, metavar="ACTION")

    ls = tsub.add_parser("list", help="list transactional ids with their producer id and state")
    ls.add_argument("--state", type=txn_states, nargs="+", action="extend", default=[],
                    metavar="STATE", help=f"only transactions in these states ({', '.join(STATES)}; "
                                          "space- or comma-separated)")
    ls.add_argument("--json", action="store_true",
                    help="print a JSON list of {transactional_id, coordinator_id, producer_id, "
                         "state} objects")
    add_bootstrap(ls, command_config=True)
    ls.set_defaults(func=guarded("samsa transactions list", list_))

    d = tsub.add_parser("describe", help="show the producer, state, timeout and partitions of a "
                                         "transactional id")
    d.add_argument("transactional_id", metavar="TRANSACTIONAL-ID")
    d.add_argument("--json", action="store_true", help="print one JSON object (times in ms)")
    add_bootstrap(d, command_config=True)
    d.set_defaults(func=guarded("samsa transactions describe", describe))

    dp = tsub.add_parser("describe-producers",
                         help="show the active producers of a partition",
                         description="The producers with state in a partition (idempotent or "
                                     "transactional): epoch, last sequence, last timestamp and the "
                                     "first offset of their open transaction ('-' if none).")
    dp.add_argument("--topic", required=True)
    dp.add_argument("--partition", type=int, required=True)
    dp.add_argument("--json", action="store_true", help="print a JSON list of producer objects")
    add_bootstrap(dp, command_config=True)
    dp.set_defaults(func=guarded("samsa transactions describe-producers", describe_producers))

    ab = tsub.add_parser(
        "abort", help="abort the ongoing transaction of a transactional id",
        description="Abort the ongoing transaction of a transactional id by fencing it: an "
                    "InitProducerId for the same transactional.id makes the coordinator abort the "
                    "open transaction (ABORT markers in its partitions) and bump the producer "
                    "epoch, so the producer that opened it fails on its next transactional call. "
                    "(Kafka's tool can also write markers for a given partition and producer; there "
                    "is no client API for that.)")
    ab.add_argument("--transactional-id", required=True, metavar="ID")
    add_bootstrap(ab, command_config=True)
    ab.set_defaults(func=guarded("samsa transactions abort", abort))


# ---- helpers ------------------------------------------------------------------------------------


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2))


def _time_text(ms: int | None) -> str | None:
    """Kafka's millisecond timestamps as ISO 8601 UTC, None for -1 (unknown)."""
    if ms is None or ms < 0:
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds") \
        .replace("+00:00", "Z")


def unknown_transactional_id(tid: str) -> CliError:
    return CliError(f"unknown transactional id {tid!r} (see `samsa transactions list`)")


@dataclass
class Transaction:
    transactional_id: str
    coordinator_id: int | None
    producer_id: int
    producer_epoch: int | None  # None: not known (ListTransactions fallback)
    state: str
    timeout_ms: int | None
    start_time_ms: int | None
    partitions: list[tuple[str, int]] = field(default_factory=list)

    def duration_ms(self) -> int | None:
        if self.start_time_ms is None or self.start_time_ms < 0:
            return None
        return max(0, int(time.time() * 1000) - self.start_time_ms)

    def partitions_text(self) -> str:
        return ",".join(f"{t}-{p}" for t, p in self.partitions)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["duration_ms"] = self.duration_ms()
        d["partitions"] = [{"topic": t, "partition": p} for t, p in self.partitions]
        return d


def _list(client: WireClient, states: list[str]) -> list[Transaction]:
    """ListTransactions on every broker (each lists the ids it coordinates)."""
    from . import _wire  # lazily: kio takes a while to import

    v = client.version(_wire.LIST_TRANSACTIONS)
    body: dict[str, Any] = {"state_filters": states, "producer_id_filters": []}
    if v >= 1:
        body["duration_filter"] = -1
    found: dict[str, Transaction] = {}
    for node in client.brokers():
        resp = client.call(_wire.LIST_TRANSACTIONS, body, node, version=v)
        if resp.error_code != NONE:
            raise CliError(f"broker {node.node_id} ({node.address}) cannot list transactions: "
                           f"{_wire.error_name(resp.error_code)}")
        for t in resp.transaction_states:
            found[t.transactional_id] = Transaction(t.transactional_id, node.node_id,
                                                    int(t.producer_id), None, t.transaction_state,
                                                    None, None)
    return sorted(found.values(), key=lambda t: t.transactional_id)


def _describe(client: WireClient, tid: str, prog: str) -> Transaction:
    """DescribeTransactions at the coordinator of `tid`. A broker that drops the connection instead
    of answering gets a warning and a ListTransactions fallback (state and producer id only)."""
    from . import _wire

    node = client.transaction_coordinator(tid)
    try:
        resp = client.call(_wire.DESCRIBE_TRANSACTIONS, {"transactional_ids": [tid]}, node)
    except _wire.ConnectionLost as e:
        print(f"{prog}: warning: {e}; showing what ListTransactions knows instead", file=sys.stderr)
        for t in _list(client, []):
            if t.transactional_id == tid:
                return t
        raise unknown_transactional_id(tid) from None
    if not resp.transaction_states:
        raise CliError(f"broker {node.node_id} ({node.address}) answered DescribeTransactions "
                       f"without a result for {tid!r}")
    s = resp.transaction_states[0]
    if s.error_code == TRANSACTIONAL_ID_NOT_FOUND:
        raise unknown_transactional_id(tid)
    if s.error_code != NONE:
        raise CliError(f"cannot describe transactional id {tid!r}: {_wire.error_name(s.error_code)}")
    return Transaction(tid, node.node_id, int(s.producer_id), int(s.producer_epoch),
                       s.transaction_state, _wire.millis(s.transaction_timeout),
                       _wire.millis(s.transaction_start_time),
                       sorted((t.topic, int(p)) for t in s.topics for p in t.partitions))


# ---- list ---------------------------------------------------------------------------------------
def list_(args: argparse.Namespace) -> int:
    from . import _wire  # lazily: kio takes a while to import

    with _wire.WireClient(args.bootstrap_server) as client:
        txns = _list(client, list(dict.fromkeys(s for group in args.state for s in group)))
    if args.json:
        _print_json([{"transactional_id": t.transactional_id, "coordinator_id": t.coordinator_id,
                      "producer_id": t.producer_id, "state": t.state} for t in txns])
    elif txns:
        print_table(["TRANSACTIONAL-ID", "PRODUCER-ID", "STATE"],
                     ([t.transactional_id, t.producer_id, t.state] for t in txns))
    return 0


# ---- describe -----------------------------------------------------------------------------------
def describe(args: argparse.Namespace) -> int:
    from . import _wire  # lazily: kio takes a while to import

    with _wire.WireClient(args.bootstrap_server) as client:
        t = _describe(client, args.transactional_id, "samsa transactions describe")
    if args.json:
        _print_json(t.to_json())
        return 0
    print_table(["TRANSACTIONAL-ID", "COORDINATOR", "PRODUCER-ID", "EPOCH", "STATE", "TIMEOUT-MS",
                  "START-TIME", "DURATION-MS", "PARTITIONS"],
                 [[t.transactional_id, t.coordinator_id, t.producer_id, t.producer_epoch, t.state,
                   t.timeout_ms, _time_text(t.start_time_ms), t.duration_ms(),
                   t.partitions_text()]])
    return 0


# ---- describe-producers -------------------------------------------------------------------------
def describe_producers(args: argparse.Namespace) -> int:
    from . import _wire  # lazily: kio takes a while to import

    topic, partition = args.topic, args.partition
    with _wire.WireClient(args.bootstrap_server) as client:
        md = client.metadata([topic])
        tmd = next((t for t in md.topics if t.name == topic), None)
        if tmd is None or tmd.error_code == UNKNOWN_TOPIC_OR_PARTITION:
            raise unknown_topic(topic)
        if tmd.error_code != NONE:
            raise CliError(f"cannot look up topic {topic!r}: {_wire.error_name(tmd.error_code)}")
        parts = {int(p.partition_index): p for p in tmd.partitions}
        if partition not in parts:
            raise CliError(f"unknown partition {partition} of topic {topic!r} "
                           f"(it has {len(parts)} partition{'s' if len(parts) != 1 else ''})")
        nodes = {int(b.node_id): _wire.Node(int(b.node_id), b.host, int(b.port)) for b in md.brokers}
        leader = nodes.get(int(parts[partition].leader_id))
        if leader is None:
            raise CliError(f"partition {topic}-{partition} has no leader")
        resp = client.call(_wire.DESCRIBE_PRODUCERS,
                           {"topics": [{"name": topic, "partition_indexes": [partition]}]}, leader)
    found = [p for t in resp.topics if t.name == topic for p in t.partitions
             if int(p.partition_index) == partition]
    if not found:
        raise CliError(f"broker {leader.node_id} answered DescribeProducers without {topic}-{partition}")
    pr = found[0]
    if pr.error_code != NONE:
        raise CliError(f"cannot describe the producers of {topic}-{partition}: "
                       f"{pr.error_message or _wire.error_name(pr.error_code)}")
    rows = sorted(({"producer_id": int(s.producer_id), "producer_epoch": int(s.producer_epoch),
                    "last_sequence": int(s.last_sequence), "last_timestamp_ms": int(s.last_timestamp),
                    "coordinator_epoch": int(s.coordinator_epoch),
                    "current_txn_start_offset": int(s.current_txn_start_offset)}
                   for s in pr.active_producers), key=lambda r: r["producer_id"])
    if args.json:
        _print_json(rows)
    elif rows:
        def opt(v: int) -> int | None:
            return v if v >= 0 else None

        print_table(["PRODUCER-ID", "EPOCH", "LAST-SEQUENCE", "LAST-TIMESTAMP", "COORDINATOR-EPOCH",
                      "CURRENT-TXN-START-OFFSET"],
                     ([r["producer_id"], r["producer_epoch"], opt(r["last_sequence"]),
                       _time_text(r["last_timestamp_ms"]), opt(r["coordinator_epoch"]),
                       opt(r["current_txn_start_offset"])] for r in rows))
    return 0


# ---- abort --------------------------------------------------------------------------------------
def _fence(bootstrap: str, tid: str, timeout_ms: int | None) -> None:
    """InitProducerId for `tid` through a transactional producer: the coordinator aborts the open
    transaction and bumps the epoch. The producer keeps the id's transaction timeout."""
    conf = {**base_config(bootstrap), "transactional.id": tid}
    if timeout_ms is not None and timeout_ms > 0:
        conf["transaction.timeout.ms"] = max(timeout_ms, 1000)  # librdkafka's minimum
    try:
        producer = Producer(conf)
    except KafkaException as e:
        raise UsageError(f"bad client configuration: {describe_error(e)}") from None
    try:
        producer.init_transactions(REQUEST_TIMEOUT_S)
    except KafkaException as e:
        if is_unreachable(e):
            raise unreachable(bootstrap, e) from None
        raise CliError(f"cannot fence transactional id {tid!r} (InitProducerId failed): "
                       f"{describe_error(e)}") from None
    finally:
        producer.flush(5)
        if hasattr(producer, "close"):
            producer.close()


def abort(args: argparse.Namespace) -> int:
    from . import _wire  # lazily: kio takes a while to import

    prog = "samsa transactions abort"
    tid = args.transactional_id
    with _wire.WireClient(args.bootstrap_server) as client:
        before = _describe(client, tid, prog)
        if before.state != ONGOING:
            raise CliError(f"transactional id {tid!r} has no ongoing transaction (state "
                           f"{before.state}); nothing to abort")
        _fence(args.bootstrap_server, tid, before.timeout_ms)
        after = _describe(client, tid, prog)
    if after.state == ONGOING and after.producer_id == before.producer_id and \
            after.producer_epoch == before.producer_epoch:
        raise CliError(f"the transaction of {tid!r} is still ongoing after InitProducerId")
    epochs = (f", epoch {before.producer_epoch} -> {after.producer_epoch}"
              if before.producer_epoch is not None and after.producer_epoch is not None else "")
    new_pid = (f" (new producer id {after.producer_id})"
               if after.producer_id != before.producer_id else "")
    print(f"Aborted the transaction of {tid!r}: producer id {before.producer_id}{epochs}{new_pid}; "
          f"state {before.state} -> {after.state}.")
    if before.start_time_ms is not None:
        print(f"It had started at {_time_text(before.start_time_ms)}.")
    print(f"Aborted partitions: {before.partitions_text() or '(unknown)'}")
    print("The producer that opened it is fenced: its next transactional request is rejected.")
    return 0
