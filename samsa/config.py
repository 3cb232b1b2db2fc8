"""Kafka-named configuration: broker settings and topic-level settings with their broker synonyms.

Values are kept as strings (as Kafka's DescribeConfigs reports them) and parsed by type on use.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

LONG_MAX = 9223372036854775807


@dataclass(frozen=True)
class ConfigDef:
    name: str
    type: str  # boolean, string, int, short, long, double, list, class, password
    default: str | None
    doc: str
    broker_synonym: str | None = None  # for topic configs: the broker setting providing the default
    valid: tuple[str, ...] = ()


# Kafka's describe-configs ConfigType numbers
CONFIG_TYPE = {"boolean": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6, "list": 7,
               "class": 8, "password": 9}

TOPIC_CONFIGS: dict[str, ConfigDef] = {c.name: c for c in [
    ConfigDef("cleanup.policy", "list", "delete", "Retention policy: delete and/or compact.",
              "log.cleanup.policy", ("delete", "compact", "compact,delete", "delete,compact")),
    ConfigDef("compression.type", "string", "producer", "Final compression type of the topic.",
              "compression.type", ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
    ConfigDef("compression.gzip.level", "int", "-1", "gzip level when compression.type=gzip.",
              "compression.gzip.level"),
    ConfigDef("compression.lz4.level", "int", "9", "lz4 level when compression.type=lz4.",
              "compression.lz4.level"),
    ConfigDef("compression.zstd.level", "int", "3", "zstd level when compression.type=zstd.",
              "compression.zstd.level"),
    ConfigDef("delete.retention.ms", "long", "86400000", "How long tombstones are retained.",
              "log.cleaner.delete.retention.ms"),
    ConfigDef("file.delete.delay.ms", "long", "60000", "Delay before deleting a file.",
              "log.segment.delete.delay.ms"),
    ConfigDef("flush.messages", "long", str(LONG_MAX), "fsync after this many messages.",
              "log.flush.interval.messages"),
    ConfigDef("flush.ms", "long", str(LONG_MAX), "fsync after this many milliseconds.",
              "log.flush.interval.ms"),
    ConfigDef("follower.replication.throttled.replicas", "list", "", "Throttled replicas.",
              "follower.replication.throttled.replicas"),
    ConfigDef("index.interval.bytes", "int", "4096", "Bytes between offset index entries.",
              "log.index.interval.bytes"),
    ConfigDef("leader.replication.throttled.replicas", "list", "", "Throttled replicas.",
              "leader.replication.throttled.replicas"),
    ConfigDef("local.retention.bytes", "long", "-2", "Local retention bytes (tiered storage).",
              "log.local.retention.bytes"),
    ConfigDef("local.retention.ms", "long", "-2", "Local retention ms (tiered storage).",
              "log.local.retention.ms"),
    ConfigDef("max.compaction.lag.ms", "long", str(LONG_MAX), "Max time a message stays uncompacted.",
              "log.cleaner.max.compaction.lag.ms"),
    ConfigDef("max.message.bytes", "int", "1048588", "Largest record batch size allowed.",
              "message.max.bytes"),
    ConfigDef("message.timestamp.after.max.ms", "long", "3600000",
              "Max allowed timestamp ahead of the broker clock.", "log.message.timestamp.after.max.ms"),
    ConfigDef("message.timestamp.before.max.ms", "long", str(LONG_MAX),
              "Max allowed timestamp behind the broker clock.", "log.message.timestamp.before.max.ms"),
    ConfigDef("message.timestamp.type", "string", "CreateTime", "CreateTime or LogAppendTime.",
              "log.message.timestamp.type", ("CreateTime", "LogAppendTime")),
    ConfigDef("min.cleanable.dirty.ratio", "double", "0.5", "Dirty ratio that triggers cleaning.",
              "log.cleaner.min.cleanable.ratio"),
    ConfigDef("min.compaction.lag.ms", "long", "0", "Min time a message stays uncompacted.",
              "log.cleaner.min.compaction.lag.ms"),
    ConfigDef("min.insync.replicas", "int", "1", "Min in-sync replicas for acks=all.",
              "min.insync.replicas"),
    ConfigDef("preallocate", "boolean", "false", "Preallocate segment files.", "log.preallocate"),
    ConfigDef("remote.storage.enable", "boolean", "false", "Tiered storage for this topic.", None),
    ConfigDef("retention.bytes", "long", "-1", "Max partition size before old segments go.",
              "log.retention.bytes"),
    ConfigDef("retention.ms", "long", "604800000", "Max age of a segment before it is deleted.",
              "log.retention.ms"),
    ConfigDef("segment.bytes", "int", "1073741824", "Segment file size.", "log.segment.bytes"),
    ConfigDef("segment.index.bytes", "int", "10485760", "Offset index size.",
              "log.index.size.max.bytes"),
    ConfigDef("segment.jitter.ms", "long", "0", "Jitter subtracted from segment.ms.",
              "log.roll.jitter.ms"),
    ConfigDef("segment.ms", "long", "604800000", "Time after which a segment is rolled.",
              "log.roll.ms"),
    ConfigDef("unclean.leader.election.enable", "boolean", "false", "Unclean leader election.",
              "unclean.leader.election.enable"),
    ConfigDef("confluent.key.schema.validation", "boolean", "false",
              "Reject records whose key is not schema-registry framed with an id registered under "
              "<topic>-key.", None),
    ConfigDef("confluent.value.schema.validation", "boolean", "false",
              "Reject records whose value is not schema-registry framed with an id registered under "
              "<topic>-value.", None),
]}

BROKER_CONFIGS: dict[str, ConfigDef] = {c.name: c for c in [
    ConfigDef("node.id", "int", "1", "This broker's id."),
    ConfigDef("broker.id", "int", "1", "Alias of node.id."),
    ConfigDef("listeners", "list", "PLAINTEXT://127.0.0.1:9092", "Listen addresses."),
    ConfigDef("advertised.listeners", "list", None, "Addresses given to clients."),
    ConfigDef("log.dirs", "list", "./samsa-data", "Directories holding partition logs."),
    ConfigDef("num.partitions", "int", "1", "Partitions of auto-created topics."),
    ConfigDef("default.replication.factor", "int", "1", "Replication factor of auto-created topics."),
    ConfigDef("max.broker.partitions", "int", "4000",
              "Most partitions this broker hosts (KIP-578's name); creating more is refused."),
    ConfigDef("auto.create.topics.enable", "boolean", "true", "Create topics on first use."),
    ConfigDef("delete.topic.enable", "boolean", "true", "Allow topic deletion."),
    ConfigDef("socket.request.max.bytes", "int", "104857600", "Largest request accepted."),
    # -- network limits (docs/operations.md) --
    ConfigDef("queued.max.requests", "int", "500",
              "Requests read and not yet answered, over all connections, before the broker stops "
              "reading sockets (long-polling fetches excepted)."),
    ConfigDef("queued.max.requests.per.connection", "int", "256",
              "Requests read and not yet answered on one connection before it stops being read "
              "(Samsa-specific: Kafka reads one request per connection at a time)."),
    ConfigDef("max.connections", "int", "2147483647",
              "Connections the broker keeps open at once; new ones beyond are closed."),
    ConfigDef("max.connections.per.ip", "int", "2147483647",
              "Connections allowed from one IP address; new ones beyond are closed."),
    # -- end network limits --
    ConfigDef("log.retention.check.interval.ms", "long", "300000", "Retention check period."),
    ConfigDef("log.retention.hours", "int", "168", "Retention in hours."),
    ConfigDef("log.retention.minutes", "int", None, "Retention in minutes."),
    ConfigDef("log.flush.scheduler.interval.ms", "long", str(LONG_MAX), "Flush check period."),
    ConfigDef("log.flush.offset.checkpoint.interval.ms", "int", "60000", "Recovery point period."),
    ConfigDef("message.max.bytes", "int", "1048588", "Largest record batch size allowed."),
    ConfigDef("cluster.id", "string", None, "Cluster id (generated on first start)."),
    ConfigDef("process.roles", "list", "broker,controller", "Roles of this node."),
    ConfigDef("offsets.topic.num.partitions", "int", "50", "Partitions of __consumer_offsets."),
    ConfigDef("offsets.topic.replication.factor", "short", "1", "RF of __consumer_offsets."),
    ConfigDef("transaction.state.log.replication.factor", "short", "1", "RF of txn state."),
    ConfigDef("transaction.state.log.min.isr", "int", "1", "Min ISR of txn state."),
    ConfigDef("max.incremental.fetch.session.cache.slots", "int", "1000",
              "Incremental fetch sessions kept (0 disables them)."),
    ConfigDef("group.initial.rebalance.delay.ms", "int", "3000", "Initial rebalance delay."),
    ConfigDef("group.min.session.timeout.ms", "int", "6000", "Smallest session timeout allowed."),
    ConfigDef("group.max.session.timeout.ms", "int", "1800000", "Largest session timeout allowed."),
    ConfigDef("offsets.retention.minutes", "int", "10080", "Committed offsets of empty groups "
              "are kept this long."),
    ConfigDef("offsets.retention.check.interval.ms", "long", "600000", "Offset expiry period."),
    ConfigDef("offset.metadata.max.bytes", "int", "4096", "Largest commit metadata string."),
    ConfigDef("group.consumer.heartbeat.interval.ms", "int", "5000",
              "Heartbeat interval given to KIP-848 consumers."),
    ConfigDef("group.consumer.session.timeout.ms", "int", "45000",
              "Session timeout of KIP-848 consumers."),
    ConfigDef("transaction.state.log.num.partitions", "int", "50",
              "Partitions of __transaction_state."),
    ConfigDef("transaction.max.timeout.ms", "int", "900000",
              "Largest transaction timeout a producer may ask for."),
    ConfigDef("transaction.abort.timed.out.transaction.cleanup.interval.ms", "int", "10000",
              "How often timed-out transactions are looked for."),
    ConfigDef("transactional.id.expiration.ms", "int", "604800000",
              "Idle transactional ids are forgotten after this long."),
    ConfigDef("producer.id.expiration.ms", "int", "86400000",
              "Idle producers' idempotence state is dropped after this long."),
    ConfigDef("producer.id.expiration.check.interval.ms", "int", "600000",
              "How often idle producers are looked for."),
    ConfigDef("offsets.topic.segment.bytes", "int", "104857600", "Segment size of "
              "__consumer_offsets."),
    ConfigDef("log.cleaner.enable", "boolean", "true", "Run the log cleaner (compaction)."),
    ConfigDef("log.cleaner.backoff.ms", "long", "15000", "Cleaner sleep when nothing is cleanable."),
    ConfigDef("log.cleaner.threads", "int", "1", "Cleaner threads (Samsa runs one)."),
    ConfigDef("log.cleaner.dedupe.buffer.size", "long", "134217728",
              "Memory for the cleaner's key -> offset map."),
    ConfigDef("log.cleaner.io.buffer.size", "int", "524288", "Cleaner read/write buffer size."),
    ConfigDef("log.cleaner.io.buffer.load.factor", "double", "0.9", "Offset map load factor."),
    ConfigDef("log.cleaner.io.max.bytes.per.second", "double", "1.7976931348623157E308",
              "Cleaner I/O throttle."),
    ConfigDef("samsa.log.cleaner.mode", "string", "process",
              "Where cleaning runs: a child process, or a thread of the broker.",
              valid=("process", "thread")),
    ConfigDef("schema.registry.enable", "boolean", "false",
              "Run the schema registry inside the broker process."),
    ConfigDef("schema.registry.listeners", "string", "http://127.0.0.1:8081",
              "HTTP address of the embedded schema registry."),
    ConfigDef("schema.registry.leader.url", "string", None,
              "Forward registry writes to this registry (unset: this one is the writer)."),
    ConfigDef("schema.registry.compatibility", "string", "BACKWARD",
              "Default compatibility level of the embedded schema registry."),
    ConfigDef("schema.registry.topic", "string", "_schemas",
              "Topic holding the registry's schemas (also read for schema-validated topics)."),
] + [ConfigDef(t.broker_synonym, t.type, t.default, t.doc) for t in TOPIC_CONFIGS.values()
     if t.broker_synonym and t.broker_synonym not in ("message.max.bytes",)]}

BROKER_CONFIGS["log.retention.ms"] = ConfigDef("log.retention.ms", "long", None,
                                                "Retention in ms (overrides hours/minutes).")
BROKER_CONFIGS["log.roll.ms"] = ConfigDef("log.roll.ms", "long", None, "Roll period in ms.")
BROKER_CONFIGS["log.roll.hours"] = ConfigDef("log.roll.hours", "int", "168", "Roll period in hours.")
BROKER_CONFIGS["log.flush.interval.ms"] = ConfigDef("log.flush.interval.ms", "long", None,
                                                     "fsync period in ms.")

ENV_PREFIX = "SAMSA_"


class ConfigError(ValueError):
    """A configuration value that does not parse or is out of range."""


def parse_value(d: ConfigDef, value: str) -> object:
    """Parse and validate one value; raises ConfigError with a clear message."""
    try:
        if d.type == "boolean":
            if value.lower() not in ("true", "false"):
                raise ValueError
            return value.lower() == "true"
        if d.type in ("int", "short", "long"):
            return int(value)
        if d.type == "double":
            return float(value)
    except ValueError:
        raise ConfigError(f"Invalid value {value!r} for configuration {d.name}: "
                          f"expected a {d.type}") from None
    if d.valid and value not in d.valid:
        raise ConfigError(f"Invalid value {value!r} for configuration {d.name}: "
                          f"must be one of {', '.join(d.valid)}")
    return value


def read_properties(path: str | Path) -> dict[str, str]:
    """A server.properties-style file: key=value lines, # comments."""
    out: dict[str, str] = {}
    for raw in Path(path).read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if sep < 0:
            raise ConfigError(f"{path}: cannot parse line {raw!r} (expected key=value)")
        out[line[:sep].strip()] = line[sep + 1 :].strip()
    return out


def env_overrides(environ: dict[str, str] | None = None) -> dict[str, str]:
    """SAMSA_LOG_DIRS=... -> log.dirs=... (underscores become dots, like Kafka's docker images)."""
    env = os.environ if environ is None else environ
    out = {}
    for k, v in env.items():
        if k.startswith(ENV_PREFIX) and k != "SAMSA_HOME":
            out[k[len(ENV_PREFIX):].lower().replace("_", ".")] = v
    return out


class BrokerConfig:
    """Static broker configuration: defaults < properties file < environment < CLI overrides."""

    def __init__(self, values: dict[str, str] | None = None) -> None:
        self.values: dict[str, str] = {}
        for k, v in (values or {}).items():
            d = BROKER_CONFIGS.get(k)
            if d is not None:
                parse_value(d, v)
            self.values[k] = v

    def get(self, name: str) -> str | None:
        if name in self.values:
            return self.values[name]
        d = BROKER_CONFIGS.get(name)
        return d.default if d else None

    def get_int(self, name: str) -> int:
        v = self.get(name)
        if v is None:
            raise ConfigError(f"{name} is not set")
        return int(v)

    def get_bool(self, name: str) -> bool:
        return (self.get(name) or "false").lower() == "true"

    def topic_default(self, topic_key: str) -> tuple[str | None, int]:
        """Broker-level value for a topic config and its DescribeConfigs source
        (4 STATIC_BROKER_CONFIG, 5 DEFAULT_CONFIG)."""
        d = TOPIC_CONFIGS[topic_key]
        if topic_key == "retention.ms":
            for name, mult in (("log.retention.ms", 1), ("log.retention.minutes", 60000),
                               ("log.retention.hours", 3600000)):
                if name in self.values:
                    return str(int(self.values[name]) * mult), 4
        if topic_key == "segment.ms":
            for name, mult in (("log.roll.ms", 1), ("log.roll.hours", 3600000)):
                if name in self.values:
                    return str(int(self.values[name]) * mult), 4
        if d.broker_synonym and d.broker_synonym in self.values:
            return self.values[d.broker_synonym], 4
        return d.default, 5

    def topic_defaults(self) -> dict[str, str]:
        return {k: v for k in TOPIC_CONFIGS if (v := self.topic_default(k)[0]) is not None}

    @property
    def log_dirs(self) -> list[Path]:
        return [Path(p) for p in (self.get("log.dirs") or "./samsa-data").split(",") if p]

    @property
    def node_id(self) -> int:
        return int(self.values.get("node.id", self.values.get("broker.id", "1")))


def validate_topic_configs(configs: dict[str, str | None]) -> None:
    for k, v in configs.items():
        d = TOPIC_CONFIGS.get(k)
        if d is None:
            raise ConfigError(f"Unknown topic config name: {k}")
        if v is not None:
            parse_value(d, v)
            if k == "segment.bytes" and int(v) < 14:
                raise ConfigError(f"Invalid value {v} for configuration segment.bytes: "
                                  "Value must be at least 14")
