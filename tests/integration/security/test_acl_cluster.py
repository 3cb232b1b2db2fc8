"""ACLs in a 3-node cluster: an ACL created through a broker that is not the active controller is
forwarded, written to the metadata log and applied by every broker, which then all enforce it."""

from __future__ import annotations

import time

import pytest

from samsa.protocol.records import encode_batch
from samsa.testing import SamsaCluster
from tests.wire import Wire

pytestmark = pytest.mark.timeout(180)

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def _produce(bootstrap: str, topic: str) -> int:
    w = Wire(bootstrap)
    try:
        r = w.request(0, 9, {"transactional_id": None, "acks": 1, "timeout": 5000,
                             "topic_data": [{"name": topic, "partition_data": [
                                 {"index": 0, "records": encode_batch(
                                     [(b"k", b"v", [], 1_700_000_000_000)])}]}]})
        return int(r.responses[0].partition_responses[0].error_code)
    finally:
        w.close()


def _described(bootstrap: str) -> list[tuple[str, str, int]]:
    w = Wire(bootstrap)
    try:
        r = w.request(29, 3, {"resource_type_filter": 1, "resource_name_filter": None,
                              "pattern_type_filter": 1, "principal_filter": None,
                              "host_filter": None, "operation": 1, "permission_type": 1})
        assert r.error_code == 0
        return [(res.resource_name, a.principal, int(a.permission_type))
                for res in r.resources for a in res.acls]
    finally:
        w.close()


def test_acl_reaches_and_binds_every_broker() -> None:
    # no super user: ANONYMOUS (PLAINTEXT) may do what no ACL names, so the cluster works,
    # and a DENY on one topic binds it everywhere
    with SamsaCluster(3, overrides={"authorizer.class.name": STANDARD,
                                    "allow.everyone.if.no.acl.found": "true"}) as c:
        leader = c.wait_for_leader()
        other = next(n for n in c.brokers if n.node_id != leader)
        w = Wire(other.bootstrap)
        created = w.request(19, 5, {"topics": [{"name": n, "num_partitions": 1,
                                                "replication_factor": 3, "assignments": [],
                                                "configs": []} for n in ("open", "secret")],
                                    "timeout": 30000, "validate_only": False})
        assert [t.error_code for t in created.topics] == [0, 0]
        acl = w.request(30, 3, {"creations": [
            {"resource_type": 2, "resource_name": "secret", "resource_pattern_type": 3,
             "principal": "User:ANONYMOUS", "host": "*", "operation": 4,
             "permission_type": 2}]})
        assert acl.results[0].error_code == 0
        w.close()
        expected = [("secret", "User:ANONYMOUS", 2)]
        for n in c.brokers:
            deadline = time.monotonic() + 15
            while _described(n.bootstrap) != expected and time.monotonic() < deadline:
                time.sleep(0.2)
            assert _described(n.bootstrap) == expected
            # authorization comes first: denied on every broker, leader of the partition or not
            assert _produce(n.bootstrap, "secret") == 29
            assert _produce(n.bootstrap, "open") in (0, 6)  # 6: NOT_LEADER_OR_FOLLOWER
