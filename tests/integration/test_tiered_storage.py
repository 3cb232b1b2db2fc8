"""Tiered storage (issue 19) on a real broker: closed segments move to the local-directory store,
local disk stays within local.retention.bytes, total retention deletes remote segments, KIP-950's
copy/delete switches, Kafka's config checks, and orphaned objects go."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from confluent_kafka.error import KafkaException

from samsa.storage.remote.local_store import partition_dir_name
from samsa.storage.remote.rsm import TopicIdPartition
from samsa.testing import SamsaBroker
from tests.tiered_util import (
    SEG,
    TIERED_BROKER,
    assert_store_clean,
    broker_records,
    create,
    local_log_bytes,
    local_log_start,
    produce,
    read_metadata,
    remote_records,
    store,
    wait_for,
)


@pytest.fixture(scope="module")
def broker() -> Iterator[SamsaBroker]:
    with SamsaBroker(overrides=TIERED_BROKER) as b:
        yield b


def alter(b: SamsaBroker, name: str, **configs: str) -> None:
    """IncrementalAlterConfigs SET of each setting."""
    a = AdminClient({"bootstrap.servers": b.bootstrap})
    res = ConfigResource("topic", name, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
        for k, v in configs.items()])
    a.incremental_alter_configs([res])[res].result(15)


def all_records(b: SamsaBroker, topic: str) -> dict[int, bytes | None]:
    remote, _ = remote_records(b, topic)
    local = broker_records(b.bootstrap, topic)
    for off, v in local.items():
        if off in remote:
            assert remote[off] == v, f"offset {off} differs between the tiers"
    return {**remote, **local}


def test_segments_move_to_the_store_and_local_disk_stays_bounded(broker: SamsaBroker) -> None:
    local_bytes = 3 * SEG
    create(broker, "tiered-bounded", **{"local.retention.bytes": str(local_bytes)})
    acked = produce(broker.bootstrap, "tiered-bounded", 3000)
    assert len(acked) == 3000
    end = max(acked) + 1

    def settled() -> bool:
        _, segs = remote_records(broker, "tiered-bounded")
        copied = max((m.end_offset for m in segs), default=-1)
        # everything but the active segment is copied, and local retention has run
        return copied >= end - 200 and local_log_bytes(broker, "tiered-bounded") \
            <= local_bytes + 2 * SEG

    wait_for(settled, 30, "segments copied and local retention applied")
    assert local_log_bytes(broker, "tiered-bounded") <= local_bytes + 2 * SEG
    remote, segs = remote_records(broker, "tiered-bounded")
    # the remote tier: whole segments from offset 0, contiguous, none overlapping
    assert segs[0].start_offset == 0
    for a, b in zip(segs, segs[1:], strict=False):
        assert b.start_offset == a.end_offset + 1
    local_start = local_log_start(broker, "tiered-bounded")
    assert local_start > 0, "local retention deleted nothing"
    assert local_start <= max(remote) + 1, "a gap between the tiers"
    # every acknowledged record, byte-identical, in the store and through the broker from 0
    assert {o: remote.get(o) for o in acked if o < local_start} == {
        o: v for o, v in acked.items() if o < local_start}
    via_broker = broker_records(broker.bootstrap, "tiered-bounded")
    assert via_broker == acked
    cache = assert_store_clean(broker, "tiered-bounded")
    (tp,) = [t for t in cache.topic_partitions() if t.topic == "tiered-bounded"]
    assert cache.remote_log_size(tp) == sum(m.segment_size_in_bytes for m in segs)


def test_kafka_config_checks(broker: SamsaBroker) -> None:
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    bad = [
        ({"remote.storage.enable": "true", "cleanup.policy": "compact"},
         "Remote log storage only supports topics with cleanup.policy=delete"),
        ({"remote.storage.enable": "true", "retention.bytes": "1000",
          "local.retention.bytes": "2000"},
         "Value must not be more than retention.bytes property value: 1000"),
        ({"remote.storage.enable": "true", "remote.log.copy.disable": "true",
          "local.retention.ms": "1000"},
         "must be set to the identical value"),
    ]
    for i, (cfg, msg) in enumerate(bad):
        with pytest.raises(KafkaException) as err:
            a.create_topics([NewTopic(f"tiered-bad-{i}", 1, 1, config=cfg)])[
                f"tiered-bad-{i}"].result(15)
        assert err.value.args[0].name() == "INVALID_CONFIG"
        assert msg in err.value.args[0].str()
    create(broker, "tiered-turnoff")
    with pytest.raises(KafkaException) as err:
        alter(broker, "tiered-turnoff", **{"remote.storage.enable": "false"})
    assert "invalid to disable remote storage without deleting remote data" in \
        err.value.args[0].str()


def test_copy_disable_then_delete_on_disable(broker: SamsaBroker) -> None:
    topic = "tiered-kip950"
    create(broker, topic)
    acked = produce(broker.bootstrap, topic, 1500)
    wait_for(lambda: len(remote_records(broker, topic)[1]) >= 5, 30, "segments copied")
    # KIP-950 read-only remote tier: no more copies, what is there stays readable
    alter(broker, topic, **{"remote.log.copy.disable": "true"})
    time.sleep(0.5)  # a copy already running may finish
    _, before = remote_records(broker, topic)
    acked.update(produce(broker.bootstrap, topic, 1500, start=1500))
    time.sleep(2.0)  # ten remote log manager passes
    _, after = remote_records(broker, topic)
    assert [m.id for m in after] == [m.id for m in before], "copied while copying was disabled"
    got = all_records(broker, topic)
    assert {o: got.get(o) for o in acked} == acked
    # turned off with remote.log.delete.on.disable: the remote data goes, local data stays
    alter(broker, topic, **{"remote.storage.enable": "false",
                            "remote.log.delete.on.disable": "true"})
    wait_for(lambda: not remote_records(broker, topic)[1] and not [
        o for o in store(broker).list_segments() if o.segment_id.tp.topic == topic], 30,
        "the remote data deleted")
    assert_store_clean(broker, topic)
    local = broker_records(broker.bootstrap, topic)
    assert max(local) == max(acked)


def test_total_retention_deletes_remote_segments(broker: SamsaBroker) -> None:
    topic = "tiered-retention"
    create(broker, topic)
    old = int(time.time() * 1000) - 2 * 86400_000
    acked_old = produce(broker.bootstrap, topic, 1200, timestamp=old)
    acked_new = produce(broker.bootstrap, topic, 1200, start=1200)
    first_new = min(acked_new)
    wait_for(lambda: max((m.end_offset for m in remote_records(broker, topic)[1]), default=-1)
             >= first_new, 30, "segments copied")
    # retention.ms of a day: the segments holding only two-day-old records go from both tiers
    alter(broker, topic, **{"retention.ms": str(86400_000)})

    def old_gone() -> bool:
        _, segs = remote_records(broker, topic)
        return bool(segs) and segs[0].start_offset > 0 and all(
            m.max_timestamp_ms > old for m in segs)

    wait_for(old_gone, 30, "remote retention")
    remote, segs = remote_records(broker, topic)
    start = segs[0].start_offset
    assert start <= first_new  # only segments wholly below retention went
    assert_store_clean(broker, topic)
    got = all_records(broker, topic)
    assert all(got.get(o) == v for o, v in acked_new.items())
    assert min(got) == start
    assert all(o >= start for o in got) and len(acked_old) == 1200


def test_orphaned_objects_are_deleted(tmp_path: os.PathLike[str]) -> None:
    """Objects in the store the metadata never heard of (a lost metadata write) go once old."""
    with SamsaBroker(overrides=TIERED_BROKER) as b:
        create(b, "tiered-orphan")
        produce(b.bootstrap, "tiered-orphan", 600)
        wait_for(lambda: remote_records(b, "tiered-orphan")[1], 30, "a segment copied")
        _, segs = remote_records(b, "tiered-orphan")
        tp: TopicIdPartition = segs[0].tp
        d = b.data_dir / "remote-storage" / partition_dir_name(tp)
        orphan_id = uuid.uuid4()
        files = [d / f"{0:020d}-{orphan_id.hex}.{part}" for part in ("log", "index")]
        files.append(d / f"{0:020d}-{orphan_id.hex}.timeindex.tmp-0badf00d")
        old = time.time() - 3600
        for f in files:
            f.write_bytes(b"junk")
            os.utime(f, (old, old))
        young = d / f"{0:020d}-{uuid.uuid4().hex}.log"  # may be an upload in progress: kept
        young.write_bytes(b"junk")
        b.restart()  # the first pass of the remote log manager lists the store
        wait_for(lambda: not any(f.exists() for f in files), 20, "the orphan deleted")
        assert young.exists()
        young.unlink()
        assert_store_clean(b, "tiered-orphan")
        assert "deleted orphaned remote segment" in b.log_text()


def test_remote_data_of_a_deleted_topic_goes(broker: SamsaBroker) -> None:
    topic = "tiered-deleted"
    create(broker, topic)
    produce(broker.bootstrap, topic, 600)
    wait_for(lambda: remote_records(broker, topic)[1], 30, "a segment copied")
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    a.delete_topics([topic])[topic].result(15)
    wait_for(lambda: not [o for o in store(broker).list_segments()
                          if o.segment_id.tp.topic == topic], 30, "remote data deleted")
    cache = read_metadata(broker.bootstrap)
    assert not [tp for tp in cache.topic_partitions() if tp.topic == topic]


def test_store_failures_back_off_and_keep_local_data(tmp_path: Path) -> None:
    """A store that fails every upload: copies are retried with growing back-off
    (remote.log.manager.task.retry.backoff.*), no local segment is deleted meanwhile, every record
    stays readable; once the store is back, copying catches up and nothing is left half done."""
    store_dir = tmp_path / "store"
    ov = {**TIERED_BROKER, "rsm.config.dir": str(store_dir)}
    with SamsaBroker(overrides=ov) as b:
        topic = "tiered-failing"
        create(b, topic, **{"local.retention.bytes": str(SEG)})
        shutil.rmtree(store_dir)
        store_dir.write_bytes(b"")  # the store's directory is a file now: every call fails
        acked = produce(b.bootstrap, topic, 1000)
        pattern = re.compile(rf"remote copy of {topic}-0:\S+ failed \(attempt (\d+), next in "
                             r"([0-9.]+)s\)")

        def attempts() -> list[tuple[int, float]]:
            return [(int(a), float(w)) for a, w in pattern.findall(b.log_text())]
        wait_for(lambda: len(attempts()) >= 3, 30, "three failed copies")
        seen = attempts()
        assert [a for a, _ in seen[:3]] == [1, 2, 3]
        waits = [w for _, w in seen[:3]]
        assert waits[0] < waits[1] < waits[2], waits  # exponential back-off
        assert local_log_start(b, topic) == 0  # nothing copied, so nothing deleted locally
        assert broker_records(b.bootstrap, topic) == acked
        store_dir.unlink()
        store_dir.mkdir()

        def caught_up() -> bool:
            _, segs = remote_records(b, topic)
            return bool(segs) and local_log_start(b, topic) > 0
        wait_for(caught_up, 60, "copies resumed after the store came back")
        assert broker_records(b.bootstrap, topic) == acked
        wait_for(lambda: _clean(b, topic), 30, "the failed attempts cleaned up")


def _clean(b: SamsaBroker, topic: str) -> bool:
    try:
        assert_store_clean(b, topic)
    except AssertionError:
        return False
    return True


def test_tiering_an_existing_topic_with_the_cli(broker: SamsaBroker) -> None:
    """The docs' commands: `samsa topics alter --config remote.storage.enable=true` on a topic
    with data copies its closed segments; `samsa consume __remote_log_metadata` shows them."""
    def cli(*args: str) -> str:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SAMSA_")}
        r = subprocess.run([sys.executable, "-m", "samsa.cli.main", *args, "--bootstrap-server",
                            broker.bootstrap], capture_output=True, text=True, env=env,
                           timeout=60)
        assert r.returncode == 0, r.stderr
        return r.stdout

    topic = "tiered-late"
    cli("topics", "create", topic, "--config", f"segment.bytes={SEG}")
    acked = produce(broker.bootstrap, topic, 600)
    time.sleep(1.0)  # five remote log manager passes: nothing is copied yet
    assert not remote_records(broker, topic)[1]
    cli("topics", "alter", topic, "--config", "remote.storage.enable=true")
    wait_for(lambda: len(remote_records(broker, topic)[1]) >= 3, 30, "segments copied")
    assert broker_records(broker.bootstrap, topic) == acked
    out = cli("consume", "__remote_log_metadata", "--from-beginning", "--max-messages", "1000",
              "--timeout", "5")
    mine = [line for line in out.splitlines() if f'"topic":"{topic}"' in line]
    assert any('"t":"segment"' in line for line in mine), out[-2000:]
    assert any('"t":"update"' in line and '"state":1' in line for line in mine)


def test_a_stuck_upload_never_blocks_the_broker(tmp_path: Path) -> None:
    """Uploads run on the copier threads: while one is stuck in the store (a backend loaded by
    class name), the broker keeps taking and serving records, and the stuck segment stays
    invisible (COPY_SEGMENT_STARTED) until the store lets it finish."""
    gate = tmp_path / "gate"
    ov = {**TIERED_BROKER, "rsm.config.dir": str(tmp_path / "store"),
          "rsm.config.gate": str(gate),
          "remote.log.storage.manager.class.name": "tests.tiered_blocking_store:BlockingStore"}
    with SamsaBroker(overrides=ov) as b:
        topic = "tiered-stuck"
        create(b, topic, **{"local.retention.bytes": str(SEG)})
        acked = produce(b.bootstrap, topic, 300)
        wait_for(lambda: list(tmp_path.glob("copy-waiting-*")), 30, "an upload stuck")
        # the event loop is free: produce and consume go on
        acked.update(produce(b.bootstrap, topic, 2000, start=300))
        assert len(acked) == 2300
        assert broker_records(b.bootstrap, topic) == acked
        cache = read_metadata(b.bootstrap)
        (tp,) = [t for t in cache.topic_partitions() if t.topic == topic]
        assert [m.state.name for m in cache.list_remote_log_segments(tp)] == [
            "COPY_SEGMENT_STARTED"]
        assert cache.segments(tp) == [] and local_log_start(b, topic) == 0
        gate.touch()
        wait_for(lambda: len(remote_records(b, topic)[1]) >= 10 and local_log_start(b, topic) > 0,
                 60, "the copies after the stuck one")
        assert broker_records(b.bootstrap, topic) == acked
        wait_for(lambda: _clean(b, topic), 30, "no copy left half done")


def test_local_retention_by_time(broker: SamsaBroker) -> None:
    """local.retention.ms: copied local segments older than it go, the rest of the log stays
    readable from the store (retention.ms, the total, is a week)."""
    topic = "tiered-local-ms"
    create(broker, topic, **{"local.retention.ms": "1000"})
    old = int(time.time() * 1000) - 60_000  # a minute old: past local.retention.ms at once
    acked = produce(broker.bootstrap, topic, 1000, timestamp=old)
    wait_for(lambda: local_log_start(broker, topic) > 0, 30, "local retention by time")
    _, segs = remote_records(broker, topic)
    assert segs and segs[0].start_offset == 0
    assert local_log_start(broker, topic) <= segs[-1].end_offset + 1
    assert broker_records(broker.bootstrap, topic) == acked
