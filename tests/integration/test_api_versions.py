"""ApiVersions advertises what a Kafka 4.0 broker advertises, for every API Samsa serves, and clients
that infer the broker version from it infer 4.0."""

from __future__ import annotations

from kafka.admin import KafkaAdminClient

from samsa.testing import SamsaBroker
from tests.wire import Wire

# Kafka 4.0.0's ApiVersions ranges (validVersions of Kafka 4.0's message specs,
# clients/src/main/resources/common/message/*Request.json, as a 4.0.0 broker advertises them;
# kafka-python 3.0 records the same table in kafka/protocol/broker_version_data.py), limited to
# the APIs Samsa serves.
KAFKA_40: dict[int, tuple[int, int]] = {
    0: (0, 12),   # Produce
    1: (4, 17),   # Fetch
    2: (1, 10),   # ListOffsets
    3: (0, 13),   # Metadata
    8: (2, 9),    # OffsetCommit
    9: (1, 9),    # OffsetFetch
    10: (0, 6),   # FindCoordinator
    11: (2, 9),   # JoinGroup
    12: (0, 4),   # Heartbeat
    13: (0, 5),   # LeaveGroup
    14: (0, 5),   # SyncGroup
    15: (0, 6),   # DescribeGroups
    16: (0, 5),   # ListGroups
    18: (0, 4),   # ApiVersions
    19: (2, 7),   # CreateTopics
    20: (1, 6),   # DeleteTopics
    21: (0, 2),   # DeleteRecords
    22: (0, 5),   # InitProducerId
    24: (0, 5),   # AddPartitionsToTxn
    25: (0, 4),   # AddOffsetsToTxn
    26: (0, 5),   # EndTxn
    28: (0, 5),   # TxnOffsetCommit
    32: (1, 4),   # DescribeConfigs
    33: (0, 2),   # AlterConfigs
    34: (1, 2),   # AlterReplicaLogDirs
    35: (1, 4),   # DescribeLogDirs
    37: (0, 3),   # CreatePartitions
    42: (0, 2),   # DeleteGroups
    43: (0, 2),   # ElectLeaders
    44: (0, 1),   # IncrementalAlterConfigs
    45: (0, 0),   # AlterPartitionReassignments
    46: (0, 0),   # ListPartitionReassignments
    47: (0, 0),   # OffsetDelete
    55: (0, 2),   # DescribeQuorum
    60: (0, 2),   # DescribeCluster
    61: (0, 0),   # DescribeProducers
    65: (0, 0),   # DescribeTransactions
    66: (0, 1),   # ListTransactions
    68: (0, 1),   # ConsumerGroupHeartbeat
    69: (0, 1),   # ConsumerGroupDescribe
    75: (0, 0),   # DescribeTopicPartitions
}

# Deliberate differences, each a line in docs/compatibility.md: the top versions of these three
# mean transactions v2 (KIP-890 part 2), which Samsa does not implement; Kafka 4.0 also
# advertises Produce v0-v2, which it no longer accepts (KIP-896).
DIFFERENCES: dict[int, tuple[int, int]] = {0: (3, 11), 26: (0, 4), 28: (0, 4)}


def advertised(bootstrap: str, version: int) -> dict[int, tuple[int, int]]:
    w = Wire(bootstrap)
    try:
        body = {"client_software_name": "wire-test", "client_software_version": "1"} \
            if version >= 3 else {}
        resp = w.request(18, version, body)
    finally:
        w.close()
    assert resp.error_code == 0
    return {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}


def test_ranges_equal_kafka_40_for_every_api_served(samsa_broker: SamsaBroker) -> None:
    expected = {**KAFKA_40, **DIFFERENCES}
    for version in (0, 3, 4):
        assert advertised(samsa_broker.bootstrap, version) == expected


def test_kafka_python_infers_broker_4_0(samsa_broker: SamsaBroker) -> None:
    admin = KafkaAdminClient(bootstrap_servers=samsa_broker.bootstrap, request_timeout_ms=10000)
    try:
        assert admin._manager.broker_version_data.broker_version == (4, 0)
    finally:
        admin.close()
