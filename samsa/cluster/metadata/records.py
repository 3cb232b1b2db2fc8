"""KRaft's metadata record types, as Kafka defines them (metadata/src/main/resources/common/metadata).

Each record is a frozen dataclass whose fields are Kafka's field names in snake_case. On the wire
and on disk a record is framed as Kafka's ApiMessageAndVersion: unsigned varint frame version (0),
unsigned varint record type (the `API_KEY` below), unsigned varint record version, then the
record's body in the flexible (compact, tagged-field) encoding of that version.

`encode(record) -> bytes` and `decode(data) -> Record` are the only entry points the rest of
Samsa uses; `decode` raises `MetadataRecordError` for anything malformed or unknown.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import ClassVar

NO_LEADER = -1
NO_LEADER_CHANGE = -2  # PartitionChangeRecord.leader: "unchanged"

# ConfigRecord.resource_type, as in Kafka's ConfigResource.Type
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4


class MetadataRecordError(ValueError):
    """Bytes that are not a metadata record Samsa knows (unknown type, bad version, truncated)."""


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    name: str  # listener name, e.g. PLAINTEXT
    host: str
    port: int
    security_protocol: int = 0  # 0 PLAINTEXT, 1 SSL, 2 SASL_PLAINTEXT, 3 SASL_SSL


@dataclass(frozen=True, slots=True)
class BrokerFeature:
    name: str
    min_supported_version: int
    max_supported_version: int


@dataclass(frozen=True, slots=True)
class RegisterBrokerRecord:
    API_KEY: ClassVar[int] = 0
    broker_id: int
    incarnation_id: uuid.UUID
    broker_epoch: int
    endpoints: tuple[BrokerEndpoint, ...] = ()
    features: tuple[BrokerFeature, ...] = ()
    rack: str | None = None
    fenced: bool = True
    in_controlled_shutdown: bool = False


@dataclass(frozen=True, slots=True)
class UnregisterBrokerRecord:
    API_KEY: ClassVar[int] = 1
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class TopicRecord:
    API_KEY: ClassVar[int] = 2
    name: str
    topic_id: uuid.UUID


@dataclass(frozen=True, slots=True)
class PartitionRecord:
    API_KEY: ClassVar[int] = 3
    partition_id: int
    topic_id: uuid.UUID
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class ConfigRecord:
    API_KEY: ClassVar[int] = 4
    resource_type: int  # TOPIC_RESOURCE or BROKER_RESOURCE
    resource_name: str  # topic name; broker id as a string, or "" for the cluster-wide default
    name: str
    value: str | None  # None deletes the setting


@dataclass(frozen=True, slots=True)
class PartitionChangeRecord:
    """A change to one partition; fields left at their defaults are unchanged."""

    API_KEY: ClassVar[int] = 5
    partition_id: int
    topic_id: uuid.UUID
    isr: tuple[int, ...] | None = None
    leader: int = NO_LEADER_CHANGE
    replicas: tuple[int, ...] | None = None
    removing_replicas: tuple[int, ...] | None = None
    adding_replicas: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class FenceBrokerRecord:
    API_KEY: ClassVar[int] = 7
    id: int
    epoch: int


@dataclass(frozen=True, slots=True)
class UnfenceBrokerRecord:
    API_KEY: ClassVar[int] = 8
    id: int
    epoch: int


@dataclass(frozen=True, slots=True)
class RemoveTopicRecord:
    API_KEY: ClassVar[int] = 9
    topic_id: uuid.UUID


@dataclass(frozen=True, slots=True)
class FeatureLevelRecord:
    API_KEY: ClassVar[int] = 12
    name: str
    feature_level: int


@dataclass(frozen=True, slots=True)
class ProducerIdsRecord:
    API_KEY: ClassVar[int] = 15
    broker_id: int
    broker_epoch: int
    next_producer_id: int


@dataclass(frozen=True, slots=True)
class BrokerRegistrationChangeRecord:
    """fenced / in_controlled_shutdown: -1 unchanged... as Kafka: 0 = no change, 1 = set, -1 = clear
    (see Kafka's BrokerRegistrationFencingChange / BrokerRegistrationInControlledShutdownChange)."""

    API_KEY: ClassVar[int] = 17
    broker_id: int
    broker_epoch: int
    fenced: int = 0
    in_controlled_shutdown: int = 0


@dataclass(frozen=True, slots=True)
class NoOpRecord:
    API_KEY: ClassVar[int] = 20


Record = (RegisterBrokerRecord | UnregisterBrokerRecord | TopicRecord | PartitionRecord
          | ConfigRecord | PartitionChangeRecord | FenceBrokerRecord | UnfenceBrokerRecord
          | RemoveTopicRecord | FeatureLevelRecord | ProducerIdsRecord
          | BrokerRegistrationChangeRecord | NoOpRecord)


def encode(record: Record) -> bytes:
    """ApiMessageAndVersion bytes of `record` (highest version Samsa writes for its type)."""
    raise NotImplementedError  # metadata helper


def decode(data: bytes) -> Record:
    """The record in `data`; MetadataRecordError if malformed or of an unknown type/version."""
    raise NotImplementedError  # metadata helper


_ = field  # (kept for helpers adding defaults)
