"""The herder's contract: what the REST API (and the CLI through it) asks of a worker, whether it
runs standalone or in a distributed group. Methods are blocking and thread-safe; the REST layer
calls them from worker threads. Failures are the exceptions of samsa.connect.errors, which the
REST layer maps to Connect's status codes (NotFound 404, AlreadyExists 409, BadRequest 400,
Conflict 409, NotLeader: forwarded to the leader)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from ..plugins import Plugins
from .status import ConnectorTaskId, Status, TargetState


@dataclass
class ConnectorInfo:
    """GET /connectors/{name}: the config as submitted, its tasks and its type."""

    name: str
    config: dict[str, str]
    tasks: list[ConnectorTaskId]
    type: str  # "source" | "sink" | "unknown"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "config": dict(self.config),
                "tasks": [t.to_json() for t in self.tasks], "type": self.type}


@dataclass
class ConnectorStateInfo:
    """GET /connectors/{name}/status."""

    name: str
    connector: Status
    tasks: list[Status]
    type: str

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "connector": self.connector.to_json(),
                "tasks": [t.to_json() for t in sorted(self.tasks, key=lambda s: s.task or 0)],
                "type": self.type}


@dataclass
class TaskInfo:
    id: ConnectorTaskId
    config: dict[str, str]

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id.to_json(), "config": dict(self.config)}


@dataclass
class PutResult:
    created: bool
    info: ConnectorInfo


@dataclass
class ConnectorOffsets:
    """GET /connectors/{name}/offsets: [{"partition": {...}, "offset": {...}}]. Sinks use
    kafka_topic/kafka_partition and kafka_offset, as Kafka Connect does."""

    offsets: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"offsets": list(self.offsets)}


@dataclass
class RestartRequest:
    connector: str
    only_failed: bool = False
    include_tasks: bool = False


class Herder(ABC):
    plugins: Plugins
    worker_id: str  # host:port of this worker's REST listener, as statuses name it
    kafka_cluster_id: str

    # ---- connectors ------------------------------------------------------------------------
    @abstractmethod
    def connectors(self) -> list[str]: ...

    @abstractmethod
    def connector_info(self, name: str) -> ConnectorInfo: ...

    @abstractmethod
    def connector_config(self, name: str) -> dict[str, str]: ...

    @abstractmethod
    def put_connector_config(self, name: str, config: dict[str, str], allow_replace: bool,
                             initial_state: TargetState | None = None) -> PutResult:
        """Create (allow_replace False: AlreadyExists if present) or create-or-update. The config
        is validated first (BadRequest with the validation's error count and messages)."""

    @abstractmethod
    def patch_connector_config(self, name: str, patch: dict[str, str | None]) -> PutResult:
        """KIP-477: merge into the existing config; a None value removes the key."""

    @abstractmethod
    def delete_connector(self, name: str) -> None: ...

    @abstractmethod
    def connector_status(self, name: str) -> ConnectorStateInfo: ...

    @abstractmethod
    def task_configs(self, name: str) -> list[TaskInfo]: ...

    @abstractmethod
    def task_status(self, task: ConnectorTaskId) -> Status: ...

    # ---- life cycle ------------------------------------------------------------------------
    @abstractmethod
    def restart_connector(self, name: str) -> None: ...

    @abstractmethod
    def restart_connector_and_tasks(self, request: RestartRequest) -> ConnectorStateInfo:
        """KIP-745: returns the status with RESTARTING marked on what will restart."""

    @abstractmethod
    def restart_task(self, task: ConnectorTaskId) -> None: ...

    @abstractmethod
    def pause_connector(self, name: str) -> None: ...

    @abstractmethod
    def resume_connector(self, name: str) -> None: ...

    @abstractmethod
    def stop_connector(self, name: str) -> None:
        """KIP-875: tasks shut down, zero task configs written, offsets may then be altered."""

    # ---- offsets (KIP-875) and topics (KIP-558) ---------------------------------------------
    @abstractmethod
    def connector_offsets(self, name: str) -> ConnectorOffsets: ...

    @abstractmethod
    def alter_connector_offsets(self, name: str, offsets: list[dict[str, Any]]) -> str:
        """PATCH: the connector must be STOPPED (BadRequest otherwise); returns the message."""

    @abstractmethod
    def reset_connector_offsets(self, name: str) -> str:
        """DELETE: the connector must be STOPPED; returns the message."""

    @abstractmethod
    def connector_active_topics(self, name: str) -> list[str]: ...

    @abstractmethod
    def reset_connector_active_topics(self, name: str) -> None: ...

    # ---- plugins -----------------------------------------------------------------------------
    @abstractmethod
    def validate_connector_config(self, config: dict[str, str]) -> dict[str, Any]:
        """Connect's ConfigInfos JSON: name, error_count, groups, configs[definition, value]."""
