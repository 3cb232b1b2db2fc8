"""min.insync.replicas=2 with RF=3, as Kafka documents it: with one replica down acks=all writes
succeed; with two down the leader alone is the ISR and acks=all produce fails with
NOT_ENOUGH_REPLICAS (nothing appended, so nothing of it is ever read), while acks=1 still works.

Four nodes: node 1 is the only controller (and a broker), the partition lives on brokers 2, 3
and 4, so killing two replicas never costs the controller quorum."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.testing import SamsaCluster
from samsa.testing.workload import metadata, raw_produce, read_all
from tests.cluster_util import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

TOPIC = "min-isr"
NOT_ENOUGH_REPLICAS = 19
OVERRIDES = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.wait.max.ms": "200",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SamsaCluster]:
    with SamsaCluster(4, controllers=1, data_dir=tmp_path_factory.mktemp("mir"),
                      overrides=OVERRIDES) as c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        fut = admin.create_topics([NewTopic(TOPIC, num_partitions=1, replica_assignment=[[2, 3, 4]],
                                            config={"min.insync.replicas": "2"})])[TOPIC]
        fut.result(60)
        yield c


def isr(c: SamsaCluster) -> tuple[int, ...]:
    info = metadata(c.node(1).bootstrap, TOPIC)[1][0]
    assert info.leader == 2, info  # the preferred leader keeps leading: it is never down
    return tuple(sorted(info.isr))


def produce_all(c: SamsaCluster, values: list[str], timeout_ms: int = 10000) -> dict[str, str]:
    """confluent-kafka, idempotent acks=all: value -> "ok" or the delivery error's name."""
    out: dict[str, str] = {}
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "enable.idempotence": True,
                  "message.timeout.ms": timeout_ms})

    def done(err: object, msg: object) -> None:
        out[msg.value().decode()] = "ok" if err is None else err.name()  # type: ignore[attr-defined]

    for v in values:
        p.produce(TOPIC, v.encode(), partition=0, on_delivery=done)
    p.flush(timeout_ms / 1000 + 30)
    return out


def test_min_insync_replicas(cluster: SamsaCluster) -> None:
    c = cluster
    leader = c.node(2).bootstrap
    wait_until("a full ISR", lambda: isr(c) == (2, 3, 4), 60)
    assert produce_all(c, ["all-up-0", "all-up-1"]) == {"all-up-0": "ok", "all-up-1": "ok"}

    # one replica down: the ISR shrinks to {2, 3} and acks=all still succeeds (2 >= 2)
    c.node(4).kill()
    wait_until("the ISR without node 4", lambda: isr(c) == (2, 3), 60)
    assert produce_all(c, ["one-down-0", "one-down-1"]) == {"one-down-0": "ok",
                                                            "one-down-1": "ok"}
    code, _ = raw_produce(leader, TOPIC, 0, [b"one-down-raw"], acks=-1)
    assert code == 0

    # two replicas down: the leader alone is the ISR; acks=all is refused before the append
    c.node(3).kill()
    wait_until("the ISR down to the leader", lambda: isr(c) == (2,), 60)
    refused = [f"two-down-raw-{i}" for i in range(5)]
    for v in refused:
        code, offset = raw_produce(leader, TOPIC, 0, [v.encode()], acks=-1)
        assert (code, offset) == (NOT_ENOUGH_REPLICAS, -1), v
    via_client = [f"two-down-{i}" for i in range(5)]
    outcome = produce_all(c, via_client, timeout_ms=5000)
    assert sorted(outcome) == via_client and "ok" not in outcome.values(), outcome
    code, _ = raw_produce(leader, TOPIC, 0, [b"two-down-acks1"], acks=1)
    assert code == 0  # acks=1 is not subject to min.insync.replicas

    # recovery: the replicas return, catch up and rejoin; nothing refused was ever appended
    c.node(3).start()
    c.node(4).start()
    wait_until("the ISR whole again", lambda: isr(c) == (2, 3, 4), 90)
    assert produce_all(c, ["recovered"]) == {"recovered": "ok"}
    values = [s.value for s in read_all(c.bootstrap, TOPIC, 1, "read_uncommitted")]
    assert not set(values) & set(refused + via_client), values
    for v in ["all-up-0", "all-up-1", "one-down-0", "one-down-1", "one-down-raw",
              "two-down-acks1", "recovered"]:
        assert values.count(v) == 1, (v, values)
