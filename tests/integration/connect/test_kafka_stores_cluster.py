"""The Connect stores on a 3-broker cluster: their topics get the default replication factor 3,
and a running store keeps writing and reading to the end when the config topic's leader is killed
(-9): `read_to_end()` asks the new leader instead of waiting on the dead one."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient

from samsa.connect.runtime.status import ConnectorTaskId, TargetState
from samsa.connect.runtime.stores.config_store import KafkaConfigBackingStore
from samsa.connect.runtime.stores.offset_store import (
    KafkaOffsetBackingStore,
    OffsetStorageReaderImpl,
    write_offsets,
)
from samsa.testing import SamsaCluster
from tests.replication_util import CLUSTER_OVERRIDES, bring_back, move_leader

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster() -> Iterator[SamsaCluster]:
    with SamsaCluster(3, overrides=CLUSTER_OVERRIDES) as c:
        c.wait_brokers(3)
        yield c


def test_stores_survive_a_leader_kill(cluster: SamsaCluster) -> None:
    client = {"bootstrap.servers": cluster.bootstrap}
    topic, off_topic = f"cfg-{uuid.uuid4().hex[:8]}", f"off-{uuid.uuid4().hex[:8]}"
    store = KafkaConfigBackingStore(topic, client, timeout_s=60)
    offsets = KafkaOffsetBackingStore(off_topic, client, partitions=1, timeout_s=60)
    store.start()
    offsets.start()
    try:
        md = AdminClient(client).list_topics(topic, timeout=10).topics[topic]
        assert len(md.partitions[0].replicas) == 3  # Kafka's default, all brokers present
        store.put_connector_config("c", {"k": "v1"})
        write_offsets(offsets, "c", [({"p": 0}, {"o": 1})])

        old, _ = move_leader(cluster, topic, 0, "kill")

        store.put_connector_config("c", {"k": "v2"})
        store.put_task_configs("c", [{"t": "0"}])
        store.put_target_state("c", TargetState.PAUSED)
        store.refresh(60)
        write_offsets(offsets, "c", [({"p": 0}, {"o": 2})], timeout_s=60)
        assert OffsetStorageReaderImpl(offsets, "c").offset({"p": 0}) == {"o": 2}
        fresh = KafkaConfigBackingStore(topic, client, timeout_s=60)
        fresh.start()
        try:
            snap = fresh.snapshot()
            assert snap.connector_config("c") == {"k": "v2"}
            assert snap.tasks("c") == [ConnectorTaskId("c", 0)]
            assert snap.target_state("c") is TargetState.PAUSED
        finally:
            fresh.stop()
    finally:
        store.stop()
        offsets.stop()
    bring_back(cluster, old, [(topic, 0)])
