"""Connector and task states as Kafka Connect reports them (AbstractStatus.State), and the
status records the status store keeps per connector and task."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class State(StrEnum):
    UNASSIGNED = "UNASSIGNED"
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    FAILED = "FAILED"
    RESTARTING = "RESTARTING"
    STOPPED = "STOPPED"
    DESTROYED = "DESTROYED"


class TargetState(StrEnum):
    """What the user asked for: running, paused (tasks idle) or stopped (no tasks, KIP-875)."""

    STARTED = "STARTED"
    PAUSED = "PAUSED"
    STOPPED = "STOPPED"


@dataclass(frozen=True, order=True)
class ConnectorTaskId:
    connector: str
    task: int

    def to_json(self) -> dict[str, Any]:
        return {"connector": self.connector, "task": self.task}

    def __str__(self) -> str:
        return f"{self.connector}-{self.task}"


@dataclass(frozen=True)
class Status:
    """The last state a worker reported for a connector (task None) or one of its tasks.
    `generation` orders reports across rebalances: an older generation never overwrites."""

    connector: str
    task: int | None
    state: State
    worker_id: str
    trace: str | None = None
    generation: int = 0

    def to_json(self) -> dict[str, Any]:
        """The REST shape (ConnectorStateInfo.AbstractState): trace only when there is one."""
        out: dict[str, Any] = {"state": self.state.value, "worker_id": self.worker_id}
        if self.task is not None:
            out = {"id": self.task, **out}
        if self.trace:
            out["trace"] = self.trace
        return out
