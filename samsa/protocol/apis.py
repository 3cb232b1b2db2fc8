"""The APIs Samsa serves and the version ranges it advertises in ApiVersions."""

from __future__ import annotations

PRODUCE = 0
FETCH = 1
LIST_OFFSETS = 2
METADATA = 3
API_VERSIONS = 18
CREATE_TOPICS = 19
DELETE_TOPICS = 20
DELETE_RECORDS = 21
INIT_PRODUCER_ID = 22
OFFSET_FOR_LEADER_EPOCH = 23
DESCRIBE_CONFIGS = 32
ALTER_CONFIGS = 33
DESCRIBE_LOG_DIRS = 35
CREATE_PARTITIONS = 37
INCREMENTAL_ALTER_CONFIGS = 44
DESCRIBE_CLUSTER = 60
OFFSET_COMMIT = 8
OFFSET_FETCH = 9
FIND_COORDINATOR = 10
JOIN_GROUP = 11
HEARTBEAT = 12
LEAVE_GROUP = 13
SYNC_GROUP = 14
DESCRIBE_GROUPS = 15
LIST_GROUPS = 16
DELETE_GROUPS = 42
OFFSET_DELETE = 47
ADD_PARTITIONS_TO_TXN = 24
ADD_OFFSETS_TO_TXN = 25
END_TXN = 26
TXN_OFFSET_COMMIT = 28
DESCRIBE_PRODUCERS = 61
DESCRIBE_TRANSACTIONS = 65
LIST_TRANSACTIONS = 66
CONSUMER_GROUP_HEARTBEAT = 68
CONSUMER_GROUP_DESCRIBE = 69
ALTER_REPLICA_LOG_DIRS = 34
ELECT_LEADERS = 43
ALTER_PARTITION_REASSIGNMENTS = 45
LIST_PARTITION_REASSIGNMENTS = 46
DESCRIBE_QUORUM = 55
DESCRIBE_TOPIC_PARTITIONS = 75
VOTE = 52
BEGIN_QUORUM_EPOCH = 53
END_QUORUM_EPOCH = 54
FETCH_SNAPSHOT = 59
BROKER_REGISTRATION = 62
BROKER_HEARTBEAT = 63
ALLOCATE_PRODUCER_IDS = 67
ALTER_PARTITION = 56
WRITE_TXN_MARKERS = 27
# ACLs (issue 17)
DESCRIBE_ACLS = 29
CREATE_ACLS = 30
DELETE_ACLS = 31
# client quotas (helper "quotas")
DESCRIBE_CLIENT_QUOTAS = 48
ALTER_CLIENT_QUOTAS = 49
# SASL (helper sasl)
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
DESCRIBE_USER_SCRAM_CREDENTIALS = 50
ALTER_USER_SCRAM_CREDENTIALS = 51

# api key -> (min version, max version) Samsa accepts. ApiVersions advertises ADVERTISED below:
# Kafka 4.0's ranges for every API Samsa serves (tests/integration/test_api_versions.py holds Kafka
# 4.0's table), except the top versions of Produce, EndTxn and TxnOffsetCommit (12, 5, 5), which
# mean transactions v2 (KIP-890 part 2), not implemented. See docs/compatibility.md.
SUPPORTED: dict[int, tuple[int, int]] = {
    PRODUCE: (3, 11),
    FETCH: (4, 17),
    LIST_OFFSETS: (1, 10),
    METADATA: (0, 13),
    API_VERSIONS: (0, 4),
    CREATE_TOPICS: (2, 7),
    DELETE_TOPICS: (1, 6),
    DELETE_RECORDS: (0, 2),
    INIT_PRODUCER_ID: (0, 5),
    OFFSET_FOR_LEADER_EPOCH: (2, 4),
    DESCRIBE_CONFIGS: (1, 4),
    ALTER_CONFIGS: (0, 2),
    DESCRIBE_LOG_DIRS: (1, 4),
    CREATE_PARTITIONS: (0, 3),
    INCREMENTAL_ALTER_CONFIGS: (0, 1),
    DESCRIBE_CLUSTER: (0, 2),
    OFFSET_COMMIT: (2, 9),
    OFFSET_FETCH: (1, 9),
    FIND_COORDINATOR: (0, 6),
    JOIN_GROUP: (0, 9),
    HEARTBEAT: (0, 4),
    LEAVE_GROUP: (0, 5),
    SYNC_GROUP: (0, 5),
    DESCRIBE_GROUPS: (0, 6),
    LIST_GROUPS: (0, 5),
    DELETE_GROUPS: (0, 2),
    OFFSET_DELETE: (0, 0),
    ADD_PARTITIONS_TO_TXN: (0, 5),
    ADD_OFFSETS_TO_TXN: (0, 4),
    END_TXN: (0, 4),
    TXN_OFFSET_COMMIT: (0, 4),
    WRITE_TXN_MARKERS: (1, 1),  # inter-broker; Kafka lists it too
    DESCRIBE_PRODUCERS: (0, 0),
    DESCRIBE_TRANSACTIONS: (0, 0),
    LIST_TRANSACTIONS: (0, 1),
    CONSUMER_GROUP_HEARTBEAT: (0, 1),
    CONSUMER_GROUP_DESCRIBE: (0, 1),
    ALTER_REPLICA_LOG_DIRS: (1, 2),
    ELECT_LEADERS: (0, 2),
    ALTER_PARTITION_REASSIGNMENTS: (0, 0),
    LIST_PARTITION_REASSIGNMENTS: (0, 0),
    DESCRIBE_QUORUM: (0, 2),
    DESCRIBE_TOPIC_PARTITIONS: (0, 0),
    # ACLs (issue 17): Kafka 4.0's ranges
    DESCRIBE_ACLS: (1, 3),
    CREATE_ACLS: (1, 3),
    DELETE_ACLS: (1, 3),
    # client quotas (helper "quotas")
    DESCRIBE_CLIENT_QUOTAS: (0, 1),
    ALTER_CLIENT_QUOTAS: (0, 1),
    # SASL (helper sasl): Kafka 4.0's ranges
    SASL_HANDSHAKE: (0, 1),
    SASL_AUTHENTICATE: (0, 2),
    DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
}

# What ApiVersions lists. Like Kafka 4.0 (KAFKA-18659), Produce is listed from v0 although v0-v2
# are refused (KIP-896 removed them; a request closes the connection): older librdkafka versions
# (2.0.2, in kcat's Debian package) compress produce batches only when the broker lists Produce v0.
ADVERTISED: dict[int, tuple[int, int]] = {**SUPPORTED, PRODUCE: (0, SUPPORTED[PRODUCE][1])}


# The CONTROLLER listener serves the KRaft quorum (Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch and
# FetchSnapshot of __cluster_metadata, DescribeQuorum), brokers' registration, heartbeats and
# producer id blocks, and the admin requests brokers forward to the active controller.
CONTROLLER_SUPPORTED: dict[int, tuple[int, int]] = {
    API_VERSIONS: (0, 4),
    FETCH: (17, 17),
    VOTE: (2, 2),
    BEGIN_QUORUM_EPOCH: (1, 1),
    END_QUORUM_EPOCH: (1, 1),
    DESCRIBE_QUORUM: (0, 2),
    FETCH_SNAPSHOT: (1, 1),
    BROKER_REGISTRATION: (0, 4),
    BROKER_HEARTBEAT: (0, 1),
    ALLOCATE_PRODUCER_IDS: (0, 0),
    CREATE_TOPICS: SUPPORTED[CREATE_TOPICS],
    DELETE_TOPICS: SUPPORTED[DELETE_TOPICS],
    CREATE_PARTITIONS: SUPPORTED[CREATE_PARTITIONS],
    ALTER_CONFIGS: SUPPORTED[ALTER_CONFIGS],
    INCREMENTAL_ALTER_CONFIGS: SUPPORTED[INCREMENTAL_ALTER_CONFIGS],
    DESCRIBE_CLUSTER: SUPPORTED[DESCRIBE_CLUSTER],
    # replication control: a partition leader's ISR changes (v2+, topic ids: Kafka 4.0's range),
    # and the elections and reassignments brokers forward
    ALTER_PARTITION: (2, 3),
    ELECT_LEADERS: SUPPORTED[ELECT_LEADERS],
    ALTER_PARTITION_REASSIGNMENTS: SUPPORTED[ALTER_PARTITION_REASSIGNMENTS],
    LIST_PARTITION_REASSIGNMENTS: SUPPORTED[LIST_PARTITION_REASSIGNMENTS],
    # ACL changes brokers forward (issue 17)
    CREATE_ACLS: SUPPORTED[CREATE_ACLS],
    DELETE_ACLS: SUPPORTED[DELETE_ACLS],
    ALTER_CLIENT_QUOTAS: SUPPORTED[ALTER_CLIENT_QUOTAS],  # client quotas (helper "quotas")
    ALTER_USER_SCRAM_CREDENTIALS: SUPPORTED[ALTER_USER_SCRAM_CREDENTIALS],  # forwarded (sasl)
    # SASL_PLAINTEXT / SASL_SSL controller listeners (sec-cluster)
    SASL_HANDSHAKE: SUPPORTED[SASL_HANDSHAKE],
    SASL_AUTHENTICATE: SUPPORTED[SASL_AUTHENTICATE],
}
