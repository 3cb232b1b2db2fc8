"""Parse the options of Spark's Kafka source and sink (the same names; Spark lower-cases the keys and
passes every value as a string)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

EARLIEST = -2
LATEST = -1

# Spark's own options that are not Kafka client settings
_KNOWN = {
    "subscribe", "subscribepattern", "assign", "startingoffsets", "endingoffsets",
    "startingtimestamp", "endingtimestamp", "startingoffsetsbytimestamp", "endingoffsetsbytimestamp",
    "startingoffsetsbytimestampstrategy", "maxoffsetspertrigger", "minoffsetspertrigger",
    "maxtriggerdelay", "failondataloss", "includeheaders", "minpartitions", "maxrecordsperpartition",
    "kafkaconsumer.polltimeoutms", "fetchoffset.numretries", "fetchoffset.retryintervalms",
    "groupidprefix", "topic", "path",
}
# client settings Spark's connector manages itself (rejected there, ignored here)
_MANAGED = {"group.id", "auto.offset.reset", "enable.auto.commit", "key.deserializer",
            "value.deserializer", "key.serializer", "value.serializer", "interceptor.classes"}


class OptionError(ValueError):
    pass


@dataclass(frozen=True)
class Subscription:
    kind: str  # "subscribe" | "subscribePattern" | "assign"
    topics: tuple[str, ...] = ()
    pattern: str = ""
    assigned: tuple[tuple[str, int], ...] = ()

    def matches(self, topic: str) -> bool:
        if self.kind == "subscribe":
            return topic in self.topics
        if self.kind == "subscribePattern":
            return re.fullmatch(self.pattern, topic) is not None
        return any(t == topic for t, _ in self.assigned)


@dataclass(frozen=True)
class OffsetSpec:
    """Where to start or end: earliest, latest, per-partition offsets, or timestamps."""
    kind: str  # "earliest" | "latest" | "offsets" | "timestamp" | "timestamps"
    offsets: dict[str, int] = field(default_factory=dict)  # "topic/partition" -> offset or -1/-2
    timestamp: int = 0  # global timestamp (kind "timestamp")
    timestamps: dict[str, int] = field(default_factory=dict)  # kind "timestamps"


@dataclass(frozen=True)
class SourceOptions:
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    client: dict[str, Any]
    include_headers: bool = False
    fail_on_data_loss: bool = True
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60 * 1000
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    timestamp_strategy: str = "error"
    poll_timeout_ms: int = 120_000

    @property
    def read_committed(self) -> bool:
        return self.client.get("isolation.level", "read_uncommitted") == "read_committed"


def key(topic: str, partition: int) -> str:
    """The offset-dict key for a partition (offsets round-trip through JSON: string keys)."""
    return f"{topic}/{partition}"


def split_key(k: str) -> tuple[str, int]:
    topic, _, p = k.rpartition("/")
    return topic, int(p)


def client_config(opts: dict[str, str]) -> dict[str, Any]:
    """`kafka.*` options become librdkafka settings; bootstrap servers are required. Security
    options come as Spark's Kafka connector passes them to the Java client
    (`kafka.security.protocol`, `kafka.sasl.mechanism`, `kafka.sasl.jaas.config`,
    `kafka.ssl.truststore.location`, `kafka.ssl.keystore.*`, ...) and are translated
    (samsa.client_security); librdkafka's own names work too."""
    from samsa.client_security import SecurityConfigError, librdkafka_config

    conf = {k[len("kafka."):]: v for k, v in opts.items() if k.startswith("kafka.")}
    if "bootstrap.servers" not in conf:
        raise OptionError("option 'kafka.bootstrap.servers' must be specified")
    for k in _MANAGED:
        conf.pop(k, None)
    try:
        return librdkafka_config(conf)
    except SecurityConfigError as e:
        raise OptionError(f"kafka.* security options: {e}") from None


def _bool(opts: dict[str, str], name: str, default: bool) -> bool:
    v = opts.get(name)
    if v is None:
        return default
    if v.strip().lower() not in ("true", "false"):
        raise OptionError(f"option '{name}' must be true or false, got {v!r}")
    return v.strip().lower() == "true"


def _int(opts: dict[str, str], name: str, minimum: int = 1) -> int | None:
    v = opts.get(name)
    if v is None:
        return None
    try:
        n = int(v)
    except ValueError:
        raise OptionError(f"option '{name}' must be an integer, got {v!r}") from None
    if n < minimum:
        raise OptionError(f"option '{name}' must be >= {minimum}, got {n}")
    return n


def _duration_ms(v: str) -> int:
    m = re.fullmatch(r"\s*(\d+)\s*(ms|s|m|min|h)?\s*", v.lower())
    if not m:
        raise OptionError(f"option 'maxTriggerDelay' must be a duration like '15m', got {v!r}")
    n, unit = int(m.group(1)), m.group(2) or "ms"
    return n * {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000}[unit]


def _partition_json(text: str, name: str) -> dict[str, int]:
    try:
        doc: Any = json.loads(text)
        out = {key(t, int(p)): int(o) for t, parts in doc.items() for p, o in parts.items()}
    except (ValueError, AttributeError, TypeError):
        raise OptionError(f"option '{name}' must be JSON like {{\"topicA\":{{\"0\":23}}}}, "
                          f"got {text!r}") from None
    return out


def subscription(opts: dict[str, str]) -> Subscription:
    given = [k for k in ("subscribe", "subscribepattern", "assign") if k in opts]
    if len(given) != 1:
        raise OptionError("exactly one of the options 'subscribe', 'subscribePattern' or 'assign' "
                          f"must be specified, got {len(given)}")
    kind, value = given[0], opts[given[0]]
    if kind == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise OptionError("option 'subscribe' names no topic")
        return Subscription("subscribe", topics=topics)
    if kind == "subscribepattern":
        try:
            re.compile(value)
        except re.error as e:
            raise OptionError(f"option 'subscribePattern' is not a valid regex: {e}") from None
        return Subscription("subscribePattern", pattern=value)
    try:
        doc: Any = json.loads(value)
        assigned = tuple(sorted((str(t), int(p)) for t, ps in doc.items() for p in ps))
    except (ValueError, AttributeError, TypeError):
        raise OptionError(f"option 'assign' must be JSON like {{\"topicA\":[0,1]}}, got {value!r}") from None
    if not assigned:
        raise OptionError("option 'assign' names no partition")
    return Subscription("assign", assigned=assigned)


def _offset_spec(opts: dict[str, str], prefix: str, default: str, streaming: bool) -> OffsetSpec:
    ts = opts.get(f"{prefix}timestamp")
    if ts is not None:
        try:
            return OffsetSpec("timestamp", timestamp=int(ts))
        except ValueError:
            raise OptionError(f"option '{prefix}Timestamp' must be a number (ms), got {ts!r}") from None
    by_ts = opts.get(f"{prefix}offsetsbytimestamp")
    if by_ts is not None:
        return OffsetSpec("timestamps", timestamps=_partition_json(by_ts, f"{prefix}OffsetsByTimestamp"))
    text = opts.get(f"{prefix}offsets", default).strip()
    name = f"{prefix}Offsets"
    if text.lower() in ("earliest", "latest"):
        kind = text.lower()
        if prefix == "ending" and kind == "earliest":
            raise OptionError("option 'endingOffsets' cannot be 'earliest'")
        if prefix == "starting" and kind == "latest" and not streaming:
            raise OptionError("option 'startingOffsets' cannot be 'latest' for batch queries")
        return OffsetSpec(kind)
    offsets = _partition_json(text, name)
    if prefix == "ending" and EARLIEST in offsets.values():
        raise OptionError("option 'endingOffsets' cannot use -2 (earliest)")
    if prefix == "starting" and not streaming and LATEST in offsets.values():
        raise OptionError("option 'startingOffsets' cannot use -1 (latest) for batch queries")
    return OffsetSpec("offsets", offsets=offsets)


def source_options(raw: dict[str, str], streaming: bool) -> SourceOptions:
    opts = {k.lower(): v for k, v in raw.items()}
    if streaming and any(k in opts for k in ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp")):
        raise OptionError("ending offsets are not supported for streaming queries")
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").lower()
    if strategy not in ("error", "latest"):
        raise OptionError("option 'startingOffsetsByTimestampStrategy' must be 'error' or 'latest'")
    delay = opts.get("maxtriggerdelay")
    return SourceOptions(
        subscription=subscription(opts),
        starting=_offset_spec(opts, "starting", "latest" if streaming else "earliest", streaming),
        ending=_offset_spec(opts, "ending", "latest", streaming),
        client=client_config(opts),
        include_headers=_bool(opts, "includeheaders", False),
        fail_on_data_loss=_bool(opts, "failondataloss", True),
        max_offsets_per_trigger=_int(opts, "maxoffsetspertrigger"),
        min_offsets_per_trigger=_int(opts, "minoffsetspertrigger"),
        max_trigger_delay_ms=_duration_ms(delay) if delay else 15 * 60 * 1000,
        min_partitions=_int(opts, "minpartitions"),
        max_records_per_partition=_int(opts, "maxrecordsperpartition"),
        timestamp_strategy=strategy,
        poll_timeout_ms=_int(opts, "kafkaconsumer.polltimeoutms") or 120_000,
    )


@dataclass(frozen=True)
class SinkOptions:
    client: dict[str, Any]
    topic: str | None


def sink_options(raw: dict[str, str]) -> SinkOptions:
    opts = {k.lower(): v for k, v in raw.items()}
    return SinkOptions(client=client_config(opts), topic=opts.get("topic") or None)
