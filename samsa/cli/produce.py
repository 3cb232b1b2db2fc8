"""`samsa produce TOPIC`: one message per stdin line, like kafka-console-producer.sh."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from ._common import (
    CliError,
    UsageError,
    add_bootstrap,
    base_config,
    describe_error,
    fetch_metadata,
    guarded,
    key_value,
    load_client_properties,
    position,
)
from ._console import READER_PROPERTIES, InputError, LineFormat, split_properties

COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")
ACKS = ("all", "-1", "0", "1")
MESSAGE_TIMEOUT_MS = 30000


def header(text: str) -> tuple[str, str | None]:
    """argparse type for --header: KEY=VALUE, or KEY alone for a null value."""
    key, sep, value = text.partition("=")
    if not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, (value if sep else None)


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("produce", help="send stdin lines as messages",
                       description="Send each line of stdin as one message "
                                   "(like kafka-console-producer.sh). A summary goes to stderr.")
    p.add_argument("topic", nargs="?", help="the topic (or --topic TOPIC)")
    p.add_argument("--topic", dest="topic_option", metavar="TOPIC", help=argparse.SUPPRESS)
    p.add_argument("--key-separator", metavar="SEP",
                   help="split each line at the first SEP into key and value (same as --property "
                        "parse.key=true --property key.separator=SEP)")
    p.add_argument("--partition", type=int, metavar="N",
                   help="send every message to partition N (default: by key, or spread)")
    p.add_argument("--header", type=header, action="append", default=[], metavar="KEY=VALUE",
                   help="header added to every message, repeatable (KEY alone: null value)")
    p.add_argument("--acks", "--request-required-acks", choices=ACKS, default="all",
                   help="acknowledgements to wait for (default: all)")
    p.add_argument("--compression", "--compression-codec", choices=COMPRESSIONS, default="none",
                   nargs="?", const="gzip",
                   help="batch compression (default: none; the option alone: gzip, as Kafka's)")
    p.add_argument("--sync", action="store_true",
                   help="wait for each message's acknowledgement before reading the next line")
    p.add_argument("--property", type=key_value, action="append", default=[],
                   metavar="KEY=VALUE",
                   help="input format, repeatable, as kafka-console-producer.sh: parse.key, "
                        "key.separator (default TAB), parse.headers, headers.delimiter (TAB), "
                        "headers.separator (',', a regular expression), headers.key.separator "
                        "(':'), ignore.error, null.marker; other names are producer settings")
    p.add_argument("--producer-property", "--command-property", type=key_value, action="append", default=[],
                   metavar="KEY=VALUE", help="librdkafka producer setting, repeatable")
    p.add_argument("--producer.config", dest="producer_config_file", metavar="FILE",
                   help="producer properties file (as kafka-console-producer.sh); "
                        "--producer-property wins over it")
    add_bootstrap(p, command_config=True)
    p.set_defaults(func=guarded("samsa produce", run))


def producer_config(bootstrap: str, acks: str = "all", compression: str = "none",
                    properties: Iterable[tuple[str, str]] = ()) -> dict[str, Any]:
    conf = base_config(bootstrap)
    conf.update({
        "acks": acks,
        "compression.type": compression,
        "message.timeout.ms": MESSAGE_TIMEOUT_MS,
        "linger.ms": 5,
        # the Java client's partitioner, so keys land where Kafka's own tools would put them
        "partitioner": "murmur2_random",
    })
    conf.update(dict(properties))
    return conf


def make_producer(conf: dict[str, Any]) -> Producer:
    try:
        return Producer(conf)
    except KafkaException as e:
        raise UsageError(f"bad producer configuration: {describe_error(e)}") from None


def partition_count(producer: Producer, bootstrap: str, topic: str) -> int:
    """Partitions of `topic`; asks for it by name if unlisted (brokers with
    auto.create.topics.enable create it then), else fails with a clear message."""
    md = fetch_metadata(producer, bootstrap)
    if topic not in md.topics:
        md = fetch_metadata(producer, bootstrap, topic)
    tm = md.topics.get(topic)
    if tm is not None and tm.error is not None and tm.error.code() == KafkaError.TOPIC_EXCEPTION:
        raise CliError(f"invalid topic name {topic!r}: {tm.error.str()}")
    if tm is None or tm.error is not None or not tm.partitions:
        reason = ""
        if tm is not None and tm.error is not None and \
                tm.error.code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
            reason = f": {tm.error.str()}"
        raise CliError(f"unknown topic {topic!r}{reason} "
                       f"(create it with `samsa topics create {topic}`)")
    return len(tm.partitions)


@dataclass
class DeliveryStats:
    sent: int = 0
    delivered: Counter[int] = field(default_factory=Counter)
    failed: int = 0
    first_error: str | None = None

    def on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self.failed += 1
            if self.first_error is None:
                self.first_error = err.str() or err.name()
        else:
            self.delivered[position(msg)[0]] += 1

    @property
    def total_delivered(self) -> int:
        return sum(self.delivered.values())


def _lines(stream: BinaryIO) -> Iterable[bytes]:
    for raw in stream:
        if raw.endswith(b"\n"):
            raw = raw[:-1]
            if raw.endswith(b"\r"):
                raw = raw[:-1]
        yield raw


def _send_lines(producer: Producer, topic: str, reader: LineFormat,
                fixed_headers: list[tuple[str, bytes | None]], kwargs: dict[str, Any],
                stats: DeliveryStats, sync: bool = False) -> None:
    for lineno, line in enumerate(_lines(sys.stdin.buffer), 1):
        key, value, parsed = reader.parse(line, lineno)
        headers: list[tuple[str, str | bytes | None]] = [*parsed, *fixed_headers]
        stats.sent += 1
        while True:
            try:
                producer.produce(topic, value=value, key=key, headers=headers or None, **kwargs)
                break
            except BufferError:
                producer.poll(0.1)  # local queue full: wait for deliveries
            except KafkaException as e:  # rejected locally, e.g. larger than message.max.bytes
                stats.failed += 1
                stats.first_error = stats.first_error or f"line {lineno}: {describe_error(e)}"
                break
        if sync:
            producer.flush()
        else:
            producer.poll(0)
        if stats.failed:
            return


def line_format(args: argparse.Namespace, props: dict[str, str]) -> LineFormat:
    """The line reader from --property, with the older --key-separator folded in."""
    if args.key_separator:
        given = props.get("key.separator", args.key_separator)
        if given != args.key_separator:
            raise UsageError(f"--key-separator {args.key_separator!r} and --property "
                             f"key.separator={given} disagree; give one of them")
        props = {**props, "parse.key": "true", "key.separator": args.key_separator}
    return LineFormat.from_properties(props)


def _flush(producer: Producer, timeout: float) -> int:
    """Wait for outstanding deliveries; a (further) Ctrl-C gives up waiting. Returns how many
    messages are still unacknowledged."""
    interrupted = threading.Event()
    previous = signal.signal(signal.SIGINT, lambda signum, frame: interrupted.set())
    try:
        deadline = time.monotonic() + timeout
        while len(producer) and not interrupted.is_set() and time.monotonic() < deadline:
            producer.flush(0.2)
        return len(producer)
    finally:
        signal.signal(signal.SIGINT, previous)


def run(args: argparse.Namespace) -> int:
    if args.topic and args.topic_option and args.topic != args.topic_option:
        raise UsageError(f"two topics given: {args.topic!r} and --topic {args.topic_option!r}")
    topic = args.topic or args.topic_option
    if not topic:
        raise UsageError("a topic is required (samsa produce TOPIC or --topic TOPIC)")
    reader_props, legacy, _ = split_properties(args.property, READER_PROPERTIES)
    reader = line_format(args, reader_props)
    bootstrap = args.bootstrap_server
    from_file = (load_client_properties(args.producer_config_file, "--producer.config")
                 if args.producer_config_file else {})
    producer = make_producer(producer_config(bootstrap, args.acks, args.compression,
                                             [*from_file.items(), *legacy,
                                              *args.producer_property]))
    count = partition_count(producer, bootstrap, topic)
    if args.partition is not None and not 0 <= args.partition < count:
        raise CliError(f"topic {topic!r} has no partition {args.partition} "
                       f"(it has {count}: 0..{count - 1})")
    fixed = [(k, v.encode() if v is not None else None) for k, v in args.header]
    stats = DeliveryStats()
    kwargs: dict[str, Any] = {"on_delivery": stats.on_delivery}
    if args.partition is not None:
        kwargs["partition"] = args.partition
    input_error: str | None = None
    try:
        _send_lines(producer, topic, reader, fixed, kwargs, stats, args.sync)
    except InputError as e:
        input_error = str(e)
    except KeyboardInterrupt:
        pass  # Ctrl-C ends the input like Ctrl-D: deliver what was read, then stop
    remaining = _flush(producer, MESSAGE_TIMEOUT_MS / 1000 + 5)
    per_partition = ", ".join(f"partition {p}: {n}" for p, n in sorted(stats.delivered.items()))
    summary = f"Produced {stats.total_delivered} message(s) to topic {topic}"
    print(summary + (f" ({per_partition})" if per_partition else "") + ".", file=sys.stderr)
    if stats.failed or remaining:
        lost = stats.failed + remaining
        reason = stats.first_error or "not acknowledged before the timeout"
        raise CliError(f"{lost} of {stats.sent} message(s) were not delivered: {reason}")
    if input_error is not None:
        raise CliError(input_error)
    return 0
