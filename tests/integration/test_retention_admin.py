"""Retention (segment deletion moves the log start offset; consumers behind it follow
auto.offset.reset) and the admin APIs: partitions, configs, records, cluster, log dirs."""

from __future__ import annotations

import shutil
import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)

from samsa.testing import SamsaBroker

pytestmark = pytest.mark.timeout(120)


def wait_for(cond, timeout: float = 20.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return True
        time.sleep(0.1)
    return False


def fill(bs: str, topic: str, n: int, size: int = 100, partition: int = 0) -> None:
    p = Producer({"bootstrap.servers": bs, "linger.ms": 0, "batch.num.messages": 1})
    for i in range(n):
        p.produce(topic, value=b"%08d" % i + b"x" * size, partition=partition)
    assert p.flush(20) == 0


def watermarks(bs: str, topic: str, p: int = 0) -> tuple[int, int]:
    c = Consumer({"bootstrap.servers": bs, "group.id": "wm"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
    finally:
        c.close()


def first_offset(bs: str, topic: str, reset: str) -> tuple[str, int]:
    """Where a consumer assigned at offset 0 (below the log start now) ends up after the broker's
    OFFSET_OUT_OF_RANGE and auto.offset.reset: ("record", offset) for the first record it gets, or
    ("end", offset) when it reaches the end of the partition first (librdkafka's partition EOF
    carries the position it reached)."""
    c = Consumer({"bootstrap.servers": bs, "group.id": "g", "auto.offset.reset": reset,
                  "enable.auto.commit": False, "enable.partition.eof": True})
    c.assign([TopicPartition(topic, 0, 0)])
    try:
        deadline = time.time() + 20
        while time.time() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error() is None:
                return "record", m.offset()
            assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
            return "end", m.offset()
        raise AssertionError(f"{topic}: neither a record nor the partition end in 20 s")
    finally:
        c.close()


def test_retention_bytes_deletes_segments_and_consumers_follow_reset(
        fast_broker: SamsaBroker) -> None:
    bs = fast_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic("ret-bytes", 1, 1, config={
        "segment.bytes": "2000", "retention.bytes": "4000"})])["ret-bytes"].result(10)
    fill(bs, "ret-bytes", 300)
    assert wait_for(lambda: watermarks(bs, "ret-bytes")[0] > 0), "log start offset never moved"
    lo, hi = watermarks(bs, "ret-bytes")
    assert hi == 300 and 0 < lo < 300
    # 'earliest' resets to the new log start offset
    assert first_offset(bs, "ret-bytes", "earliest") == ("record", lo)
    fill(bs, "ret-bytes", 1)
    # 'latest' jumps to the end (301): nothing old is delivered
    assert first_offset(bs, "ret-bytes", "latest") == ("end", 301)


def test_retention_ms_expires_old_segments(fast_broker: SamsaBroker) -> None:
    bs = fast_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic("ret-ms", 1, 1, config={
        "segment.bytes": "1500", "retention.ms": "1500"})])["ret-ms"].result(10)
    fill(bs, "ret-ms", 100)
    assert wait_for(lambda: watermarks(bs, "ret-ms")[0] == 100, timeout=30)
    fill(bs, "ret-ms", 5)
    assert watermarks(bs, "ret-ms") == (100, 105)


def test_delete_records_create_partitions_and_configs(samsa_broker: SamsaBroker) -> None:
    bs = samsa_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic("adm", 2, 1)])["adm"].result(10)
    fill(bs, "adm", 50)
    res = admin.delete_records([TopicPartition("adm", 0, 20)])
    assert next(iter(res.values())).result(10).low_watermark == 20
    assert watermarks(bs, "adm") == (20, 50)
    bad = admin.delete_records([TopicPartition("adm", 0, 99)])
    with pytest.raises(Exception, match="OFFSET_OUT_OF_RANGE|out of range"):
        next(iter(bad.values())).result(10)

    admin.create_partitions([NewPartitions("adm", 5)])["adm"].result(10)
    assert len(admin.list_topics(timeout=10).topics["adm"].partitions) == 5
    fill(bs, "adm", 3, partition=4)
    assert watermarks(bs, "adm", 4) == (0, 3)
    with pytest.raises(Exception, match="INVALID_PARTITIONS|partitions"):
        admin.create_partitions([NewPartitions("adm", 3)])["adm"].result(10)

    r = ConfigResource("topic", "adm", incremental_configs=[
        ConfigEntry("retention.ms", "12345", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND)])
    next(iter(admin.incremental_alter_configs([r]).values())).result(10)
    got = next(iter(admin.describe_configs([ConfigResource("topic", "adm")]).values())).result(10)
    assert got["retention.ms"].value == "12345"
    assert got["cleanup.policy"].value == "delete,compact"
    assert got["retention.ms"].source == 1  # DYNAMIC_TOPIC_CONFIG
    bad_cfg = ConfigResource("topic", "adm", incremental_configs=[
        ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(Exception, match="INVALID_CONFIG|Invalid value"):
        next(iter(admin.incremental_alter_configs([bad_cfg]).values())).result(10)
    unknown = ConfigResource("topic", "adm", incremental_configs=[
        ConfigEntry("no.such.config", "1", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(Exception, match="INVALID_CONFIG|Unknown"):
        next(iter(admin.incremental_alter_configs([unknown]).values())).result(10)

    broker_cfg = next(iter(admin.describe_configs([ConfigResource("broker", "1")]).values())) \
        .result(10)
    assert broker_cfg["num.partitions"].value == "1"
    assert "log.retention.hours" in broker_cfg


def test_create_topic_errors(samsa_broker: SamsaBroker) -> None:
    admin = AdminClient({"bootstrap.servers": samsa_broker.bootstrap})
    admin.create_topics([NewTopic("dupe", 1, 1)])["dupe"].result(10)
    cases = {
        "dupe": (NewTopic("dupe", 1, 1), "TOPIC_ALREADY_EXISTS|already exists"),
        "bad name": (NewTopic("bad name!", 1, 1), "INVALID_TOPIC|illegal"),
        "rf": (NewTopic("rf3", 1, 3), "INVALID_REPLICATION_FACTOR|replication"),
        "cfg": (NewTopic("cfg", 1, 1, config={"segment.bytes": "abc"}), "INVALID_CONFIG"),
    }
    for _name, (nt, pattern) in cases.items():
        with pytest.raises(Exception, match=pattern):
            admin.create_topics([nt])[nt.topic].result(10)
    # validate_only creates nothing
    admin.create_topics([NewTopic("dry", 1, 1)], validate_only=True)["dry"].result(10)
    assert "dry" not in admin.list_topics(timeout=10).topics


def test_describe_cluster_and_log_dirs(samsa_broker: SamsaBroker) -> None:
    admin = AdminClient({"bootstrap.servers": samsa_broker.bootstrap})
    desc = admin.describe_cluster().result(10)
    assert len(desc.nodes) == 1 and desc.nodes[0].port == samsa_broker.port
    assert desc.controller.id == 1 and desc.cluster_id
    admin.create_topics([NewTopic("ld", 2, 1)])["ld"].result(10)
    fill(samsa_broker.bootstrap, "ld", 50)  # partition 0 only
    from kafka import KafkaAdminClient
    ka = KafkaAdminClient(bootstrap_servers=samsa_broker.bootstrap)
    try:
        (broker,) = ka.describe_log_dirs(["ld"])
    finally:
        ka.close()
    assert broker["broker"] == 1
    (log_dir,) = broker["log_dirs"]
    root = samsa_broker.data_dir / "logs"
    assert log_dir["error_code"] == 0 and log_dir["log_dir"] == str(root)
    disk = shutil.disk_usage(root)
    assert log_dir["total_bytes"] == disk.total and 0 < log_dir["usable_bytes"] <= disk.total
    (topic,) = log_dir["topics"]
    assert topic["name"] == "ld"
    sizes = {p["partition_index"]: p["partition_size"] for p in topic["partitions"]}
    on_disk = {i: sum(f.stat().st_size for f in (root / f"ld-{i}").glob("*.log")) for i in (0, 1)}
    assert sizes == on_disk and on_disk[0] > 50 * 100 and on_disk[1] == 0
    assert all(p["offset_lag"] == 0 and not p["is_future_key"] for p in topic["partitions"])


def test_fetch_long_poll_is_woken_by_append(samsa_broker: SamsaBroker) -> None:
    """A consumer parked in a fetch with a 5-minute max wait still gets a new record: only the
    append can have woken the delayed fetch (no elapsed time is measured)."""
    bs = samsa_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic("wake", 1, 1)])["wake"].result(10)
    c = Consumer({"bootstrap.servers": bs, "group.id": "w", "fetch.wait.max.ms": 300000,
                  "fetch.min.bytes": 1})
    c.assign([TopicPartition("wake", 0, 0)])
    assert c.poll(1.5) is None  # the consumer is now parked in a long poll
    p = Producer({"bootstrap.servers": bs, "linger.ms": 0})
    p.produce("wake", value=b"now")
    p.flush(5)
    m = c.poll(30)
    assert m is not None and m.value() == b"now", "the delayed fetch was not woken by the append"
    c.close()
