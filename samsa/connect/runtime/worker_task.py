"""What source and sink tasks share: a thread per task, its life cycle (start, run, pause/resume,
stop, fail) reported as Connect statuses, and the converters and transforms of its pipeline."""

from __future__ import annotations

import logging
import threading
import traceback
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Protocol

from ..api import Converter, HeaderConverter, Task
from ..plugins import Plugins, PluginType
from .status import ConnectorTaskId, State, TargetState

log = logging.getLogger("samsa.connect.task")


class StatusListener(Protocol):
    def task_state(self, task: ConnectorTaskId, state: State, trace: str | None = None) -> None: ...

    def topic_used(self, connector: str, task: int, topic: str) -> None: ...


def trace_of(error: BaseException) -> str:
    return "".join(traceback.format_exception(error))


@dataclass
class Converters:
    key: Converter
    value: Converter
    header: HeaderConverter


REGISTRY_URL = "schema.registry.url"


def _prefixed(props: dict[str, Any], prefix: str) -> dict[str, Any]:
    return {k[len(prefix):]: v for k, v in props.items() if k.startswith(prefix)}


def build_converters(plugins: Plugins, connector_props: dict[str, str],
                     worker_props: dict[str, Any], worker_defaults: dict[str, str]) -> Converters:
    """The connector's converters when it names them (with its own `<kind>.converter.*`
    settings), else the worker's (with the worker's settings), as Kafka's Plugins.newConverter."""
    made: dict[str, Any] = {}
    for kind in ("key", "value", "header"):
        name = f"{kind}.converter"
        if connector_props.get(name):
            cls_name, source = connector_props[name], connector_props
        else:
            cls_name, source = str(worker_props.get(name) or worker_defaults[name]), worker_props
        types = (PluginType.HEADER_CONVERTER, PluginType.CONVERTER) if kind == "header" else \
            (PluginType.CONVERTER,)
        conv = plugins.new(cls_name, *types)
        cfg = {k: str(v) for k, v in _prefixed(source, name + ".").items()}
        if source is connector_props and REGISTRY_URL not in cfg and \
                worker_props.get(f"{name}.{REGISTRY_URL}"):
            # Samsa's fallback (docs/compatibility.md): a connector naming a registry converter
            # without its URL uses the worker's, e.g. the seeds' Snowflake JSON posted as written.
            cfg[REGISTRY_URL] = str(worker_props[f"{name}.{REGISTRY_URL}"])
            # ... with the worker's registry credentials and TLS settings (basic.auth.*,
            # schema.registry.ssl.*) when the connector has none of its own
            for k, v in _prefixed(worker_props, name + ".").items():
                if k.startswith(("basic.auth.", "schema.registry.")) and k not in cfg:
                    cfg[k] = str(v)
        if kind == "header":
            if isinstance(conv, HeaderConverter):
                conv.configure({**cfg, "converter.type": "header"})
            else:
                conv.configure({**cfg, "converter.type": "header"}, False)
        else:
            conv.configure({**cfg, "converter.type": kind}, kind == "key")
        made[kind] = conv
    return Converters(made["key"], made["value"], made["header"])


class WorkerTask(threading.Thread, ABC):
    """One task's thread. Subclasses implement `initialize`, `execute` (loop until
    `self.stopping`), `close`; the base reports RUNNING / PAUSED / FAILED / UNASSIGNED."""

    def __init__(self, task_id: ConnectorTaskId, task: Task, task_props: dict[str, str],
                 target_state: TargetState, listener: StatusListener) -> None:
        super().__init__(name=f"task-{task_id}", daemon=True)
        self.id = task_id
        self.task = task
        self.task_props = task_props
        self.listener = listener
        self.stopping = threading.Event()
        self._state_lock = threading.Condition()
        self.target_state = target_state
        self.failed: BaseException | None = None
        self.cancelled = False
        self._topics_seen: set[str] = set()

    def saw_topic(self, topic: str) -> None:
        """KIP-558: report each topic the task uses, once."""
        if topic in self._topics_seen:
            return
        self._topics_seen.add(topic)
        try:
            self.listener.topic_used(self.id.connector, self.id.task, topic)
        except Exception:
            log.exception("%s: recording active topic %s", self.id, topic)

    # ---- control from the worker ---------------------------------------------------------
    def transition_to(self, state: TargetState) -> None:
        with self._state_lock:
            if state == self.target_state:
                return
            self.target_state = state
            self._state_lock.notify_all()
        if not self.stopping.is_set() and self.failed is None:
            self.listener.task_state(self.id, State.PAUSED if state is TargetState.PAUSED
                                     else State.RUNNING)
        self.on_target_state(state)

    def on_target_state(self, state: TargetState) -> None:
        """Hook: a sink pauses its consumer here."""

    def stop(self) -> None:
        self.stopping.set()
        with self._state_lock:
            self._state_lock.notify_all()
        self.wakeup()

    def wakeup(self) -> None:
        """Hook: interrupt a blocking poll."""

    def await_paused(self) -> bool:
        """Block while paused; True when the task should go on running."""
        with self._state_lock:
            while self.target_state is TargetState.PAUSED and not self.stopping.is_set():
                self._state_lock.wait(0.5)
        return not self.stopping.is_set()

    @property
    def paused(self) -> bool:
        return self.target_state is TargetState.PAUSED

    # ---- the thread -------------------------------------------------------------------------
    def run(self) -> None:
        try:
            self.initialize()
            self.task.start(self.task_props)
            self.listener.task_state(self.id, State.PAUSED if self.paused else State.RUNNING)
            self.execute()
        except BaseException as e:  # the task failed: report it; the worker keeps running
            if not self.stopping.is_set() or not isinstance(e, InterruptedError):
                self.failed = e
                log.error("%s failed: %s", self.id, e, exc_info=e)
                self.listener.task_state(self.id, State.FAILED, trace_of(e))
        finally:
            try:
                self.close()
            except Exception:
                log.exception("%s: error while closing", self.id)
            if self.failed is None:
                self.listener.task_state(self.id, State.UNASSIGNED)

    @abstractmethod
    def initialize(self) -> None: ...

    @abstractmethod
    def execute(self) -> None: ...

    @abstractmethod
    def close(self) -> None: ...
