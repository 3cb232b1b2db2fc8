"""ApiVersions advertises what a Kafka 4.0 broker advertises, for every API Samsa serves, and clients
that infer the broker version from it infer 4.0."""

from __future__ import annotations

import shutil
import struct
import subprocess

import pytest
from kafka.admin import KafkaAdminClient

from samsa.testing import SamsaBroker
from tests.wire import Wire

# Kafka 4.0's ApiVersions ranges (validVersions of Kafka 4.0's message specs,
# clients/src/main/resources/common/message/*Request.json, as a 4.0 broker advertises them;
# kafka-python 3.0 records the 4.0.0 table in kafka/protocol/broker_version_data.py), limited to
# the APIs Samsa serves. 4.0.1 brought back JoinGroup v0-v1 (KAFKA-19444), so they are listed.
KAFKA_40: dict[int, tuple[int, int]] = {
    0: (0, 12),   # Produce
    1: (4, 17),   # Fetch
    2: (1, 10),   # ListOffsets
    3: (0, 13),   # Metadata
    8: (2, 9),    # OffsetCommit
    9: (1, 9),    # OffsetFetch
    10: (0, 6),   # FindCoordinator
    11: (0, 9),   # JoinGroup (v0-v1 removed in 4.0.0, back in 4.0.1: KAFKA-19444)
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
    23: (2, 4),   # OffsetForLeaderEpoch
    24: (0, 5),   # AddPartitionsToTxn
    25: (0, 4),   # AddOffsetsToTxn
    26: (0, 5),   # EndTxn
    27: (1, 1),   # WriteTxnMarkers
    28: (0, 5),   # TxnOffsetCommit
    29: (1, 3),   # DescribeAcls
    30: (1, 3),   # CreateAcls
    31: (1, 3),   # DeleteAcls
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
    48: (0, 1),   # DescribeClientQuotas
    49: (0, 1),   # AlterClientQuotas
    55: (0, 2),   # DescribeQuorum
    60: (0, 2),   # DescribeCluster
    61: (0, 0),   # DescribeProducers
    65: (0, 0),   # DescribeTransactions
    66: (0, 1),   # ListTransactions
    68: (0, 1),   # ConsumerGroupHeartbeat
    69: (0, 1),   # ConsumerGroupDescribe
    75: (0, 0),   # DescribeTopicPartitions
}
# SASL (helper sasl): SaslHandshake, SaslAuthenticate, Describe/AlterUserScramCredentials
KAFKA_40.update({17: (0, 1), 36: (0, 2), 50: (0, 0), 51: (0, 0)})

# Deliberate differences, each a line in docs/compatibility.md: the top versions of these three
# mean transactions v2 (KIP-890 part 2), which Samsa does not implement.
DIFFERENCES: dict[int, tuple[int, int]] = {0: (0, 11), 26: (0, 4), 28: (0, 4)}


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


@pytest.mark.parametrize("codec,bits", [("gzip", 1), ("snappy", 2), ("lz4", 3), ("zstd", 4)])
def test_kcat_compresses(samsa_broker: SamsaBroker, codec: str, bits: int) -> None:
    """Older librdkafka (kcat's Debian build has 2.0.2) compresses only when ApiVersions lists
    Produce v0, which Kafka 4.0 lists for that reason; Samsa used to get these uncompressed."""
    exe = shutil.which("kcat") or shutil.which("kafkacat")
    assert exe, "kcat is not installed: `make system-deps` installs it (Debian package kcat)"
    topic = f"kcat-{codec}"
    lines = "".join(f"line {i} of a compressible text\n" for i in range(500))  # smaller than raw
    # one batch (linger): a batch that compression would not shrink is sent uncompressed
    r = subprocess.run([exe, "-b", samsa_broker.bootstrap, "-P", "-t", topic, "-p", "0", "-z", codec,
                        "-X", "linger.ms=1000"], input=lines, text=True, capture_output=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    w = Wire(samsa_broker.bootstrap)
    try:
        resp = w.request(1, 4, {"replica_id": -1, "max_wait": 0, "min_bytes": 0,
                                "max_bytes": 1 << 20, "isolation_level": 0, "topics": [
                                    {"topic": topic, "partitions": [
                                        {"partition": 0, "fetch_offset": 0,
                                         "partition_max_bytes": 1 << 20}]}]})
    finally:
        w.close()
    records = resp.responses[0].partitions[0].records
    assert records, "kcat's records are not in the log"
    pos, codecs = 0, []
    while pos + 23 <= len(records):  # every RecordBatch: its attributes' codec bits
        (length,) = struct.unpack_from(">i", records, pos + 8)
        codecs.append(struct.unpack_from(">h", records, pos + 21)[0] & 0x7)
        pos += 12 + length
    assert codecs and set(codecs) == {bits}


def test_produce_v0_is_listed_but_refused(samsa_broker: SamsaBroker) -> None:
    """As in Kafka 4.0: Produce v0-v2 are in ApiVersions, and a request closes the connection."""
    assert advertised(samsa_broker.bootstrap, 3)[0][0] == 0
    w = Wire(samsa_broker.bootstrap)
    try:
        client = b"wire-test"
        body = struct.pack(">hii", 1, 1000, 0)  # acks, timeout, no topics
        frame = struct.pack(">hhih", 0, 0, 7, len(client)) + client + body
        w.send_raw(struct.pack(">i", len(frame)) + frame)
        assert w.is_closed()
    finally:
        w.close()


def test_feature_flags_say_what_samsa_implements(samsa_broker: SamsaBroker) -> None:
    """ApiVersions v3+ (KIP-584): group.version 1 (KIP-848 groups are served) and
    transaction.version 0 (no transactions v2), so clients pick the protocols Samsa speaks."""
    w = Wire(samsa_broker.bootstrap)
    try:
        resp = w.request(18, 3, {"client_software_name": "t", "client_software_version": "1"})
    finally:
        w.close()
    supported = {f.name: (f.min_version, f.max_version) for f in resp.supported_features}
    finalized = {f.name: (f.min_version_level, f.max_version_level)
                 for f in resp.finalized_features}
    assert supported == {"group.version": (0, 1), "transaction.version": (0, 0)}
    assert finalized == {"group.version": (1, 1), "transaction.version": (0, 0)}
