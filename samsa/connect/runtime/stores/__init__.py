"""The Connect worker's backing stores: connector/task configs, source offsets and statuses, in
memory or a file (standalone) or in Kafka Connect's internal topics, with Kafka Connect's record
formats (distributed)."""

from .config_store import (
    ClusterConfigState,
    ConfigBackingStore,
    ConfigUpdateListener,
    KafkaConfigBackingStore,
    MemoryConfigBackingStore,
    SessionKey,
)
from .kafka_log import KafkaBasedLog, LogRecord, SendError
from .offset_store import (
    FileOffsetBackingStore,
    KafkaOffsetBackingStore,
    MemoryOffsetBackingStore,
    OffsetBackingStore,
    OffsetStorageReaderImpl,
    OffsetStorageWriter,
    partition_key,
)
from .status_store import (
    KafkaStatusBackingStore,
    MemoryStatusBackingStore,
    StatusBackingStore,
    TopicStatus,
)

__all__ = [
    "ClusterConfigState", "ConfigBackingStore", "ConfigUpdateListener", "FileOffsetBackingStore",
    "KafkaBasedLog", "KafkaConfigBackingStore", "KafkaOffsetBackingStore",
    "KafkaStatusBackingStore", "LogRecord", "MemoryConfigBackingStore",
    "MemoryOffsetBackingStore", "MemoryStatusBackingStore", "OffsetBackingStore",
    "OffsetStorageReaderImpl", "OffsetStorageWriter", "SendError", "SessionKey",
    "StatusBackingStore", "TopicStatus", "partition_key",
]
