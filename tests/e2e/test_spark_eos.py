"""Exactly-once through a crash of the Spark driver: a streaming query copying IN to OUT with the
samsa sink is killed with SIGKILL mid-stream (driver, JVM and Python workers), then restarted from
its checkpoint; a read_committed consumer sees exactly one output per input."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from samsa.testing import SamsaBroker
from tests.spark_util import create_topic, produce, read_all

pytest.importorskip("pyspark")
pytestmark = pytest.mark.timeout(600)

JOB = Path(__file__).with_name("spark_eos_job.py")
N = 1500


def out_end(bs: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bs, "group.id": "eos-probe", "isolation.level": "read_uncommitted"})
    try:
        return sum(c.get_watermark_offsets(TopicPartition(topic, p), 10, cached=False)[1] for p in range(3))
    finally:
        c.close()


def test_kill_9_of_the_driver_mid_stream_then_restart(samsa_broker: SamsaBroker, tmp_path: Path) -> None:
    bs = samsa_broker.bootstrap
    create_topic(bs, "eos-in", 3)
    create_topic(bs, "eos-out", 3)
    sent = produce(bs, "eos-in", N, partitions=3, headers=False)
    ck = str(tmp_path / "checkpoint")
    argv = [sys.executable, str(JOB), bs, "eos-in", "eos-out", ck]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    log = open(tmp_path / "job.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen([*argv, "run"], stdout=log, stderr=subprocess.STDOUT, env=env,
                            start_new_session=True)
    try:
        deadline = time.time() + 300
        while time.time() < deadline and out_end(bs, "eos-out") < 300:
            assert proc.poll() is None, (tmp_path / "job.log").read_text()[-3000:]
            time.sleep(0.5)
        assert out_end(bs, "eos-out") >= 300, "the job made no progress"
    finally:
        # SIGKILL the driver and everything it started (JVM, Python workers): no clean shutdown
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    before = len(read_all(bs, "eos-out", committed=True))
    assert 0 < before < N, before
    done = subprocess.run([*argv, "drain"], stdout=log, stderr=subprocess.STDOUT, env=env, timeout=400)
    assert done.returncode == 0, (tmp_path / "job.log").read_text()[-3000:]
    out = read_all(bs, "eos-out", committed=True)
    counts = collections.Counter((m.key(), m.value()) for m in out)
    expected = collections.Counter((s["key"], s["value"] + b":out") for s in sent)
    assert counts == expected  # exactly one output per input: nothing lost, nothing duplicated
    # read_uncommitted shows what the crash left behind: aborted attempts, never in committed reads
    assert len(read_all(bs, "eos-out", committed=False)) >= N
