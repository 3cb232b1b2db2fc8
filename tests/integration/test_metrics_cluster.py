"""Replica-manager and controller metrics on a 3-node cluster: a follower killed shows up as an
under-replicated partition and an ISR shrink on the leader, its return as an ISR expansion; exactly
one node reports itself the active controller."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from samsa.testing import SamsaCluster, free_port
from tests.cluster_util import wait_until

TOPIC = "metrics-isr"


def scrape(url: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    text = httpx.get(url + "/metrics", timeout=10).text
    return {(s.name, frozenset(s.labels.items())): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def gauge(url: str, name: str) -> float:
    return scrape(url)[(name, frozenset())]


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[SamsaCluster, dict[int, str]]]:
    urls = {i: f"http://127.0.0.1:{free_port()}" for i in (1, 2, 3)}
    with SamsaCluster(3, overrides={"replica.lag.time.max.ms": "2000",
                                    "broker.session.timeout.ms": "10000"},
                      node_overrides={i: {"admin.http.listeners": u}
                                      for i, u in urls.items()}) as c:
        c.wait_brokers(3)
        yield c, urls


@pytest.mark.slow
def test_isr_shrink_and_expand_and_the_active_controller(
        cluster: tuple[SamsaCluster, dict[int, str]]) -> None:
    c, urls = cluster
    wait_until("every node ready", lambda: all(
        httpx.get(u + "/health/ready", timeout=5).status_code == 200 for u in urls.values()), 30)
    active = [gauge(u, "kafka_controller_kafkacontroller_activecontrollercount")
              for u in urls.values()]
    assert sorted(active) == [0, 0, 1]
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 3)])[TOPIC].result(30)

    def leader() -> int | None:
        md = admin.list_topics(TOPIC, timeout=5).topics[TOPIC]
        p = md.partitions.get(0)
        return p.leader if p is not None and p.leader >= 0 and len(p.isrs) == 3 else None

    lead = wait_until("a leader with 3 in-sync replicas", leader, 30)
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all"})
    for i in range(50):
        p.produce(TOPIC, value=b"%d" % i)
    assert p.flush(30) == 0
    url = urls[lead]
    assert gauge(url, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    shrinks = gauge(url, "kafka_server_replicamanager_isrshrinks_total")
    expands = gauge(url, "kafka_server_replicamanager_isrexpands_total")
    victim = next(i for i in urls if i != lead)
    c.node(victim).kill()
    wait_until("the leader sees an under-replicated partition", lambda: gauge(
        url, "kafka_server_replicamanager_underreplicatedpartitions") >= 1, 60, 0.5)
    assert gauge(url, "kafka_server_replicamanager_isrshrinks_total") >= shrinks + 1
    c.node(victim).start()
    wait_until("the ISR complete again", lambda: gauge(
        url, "kafka_server_replicamanager_underreplicatedpartitions") == 0, 90, 0.5)
    assert gauge(url, "kafka_server_replicamanager_isrexpands_total") >= expands + 1
    samples = scrape(url)
    assert samples[("kafka_log_log_logendoffset",
                    frozenset({"topic": TOPIC, "partition": "0"}.items()))] == 50
