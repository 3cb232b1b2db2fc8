"""A broker tiering to S3 (moto's server over real HTTP, behind an error-injecting proxy): while
the store answers errors, uploads are retried with back-off and the local data is kept (local
retention waits for the copies); once it heals, the copies complete and every offset reads back
through the broker; fetches of remote-only data while the store fails get Kafka's retriable
KAFKA_STORAGE_ERROR, and a corrupted object is detected and never served."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from samsa.testing import SamsaBroker
from samsa.testing.s3 import MotoS3, S3FaultProxy, aws_env
from tests.spark_util import create_topic
from tests.wire import Wire

pytestmark = pytest.mark.timeout(300)
BUCKET = "samsa-broker-tier"
TOPIC = "s3-tiered"
STORAGE_ERROR = 56


@pytest.fixture(scope="module")
def s3() -> Iterator[tuple[MotoS3, S3FaultProxy]]:
    with MotoS3() as server, aws_env(server.env), S3FaultProxy(server.endpoint) as proxy:
        server.create_bucket(BUCKET)
        yield server, proxy


def _fetch(w: Wire, offset: int) -> Any:
    return w.request(1, 11, {"replica_id": -1, "max_wait": 100, "min_bytes": 1,
                             "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0,
                             "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
                             "topics": [{"topic": TOPIC, "partitions": [
                                 {"partition": 0, "current_leader_epoch": -1,
                                  "fetch_offset": offset, "log_start_offset": -1,
                                  "partition_max_bytes": 1 << 20}]}]}
                     ).responses[0].partitions[0]


def _local_start(b: SamsaBroker) -> int:
    d = b.data_dir / "logs" / f"{TOPIC}-0"
    return min((int(f.stem) for f in d.glob("*.log")), default=-1)


def _keys(moto: MotoS3, ext: str) -> list[str]:
    return [k for k in moto.keys(BUCKET, "t/") if k.endswith("." + ext)]


def test_store_failures_retry_keep_local_data_and_never_serve_bad_bytes(
        s3: tuple[MotoS3, S3FaultProxy]) -> None:
    moto, proxy = s3
    proxy.fail(10**9)  # every S3 request fails (503 SlowDown) until healed
    overrides = {"remote.log.storage.system.enable": "true",
                 "remote.log.manager.task.interval.ms": "200",
                 "remote.log.manager.task.retry.backoff.ms": "200",
                 "remote.log.manager.task.retry.backoff.max.ms": "2000",
                 "log.retention.check.interval.ms": "200",
                 "rlmm.config.remote.log.metadata.topic.num.partitions": "3",
                 "remote.log.storage.manager.class.name": "s3", "rsm.config.bucket": BUCKET,
                 "rsm.config.endpoint.url": proxy.endpoint, "rsm.config.prefix": "t/",
                 "rsm.config.retry.max.attempts": "2", "remote.fetch.max.wait.ms": "2000"}
    with SamsaBroker(overrides=overrides) as b:
        bs = b.bootstrap
        create_topic(bs, TOPIC, 1, **{"remote.storage.enable": "true", "segment.bytes": "32768",
                                     "local.retention.bytes": "65536", "retention.ms": "-1"})
        p = Producer({"bootstrap.servers": bs, "linger.ms": 2, "batch.size": 4096})
        sent = [os.urandom(500) for _ in range(600)]
        for v in sent:
            p.produce(TOPIC, v, partition=0)
        assert p.flush(60) == 0

        # the store fails: copies are retried with growing waits, nothing local goes
        deadline = time.monotonic() + 60
        attempts: list[int] = []
        while len(attempts) < 3:
            assert time.monotonic() < deadline, "no retried copies logged"
            attempts = [int(a) for a in re.findall(r"remote copy of \S+ failed \(attempt (\d+)",
                                                   b.log_text())]
            time.sleep(0.3)
        assert attempts[:3] == [1, 2, 3]
        assert _local_start(b) == 0 and _keys(moto, "log") == []

        # healed: the copies complete, local retention follows
        proxy.fail(0)
        deadline = time.monotonic() + 60
        # local retention starts with the first FINISHED copy; the others follow
        while _local_start(b) <= 0 or len(_keys(moto, "log")) < 3:
            assert time.monotonic() < deadline, "no copies after the store healed"
            time.sleep(0.3)
        logs = _keys(moto, "log")
        local_start = _local_start(b)

        w = Wire(bs, timeout=30)
        try:
            # the store fails again: a remote-only fetch gets the retriable storage error
            proxy.fail(10**9)
            part = _fetch(w, 0)
            assert part.error_code == STORAGE_ERROR and not part.records
            proxy.fail(0)

            # a corrupted object (bit rot inside a batch): detected by CRC, never served
            def start_of(k: str) -> int:
                return int(k.rsplit("/", 1)[1].split("-", 1)[0])
            # a remote-only segment that no fetch has read yet (nothing cached)
            victim = max((k for k in logs if 0 < start_of(k) < local_start), key=start_of)
            start = start_of(victim)
            body = bytearray(moto.client().get_object(Bucket=BUCKET, Key=victim)["Body"].read())
            body[len(body) // 2] ^= 0x5A
            moto.client().put_object(Bucket=BUCKET, Key=victim, Body=bytes(body))
            part = _fetch(w, start)
            assert part.error_code == STORAGE_ERROR and not part.records
            part = _fetch(w, 0)  # the intact segments still serve
            assert part.error_code == 0 and part.records
            body[len(body) // 2] ^= 0x5A  # repaired
            moto.client().put_object(Bucket=BUCKET, Key=victim, Body=bytes(body))
        finally:
            w.close()

        # every offset reads back through the broker (remote part from S3, then local)
        c = Consumer({"bootstrap.servers": bs, "group.id": "s3-check", "enable.auto.commit": False,
                      "check.crcs": True})
        c.assign([TopicPartition(TOPIC, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < len(sent) and time.monotonic() < deadline:
            got += [m.value() for m in c.consume(500, 0.5) if m.error() is None]
        c.close()
        assert got == sent

