"""DescribeConfigs metadata checked against Kafka 4.0's documented config tables, and the Kafka 4.0
config rules (empty cleanup.policy, log.segment.bytes >= 1 MiB).

The facts below (name, type, default, update mode, server default property) are copied as data
from Apache Kafka 4.0's generated config documentation: apache/kafka-site `40/generated/
topic_config.html` (topic configs: Type, Default, Server Default Property) and `40/generated/
kafka_config.html` (broker configs: Type, Default, Update Mode), plus the 4.0 upgrade notes
(`40/getting-started/upgrade`, KIP-1030: the minimum log.segment.bytes is 1 MiB). Where Samsa
deliberately differs, the difference is listed here and in docs/compatibility.md.

How Kafka builds synonyms (ConfigHelper.configSynonyms): for a broker setting, every source in
precedence order (DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG,
DEFAULT_CONFIG), each with all names of the setting (log.retention.ms, .minutes, .hours), then the
entries before the first one named like the setting itself dropped; a topic config lists its own
value (TOPIC_CONFIG) first, then the synonyms of its server default property.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    OffsetSpec,
)
from kafka.admin import ConfigResource as KConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient

from samsa.testing import SamsaBroker
from tests.wire import Wire

pytestmark = pytest.mark.timeout(120)

LONG_MAX = "9223372036854775807"
TOPIC_SRC, DYN_BROKER, DYN_DEFAULT, STATIC, DEFAULT = 1, 2, 3, 4, 5

# Kafka 4.0 topic configs: name -> (type, default, server default property)
KAFKA_40_TOPIC: dict[str, tuple[str, str, str | None]] = {
    "cleanup.policy": ("list", "delete", "log.cleanup.policy"),
    "compression.gzip.level": ("int", "-1", "compression.gzip.level"),
    "compression.lz4.level": ("int", "9", "compression.lz4.level"),
    "compression.type": ("string", "producer", "compression.type"),
    "compression.zstd.level": ("int", "3", "compression.zstd.level"),
    "delete.retention.ms": ("long", "86400000", "log.cleaner.delete.retention.ms"),
    "file.delete.delay.ms": ("long", "60000", "log.segment.delete.delay.ms"),
    "flush.messages": ("long", LONG_MAX, "log.flush.interval.messages"),
    "flush.ms": ("long", LONG_MAX, "log.flush.interval.ms"),
    "follower.replication.throttled.replicas": ("list", "", None),
    "index.interval.bytes": ("int", "4096", "log.index.interval.bytes"),
    "leader.replication.throttled.replicas": ("list", "", None),
    "local.retention.bytes": ("long", "-2", "log.local.retention.bytes"),
    "local.retention.ms": ("long", "-2", "log.local.retention.ms"),
    "max.compaction.lag.ms": ("long", LONG_MAX, "log.cleaner.max.compaction.lag.ms"),
    "max.message.bytes": ("int", "1048588", "message.max.bytes"),
    "message.timestamp.after.max.ms": ("long", "3600000", "log.message.timestamp.after.max.ms"),
    "message.timestamp.before.max.ms": ("long", LONG_MAX, "log.message.timestamp.before.max.ms"),
    "message.timestamp.type": ("string", "CreateTime", "log.message.timestamp.type"),
    "min.cleanable.dirty.ratio": ("double", "0.5", "log.cleaner.min.cleanable.ratio"),
    "min.compaction.lag.ms": ("long", "0", "log.cleaner.min.compaction.lag.ms"),
    "min.insync.replicas": ("int", "1", "min.insync.replicas"),
    "preallocate": ("boolean", "false", "log.preallocate"),
    "remote.log.copy.disable": ("boolean", "false", None),
    "remote.log.delete.on.disable": ("boolean", "false", None),
    "remote.storage.enable": ("boolean", "false", None),
    "retention.bytes": ("long", "-1", "log.retention.bytes"),
    "retention.ms": ("long", "604800000", "log.retention.ms"),
    "segment.bytes": ("int", "1073741824", "log.segment.bytes"),
    "segment.index.bytes": ("int", "10485760", "log.index.size.max.bytes"),
    "segment.jitter.ms": ("long", "0", "log.roll.jitter.ms"),
    "segment.ms": ("long", "604800000", "log.roll.ms"),
    "unclean.leader.election.enable": ("boolean", "false", "unclean.leader.election.enable"),
}

# Kafka 4.0 broker configs Samsa knows: name -> (type, default or None, update mode)
KAFKA_40_BROKER: dict[str, tuple[str, str | None, str]] = {
    "node.id": ("int", None, "read-only"),
    "broker.id": ("int", "-1", "read-only"),
    "process.roles": ("list", None, "read-only"),
    "listeners": ("string", "PLAINTEXT://:9092", "per-broker"),
    "advertised.listeners": ("string", None, "read-only"),
    "log.dirs": ("string", None, "read-only"),
    "num.partitions": ("int", "1", "read-only"),
    "default.replication.factor": ("int", "1", "read-only"),
    "auto.create.topics.enable": ("boolean", "true", "read-only"),
    "delete.topic.enable": ("boolean", "true", "read-only"),
    "socket.request.max.bytes": ("int", "104857600", "read-only"),
    "message.max.bytes": ("int", "1048588", "cluster-wide"),
    "log.retention.check.interval.ms": ("long", "300000", "read-only"),
    "log.retention.ms": ("long", None, "cluster-wide"),
    "log.retention.minutes": ("int", None, "read-only"),
    "log.retention.hours": ("int", "168", "read-only"),
    "log.retention.bytes": ("long", "-1", "cluster-wide"),
    "log.roll.ms": ("long", None, "cluster-wide"),
    "log.roll.hours": ("int", "168", "read-only"),
    "log.roll.jitter.ms": ("long", None, "cluster-wide"),
    "log.roll.jitter.hours": ("int", "0", "read-only"),
    "log.segment.bytes": ("int", "1073741824", "cluster-wide"),
    "log.segment.delete.delay.ms": ("long", "60000", "cluster-wide"),
    "log.flush.interval.messages": ("long", LONG_MAX, "cluster-wide"),
    "log.flush.interval.ms": ("long", None, "cluster-wide"),
    "log.flush.scheduler.interval.ms": ("long", LONG_MAX, "read-only"),
    "log.flush.offset.checkpoint.interval.ms": ("int", "60000", "read-only"),
    "log.index.interval.bytes": ("int", "4096", "cluster-wide"),
    "log.index.size.max.bytes": ("int", "10485760", "cluster-wide"),
    "log.cleanup.policy": ("list", "delete", "cluster-wide"),
    "log.cleaner.enable": ("boolean", "true", "read-only"),
    "log.cleaner.backoff.ms": ("long", "15000", "cluster-wide"),
    "log.cleaner.threads": ("int", "1", "cluster-wide"),
    "log.cleaner.dedupe.buffer.size": ("long", "134217728", "cluster-wide"),
    "log.cleaner.io.buffer.size": ("int", "524288", "cluster-wide"),
    "log.cleaner.io.buffer.load.factor": ("double", "0.9", "cluster-wide"),
    "log.cleaner.io.max.bytes.per.second": ("double", "1.7976931348623157E308", "cluster-wide"),
    "log.cleaner.delete.retention.ms": ("long", "86400000", "cluster-wide"),
    "log.cleaner.max.compaction.lag.ms": ("long", LONG_MAX, "cluster-wide"),
    "log.cleaner.min.cleanable.ratio": ("double", "0.5", "cluster-wide"),
    "log.cleaner.min.compaction.lag.ms": ("long", "0", "cluster-wide"),
    "log.local.retention.bytes": ("long", "-2", "cluster-wide"),
    "log.local.retention.ms": ("long", "-2", "cluster-wide"),
    "log.message.timestamp.after.max.ms": ("long", "3600000", "cluster-wide"),
    "log.message.timestamp.before.max.ms": ("long", LONG_MAX, "cluster-wide"),
    "log.message.timestamp.type": ("string", "CreateTime", "cluster-wide"),
    "log.preallocate": ("boolean", "false", "cluster-wide"),
    "min.insync.replicas": ("int", "1", "cluster-wide"),
    "compression.type": ("string", "producer", "cluster-wide"),
    "compression.gzip.level": ("int", "-1", "cluster-wide"),
    "compression.lz4.level": ("int", "9", "cluster-wide"),
    "compression.zstd.level": ("int", "3", "cluster-wide"),
    "unclean.leader.election.enable": ("boolean", "false", "cluster-wide"),
    "offsets.topic.num.partitions": ("int", "50", "read-only"),
    "offsets.topic.replication.factor": ("short", "3", "read-only"),
    "offsets.topic.segment.bytes": ("int", "104857600", "read-only"),
    "offsets.retention.minutes": ("int", "10080", "read-only"),
    "offsets.retention.check.interval.ms": ("long", "600000", "read-only"),
    "offset.metadata.max.bytes": ("int", "4096", "read-only"),
    "transaction.state.log.num.partitions": ("int", "50", "read-only"),
    "transaction.state.log.replication.factor": ("short", "3", "read-only"),
    "transaction.state.log.min.isr": ("int", "2", "read-only"),
    "transaction.max.timeout.ms": ("int", "900000", "read-only"),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": ("int", "10000", "read-only"),
    "transactional.id.expiration.ms": ("int", "604800000", "read-only"),
    "producer.id.expiration.ms": ("int", "86400000", "cluster-wide"),
    "max.incremental.fetch.session.cache.slots": ("int", "1000", "read-only"),
    "group.initial.rebalance.delay.ms": ("int", "3000", "read-only"),
    "group.min.session.timeout.ms": ("int", "6000", "read-only"),
    "group.max.session.timeout.ms": ("int", "1800000", "read-only"),
    "group.consumer.heartbeat.interval.ms": ("int", "5000", "read-only"),
    "group.consumer.session.timeout.ms": ("int", "45000", "read-only"),
    "controller.listener.names": ("string", None, "read-only"),
    "inter.broker.listener.name": ("string", None, "read-only"),
    "listener.security.protocol.map": (
        "string", "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "per-broker"),
    "controller.quorum.voters": ("list", "", "read-only"),
    "controller.quorum.bootstrap.servers": ("list", "", "read-only"),
    "controller.quorum.election.timeout.ms": ("int", "1000", "read-only"),
    "controller.quorum.fetch.timeout.ms": ("int", "2000", "read-only"),
    "controller.quorum.election.backoff.max.ms": ("int", "1000", "read-only"),
    "controller.quorum.request.timeout.ms": ("int", "2000", "read-only"),
    "controller.quorum.retry.backoff.ms": ("int", "20", "read-only"),
    "controller.quorum.append.linger.ms": ("int", "25", "read-only"),
    "broker.heartbeat.interval.ms": ("int", "2000", "read-only"),
    "broker.session.timeout.ms": ("int", "9000", "read-only"),
    "initial.broker.registration.timeout.ms": ("int", "60000", "read-only"),
    "broker.rack": ("string", None, "read-only"),
    "metadata.log.dir": ("string", None, "read-only"),
    "metadata.log.max.record.bytes.between.snapshots": ("long", "20971520", "read-only"),
    "metadata.log.max.snapshot.interval.ms": ("long", "3600000", "read-only"),
    "metadata.log.segment.bytes": ("int", "1073741824", "read-only"),
    "metadata.max.retention.bytes": ("long", "104857600", "read-only"),
    "metadata.max.retention.ms": ("long", "604800000", "read-only"),
}

# Deliberate differences (docs/compatibility.md). A single node gets usable defaults ...
SAMSA_DEFAULTS = {"node.id": "1", "broker.id": "1", "process.roles": "broker,controller",
                  "listeners": "PLAINTEXT://127.0.0.1:9092", "log.dirs": "./samsa-data",
                  "offsets.topic.replication.factor": "1",
                  "transaction.state.log.replication.factor": "1",
                  "transaction.state.log.min.isr": "1",
                  # a node needs no extra settings to name its controller and broker listeners
                  "controller.listener.names": "CONTROLLER",
                  "inter.broker.listener.name": "PLAINTEXT"}
# ... and these, dynamic in Kafka, need a restart in Samsa (so Samsa reports them read-only).
SAMSA_READ_ONLY = {"listeners", "listener.security.protocol.map", "log.cleaner.backoff.ms",
                   "log.cleaner.threads",
                   "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.size",
                   "log.cleaner.io.buffer.load.factor", "log.cleaner.io.max.bytes.per.second",
                   "producer.id.expiration.ms"}
# Broker settings with no built-in default (Kafka: Default null): no DEFAULT_CONFIG synonym, so the
# topic configs they back list no synonyms while nothing is set (Kafka drops the hours default).
NO_DEFAULT = {n for n, (_, default, _) in KAFKA_40_BROKER.items() if default is None}

KP_TYPES = {"boolean": "BOOLEAN", "string": "STRING", "int": "INT", "short": "SHORT",
            "long": "LONG", "double": "DOUBLE", "list": "LIST"}
TYPE_IDS = {"boolean": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6, "list": 7}
KP_SOURCES = {"DYNAMIC_TOPIC_CONFIG": TOPIC_SRC, "TOPIC_CONFIG": TOPIC_SRC,
              "DYNAMIC_BROKER_CONFIG": DYN_BROKER, "DYNAMIC_DEFAULT_BROKER_CONFIG": DYN_DEFAULT,
              "STATIC_BROKER_CONFIG": STATIC, "DEFAULT_CONFIG": DEFAULT}


@pytest.fixture(scope="module")
def tuned() -> Any:
    """A broker with a static log.retention.hours (a synonym in other units), fast retention and
    a fast cleaner."""
    with SamsaBroker(overrides={"log.retention.hours": "48", "log.cleaner.backoff.ms": "200",
                                "log.retention.check.interval.ms": "200"}) as b:
        yield b


def kp_describe(bs: str, kind: Any, name: str) -> dict[str, dict[str, Any]]:
    """kafka-python's DescribeConfigs (v3+: config_type), all configs, synonyms in order."""
    admin = KafkaAdminClient(bootstrap_servers=bs)
    try:
        got = admin.describe_configs([KConfigResource(kind, name)], include_synonyms=True,
                                     config_filter="all")
    finally:
        admin.close()
    return next(iter(next(iter(got.values())).values()))


def kp_synonyms(entry: dict[str, Any]) -> list[tuple[str, str | None, int]]:
    return [(s["name"], s["value"], KP_SOURCES[s["source"]]) for s in entry["synonyms"]]


def create(bs: str, *topics: NewTopic) -> None:
    admin = AdminClient({"bootstrap.servers": bs})
    for fut in admin.create_topics(list(topics)).values():
        fut.result(10)


def ck_describe(bs: str, kind: str, name: str) -> dict[str, Any]:
    admin = AdminClient({"bootstrap.servers": bs})
    fut = next(iter(admin.describe_configs([ConfigResource(kind, name)]).values()))
    return fut.result(10)  # type: ignore[no-any-return]


def ck_alter(bs: str, kind: str, name: str, key: str, value: str | None,
             op: AlterConfigOpType = AlterConfigOpType.SET) -> None:
    admin = AdminClient({"bootstrap.servers": bs})
    res = ConfigResource(kind, name, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=op)])
    next(iter(admin.incremental_alter_configs([res]).values())).result(10)


def wire_describe(bs: str, kind: int, name: str, doc: bool) -> Any:
    w = Wire(bs)
    try:
        resp = w.request(32, 4, {"resources": [{"resource_type": kind, "resource_name": name,
                                                "configuration_keys": None}],
                                 "include_synonyms": True, "include_documentation": doc})
    finally:
        w.close()
    (res,) = resp.results
    assert int(res.error_code) == 0, res.error_message
    return {c.name: c for c in res.configs}


def test_topic_configs_match_kafka_40_table(samsa_broker: SamsaBroker) -> None:
    bs = samsa_broker.bootstrap
    create(bs, NewTopic("plain", 1, 1))
    ck = ck_describe(bs, "topic", "plain")
    kp = kp_describe(bs, ConfigResourceType.TOPIC, "plain")
    for name, (ctype, default, server_default) in KAFKA_40_TOPIC.items():
        want = [] if server_default is None or server_default in NO_DEFAULT else \
            [(server_default, default, DEFAULT)]
        e = ck[name]
        assert (e.value, e.source, e.is_read_only, e.is_sensitive) == \
            (default, DEFAULT, False, False), name
        assert {k: (s.value, s.source) for k, s in e.synonyms.items()} == \
            {n: (v, src) for n, v, src in want}, name
        k = kp[name]
        assert (k["value"], k["config_type"], k["read_only"]) == (default, KP_TYPES[ctype], False), \
            name
        assert kp_synonyms(k) == want, name


def test_broker_configs_match_kafka_40_table(samsa_broker: SamsaBroker) -> None:
    bs = samsa_broker.bootstrap
    static = {"listeners": f"PLAINTEXT://{bs}", "log.dirs": str(samsa_broker.data_dir / "logs")}
    ck = ck_describe(bs, "broker", "1")
    kp = kp_describe(bs, ConfigResourceType.BROKER, "1")
    for name, (ctype, default, mode) in KAFKA_40_BROKER.items():
        default = SAMSA_DEFAULTS.get(name, default)
        read_only = mode == "read-only" or name in SAMSA_READ_ONLY
        if name in static:
            value, source = static[name], STATIC
            want = [(name, static[name], STATIC), (name, default, DEFAULT)]
        else:
            value, source = default, DEFAULT
            want = [] if default is None else [(name, default, DEFAULT)]
        e = ck[name]
        assert (e.value, e.source, e.is_read_only, e.is_sensitive) == \
            (value, source, read_only, False), name
        k = kp[name]
        assert (k["value"], k["config_type"], k["read_only"]) == \
            (value, KP_TYPES[ctype], read_only), name
        assert kp_synonyms(k) == want, name


def test_types_and_documentation_v4(samsa_broker: SamsaBroker) -> None:
    bs = samsa_broker.bootstrap
    create(bs, NewTopic("docs", 1, 1))
    for kind, name, table in ((2, "docs", KAFKA_40_TOPIC), (4, "1", KAFKA_40_BROKER)):
        with_doc = wire_describe(bs, kind, name, doc=True)
        without = wire_describe(bs, kind, name, doc=False)
        for key, (ctype, *_rest) in table.items():
            assert with_doc[key].config_type == TYPE_IDS[ctype], key
            assert with_doc[key].documentation, key
            assert without[key].documentation is None, key


def test_synonym_order_and_sources(tuned: SamsaBroker) -> None:
    """Topic value, this broker's dynamic value, the cluster default, the static setting in
    hours, the built-in default: Kafka's order, with Kafka's source for each."""
    bs = tuned.bootstrap
    create(bs, NewTopic("own", 1, 1, config={"retention.ms": "1000000"}),
           NewTopic("inherits", 1, 1))
    hours = [("log.retention.hours", "48", STATIC), ("log.retention.hours", "168", DEFAULT)]
    assert kp_synonyms(kp_describe(bs, ConfigResourceType.TOPIC, "inherits")["retention.ms"]) == []
    assert ck_describe(bs, "topic", "inherits")["retention.ms"].value == str(48 * 3600_000)

    w = Wire(bs)  # neither client can name the cluster-default resource ""
    try:
        resp = w.request(44, 1, {"resources": [{"resource_type": 4, "resource_name": "", "configs": [
            {"name": "log.retention.ms", "config_operation": 0, "value": "5000000"}]}],
            "validate_only": False})
    finally:
        w.close()
    assert int(resp.responses[0].error_code) == 0
    ck_alter(bs, "broker", "1", "log.retention.ms", "7000000")

    chain = [("log.retention.ms", "7000000", DYN_BROKER), ("log.retention.ms", "5000000", DYN_DEFAULT),
             *hours]
    own = kp_describe(bs, ConfigResourceType.TOPIC, "own")["retention.ms"]
    assert (own["value"], KP_SOURCES[own["config_source"]]) == ("1000000", TOPIC_SRC)
    assert kp_synonyms(own) == [("retention.ms", "1000000", TOPIC_SRC), *chain]
    inherits = kp_describe(bs, ConfigResourceType.TOPIC, "inherits")["retention.ms"]
    assert (inherits["value"], KP_SOURCES[inherits["config_source"]]) == ("7000000", DYN_BROKER)
    assert kp_synonyms(inherits) == chain
    e = ck_describe(bs, "topic", "inherits")["retention.ms"]
    assert (e.value, e.source) == ("7000000", DYN_BROKER)

    brk = kp_describe(bs, ConfigResourceType.BROKER, "1")
    assert (brk["log.retention.ms"]["value"], brk["log.retention.ms"]["read_only"]) == \
        ("7000000", False)
    assert kp_synonyms(brk["log.retention.ms"]) == chain
    assert (brk["log.retention.hours"]["value"], brk["log.retention.hours"]["read_only"]) == \
        ("48", True)
    assert kp_synonyms(brk["log.retention.hours"]) == hours
    assert kp_synonyms(brk["log.retention.minutes"]) == []

    # the cluster-default resource lists only the dynamic defaults, with their own source
    cluster = wire_describe(bs, 4, "", doc=False)
    assert list(cluster) == ["log.retention.ms"]
    c = cluster["log.retention.ms"]
    assert (c.value, c.config_source, c.read_only) == ("5000000", DYN_DEFAULT, False)
    assert [(s.name, s.value, s.source) for s in c.synonyms] == \
        [("log.retention.ms", "5000000", DYN_DEFAULT)]

    # both dynamic layers are in the metadata log: a crash and restart keeps them
    tuned.restart(hard=True)
    assert kp_synonyms(kp_describe(bs, ConfigResourceType.TOPIC, "inherits")["retention.ms"]) == \
        chain

    # dropping the broker's own value falls back to the cluster default
    ck_alter(bs, "broker", "1", "log.retention.ms", None, AlterConfigOpType.DELETE)
    e = ck_describe(bs, "topic", "inherits")["retention.ms"]
    assert (e.value, e.source) == ("5000000", DYN_DEFAULT)


def test_read_only_broker_configs_are_refused(tuned: SamsaBroker) -> None:
    """Kafka answers INVALID_REQUEST for a broker config it cannot change at run time, or a value
    it cannot apply (KIP-1030: log.segment.bytes below 1 MiB)."""
    bs = tuned.bootstrap
    for key, value in (("log.dirs", "/tmp/elsewhere"), ("log.retention.hours", "1"),
                       ("node.id", "7"), ("advertised.listeners", "PLAINTEXT://x:1")):
        with pytest.raises(Exception, match="INVALID_REQUEST") as err:
            ck_alter(bs, "broker", "1", key, value)
        assert "dynamically" in str(err.value), key
    with pytest.raises(Exception, match="INVALID_REQUEST") as err:
        ck_alter(bs, "broker", "1", "log.segment.bytes", "1000")
    assert "1048576" in str(err.value)
    ck_alter(bs, "broker", "1", "log.segment.bytes", str(1 << 20))
    assert ck_describe(bs, "broker", "1")["log.segment.bytes"].value == str(1 << 20)
    ck_alter(bs, "broker", "1", "log.segment.bytes", None, AlterConfigOpType.DELETE)
    # the topic-level minimum stays 14 bytes in Kafka 4.0
    create(bs, NewTopic("small", 1, 1, config={"segment.bytes": "1000"}))


def test_remote_storage_refused(samsa_broker: SamsaBroker) -> None:
    """Samsa has no tiered storage: like a Kafka 4.0 broker without it, INVALID_CONFIG."""
    admin = AdminClient({"bootstrap.servers": samsa_broker.bootstrap})
    fut = admin.create_topics([NewTopic("tiered", 1, 1, config={"remote.storage.enable": "true"})])
    with pytest.raises(Exception, match="INVALID_CONFIG") as err:
        fut["tiered"].result(10)
    assert "Tiered Storage functionality is disabled" in str(err.value)


def test_static_log_segment_bytes_below_1mib_refused() -> None:
    broker = SamsaBroker(overrides={"log.segment.bytes": "1000"}, startup_timeout=20)
    try:
        with pytest.raises(RuntimeError, match="1048576"):
            broker.start()
    finally:
        broker.close()


def fill(bs: str, topic: str, n: int) -> None:
    p = Producer({"bootstrap.servers": bs, "linger.ms": 0, "batch.num.messages": 1})
    for i in range(n):
        p.produce(topic, key=b"k%d" % (i % 3), value=b"%06d" % i + b"x" * 200)
    assert p.flush(20) == 0


def log_start(bs: str, topic: str) -> int:
    admin = AdminClient({"bootstrap.servers": bs})
    got = admin.list_offsets({TopicPartition(topic, 0): OffsetSpec.earliest()})
    return int(next(iter(got.values())).result(10).offset)


def count_records(bs: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bs, "group.id": "count", "enable.partition.eof": True,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    n = 0
    try:
        for _ in range(200):  # bounded: 30 records and one EOF
            m = c.poll(5)
            if m is None:
                break
            if m.error():
                break  # partition EOF
            n += 1
    finally:
        c.close()
    return n


def test_empty_cleanup_policy_keeps_everything(tuned: SamsaBroker) -> None:
    """SUBTRACT of the last policy leaves an empty cleanup.policy, valid in Kafka 4.0: neither
    deleted by retention nor compacted (twins with the same settings and policy delete or compact
    show that retention and the cleaner do run)."""
    bs = tuned.bootstrap
    small = {"segment.bytes": "1000", "retention.ms": "1", "min.cleanable.dirty.ratio": "0.01"}
    create(bs, *(NewTopic(t, 1, 1, config=small) for t in ("keep", "twin")),
           NewTopic("ctwin", 1, 1, config={**small, "cleanup.policy": "compact"}))
    ck_alter(bs, "topic", "keep", "cleanup.policy", "delete", AlterConfigOpType.SUBTRACT)
    e = ck_describe(bs, "topic", "keep")["cleanup.policy"]
    assert (e.value, e.source) == ("", TOPIC_SRC)
    for t in ("keep", "twin", "ctwin"):
        fill(bs, t, 30)
    deadline = time.monotonic() + 20
    while log_start(bs, "twin") == 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert log_start(bs, "twin") > 0  # retention ran ...
    while count_records(bs, "ctwin") == 30 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert count_records(bs, "ctwin") < 30  # ... the cleaner ran ...
    time.sleep(1.0)  # ... five more retention checks and cleaner passes
    assert log_start(bs, "keep") == 0  # ... and neither touched the policy-less topic
    assert count_records(bs, "keep") == 30
    # DeleteRecords needs the delete policy, as in Kafka
    admin = AdminClient({"bootstrap.servers": bs})
    fut = next(iter(admin.delete_records([TopicPartition("keep", 0, 5)]).values()))
    with pytest.raises(Exception, match="POLICY_VIOLATION"):
        fut.result(10)
    # APPEND brings a policy back
    ck_alter(bs, "topic", "keep", "cleanup.policy", "compact", AlterConfigOpType.APPEND)
    assert ck_describe(bs, "topic", "keep")["cleanup.policy"].value == "compact"
