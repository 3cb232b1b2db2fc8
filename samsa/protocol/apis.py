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
DESCRIBE_CONFIGS = 32
ALTER_CONFIGS = 33
DESCRIBE_LOG_DIRS = 35
CREATE_PARTITIONS = 37
INCREMENTAL_ALTER_CONFIGS = 44
DESCRIBE_CLUSTER = 60

# api key -> (min version, max version). Minimums are Kafka 4.x's; maximums are what our handlers
# implement (and kio decodes).
SUPPORTED: dict[int, tuple[int, int]] = {
    PRODUCE: (3, 11),
    FETCH: (4, 16),
    LIST_OFFSETS: (1, 8),
    METADATA: (0, 12),
    API_VERSIONS: (0, 4),
    CREATE_TOPICS: (2, 7),
    DELETE_TOPICS: (1, 6),
    DELETE_RECORDS: (0, 2),
    INIT_PRODUCER_ID: (0, 5),
    DESCRIBE_CONFIGS: (1, 4),
    ALTER_CONFIGS: (0, 2),
    DESCRIBE_LOG_DIRS: (1, 4),
    CREATE_PARTITIONS: (0, 3),
    INCREMENTAL_ALTER_CONFIGS: (0, 1),
    DESCRIBE_CLUSTER: (0, 1),
}
