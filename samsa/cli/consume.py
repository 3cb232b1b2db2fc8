"""`samsa consume TOPIC`: print messages, like kafka-console-consumer.sh.

It assigns partitions explicitly (never joins a group) and never commits offsets, so watching a
topic never disturbs a real consumer group; where to start is given on the command line."""

from __future__ import annotations

import argparse
import base64
import json
import sys
import time
from collections.abc import Iterable
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
    fetch_metadata,
    guarded,
    header_list,
    key_value,
    unknown_topic,
)

# Errors after which nothing more can be read.
_FATAL = {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC,
          KafkaError._UNKNOWN_PARTITION, KafkaError.TOPIC_AUTHORIZATION_FAILED}


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


def start_offset(text: str) -> int:
    """argparse type for --offset: a non-negative offset, 'earliest' or 'latest'."""
    s = text.strip().lower()
    if s == "earliest":
        return OFFSET_BEGINNING
    if s == "latest":
        return OFFSET_END
    if s.isdigit():
        return int(s)
    raise argparse.ArgumentTypeError(f"expected an offset >= 0, 'earliest' or 'latest', "
                                     f"got {text!r}")


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("consume", help="print messages of a topic",
                       description="Print messages of a topic (like kafka-console-consumer.sh). "
                                   "Partitions are assigned explicitly; no offsets are committed. "
                                   "Without --from-beginning/--offset/--from-timestamp only new "
                                   "messages are printed.")
    p.add_argument("topic")
    p.add_argument("--partition", type=int, action="append", default=[], metavar="N",
                   help="read only partition N, repeatable (default: all partitions)")
    start = p.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true",
                       help="start at the oldest retained message")
    start.add_argument("--offset", type=start_offset, metavar="N",
                       help="start at offset N of each partition ('earliest'/'latest' also work)")
    start.add_argument("--from-timestamp", type=timestamp_ms, metavar="MS_OR_ISO8601",
                       help="start at the first message with a timestamp at or after this time")
    p.add_argument("--max-messages", type=int, metavar="N", help="stop after N messages")
    p.add_argument("--timeout", type=float, metavar="SECONDS",
                   help="stop after SECONDS without a new message (default: run until Ctrl-C)")
    p.add_argument("--print-key", action="store_true", help="print KEY<TAB>VALUE")
    p.add_argument("--print-headers", action="store_true",
                   help="print headers (k:v,k2:v2 or NO_HEADERS) before the key and value")
    p.add_argument("--json", action="store_true",
                   help="one JSON object per message: topic, partition, offset, timestamp, key, "
                        "value, headers (non-UTF-8 bytes also given as *_base64)")
    p.add_argument("--property", type=key_value, action="append", default=[],
                   metavar="KEY=VALUE", help="raw librdkafka consumer setting, repeatable")
    add_bootstrap(p)
    p.set_defaults(func=guarded("samsa consume", run))


def consumer_config(bootstrap: str, properties: Iterable[tuple[str, str]] = ()) -> dict[str, Any]:
    conf = base_config(bootstrap)
    conf.update({
        # librdkafka insists on a group id, but with assign() and no commits it is never used
        "group.id": "samsa-cli",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        # if retention removes data under our feet, carry on from the oldest retained message
        "auto.offset.reset": "earliest",
    })
    conf.update(dict(properties))
    return conf


def make_consumer(conf: dict[str, Any]) -> Consumer:
    try:
        return Consumer(conf)
    except (KafkaException, ValueError) as e:
        raise UsageError(f"bad consumer configuration: {describe_error(e)}") from None


def _raw(b: str | bytes | None) -> bytes | None:
    return b.encode() if isinstance(b, str) else b


def _text(b: bytes | None) -> str:
    return "null" if b is None else b.decode("utf-8", errors="replace")


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


def format_message(msg: Message, args: argparse.Namespace) -> str:
    if args.json:
        return json.dumps(message_json(msg), ensure_ascii=False)
    fields = []
    if args.print_headers:
        hs = header_list(msg)
        fields.append(",".join(f"{k}:{_text(v)}" for k, v in hs) if hs else "NO_HEADERS")
    if args.print_key:
        fields.append(_text(_raw(msg.key())))
    fields.append(_text(_raw(msg.value())))
    return "\t".join(fields)


def start_positions(consumer: Consumer, args: argparse.Namespace,
                    partitions: list[int]) -> list[TopicPartition]:
    topic = args.topic
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
    if args.offset is not None:
        if args.offset >= 0:
            for p in partitions:
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, p),
                                                           timeout=CONNECT_TIMEOUT_S * 2)
                if not low <= args.offset <= high:
                    raise CliError(f"offset {args.offset} is out of range for {topic}/{p} "
                                   f"(valid: {low}..{high})")
        return [TopicPartition(topic, p, args.offset) for p in partitions]
    return [TopicPartition(topic, p, OFFSET_END) for p in partitions]


def run(args: argparse.Namespace) -> int:
    if args.max_messages is not None and args.max_messages < 0:
        raise UsageError("--max-messages must be >= 0")
    if args.timeout is not None and args.timeout < 0:
        raise UsageError("--timeout must be >= 0")
    consumer = make_consumer(consumer_config(args.bootstrap_server, args.property))
    count = 0
    started = False
    try:
        md = fetch_metadata(consumer, args.bootstrap_server)
        tm = md.topics.get(args.topic)
        if tm is None:
            raise unknown_topic(args.topic)
        existing = sorted(tm.partitions)
        partitions = list(dict.fromkeys(args.partition)) or existing
        bad = [p for p in partitions if p not in tm.partitions]
        if bad:
            raise CliError(f"topic {args.topic!r} has no partition {bad[0]} "
                           f"(it has {len(existing)}: 0..{len(existing) - 1})")
        consumer.assign(start_positions(consumer, args, partitions))
        started = True
        out = sys.stdout
        last = time.monotonic()
        last_warning = ""
        while args.max_messages is None or count < args.max_messages:
            msg = consumer.poll(0)
            if msg is None:
                out.flush()  # nothing queued: show what we have before blocking
                wait = 0.5
                if args.timeout is not None:
                    left = args.timeout - (time.monotonic() - last)
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
                    raise CliError(f"cannot read {args.topic}: {err.str()}")
                if err.str() != last_warning:  # e.g. broker restarting: say it once
                    last_warning = err.str()
                    print(f"samsa consume: warning: {last_warning}", file=sys.stderr)
                continue
            last, last_warning = time.monotonic(), ""
            out.write(format_message(msg, args) + "\n")
            count += 1
        out.flush()
    except KeyboardInterrupt:
        pass  # Ctrl-C is the normal way to stop an open-ended consume
    finally:
        consumer.close()
        if started:
            print(f"Processed a total of {count} message(s).", file=sys.stderr)
    return 0
