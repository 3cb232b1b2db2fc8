"""The plugin API: what a connector, task, converter, transform or predicate written in Python
implements, and the contexts the runtime hands them. Shapes follow Kafka Connect's Java API
(org.apache.kafka.connect.{connector,source,sink,storage,transforms}) in Python names, so a Kafka
Connect developer finds the same life cycle: start -> task_configs -> tasks start -> poll/put ->
commit/flush -> stop."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from .config_def import ConfigDef, ConfigValue
from .data import ConnectRecord, Headers, Schema, SchemaAndValue, SinkRecord, SourceRecord

SAMSA_VERSION = "0.1.0"


@dataclass(frozen=True, order=True)
class TopicPartition:
    topic: str
    partition: int


# ---- connectors ---------------------------------------------------------------------------------
class ConnectorContext(Protocol):
    def request_task_reconfiguration(self) -> None:
        """Ask the runtime to call task_configs() again (the source's shape changed)."""

    def raise_error(self, error: Exception) -> None:
        """Fail the connector from a background thread of its own."""


class ExactlyOnceSupport(StrEnum):
    SUPPORTED = "SUPPORTED"
    UNSUPPORTED = "UNSUPPORTED"


class ConnectorTransactionBoundaries(StrEnum):
    SUPPORTED = "SUPPORTED"
    UNSUPPORTED = "UNSUPPORTED"


class Connector(ABC):
    """Splits a job into task configs. Runs on one worker; tasks run wherever they are assigned."""

    context: ConnectorContext

    def initialize(self, context: ConnectorContext) -> None:
        self.context = context

    def version(self) -> str:
        return SAMSA_VERSION

    @abstractmethod
    def start(self, props: dict[str, str]) -> None: ...

    @abstractmethod
    def task_class(self) -> type[Task]: ...

    @abstractmethod
    def task_configs(self, max_tasks: int) -> list[dict[str, str]]: ...

    @abstractmethod
    def stop(self) -> None: ...

    @abstractmethod
    def config(self) -> ConfigDef: ...

    def validate(self, props: dict[str, str]) -> dict[str, ConfigValue]:
        """Per-key validation of the connector's own settings; override to add cross-key checks."""
        return self.config().validate(props)


class SourceConnector(Connector):
    def exactly_once_support(self, props: dict[str, str]) -> ExactlyOnceSupport | None:
        """Whether the connector can run with exactly.once.source.support=enabled (KIP-618);
        None means unknown (allowed unless exactly.once.support=required)."""
        return None

    def can_define_transaction_boundaries(self, props: dict[str, str]) -> ConnectorTransactionBoundaries:
        return ConnectorTransactionBoundaries.UNSUPPORTED

    def alter_offsets(self, props: dict[str, str],
                      offsets: dict[tuple[tuple[str, Any], ...], dict[str, Any] | None]) -> bool:
        """KIP-875: may the runtime change these source offsets? Raise to refuse; return True if
        the connector checked them, False if it has no opinion (the runtime then still allows it)."""
        return False


class SinkConnector(Connector):
    def alter_offsets(self, props: dict[str, str], offsets: dict[TopicPartition, int | None]) -> bool:
        return False


# ---- tasks --------------------------------------------------------------------------------------
class Task(ABC):
    def version(self) -> str:
        return SAMSA_VERSION

    @abstractmethod
    def start(self, props: dict[str, str]) -> None: ...

    @abstractmethod
    def stop(self) -> None: ...


class OffsetStorageReader(Protocol):
    def offset(self, partition: dict[str, Any]) -> dict[str, Any] | None: ...

    def offsets(self, partitions: Sequence[dict[str, Any]]) -> dict[Any, dict[str, Any] | None]: ...


class TransactionContext(Protocol):
    """Connector-defined transaction boundaries (KIP-618, transaction.boundary=connector)."""

    def commit_transaction(self, record: SourceRecord | None = None) -> None: ...

    def abort_transaction(self, record: SourceRecord | None = None) -> None: ...


class SourceTaskContext(Protocol):
    @property
    def configs(self) -> dict[str, str]: ...

    @property
    def offset_storage_reader(self) -> OffsetStorageReader: ...

    def transaction_context(self) -> TransactionContext | None: ...


@dataclass(frozen=True)
class RecordMetadata:
    topic: str
    partition: int
    offset: int
    timestamp: int | None = None


class SourceTask(Task):
    """Reads from a system; `poll` returns the next records (or None/[] when there are none: the
    runtime calls again). Called from the task's own thread; `stop` from another one."""

    context: SourceTaskContext

    def initialize(self, context: SourceTaskContext) -> None:
        self.context = context

    @abstractmethod
    def poll(self) -> list[SourceRecord] | None: ...

    def commit(self) -> None:
        """The offsets of everything polled so far were written (offset.flush.interval.ms)."""

    def commit_record(self, record: SourceRecord, metadata: RecordMetadata | None) -> None:
        """One record was acknowledged by Samsa (metadata) or filtered by a transform (None)."""


class ErrantRecordReporter(Protocol):
    def report(self, record: SinkRecord, error: Exception) -> Future[None]: ...


class SinkTaskContext(Protocol):
    @property
    def configs(self) -> dict[str, str]: ...

    def offset(self, offsets: dict[TopicPartition, int]) -> None:
        """Rewind or skip: consumption of these partitions restarts at these offsets."""

    def timeout(self, timeout_ms: int) -> None:
        """After a RetriableException from put: wait this long before redelivering the batch."""

    def assignment(self) -> set[TopicPartition]: ...

    def pause(self, *partitions: TopicPartition) -> None: ...

    def resume(self, *partitions: TopicPartition) -> None: ...

    def request_commit(self) -> None: ...

    def errant_record_reporter(self) -> ErrantRecordReporter | None: ...


class SinkTask(Task):
    """Writes to a system. `put` gets batches; offsets are committed only after `flush` (or what
    `pre_commit` returns) says the data is safely written."""

    context: SinkTaskContext

    def initialize(self, context: SinkTaskContext) -> None:
        self.context = context

    @abstractmethod
    def put(self, records: list[SinkRecord]) -> None: ...

    def flush(self, current_offsets: dict[TopicPartition, int]) -> None:
        """Make everything `put` so far durable. Offsets are the next offsets to read."""

    def pre_commit(self, current_offsets: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        """The offsets safe to commit; by default flush and commit all of them."""
        self.flush(current_offsets)
        return current_offsets

    def open(self, partitions: list[TopicPartition]) -> None:
        """These partitions were assigned (after a rebalance)."""

    def close(self, partitions: list[TopicPartition]) -> None:
        """These partitions were revoked: drop buffered data of theirs."""


# ---- converters, header converters, transforms, predicates --------------------------------
class Converter(ABC):
    """Bytes in the topic <-> Connect data. Configured once per task for keys or values."""

    def config(self) -> ConfigDef:
        return ConfigDef()

    @abstractmethod
    def configure(self, configs: dict[str, Any], is_key: bool) -> None: ...

    @abstractmethod
    def from_connect_data(self, topic: str, schema: Schema | None, value: Any,
                          headers: Headers | None = None) -> bytes | None: ...

    @abstractmethod
    def to_connect_data(self, topic: str, value: bytes | None,
                        headers: Headers | None = None) -> SchemaAndValue: ...

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release what configure() acquired."""


class HeaderConverter(ABC):
    def config(self) -> ConfigDef:
        return ConfigDef()

    @abstractmethod
    def configure(self, configs: dict[str, Any]) -> None: ...

    @abstractmethod
    def from_connect_header(self, topic: str, header_key: str, schema: Schema | None,
                            value: Any) -> bytes | None: ...

    @abstractmethod
    def to_connect_header(self, topic: str, header_key: str, value: bytes | None) -> SchemaAndValue: ...

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release what configure() acquired."""


class Transformation(ABC):
    """A single message transform: returns a new record, or None to drop it."""

    @abstractmethod
    def config(self) -> ConfigDef: ...

    @abstractmethod
    def configure(self, props: dict[str, Any]) -> None: ...

    @abstractmethod
    def apply(self, record: ConnectRecord) -> ConnectRecord | None: ...

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release what configure() acquired."""


class Predicate(ABC):
    @abstractmethod
    def config(self) -> ConfigDef: ...

    @abstractmethod
    def configure(self, props: dict[str, Any]) -> None: ...

    @abstractmethod
    def test(self, record: ConnectRecord) -> bool: ...

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release what configure() acquired."""
