"""A data dir written by the single-node broker before the KRaft quorum (JSON metadata log, no
meta.properties) keeps working: the embedded node migrates it at start, keeping the cluster id,
topic ids, configs and data, and the migrated metadata survives a `kill -9` and restart."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from samsa.cluster import meta_properties as mp
from samsa.cluster.node import LEGACY_STAGING
from samsa.testing import SamsaBroker
from tests.unit.test_metadata_migrate import LEGACY_CLUSTER, ORDERS_ID, write_legacy_dir
from tests.wire import Wire


def _check(b: SamsaBroker) -> None:
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    md = admin.list_topics(timeout=10)
    assert md.cluster_id == LEGACY_CLUSTER
    assert {"orders", "plain"} <= set(md.topics) and "gone" not in md.topics
    w = Wire(b.bootstrap)
    try:
        resp = w.request(3, 12, {"topics": [{"topic_id": None, "name": "orders"}],
                                 "allow_auto_topic_creation": False,
                                 "include_topic_authorized_operations": False})
    finally:
        w.close()
    assert resp.topics[0].topic_id == ORDERS_ID
    assert len(md.topics["orders"].partitions) == 3 and len(md.topics["plain"].partitions) == 2
    res = ConfigResource(ConfigResource.Type.TOPIC, "orders")
    cfg = next(iter(admin.describe_configs([res]).values())).result(10)
    assert cfg["retention.ms"].value == "86400000"
    assert cfg["segment.bytes"].value == "1048576"
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "legacy-check",
                  "enable.auto.commit": False})
    try:
        c.assign([TopicPartition("orders", 0, 0)])
        msg = None
        for _ in range(50):
            msg = c.poll(0.2)
            if msg is not None and not msg.error():
                break
        assert msg is not None and msg.value() == b"legacy-value"
    finally:
        c.close()


def test_legacy_data_dir_is_migrated(tmp_path: Path) -> None:
    write_legacy_dir(tmp_path / "node" / "logs")
    with SamsaBroker(data_dir=tmp_path / "node") as b:
        _check(b)
        logs = tmp_path / "node" / "logs"
        assert (logs / "meta.properties").exists()
        assert any(p.name.startswith(f"{LEGACY_STAGING}.migrated-") for p in logs.iterdir())
        assert not (logs / LEGACY_STAGING).exists()
        b.kill()
        b.start()
        _check(b)


def test_migration_interrupted_by_a_crash_resumes(tmp_path: Path) -> None:
    """The state a `kill -9` leaves right after the legacy log was staged and meta.properties
    written, before the migrated records were committed: the next start migrates again."""
    logs = tmp_path / "node" / "logs"
    write_legacy_dir(logs)
    (logs / "__cluster_metadata-0").rename(logs / LEGACY_STAGING)
    mp.write(logs, mp.MetaProperties(LEGACY_CLUSTER, 1, mp.random_uuid()))
    with SamsaBroker(data_dir=tmp_path / "node") as b:
        _check(b)
