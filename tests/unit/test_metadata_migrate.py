"""Reading a data dir written by the single-node broker (JSON metadata log) as KRaft records, and
telling it apart from the KRaft log (FileRaftLog) and from garbage."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest

from samsa.cluster.metadata.image import MetadataImage
from samsa.cluster.metadata.legacy import MetadataLog
from samsa.cluster.metadata.migrate import legacy_records
from samsa.cluster.metadata.records import (
    BROKER_RESOURCE,
    ConfigRecord,
    PartitionRecord,
    ProducerIdsRecord,
    TopicRecord,
    encode,
)
from samsa.cluster.quorum.disk.log import FileRaftLog
from samsa.cluster.quorum.log import Entry

LEGACY_CLUSTER = "lEgAcYcLuStErIdAAAAAAA"
ORDERS_ID = uuid.UUID("6f1c3f36-1b7e-4b61-9a3f-0b6f1f3f8c01")


def write_legacy_dir(logs: Path) -> None:
    """A data dir as the single-node broker before the quorum wrote it: its JSON metadata log,
    written by that broker's own writer (legacy.MetadataLog), with topics with configs, one
    grown, one deleted, broker configs cluster-wide and for node 1, producer ids handed out,
    plus a partition log holding one record."""
    import asyncio

    from samsa.protocol.records import encode_batch
    from samsa.storage.log import LogConfig, PartitionLog

    logs.mkdir(parents=True, exist_ok=True)
    meta = MetadataLog(logs, clean=True)
    writes: list[list[dict[str, Any]]] = [
        [{"type": "cluster", "cluster_id": LEGACY_CLUSTER}],
        [{"type": "topic", "name": "orders", "topic_id": str(ORDERS_ID), "partitions": 3,
          "configs": {"retention.ms": "86400000", "cleanup.policy": "compact"},
          "internal": False}],
        [{"type": "topic", "name": "gone", "topic_id": str(uuid.uuid4()), "partitions": 1,
          "configs": {}, "internal": False}],
        [{"type": "topic", "name": "plain", "topic_id": str(uuid.uuid4()), "partitions": 1,
          "configs": {}, "internal": False}],
        [{"type": "partitions", "name": "plain", "partitions": 2}],
        [{"type": "remove_topic", "name": "gone"}],
        [{"type": "topic_config", "name": "orders", "configs": {"segment.bytes": "1048576"}}],
        [{"type": "topic_config", "name": "orders", "configs": {"cleanup.policy": None}}],
        [{"type": "broker_config", "configs": {"log.retention.ms": "3600000"}, "node": ""}],
        [{"type": "broker_config", "configs": {"log.segment.bytes": "2097152"}, "node": "1"}],
        [{"type": "producer_ids", "next": 1000}],
    ]

    async def write() -> None:
        for recs in writes:
            await meta.write(recs)
    asyncio.run(write())
    meta.close()
    lg = PartitionLog.open(logs / "orders-0", "orders", 0, LogConfig(), clean=True)
    lg.append(bytearray(encode_batch([(b"k", b"legacy-value", [], 1700000000000)])))
    lg.close(True)


@pytest.fixture(scope="module")
def legacy_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    logs = tmp_path_factory.mktemp("legacy") / "logs"
    write_legacy_dir(logs)
    return logs


def test_legacy_dir_becomes_records(legacy_dir: Path, tmp_path: Path) -> None:
    # what the old broker itself replays from that dir (read from a copy: it opens a PartitionLog)
    shutil.copytree(legacy_dir / "__cluster_metadata-0", tmp_path / "__cluster_metadata-0")
    old = MetadataLog(tmp_path, clean=True)
    old_image = old.replay()
    old.close()
    assert set(old_image.topics) >= {"orders", "plain"}

    got = legacy_records(legacy_dir, node_id=1)
    assert got is not None
    cluster_id, recs = got
    assert cluster_id == old_image.cluster_id and cluster_id

    img = MetadataImage(cluster_id=cluster_id)
    for i, r in enumerate(recs):
        img.apply(r, i)
    assert set(img.topics) == set(old_image.topics)  # "gone" is not there
    for name, t in old_image.topics.items():
        new = img.topics[name]
        assert new.topic_id == t.topic_id
        assert new.count == t.partitions
        assert new.configs == t.configs
        for p in new.partitions.values():
            assert (p.replicas, p.isr, p.leader) == ((1,), (1,), 1)
    assert img.topics["orders"].configs == {"retention.ms": "86400000", "segment.bytes": "1048576"}
    assert img.topics["plain"].count == 2
    assert img.cluster_configs == {"log.retention.ms": "3600000"}
    assert img.node_configs == {1: {"log.segment.bytes": "2097152"}}
    assert img.next_producer_id == old_image.next_producer_id > 0
    assert img.broker_configs_for_topics(1) == old_image.broker_configs_for_topics()

    # topic first, then its configs and partitions; records all encodable
    kinds = [type(r) for r in recs]
    assert kinds.index(TopicRecord) < kinds.index(PartitionRecord)
    assert ProducerIdsRecord in kinds and ConfigRecord in kinds
    assert ConfigRecord(BROKER_RESOURCE, "1", "log.segment.bytes", "2097152") in recs
    for r in recs:
        encode(r)


def test_node_id_places_partitions(legacy_dir: Path) -> None:
    got = legacy_records(legacy_dir, node_id=7)
    assert got is not None
    parts = [r for r in got[1] if isinstance(r, PartitionRecord)]
    assert parts and all(r.replicas == (7,) and r.isr == (7,) and r.leader == 7 for r in parts)
    assert ConfigRecord(BROKER_RESOURCE, "7", "log.segment.bytes", "2097152") in got[1]


def test_absent_or_empty_dir_is_not_legacy(tmp_path: Path) -> None:
    assert legacy_records(tmp_path) is None
    assert legacy_records(tmp_path / "missing") is None
    (tmp_path / "__cluster_metadata-0").mkdir()
    assert legacy_records(tmp_path) is None


def test_kraft_log_is_not_legacy(tmp_path: Path) -> None:
    log = FileRaftLog(tmp_path / "__cluster_metadata-0")
    log.append([Entry(1, b"\x00\x00", control=True),
                Entry(1, encode(TopicRecord("t", uuid.uuid4()))),
                Entry(1, b'{"type": "cluster", "cluster_id": "x"}')])  # JSON after non-JSON
    log.flush()
    assert legacy_records(tmp_path) is None
    other = tmp_path / "b"
    log2 = FileRaftLog(other / "__cluster_metadata-0")
    log2.append([Entry(1, encode(TopicRecord("t", uuid.uuid4())))])  # no control batch
    log2.flush()
    assert legacy_records(other) is None


def test_garbage_segments_are_not_legacy_and_do_not_raise(tmp_path: Path,
                                                          legacy_dir: Path) -> None:
    d = tmp_path / "__cluster_metadata-0"
    d.mkdir()
    (d / "00000000000000000000.log").write_bytes(b"\x00" * 7 + b"garbage" * 20)
    assert legacy_records(tmp_path) is None
    # a legacy log with a torn tail: the intact prefix is read
    torn = tmp_path / "torn"
    shutil.copytree(legacy_dir / "__cluster_metadata-0", torn / "__cluster_metadata-0")
    seg = torn / "__cluster_metadata-0" / "00000000000000000000.log"
    data = seg.read_bytes()
    seg.write_bytes(data[: len(data) - 5])
    got = legacy_records(torn)
    assert got is not None and got[0]
