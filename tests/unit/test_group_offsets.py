"""Committed offsets persist in __consumer_offsets and are rebuilt by replay; offsets of an empty
group expire after offsets.retention.minutes (Kafka 2.1+ semantics). Runs the coordinator on a
real metadata log and real partition logs in a temp dir, without a network."""

from __future__ import annotations

import asyncio
from pathlib import Path

from samsa.cluster.controller import Controller
from samsa.cluster.internal_topic import InternalTopic
from samsa.cluster.metadata.legacy import MetadataLog
from samsa.config import BrokerConfig
from samsa.coordinator.group.coordinator import GroupConfig, GroupCoordinator
from samsa.storage.manager import LogManager


async def _coordinator(d: Path) -> tuple[GroupCoordinator, LogManager, MetadataLog]:
    cfg = BrokerConfig({"log.dirs": str(d)})
    logs = LogManager([d])
    clean = logs.detect_clean()
    meta = MetadataLog(d, clean)
    image = meta.replay()
    ctl = Controller(cfg, meta, logs)
    logs.startup({n: ctl.log_config(n) for n in image.topics})
    if "t" not in image.topics:
        await ctl.create_topic("t", 2, 1, {})
    topic = InternalTopic(ctl, logs, "__consumer_offsets", 5, {"cleanup.policy": "compact"})
    gc = GroupCoordinator(topic, GroupConfig(retention_ms=60_000),
                          lambda t, p: logs.get(t, p) is not None)
    gc.load()
    return gc, logs, meta


def test_offsets_survive_replay_and_expire(tmp_path: Path) -> None:
    async def run() -> None:
        gc, logs, meta = await _coordinator(tmp_path)
        codes = await gc.commit(group_id="g", member_id="", instance_id=None, generation=-1,
                                offsets=[("t", 0, 42, -1, "meta"), ("t", 1, 7, -1, None)])
        assert codes == {("t", 0): 0, ("t", 1): 0}
        assert await gc.commit(group_id="g2", member_id="", instance_id=None, generation=-1,
                               offsets=[("t", 0, 1, -1, None)]) == {("t", 0): 0}
        logs.shutdown()
        meta.close()

        gc2, logs2, meta2 = await _coordinator(tmp_path)
        got = gc2.fetch_offsets("g", None)
        assert {tp: (e.offset, e.metadata) for tp, e in got.items() if e} == \
            {("t", 0): (42, "meta"), ("t", 1): (7, "")}
        now = max(e.commit_ms for e in got.values() if e)
        assert await gc2.expire_offsets(now + 30_000) == 0  # not yet
        assert await gc2.expire_offsets(now + 61_000) == 3
        assert "g" not in gc2.groups and "g2" not in gc2.groups
        logs2.shutdown()
        meta2.close()

        gc3, logs3, meta3 = await _coordinator(tmp_path)  # the expiry is durable too
        assert gc3.fetch_offsets("g", None) == {}
        logs3.shutdown()
        meta3.close()

    asyncio.run(run())
