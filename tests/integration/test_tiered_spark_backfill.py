"""Backfills from the remote tier: the Spark `samsa` source with `samsa.remote.read=true` reads the
offsets held by remote segments straight from the store (moto's S3 over real HTTP here) and the
local tail through the broker, with the same records and offsets as through the broker alone;
the remote part reads with the broker stopped (no broker in its data path)."""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer

from samsa.testing import SamsaBroker
from samsa.testing.s3 import MotoS3, aws_env
from tests.spark_util import create_topic

pyspark = pytest.importorskip("pyspark")
from pyspark.sql import DataFrame, SparkSession  # noqa: E402

from samsa.spark.remote import RemoteSegmentRange, read_metadata  # noqa: E402
from samsa.spark.source import SamsaDataSource  # noqa: E402

pytestmark = pytest.mark.timeout(300)
BUCKET = "samsa-backfill"
TOPIC = "backfill"


@pytest.fixture(scope="module")
def moto() -> Iterator[MotoS3]:
    with MotoS3() as server, aws_env(server.env):
        server.create_bucket(BUCKET)
        yield server


def _store(moto: MotoS3) -> dict[str, str]:
    return {"remote.log.storage.manager.class.name": "s3", "rsm.config.bucket": BUCKET,
            "rsm.config.endpoint.url": moto.endpoint, "rsm.config.region": "us-east-1",
            "rsm.config.prefix": "cluster-a/"}


@pytest.fixture(scope="module")
def broker(moto: MotoS3) -> Iterator[SamsaBroker]:
    overrides = {"remote.log.storage.system.enable": "true",
                 "remote.log.manager.task.interval.ms": "200",
                 "log.retention.check.interval.ms": "200",
                 "rlmm.config.remote.log.metadata.topic.num.partitions": "3", **_store(moto)}
    with SamsaBroker(overrides=overrides) as b:  # inherits the AWS variables (credential chain)
        yield b


def _produce(bs: str, n: int, partitions: int) -> list[dict[str, Any]]:
    """Small batches (so segments roll), keys, headers and null keys; the records with the
    offsets the broker assigned."""
    sent: list[dict[str, Any]] = []
    p = Producer({"bootstrap.servers": bs, "linger.ms": 2, "batch.size": 8192,
                  "enable.idempotence": True, "compression.type": "lz4"})

    def done(hdrs: Any, err: Any, msg: Any) -> None:
        assert err is None, err
        sent.append({"key": msg.key(), "value": msg.value(), "partition": msg.partition(),
                     "offset": msg.offset(), "timestamp": msg.timestamp()[1], "headers": hdrs})

    ts0 = int(time.time() * 1000)  # current times: segments roll by size, not by segment.ms
    for i in range(n):
        hdrs = [("i", str(i).encode())] if i % 3 else None
        key = None if i % 7 == 6 else f"k{i}".encode()
        p.produce(TOPIC, key=key, value=f"v{i}-".encode() + os.urandom(200), partition=i % partitions,
                  timestamp=ts0 + i, headers=hdrs,
                  on_delivery=functools.partial(done, hdrs))
        if i % 500 == 0:
            p.poll(0)
    assert p.flush(60) == 0
    return sorted(sent, key=lambda r: (r["partition"], r["offset"]))


def _rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for d in rows:
        ts = d["timestamp"]
        out.append({"key": d["key"], "value": d["value"], "partition": d["partition"],
                    "offset": d["offset"], "timestamp": round(ts.timestamp() * 1000),
                    "headers": [(h["key"], h["value"]) for h in d["headers"]]
                    if d.get("headers") else None})
    return sorted(out, key=lambda r: (r["partition"], r["offset"]))


def _collect(df: DataFrame) -> list[dict[str, Any]]:
    return _rows([r.asDict(recursive=True) for r in df.collect()])


def _local_starts(b: SamsaBroker, partitions: int) -> list[int]:
    out = []
    for p in range(partitions):
        d = b.data_dir / "logs" / f"{TOPIC}-{p}"
        out.append(min((int(f.stem) for f in d.glob("*.log")), default=0))
    return out


def test_backfill_reads_remote_segments_from_the_store(spark: SparkSession, broker: SamsaBroker,
                                                       moto: MotoS3) -> None:
    bs = broker.bootstrap
    create_topic(bs, TOPIC, 2, **{"remote.storage.enable": "true", "segment.bytes": "65536",
                                 "local.retention.bytes": "131072", "retention.ms": "-1"})
    sent = _produce(bs, 4000, 2)
    # wait until the older segments are only remote (local retention after their copies)
    deadline = time.monotonic() + 60
    while min(_local_starts(broker, 2)) == 0:
        assert time.monotonic() < deadline, "local retention never removed a copied segment"
        time.sleep(0.3)
    assert moto.keys(BUCKET, "cluster-a/"), "nothing in the bucket"

    opts = {"kafka.bootstrap.servers": bs, "subscribe": TOPIC, "includeHeaders": "true"}
    # the Spark workers started before the AWS variables were set: static keys instead
    keys = {"rsm.config.aws.access.key.id": moto.env["AWS_ACCESS_KEY_ID"],
            "rsm.config.aws.secret.access.key": moto.env["AWS_SECRET_ACCESS_KEY"]}
    remote = {**opts, "samsa.remote.read": "true", **_store(moto), **keys}
    through_broker = _collect(spark.read.format("samsa").options(**opts).load())
    from_store = _collect(spark.read.format("samsa").options(**remote).load())
    expected = _rows([{**s, "timestamp": _ts(s["timestamp"]),
                       "headers": [{"key": k, "value": v} for k, v in s["headers"]]
                       if s["headers"] else None} for s in sent])
    assert from_store == expected
    assert through_broker == expected

    # the plan: offsets below each partition's remote end are input partitions on the store
    reader = SamsaDataSource(remote).reader(None)  # type: ignore[arg-type]
    parts = reader.partitions()
    remote_parts = [p for p in parts if isinstance(p, RemoteSegmentRange)]
    cache = read_metadata({"bootstrap.servers": bs})
    for p in range(2):
        covered = sorted((r.start, r.end) for r in remote_parts if r.partition == p)
        assert covered and covered[0][0] == 0
        assert all(a[1] == b[0] for a, b in zip(covered, covered[1:], strict=False))
        tp = next(t for t in cache.topic_partitions() if t.partition == p and t.topic == TOPIC)
        assert covered[-1][1] == cache.highest_offset(tp) + 1
        assert covered[-1][1] >= _local_starts(broker, 2)[p]  # covers what is only remote
        # consecutive segments make one input partition (up to maxRecordsPerPartition)
        mine = [r for r in remote_parts if r.partition == p]
        assert len(mine) == 1 and len(mine[0].segments) == len(cache.segments(tp)) >= 2

    # no broker in the data path: the remote input partitions read with the broker stopped
    broker.stop()
    try:
        got = []
        for part in remote_parts:
            for batch in reader.read(part):
                got.extend(batch.to_pylist())
    finally:
        broker.start()
    by_offset = {(r["partition"], r["offset"]): r for r in expected}
    rows = _rows(got)
    assert rows and rows == [by_offset[(r["partition"], r["offset"])] for r in rows]
    assert len(rows) == sum(p.end - p.start for p in remote_parts)


def _ts(ms: int) -> Any:
    import datetime
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
