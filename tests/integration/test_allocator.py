"""The broker keeps its large request buffers in warm memory: producing does not fault in fresh
pages per MB (samsa/broker/allocator.py). Without the fixed malloc thresholds a broker process
could fault in ~460 pages per MB produced, doubling its CPU per MB."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.testing import SamsaBroker


def _minor_faults(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[7])  # minflt, proc(5) field 10


def _produce(bootstrap: str, topic: str, mb: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1 << 20,
                  "acks": 1, "queue.buffering.max.messages": 1_000_000})
    payload = os.urandom(1024)
    for _ in range(mb * 1000):
        while True:
            try:
                p.produce(topic, payload)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(60) == 0


def test_producing_does_not_fault_in_fresh_pages_per_mb(tmp_path: Path) -> None:
    with SamsaBroker(tmp_path / "data") as b:
        assert b.proc is not None
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        for i in range(4):
            topic = f"alloc-{i}"
            admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
            before = _minor_faults(b.proc.pid)
            _produce(b.bootstrap, topic, 40)
            faults_per_mb = (_minor_faults(b.proc.pid) - before) / 40
            admin.delete_topics([topic])[topic].result(30)
        # the last round, after warm-up: glibc's defaults can give ~460 here
        assert faults_per_mb < 50, faults_per_mb


def test_tuning_applies_and_can_be_switched_off() -> None:
    code = "from samsa.broker.allocator import tune_allocator; print(tune_allocator())"
    env = {k: v for k, v in os.environ.items() if k != "SAMSA_MALLOC_TUNING"}
    on = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    off = subprocess.run([sys.executable, "-c", code], env={**env, "SAMSA_MALLOC_TUNING": "off"},
                         capture_output=True, text=True)
    assert on.stdout.strip() == "True", on.stderr
    assert off.stdout.strip() == "False", off.stderr
