"""Committed offsets persist in __consumer_offsets and are rebuilt by replay; offsets of an empty
group expire after offsets.retention.minutes (Kafka 2.1+ semantics). Runs a real broker in this
process (embedded single-node quorum, ephemeral port) and drives its group coordinator directly."""

from __future__ import annotations

import asyncio
from pathlib import Path

from samsa.broker.broker import Broker
from samsa.config import BrokerConfig


async def _broker(d: Path) -> Broker:
    b = Broker(BrokerConfig({"log.dirs": str(d), "listeners": "PLAINTEXT://127.0.0.1:0",
                             "offsets.retention.minutes": "1",
                             "offsets.topic.num.partitions": "5"}))
    await b.start()
    if "t" not in b.node.image.topics:
        await b.controller.create_topic("t", 2, 1, {})
    return b


def test_offsets_survive_replay_and_expire(tmp_path: Path) -> None:
    async def run() -> None:
        b = await _broker(tmp_path)
        gc = b.groups
        codes = await gc.commit(group_id="g", member_id="", instance_id=None, generation=-1,
                                offsets=[("t", 0, 42, -1, "meta"), ("t", 1, 7, -1, None)])
        assert codes == {("t", 0): 0, ("t", 1): 0}
        assert await gc.commit(group_id="g2", member_id="", instance_id=None, generation=-1,
                               offsets=[("t", 0, 1, -1, None)]) == {("t", 0): 0}
        await b.stop()
        # the replay comes well after the commits (a slow restart): retention still counts from
        # each commit (Kafka: no current state timestamp for offsets alone), not from the replay
        await asyncio.sleep(1.5)

        b2 = await _broker(tmp_path)
        gc2 = b2.groups
        got = gc2.fetch_offsets("g", None)
        assert {tp: (e.offset, e.metadata) for tp, e in got.items() if e} == \
            {("t", 0): (42, "meta"), ("t", 1): (7, "")}
        now = max(e.commit_ms for e in got.values() if e)
        assert await gc2.expire_offsets(now + 30_000) == 0  # not yet
        assert await gc2.expire_offsets(now + 61_000) == 3
        assert "g" not in gc2.groups and "g2" not in gc2.groups
        await b2.stop()

        b3 = await _broker(tmp_path)  # the expiry is durable too
        assert b3.groups.fetch_offsets("g", None) == {}
        await b3.stop()

    asyncio.run(run())
