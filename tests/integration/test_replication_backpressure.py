"""acks=all produces parked until the followers have the records are Kafka's purgatory, not its
request queue: they must not count towards `queued.max.requests`, or enough of them stop the
leader from reading the followers' fetches that would complete them (a stall until every parked
produce times out). Found by the replication bench (two producers, RF=3 acks=all collapsed)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from samsa.testing import SamsaCluster

pytestmark = [pytest.mark.timeout(180)]

TOPIC = "purgatory"


@pytest.fixture(scope="module")
def cluster() -> Iterator[SamsaCluster]:
    with SamsaCluster(3, overrides={"queued.max.requests": "4"}) as c:
        c.wait_brokers(3)
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})])[
            TOPIC].result(30)
        yield c


def test_parked_acks_all_produces_do_not_stop_the_leader_reading(cluster: SamsaCluster) -> None:
    from confluent_kafka import Producer

    errors: list[Any] = []
    acked: list[int] = []
    lock = threading.Lock()

    def report(err: Any, msg: Any) -> None:
        with lock:
            (errors if err is not None else acked).append(err or msg.offset())

    def produce(name: str) -> None:
        # many small requests in flight per connection, each parked for the followers; no
        # retries: a stall shows as REQUEST_TIMED_OUT (the request timeout is 5 s)
        p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 0,
                      "batch.num.messages": 1, "max.in.flight": 20, "retries": 0,
                      "request.timeout.ms": 5000, "message.timeout.ms": 20000})
        for i in range(300):
            p.produce(TOPIC, f"{name}-{i}".encode(), on_delivery=report)
            p.poll(0)
        p.flush(60)

    threads = [threading.Thread(target=produce, args=(f"p{n}",)) for n in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    assert not errors, f"{len(errors)} failed, first: {errors[0]}"
    assert len(acked) == 600 and len(set(acked)) == 600
