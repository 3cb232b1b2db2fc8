"""Tiered storage review (session 9): bugs found by a correctness review, each with a test that
failed before its fix. A real broker with the local-directory store, real clients."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa.testing import SamsaBroker
from tests.integration.test_tiered_reads import (
    create,
    list_offset,
    produce,
    tiered_overrides,
    wait_tiered,
)
from tests.wire import Wire

SMALL = 2000


@pytest.fixture(scope="module")
def tiered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SamsaBroker, Path]]:
    root = tmp_path_factory.mktemp("tiered-review")
    store = root / "store"
    b = SamsaBroker(root / "data", overrides=tiered_overrides(store))
    b.start()
    try:
        yield b, store
    finally:
        b.close()


def test_spark_plan_from_earliest_respects_delete_records(
        tiered: tuple[SamsaBroker, Path]) -> None:
    """DeleteRecords at an offset inside a remote segment: the segment stays in the store (it is
    not wholly below the new start), but its records below the start are gone for clients. A
    Spark backfill from `earliest` must not read them from the store: it used to lower a start
    equal to the broker's earliest to the remote tier's first offset."""
    pytest.importorskip("pyspark")
    from samsa.spark.remote import plan_remote

    b, store = tiered
    bs = b.bootstrap
    topic = "review-spark-dr"
    create(bs, topic, segment=64 << 10, local=128 << 10)
    n = 600  # ~1.2 MiB: ~20 segments of ~32 records, most only remote
    produce(bs, topic, 0, n, SMALL)
    wait_tiered(bs, topic, n // 2)
    cut = 45  # inside the second segment (segments hold ~32 records)
    w = Wire(bs)
    try:
        r = w.request(21, 2, {"topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "offset": cut}]}], "timeout": 10000})
        pr = r.topics[0].partitions[0]
        assert (pr.error_code, pr.low_watermark) == (0, cut)
        assert list_offset(w, topic, -2)[:2] == (0, cut)
    finally:
        w.close()
    k = f"{topic}/0"
    parts, rest = plan_remote({"bootstrap.servers": bs}, {k: cut}, {k: n}, 1 << 20, {k: cut})
    assert parts, "nothing planned from the store"
    assert min(p.start for p in parts) == cut, [(p.start, p.end) for p in parts]
    assert rest[k] > cut
    # a micro-batch of a stream (no earliest given) starting below the start: nothing of it is
    # read from the store (the broker path reports the deleted offsets, failOnDataLoss)
    parts, rest = plan_remote({"bootstrap.servers": bs}, {k: cut - 5}, {k: n}, 1 << 20)
    assert not parts, [(p.start, p.end) for p in parts]
    assert rest[k] == cut - 5
    parts, rest = plan_remote({"bootstrap.servers": bs}, {k: cut}, {k: n}, 1 << 20)
    assert parts and min(p.start for p in parts) == cut


def test_a_tiered_topic_cannot_become_compacted(tiered: tuple[SamsaBroker, Path]) -> None:
    """Kafka refuses cleanup.policy=compact on a topic with remote storage, on create and on
    alter alike (the checks run on the topic's merged configs)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    b, _store = tiered
    topic = "review-compact-alter"
    create(b.bootstrap, topic, segment=64 << 10, local=128 << 10)
    a = AdminClient({"bootstrap.servers": b.bootstrap})
    for policy in ("compact", "compact,delete"):
        res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
            ConfigEntry("cleanup.policy", policy,
                        incremental_operation=AlterConfigOpType.SET)])
        with pytest.raises(KafkaException) as err:
            a.incremental_alter_configs([res])[res].result(15)
        assert err.value.args[0].name() == "INVALID_CONFIG", policy
        assert "Remote log storage only supports topics with cleanup.policy=delete" in \
            err.value.args[0].str()
    # legacy AlterConfigs (the whole set) too
    res = ConfigResource(ResourceType.TOPIC, topic, set_config={
        "remote.storage.enable": "true", "cleanup.policy": "compact"})
    with pytest.raises(KafkaException) as err:
        a.alter_configs([res])[res].result(15)
    assert err.value.args[0].name() == "INVALID_CONFIG"


def test_broker_refuses_to_start_without_tiering_while_a_topic_is_tiered(
        tmp_path: Path) -> None:
    """Kafka fails a broker's start when remote.log.storage.system.enable=false and a topic has
    remote.storage.enable=true. Samsa started, applied the total retention to the local log alone
    and hid the remote tier: the earliest offset jumped to the local log's start and every
    acknowledged record only in the store was unreadable."""
    store = tmp_path / "store"
    b = SamsaBroker(tmp_path / "data", overrides=tiered_overrides(store))
    b.start()
    try:
        topic = "review-system-off"
        create(b.bootstrap, topic, segment=64 << 10, local=128 << 10)
        produce(b.bootstrap, topic, 0, 400, SMALL)
        local = wait_tiered(b.bootstrap, topic, 100)
        assert local > 0
        b.kill()
        b.overrides["remote.log.storage.system.enable"] = "false"
        with pytest.raises(RuntimeError) as err:
            b.start()
        assert "before disabling tiered storage cluster-wide" in str(err.value)
        assert topic in str(err.value)
        # back on: everything is readable from offset 0 again
        b.overrides["remote.log.storage.system.enable"] = "true"
        b.start()
        w = Wire(b.bootstrap)
        try:
            assert list_offset(w, topic, -2)[:2] == (0, 0)
        finally:
            w.close()
    finally:
        b.close()


def test_max_timestamp_ignores_records_below_the_log_start(
        tiered: tuple[SamsaBroker, Path]) -> None:
    """ListOffsets MAX_TIMESTAMP (-3) across tiers answered the offset of the segment's largest
    timestamp even when DeleteRecords had removed that record (a remote segment straddling the
    new log start keeps its bytes): an offset below the log start."""
    from confluent_kafka import Producer

    from tests.integration.test_tiered_reads import T0, key, value

    b, _store = tiered
    bs = b.bootstrap
    topic = "review-maxts-dr"
    create(bs, topic, segment=32 << 10, local=64 << 10)
    top = T0 + 3_000_000  # above every later record's timestamp (T0 + index)
    p = Producer({"bootstrap.servers": bs, "linger.ms": 5})
    p.produce(topic, key=key(0), value=value(0, SMALL), timestamp=T0, partition=0)
    p.produce(topic, key=key(1), value=value(1, SMALL), timestamp=top, partition=0)
    assert p.flush(30) == 0
    produce(bs, topic, 2, 300, SMALL)
    wait_tiered(bs, topic, 100)
    w = Wire(bs)
    try:
        assert list_offset(w, topic, -3, version=7)[:2] == (0, 1)
        cut = 5  # inside the first segment (~15 records of 2 kB in 32 KiB)
        r = w.request(21, 2, {"topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "offset": cut}]}], "timeout": 10000})
        assert r.topics[0].partitions[0].error_code == 0
        assert list_offset(w, topic, -2)[:2] == (0, cut)
        err, off, _ = list_offset(w, topic, -3, version=7)
        assert (err, off) == (0, 301)  # the largest timestamp left: the last record's
    finally:
        w.close()
