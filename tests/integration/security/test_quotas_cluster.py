"""Client quotas in a 3-node cluster: AlterClientQuotas sent to a broker that is not the active
controller is forwarded to it, and the quota reaches every broker through the metadata log."""

from __future__ import annotations

import time

import pytest

from samsa.testing import SamsaCluster
from tests.integration.security.test_quotas_api import ALTER, as_dict, describe
from tests.wire import Wire

pytestmark = pytest.mark.timeout(180)


def test_alter_on_a_follower_reaches_every_broker() -> None:
    with SamsaCluster(3) as cluster:
        leader = cluster.wait_for_leader()
        follower = next(n for n in cluster.nodes if n.node_id != leader)
        w = Wire(follower.bootstrap)
        try:
            resp = w.request(ALTER, 1, {"entries": [
                {"entity": [{"entity_type": "client-id", "entity_name": "everywhere"}],
                 "ops": [{"key": "consumer_byte_rate", "value": 4096, "remove": False}]}],
                "validate_only": False})
        finally:
            w.close()
        assert [int(e.error_code) for e in resp.entries] == [0]
        want = {(("client-id", "everywhere"),): {"consumer_byte_rate": 4096.0}}
        # every broker (the forwarding one included) learns it from the metadata log
        for node in cluster.nodes:
            deadline = time.monotonic() + 15
            while as_dict(describe(node, [("client-id", 0, "everywhere")])) != want:
                assert time.monotonic() < deadline, f"node {node.node_id} never saw the quota"
                time.sleep(0.1)
