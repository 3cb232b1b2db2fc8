"""Tiered storage in a 3-node cluster: only the leader uploads (its metadata records forwarded to
the brokers leading `__remote_log_metadata`), followers learn from the metadata
(their local retention follows the copies they did not make), and a replica added by a
reassignment bootstraps from the remote tier (KIP-405's follower path: OFFSET_MOVED_TO_TIERED_
STORAGE, then the leader-epoch cache and producer state from the remote copies) instead of
copying the whole log from the leader; once it leads, every offset reads back from it."""

from __future__ import annotations

import contextlib
import io
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from samsa.spark.remote import read_metadata
from samsa.storage.leader_epoch import parse
from samsa.testing import SamsaCluster
from tests.cluster_util import wait_until
from tests.replication_util import CLUSTER_OVERRIDES, create_topic_on, partition_view
from tests.wire import Wire

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]
TOPIC = "tiered-moves"
DESCRIBE_PRODUCERS = 61


def _logs(c: SamsaCluster, node: int) -> Path:
    return Path(c.node(node).spec.log_dir) / f"{TOPIC}-0"


def _local_start(c: SamsaCluster, node: int) -> int:
    return min((int(f.stem) for f in _logs(c, node).glob("*.log")), default=-1)


def _local_bytes(c: SamsaCluster, node: int) -> int:
    return sum(f.stat().st_size for f in _logs(c, node).glob("*.log"))


def _produce(bs: str, n: int, tag: str, sent: dict[int, bytes]) -> None:
    """n records from one idempotent acks=all producer (small batches: segments roll)."""
    p = Producer({"bootstrap.servers": bs, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 2, "batch.size": 8192})

    def done(err: Any, msg: Any) -> None:
        assert err is None, err
        sent[msg.offset()] = msg.value()

    for i in range(n):
        p.produce(TOPIC, f"{tag}-{i}-".encode() + os.urandom(300), partition=0,
                  on_delivery=done)
        if i % 200 == 0:
            p.poll(0)
    assert p.flush(60) == 0


def _producers(c: SamsaCluster, node: int) -> dict[int, tuple[int, int]]:
    """DescribeProducers on a broker: producer id -> (epoch, last sequence)."""
    w = Wire(c.node(node).bootstrap, timeout=10)
    try:
        resp = w.request(DESCRIBE_PRODUCERS, 0, {"topics": [
            {"name": TOPIC, "partition_indexes": [0]}]})
    finally:
        w.close()
    out = {}
    for t in resp.topics:
        for p in t.partitions:
            assert p.error_code == 0, p
            for a in p.active_producers:
                out[a.producer_id] = (a.producer_epoch, a.last_sequence)
    return out


def _read_all(bs: str, end: int) -> dict[int, bytes]:
    c = Consumer({"bootstrap.servers": bs, "group.id": "tiered-cluster-check",
                  "enable.auto.commit": False, "enable.partition.eof": True,
                  "fetch.max.bytes": 1 << 20})
    got: dict[int, bytes] = {}
    try:
        c.assign([TopicPartition(TOPIC, 0, 0)])
        deadline = time.monotonic() + 90
        while len(got) < end and time.monotonic() < deadline:
            for m in c.consume(1000, 0.5):
                if m.error() is None:
                    got[m.offset()] = m.value()
    finally:
        c.close()
    return got


def _reassign(c: SamsaCluster, tmp: Path, replicas: list[int]) -> None:
    from samsa.cli.main import main

    plan = tmp / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": TOPIC, "partition": 0, "replicas": replicas}]}))

    def cli(*argv: str) -> tuple[int, str]:
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            code = main(["partitions", "reassign", "--bootstrap-server", c.bootstrap,
                         "--reassignment-json-file", str(plan), *argv])
        return code, out.getvalue()

    assert cli("--execute")[0] == 0
    code, out = cli("--verify", "--wait", "--wait-timeout", "120")
    assert code == 0 and "is completed" in out, out


def test_new_replica_bootstraps_from_the_remote_tier(tmp_path: Path) -> None:
    overrides = {**CLUSTER_OVERRIDES,
                 "remote.log.storage.system.enable": "true",
                 "rsm.config.dir": str(tmp_path / "shared-remote-store"),
                 "remote.log.manager.task.interval.ms": "200",
                 "log.retention.check.interval.ms": "200",
                 "rlmm.config.remote.log.metadata.topic.num.partitions": "3",
                 "rlmm.config.remote.log.metadata.topic.replication.factor": "3"}
    with SamsaCluster(3, overrides=overrides) as c:
        bs = c.bootstrap
        from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
        admin = AdminClient({"bootstrap.servers": bs})
        # the metadata topic led by brokers 2 and 3 only: broker 1, the leader of the tiered
        # partition, must send its metadata records to another broker (forwarded writes)
        admin.create_topics([NewTopic("__remote_log_metadata", 3, replica_assignment=[
            [2, 1, 3], [3, 2, 1], [2, 3, 1]], config={"retention.ms": "-1"})]
        )["__remote_log_metadata"].result(30)
        for p in range(3):
            wait_until("metadata partition led", lambda q=p: partition_view(
                c, "__remote_log_metadata", q)["leader"] in (2, 3), 30)
        create_topic_on(c, TOPIC, [[1, 2]])
        res = ConfigResource("topic", TOPIC, set_config={
            "remote.storage.enable": "true", "segment.bytes": "65536",
            "local.retention.bytes": "131072", "retention.ms": "-1"})
        for f in admin.alter_configs([res]).values():
            f.result(30)
        sent: dict[int, bytes] = {}
        _produce(bs, 1200, "early", sent)  # this producer writes only into what goes remote
        early_producers = _producers(c, 1)
        assert len(early_producers) == 1
        _produce(bs, 1000, "late", sent)
        end = len(sent)
        assert sorted(sent) == list(range(end))

        # the leader copies, both replicas drop their local copies of what was copied
        wait_until("old segments only remote on both replicas",
                   lambda: _local_start(c, 1) > 0 and _local_start(c, 2) > 0, 60)
        cache = read_metadata({"bootstrap.servers": bs})
        segs = [m for tp in cache.topic_partitions() if tp.topic == TOPIC
                for m in cache.segments(tp)]
        assert len(segs) >= 5
        assert {m.broker_id for m in segs} == {1}  # only the leader uploads
        spans = sorted((m.start_offset, m.end_offset) for m in segs)
        assert all(a[1] < b[0] for a, b in zip(spans, spans[1:], strict=False))  # no duplicates
        assert "copied" not in c.node(2).log_text()

        # a new replica on broker 3 (the reassignment adds it, then drops broker 2)
        _reassign(c, tmp_path, [1, 3])
        assert _local_start(c, 3) >= _local_start(c, 1) > 0  # not copied from the leader
        assert _local_bytes(c, 3) < sum(len(v) for v in sent.values()) // 2
        assert "built from the remote tier" in c.node(3).log_text()
        epochs = parse((_logs(c, 3) / "leader-epoch-checkpoint").read_text())
        assert epochs and epochs[0][0] == 0  # the leader's epochs, from the remote copy

        # broker 3 leads: producer state came with the remote snapshot, every offset reads back
        c.node(1).kill()
        wait_until("broker 3 leads", lambda: partition_view(c, TOPIC)["leader"] == 3, 60)
        on_3 = _producers(c, 3)
        for pid, state in early_producers.items():
            assert on_3.get(pid) == state, (pid, state, on_3)
        got = _read_all(bs, end)
        assert got == sent
