"""Config value rules as Kafka 4.0's ConfigDef applies them (types, ranges, lists) and the broker
settings given in several units (Kafka's brokerConfigSynonyms)."""

from __future__ import annotations

import pytest

from samsa.config import (
    BrokerConfig,
    ConfigError,
    broker_synonyms,
    validate_broker_configs,
    validate_topic_configs,
)


@pytest.mark.parametrize("value", ["", "delete", "compact", "compact,delete", " delete , compact"])
def test_cleanup_policy_lists_including_empty(value: str) -> None:
    validate_topic_configs({"cleanup.policy": value})


@pytest.mark.parametrize(("key", "value"), [
    ("cleanup.policy", "delete,"), ("cleanup.policy", "forever"),
    ("retention.ms", "-2"), ("segment.bytes", "13"), ("segment.ms", "0"),
    ("compression.gzip.level", "0"), ("compression.gzip.level", "10"),
    ("compression.lz4.level", "18"), ("min.cleanable.dirty.ratio", "1.5"),
    ("max.message.bytes", str(1 << 31)), ("flush.messages", "0"),
    ("max.compaction.lag.ms", "0"), ("min.insync.replicas", "0"),
])
def test_topic_values_out_of_kafkas_ranges(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=key):
        validate_topic_configs({key: value})


@pytest.mark.parametrize(("key", "value"), [
    ("retention.ms", "-1"), ("segment.bytes", "14"), ("compression.gzip.level", "-1"),
    ("compression.gzip.level", "9"), ("compression.zstd.level", "-131072"),
    ("min.cleanable.dirty.ratio", "1"), ("max.message.bytes", str((1 << 31) - 1)),
])
def test_topic_values_at_kafkas_limits(key: str, value: str) -> None:
    validate_topic_configs({key: value})


def test_log_segment_bytes_minimum_is_one_mib() -> None:
    """KIP-1030 (Kafka 4.0): the broker setting only; segment.bytes keeps 14 bytes in 4.0."""
    with pytest.raises(ConfigError, match="at least 1048576"):
        validate_broker_configs({"log.segment.bytes": str((1 << 20) - 1)})
    validate_broker_configs({"log.segment.bytes": str(1 << 20)})
    with pytest.raises(ConfigError, match="at least 1048576"):
        BrokerConfig({"log.segment.bytes": "1000"})


def test_synonyms_in_kafkas_order() -> None:
    assert broker_synonyms("log.retention.hours") == \
        ["log.retention.ms", "log.retention.minutes", "log.retention.hours"]
    assert broker_synonyms("log.roll.ms") == ["log.roll.ms", "log.roll.hours"]
    assert broker_synonyms("log.roll.jitter.hours") == ["log.roll.jitter.ms", "log.roll.jitter.hours"]
    assert broker_synonyms("log.flush.interval.ms") == \
        ["log.flush.interval.ms", "log.flush.scheduler.interval.ms"]
    assert broker_synonyms("log.flush.scheduler.interval.ms") == ["log.flush.scheduler.interval.ms"]
    assert broker_synonyms("log.cleanup.policy") == ["log.cleanup.policy"]


def test_topic_defaults_from_any_unit() -> None:
    cfg = BrokerConfig({"log.retention.minutes": "5", "log.retention.hours": "1",
                        "log.roll.jitter.hours": "2", "log.flush.scheduler.interval.ms": "1000"})
    assert cfg.topic_default("retention.ms") == ("300000", 4)  # minutes win over hours
    assert cfg.topic_default("segment.jitter.ms") == ("7200000", 4)
    assert cfg.topic_default("flush.ms") == ("1000", 4)  # log.flush.interval.ms unset
    assert cfg.topic_default("segment.ms") == ("604800000", 5)
    assert BrokerConfig({"log.retention.ms": "-1"}).topic_default("retention.ms") == ("-1", 4)


def test_remote_storage_refused_without_tiered_storage() -> None:
    from samsa.storage.remote.config import validate_topic

    with pytest.raises(ConfigError, match="Tiered Storage functionality is disabled"):
        validate_topic({"remote.storage.enable": "true"}, {}, False)
    validate_topic({"remote.storage.enable": "true"}, {}, True)
    validate_topic_configs({"remote.storage.enable": "false", "local.retention.ms": "-2"})
