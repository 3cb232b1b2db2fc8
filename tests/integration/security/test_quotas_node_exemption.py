"""Quotas exempt the brokers' own connections, known by their client ids ("samsa-node...");
with an authorizer on, a client claiming such a client id without ClusterAction on the cluster
is not exempt: its producer_byte_rate quota throttles it as any client's would."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from samsa.testing import SamsaBroker
from tests.wire import Wire

ALTER_CLIENT_QUOTAS = 49
STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
FAKE_NODE = "samsa-node-7"
QUOTA = 64 * 1024


@pytest.fixture(scope="module")
def broker() -> Iterator[SamsaBroker]:
    with SamsaBroker(overrides={"authorizer.class.name": STANDARD,
                                "allow.everyone.if.no.acl.found": "true",
                                "quota.window.num": "2"}) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        for f in admin.create_topics([NewTopic("claimed", 1, 1)]).values():
            f.result(30)
        w = Wire(b.bootstrap)
        resp = w.request(ALTER_CLIENT_QUOTAS, 1, {"entries": [
            {"entity": [{"entity_type": "client-id", "entity_name": FAKE_NODE}],
             "ops": [{"key": "producer_byte_rate", "value": QUOTA, "remove": False}]},
        ], "validate_only": False})
        w.close()
        assert [int(e.error_code) for e in resp.entries] == [0]
        # an ACL on the cluster resource: from now on ClusterAction is only User:node's
        acl = AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL,
                         "User:node", "*", AclOperation.CLUSTER_ACTION, AclPermissionType.ALLOW)
        for f in admin.create_acls([acl], request_timeout=10).values():
            f.result(15)
        yield b


def test_claimed_node_client_id_is_throttled(broker: SamsaBroker) -> None:
    throttle = {"max": 0}

    def stats(text: str) -> None:
        for br in json.loads(text).get("brokers", {}).values():
            throttle["max"] = max(throttle["max"], int(br.get("throttle", {}).get("max", 0)))

    p = Producer({"bootstrap.servers": broker.bootstrap, "client.id": FAKE_NODE, "acks": 1,
                  "linger.ms": 5, "statistics.interval.ms": 300, "stats_cb": stats})
    sent = 0
    deadline = time.monotonic() + 4.0
    while time.monotonic() < deadline:  # about 4 s at most, ~16x the quota offered
        try:
            p.produce("claimed", b"x" * 1024)
            sent += 1
        except BufferError:
            p.poll(0.01)
        if sent >= 1024:
            break
        p.poll(0)
    p.flush(60)
    p.poll(0.5)  # one more statistics report
    # 1 MiB against a 64 KiB/s quota: the broker must have asked for a throttle
    assert throttle["max"] > 0, "a client claiming a node's client id escaped its quota"


