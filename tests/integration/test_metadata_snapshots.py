"""The metadata image is snapshotted every metadata.log.max.record.bytes.between.snapshots bytes of
committed records (`<offset>-<epoch>.checkpoint`), and a node restarted by `kill -9` rebuilds its
image from the latest snapshot plus the log above it."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from samsa.testing import SamsaBroker


def _topics(bootstrap: str) -> dict[str, int]:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    return {n: len(t.partitions) for n, t in md.topics.items() if not n.startswith("__")}


def test_snapshot_then_replay_after_kill(tmp_path: Path) -> None:
    with SamsaBroker(data_dir=tmp_path / "n",
                     overrides={"metadata.log.max.record.bytes.between.snapshots": "2048"}) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        for i in range(30):
            fs = admin.create_topics([NewTopic(f"snap-{i}", 1 + i % 3, 1,
                                               config={"retention.ms": str(60000 + i)})])
            for f in fs.values():
                f.result(10)
        for f in admin.delete_topics(["snap-0"]).values():
            f.result(10)
        before = _topics(b.bootstrap)
        meta = tmp_path / "n" / "logs" / "__cluster_metadata-0"
        snaps = sorted(meta.glob("*.checkpoint"))
        assert snaps, "no snapshot was taken"
        b.kill()
        b.start()
        assert _topics(b.bootstrap) == before
        assert "snap-0" not in before and len(before) == 29
        res = ConfigResource(ConfigResource.Type.TOPIC, "snap-7")
        admin2 = AdminClient({"bootstrap.servers": b.bootstrap})
        cfg = next(iter(admin2.describe_configs([res]).values())).result(10)
        assert cfg["retention.ms"].value == "60007"
