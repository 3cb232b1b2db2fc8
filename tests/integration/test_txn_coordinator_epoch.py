"""Transaction markers carry their coordinator's epoch, and a partition refuses a marker from a
coordinator older than the one whose marker it already has (Kafka's checkCoordinatorEpoch:
TRANSACTION_COORDINATOR_FENCED), also after a kill -9; real transactions still commit."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.protocol import apis
from samsa.protocol.errors import Err
from samsa.testing import SamsaBroker
from tests.wire import Wire

PID = 987_654


def _marker(w: Wire, topic: str, coordinator_epoch: int, commit: bool = True) -> int:
    resp: Any = w.request(apis.WRITE_TXN_MARKERS, 1, {"markers": [{
        "producer_id": PID, "producer_epoch": 0, "transaction_result": commit,
        "coordinator_epoch": coordinator_epoch,
        "topics": [{"name": topic, "partition_indexes": [0]}]}]})
    return int(resp.markers[0].topics[0].partitions[0].error_code)


def test_markers_from_an_older_coordinator_are_fenced(tmp_path: Path) -> None:
    topic = f"ce-{uuid.uuid4().hex[:6]}"
    with SamsaBroker(tmp_path / "data") as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
        w = Wire(b.bootstrap)
        try:
            assert _marker(w, topic, 5) == Err.NONE
            assert _marker(w, topic, 3) == Err.TRANSACTION_COORDINATOR_FENCED
            assert _marker(w, topic, 5, commit=False) == Err.NONE  # the same coordinator again
            assert _marker(w, topic, 7) == Err.NONE  # a newer one takes over
            assert _marker(w, topic, 6) == Err.TRANSACTION_COORDINATOR_FENCED
        finally:
            w.close()

        b.kill()  # kill -9: the fence comes back from the log's control records
        b.start()
        w = Wire(b.bootstrap)
        try:
            assert _marker(w, topic, 6) == Err.TRANSACTION_COORDINATOR_FENCED
            assert _marker(w, topic, 7) == Err.NONE
        finally:
            w.close()

        # the broker's own coordinator (epoch: its __transaction_state partition's leader
        # epoch) still commits a real transaction end to end
        p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": f"ce-{topic}"})
        p.init_transactions(30)
        p.begin_transaction()
        for i in range(10):
            p.produce(topic, f"v{i}".encode())
        p.commit_transaction(30)
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": f"g-{topic}",
                      "isolation.level": "read_committed", "enable.auto.commit": False})
        c.assign([TopicPartition(topic, 0, 0)])
        got = []
        for _ in range(30):
            for m in c.consume(100, 1.0):
                if m.error() is None:
                    got.append(m.value())
            if len(got) >= 10:
                break
        c.close()
        assert got == [f"v{i}".encode() for i in range(10)]
