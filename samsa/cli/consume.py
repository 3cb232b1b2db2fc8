"""`samsa consume TOPIC`: print messages, like kafka-console-consumer.sh.

Without --group it assigns partitions explicitly (never joins a group) and never commits offsets,
so watching a topic never disturbs a real consumer group; where to start is given on the command
line. With --group it subscribes as a member of that group and commits what it printed, so a
second run resumes after it, as Kafka's tool does."""

from __future__ import annotations

import argparse
import base64
import json
import signal
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from ._common import (
    CONNECT_TIMEOUT_S,
    CliError,
    UsageError,
    add_bootstrap,
    base_config,
    describe_error,
    error_of,
    fetch_metadata,
    guarded,
    header_list,
    key_value,
    load_client_properties,
    unknown_topic,
)
from ._console import FORMATTER_IGNORED, FORMATTER_PROPERTIES, MessageFormat, split_properties

# Errors after which nothing more can be read.
_FATAL = {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC,
          KafkaError._UNKNOWN_PARTITION, KafkaError.TOPIC_AUTHORIZATION_FAILED,
          KafkaError.GROUP_AUTHORIZATION_FAILED}


def timestamp_ms(text: str) -> int:
    """argparse type: epoch milliseconds, or an ISO-8601 date/time (local time if no offset)."""
    s = text.strip()
    if s.lstrip("-").isdigit():
        return int(s)
    try:
        return int(datetime.fromisoformat(s).timestamp() * 1000)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected epoch milliseconds or an ISO-8601 time like 2024-05-01T12:00:00Z, "
            f"got {text!r}") from None


# Kafka's wording for bad option combinations (ConsoleConsumerOptions)
_OFFSET_NEEDS_PARTITION = "The partition is required when offset is specified."
_GROUP_AND_PARTITION = "Options group and partition cannot be specified together."
_BEGINNING_AND_OFFSET = "Options from-beginning and offset cannot be specified together."


def start_offset(text: str) -> int:
    """--offset: a non-negative offset, 'earliest' or 'latest' (Kafka's message otherwise)."""
    s = text.strip().lower()
    if s == "earliest":
        return OFFSET_BEGINNING
    if s == "latest":
        return OFFSET_END
    if s.isdigit():
        return int(s)
    raise UsageError(f"The provided offset value '{text}' is incorrect. Valid values are "
                     f"'earliest', 'latest', or a non-negative long.")


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("consume", help="print messages of a topic",
                       description="Print messages of a topic (like kafka-console-consumer.sh). "
                                   "Without --group, partitions are assigned explicitly and no "
                                   "offsets are committed; with --group, the group's committed "
                                   "offsets are used and what is printed is committed. Without "
                                   "--from-beginning/--offset/--from-timestamp only new messages "
                                   "are printed (with --group: where no offset is committed).")
    p.add_argument("topic", nargs="?", help="the topic (or --topic TOPIC)")
    p.add_argument("--topic", dest="topic_option", metavar="TOPIC", help=argparse.SUPPRESS)
    p.add_argument("--group", metavar="GROUP",
                   help="consume as a member of consumer group GROUP, committing the offsets of "
                        "what is printed (a second run resumes after them)")
    p.add_argument("--partition", type=int, action="append", default=[], metavar="N",
                   help="read only partition N, repeatable (default: all partitions)")
    p.add_argument("--from-beginning", action="store_true",
                   help="start at the oldest retained message (with --group: where the group "
                        "has no committed offset)")
    p.add_argument("--offset", metavar="OFFSET",
                   help="with --partition: start at this offset, 'earliest' or 'latest'")
    p.add_argument("--from-timestamp", type=timestamp_ms, metavar="MS_OR_ISO8601",
                   help="start at the first message with a timestamp at or after this time")
    p.add_argument("--max-messages", type=int, metavar="N", help="stop after N messages")
    stop = p.add_mutually_exclusive_group()
    stop.add_argument("--timeout", type=float, metavar="SECONDS",
                      help="stop after SECONDS without a new message (default: run until Ctrl-C)")
    stop.add_argument("--timeout-ms", type=int, metavar="MS",
                      help="the same in milliseconds (Kafka's option)")
    p.add_argument("--print-key", action="store_true",
                   help="print KEY<TAB>VALUE (same as --property print.key=true)")
    p.add_argument("--print-headers", action="store_true",
                   help="print headers (k:v,k2:v2 or NO_HEADERS) before the key and value "
                        "(same as --property print.headers=true)")
    p.add_argument("--property", "--formatter-property", type=key_value, action="append", default=[],
                   metavar="KEY=VALUE",
                   help="output format, repeatable, as kafka-console-consumer.sh: print.timestamp, "
                        "print.partition, print.offset, print.headers, print.key, print.value "
                        "(true/false), key.separator, line.separator, headers.separator, "
                        "null.literal; other names are consumer settings")
    p.add_argument("--consumer-property", "--command-property", type=key_value, action="append", default=[],
                   metavar="KEY=VALUE", help="librdkafka consumer setting, repeatable")
    p.add_argument("--isolation-level", choices=("read_uncommitted", "read_committed"),
                   default="read_uncommitted",
                   help="read_committed skips aborted transactional messages "
                        "(default: read_uncommitted, as Kafka's tool)")
    p.add_argument("--json", action="store_true",
                   help="one JSON object per message: topic, partition, offset, timestamp, key, "
                        "value, headers (non-UTF-8 bytes also given as *_base64)")
    p.add_argument("--consumer.config", dest="consumer_config_file", metavar="FILE",
                   help="consumer properties file (as kafka-console-consumer.sh); "
                        "--consumer-property wins over it")
    add_bootstrap(p, command_config=True)
    p.set_defaults(func=guarded("samsa consume", run))


@dataclass
class Plan:
    """What the command line asks for, checked: topic, group (or None), client settings and the
    output format."""

    topic: str
    group: str | None
    client: dict[str, Any]
    fmt: MessageFormat
    offset: int | None
    timeout: float | None


def _group_ids(args: argparse.Namespace, client: dict[str, Any]) -> str | None:
    ids = list(dict.fromkeys(g for g in (args.group, client.get("group.id")) if g is not None))
    if len(ids) > 1:
        raise UsageError("The group ids provided in different places (directly using '--group', "
                         "via '--consumer-property', or via '--property') do not match. Detected "
                         "group ids: " + ", ".join(f"'{g}'" for g in ids))
    return ids[0] if ids else None


def make_plan(args: argparse.Namespace) -> Plan:
    """Kafka's checks of option combinations, with its messages; usage errors exit with 2."""
    if args.topic and args.topic_option and args.topic != args.topic_option:
        raise UsageError(f"two topics given: {args.topic!r} and --topic {args.topic_option!r}")
    topic = args.topic or args.topic_option
    if not topic:
        raise UsageError("a topic is required (samsa consume TOPIC or --topic TOPIC)")
    formatter, legacy, ignored = split_properties(args.property, FORMATTER_PROPERTIES,
                                                  FORMATTER_IGNORED)
    for name in ignored:
        print(f"samsa consume: warning: --property {name} is not supported and is ignored",
              file=sys.stderr)
    client = (load_client_properties(args.consumer_config_file, "--consumer.config")
              if args.consumer_config_file else {})
    client.update(legacy)
    client.update(dict(args.consumer_property))
    group = _group_ids(args, client)
    offset = start_offset(args.offset) if args.offset is not None else None
    if args.partition:
        if group is not None:
            raise UsageError(_GROUP_AND_PARTITION)
        if args.from_beginning and offset is not None:
            raise UsageError(_BEGINNING_AND_OFFSET)
    elif offset is not None:
        raise UsageError(_OFFSET_NEEDS_PARTITION)
    if args.from_timestamp is not None:
        if group is not None:
            raise UsageError("Options group and from-timestamp cannot be specified together.")
        if args.from_beginning or offset is not None:
            raise UsageError("Option from-timestamp cannot be specified together with "
                             "from-beginning or offset.")
    reset = client.get("auto.offset.reset")
    if args.from_beginning and reset is not None and reset != "earliest":
        raise UsageError(f"Can't simultaneously specify --from-beginning and "
                         f"'auto.offset.reset={reset}', please remove one option")
    if args.json and (formatter or args.print_key or args.print_headers):
        raise UsageError("--json prints every field; it cannot be combined with --print-key, "
                         "--print-headers or --property print.*/separators")
    if args.print_key:
        formatter.setdefault("print.key", "true")
    if args.print_headers:
        formatter.setdefault("print.headers", "true")
    if args.max_messages is not None and args.max_messages < 0:
        raise UsageError("--max-messages must be >= 0")
    timeout = args.timeout if args.timeout_ms is None else args.timeout_ms / 1000
    if timeout is not None and timeout < 0:
        raise UsageError("--timeout must be >= 0")
    return Plan(topic, group, client, MessageFormat.from_properties(formatter), offset, timeout)


def consumer_config(bootstrap: str, group: str | None = None, from_beginning: bool = False,
                    isolation_level: str | None = None,
                    properties: Mapping[str, str] | None = None) -> dict[str, Any]:
    conf = base_config(bootstrap)
    if group is None:
        conf.update({
            # librdkafka insists on a group id, but with assign() and no commits it is never used
            "group.id": "samsa-cli",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            # if retention removes data under our feet, carry on from the oldest retained message
            "auto.offset.reset": "earliest",
        })
    else:
        conf.update({
            # offsets are stored by hand once a message is printed, then committed (periodically
            # and at the end), so a second run starts after the last printed message
            "enable.auto.commit": True,
            "auto.offset.reset": "earliest" if from_beginning else "latest",
        })
    if isolation_level is not None:
        conf["isolation.level"] = isolation_level
    conf.update(properties or {})
    if group is not None:
        conf["group.id"] = group
        conf["enable.auto.offset.store"] = False
    return conf


def make_consumer(conf: dict[str, Any]) -> Consumer:
    try:
        return Consumer(conf)
    except (KafkaException, ValueError) as e:
        raise UsageError(f"bad consumer configuration: {describe_error(e)}") from None


def _raw(b: str | bytes | None) -> bytes | None:
    return b.encode() if isinstance(b, str) else b


def _json_bytes(obj: dict[str, Any], name: str, b: bytes | None) -> None:
    """obj[name] = text (lossy if not UTF-8); obj[name + '_base64'] = exact bytes if not UTF-8."""
    if b is None:
        obj[name] = None
        return
    try:
        obj[name] = b.decode("utf-8")
    except UnicodeDecodeError:
        obj[name] = b.decode("utf-8", errors="replace")
        obj[f"{name}_base64"] = base64.b64encode(b).decode("ascii")


def message_json(msg: Message) -> dict[str, Any]:
    ts_type, ts = msg.timestamp()
    out: dict[str, Any] = {
        "topic": msg.topic(), "partition": msg.partition(), "offset": msg.offset(),
        "timestamp": ts if ts_type != 0 else None,
        "timestamp_type": {TIMESTAMP_CREATE_TIME: "CreateTime",
                           TIMESTAMP_LOG_APPEND_TIME: "LogAppendTime"}.get(ts_type),
    }
    _json_bytes(out, "key", _raw(msg.key()))
    _json_bytes(out, "value", _raw(msg.value()))
    headers = []
    for hk, hv in header_list(msg):
        h: dict[str, Any] = {"key": hk}
        _json_bytes(h, "value", hv)
        headers.append(h)
    out["headers"] = headers
    return out


def format_message(msg: Message, args: argparse.Namespace, plan: Plan) -> bytes:
    if args.json:
        return json.dumps(message_json(msg), ensure_ascii=False).encode() + b"\n"
    return plan.fmt.format(msg)


def start_positions(consumer: Consumer, args: argparse.Namespace, plan: Plan,
                    partitions: list[int]) -> list[TopicPartition]:
    topic = plan.topic
    if args.from_timestamp is not None:
        query = [TopicPartition(topic, p, args.from_timestamp) for p in partitions]
        found = consumer.offsets_for_times(query, timeout=CONNECT_TIMEOUT_S * 2)
        for tp in found:
            if tp.error is not None:
                raise CliError(f"cannot look up offsets by time for {topic}/{tp.partition}: "
                               f"{tp.error.str()}")
        # -1: no message at or after that time yet, so start at the end
        return [TopicPartition(topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_END)
                for tp in found]
    if args.from_beginning:
        return [TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions]
    if plan.offset is not None:
        if plan.offset >= 0:
            for p in partitions:
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, p),
                                                           timeout=CONNECT_TIMEOUT_S * 2)
                if not low <= plan.offset <= high:
                    raise CliError(f"offset {plan.offset} is out of range for {topic}/{p} "
                                   f"(valid: {low}..{high})")
        return [TopicPartition(topic, p, plan.offset) for p in partitions]
    return [TopicPartition(topic, p, OFFSET_END) for p in partitions]


def _commit(consumer: Consumer, conf: dict[str, Any]) -> None:
    """Commit the stored offsets of printed messages before leaving (Kafka's consumer commits on
    close when auto commit is on); nothing stored yet is not an error."""
    if str(conf.get("enable.auto.commit", True)).lower() == "false":
        return
    try:
        consumer.commit(asynchronous=False)
    except KafkaException as e:
        err = error_of(e)
        if err is None or err.code() != KafkaError._NO_OFFSET:
            print(f"samsa consume: warning: could not commit offsets: {describe_error(e)}",
                  file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    plan = make_plan(args)
    conf = consumer_config(args.bootstrap_server, plan.group, args.from_beginning,
                           args.isolation_level, plan.client)
    consumer = make_consumer(conf)
    printed = [0]  # kept up to date by _print_messages, for the summary after a Ctrl-C too
    started = False
    try:
        md = fetch_metadata(consumer, args.bootstrap_server)
        tm = md.topics.get(plan.topic)
        if tm is None:
            raise unknown_topic(plan.topic)
        existing = sorted(tm.partitions)
        partitions = list(dict.fromkeys(args.partition)) or existing
        bad = [p for p in partitions if p not in tm.partitions]
        if bad:
            raise CliError(f"topic {plan.topic!r} has no partition {bad[0]} "
                           f"(it has {len(existing)}: 0..{len(existing) - 1})")
        if plan.group is None:
            consumer.assign(start_positions(consumer, args, plan, partitions))
        else:
            consumer.subscribe([plan.topic])
        started = True
        _print_messages(consumer, args, plan, printed)
    except KeyboardInterrupt:
        pass  # Ctrl-C is the normal way to stop an open-ended consume
    finally:
        if started and plan.group is not None:
            _commit(consumer, conf)
        consumer.close()
        if started:
            print(f"Processed a total of {printed[0]} messages", file=sys.stderr)
    return 0


def _print_messages(consumer: Consumer, args: argparse.Namespace, plan: Plan,
                    printed: list[int]) -> None:
    out = sys.stdout.buffer
    last = time.monotonic()
    last_warning = ""
    # Ctrl-C only sets a flag, seen between messages: a KeyboardInterrupt raised inside a write
    # could leave a message printed but neither counted nor committed. A second Ctrl-C interrupts
    # at once (e.g. a write blocked on a full pipe).
    interrupted = threading.Event()

    def on_sigint(signum: int, frame: Any) -> None:
        if interrupted.is_set():
            raise KeyboardInterrupt
        interrupted.set()

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        while (args.max_messages is None or printed[0] < args.max_messages) \
                and not interrupted.is_set():
            msg = consumer.poll(0)
            if msg is None:
                out.flush()  # nothing queued: show what we have before blocking
                wait = 0.5
                if plan.timeout is not None:
                    left = plan.timeout - (time.monotonic() - last)
                    if left <= 0:
                        break
                    wait = min(wait, left)
                msg = consumer.poll(wait)
                if msg is None:
                    continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    continue
                if err.code() in _FATAL or err.fatal():
                    raise CliError(f"cannot read {plan.topic}: {err.str()}")
                if err.str() != last_warning:  # e.g. broker restarting: say it once
                    last_warning = err.str()
                    print(f"samsa consume: warning: {last_warning}", file=sys.stderr)
                continue
            last, last_warning = time.monotonic(), ""
            out.write(format_message(msg, args, plan))
            printed[0] += 1
            if plan.group is not None:
                consumer.store_offsets(message=msg)
    finally:
        signal.signal(signal.SIGINT, previous)
        out.flush()
