"""Standalone mode (connect-standalone.sh): one worker, connector configs given on the command line
or through REST and kept in memory, source offsets in `offset.storage.file.filename`, statuses in
memory. Every operation runs under one lock, in the caller's thread."""

from __future__ import annotations

import logging
import threading
from typing import Any

from ..errors import AlreadyExistsException, BadRequestException, NotFoundException
from ..plugins import Plugins
from .abstract_herder import AbstractHerder
from .herder import (
    ConnectorInfo,
    ConnectorOffsets,
    ConnectorStateInfo,
    PutResult,
    RestartRequest,
    TaskInfo,
)
from .status import ConnectorTaskId, State, Status, TargetState
from .stores.status_store import MemoryStatusBackingStore
from .worker import OffsetAccess, Worker
from .worker_config import WorkerConfig

log = logging.getLogger("samsa.connect.standalone")


class StandaloneHerder(AbstractHerder):
    def __init__(self, config: WorkerConfig, plugins: Plugins, worker_id: str,
                 offsets: OffsetAccess, kafka_cluster_id: str) -> None:
        super().__init__(config, plugins, worker_id, MemoryStatusBackingStore(), kafka_cluster_id)
        self.offsets = offsets
        self.worker = Worker(worker_id, config, plugins, offsets, self)
        self._lock = threading.RLock()
        self.configs: dict[str, dict[str, str]] = {}
        self.targets: dict[str, TargetState] = {}
        self.task_cfgs: dict[str, list[dict[str, str]]] = {}
        self._reconfigure: set[str] = set()
        self._stop = threading.Event()
        self._reconfig_thread = threading.Thread(target=self._reconfig_loop,
                                                 name="standalone-reconfigure", daemon=True)

    def start(self) -> None:
        start_offsets = getattr(self.offsets, "start", None)
        if start_offsets is not None:
            start_offsets()
        self._reconfig_thread.start()

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            self.worker.stop()
        stop_offsets = getattr(self.offsets, "stop", None)
        if stop_offsets is not None:
            stop_offsets()

    # ---- helpers ---------------------------------------------------------------------------------
    def _config(self, name: str) -> dict[str, str]:
        if name not in self.configs:
            raise NotFoundException(f"Connector {name} not found")
        return self.configs[name]

    def _tasks(self, name: str) -> list[ConnectorTaskId]:
        return [ConnectorTaskId(name, i) for i in range(len(self.task_cfgs.get(name, [])))]

    def _start_connector(self, name: str) -> None:
        ok = self.worker.start_connector(name, self.configs[name], self.targets[name])
        if ok and self.targets[name] is not TargetState.STOPPED:
            self._update_tasks(name)

    def _update_tasks(self, name: str) -> None:
        """Ask the connector for task configs; restart the tasks when they changed."""
        if not self.worker.is_running(name):
            return
        max_tasks = int(self.configs[name].get("tasks.max", "1"))
        try:
            new = self.worker.connector_task_configs(name, max_tasks)
        except Exception as e:
            self.connector_state(name, State.FAILED, repr(e))
            return
        if new != self.task_cfgs.get(name) or not self.worker.task_ids(name):
            self.worker.stop_tasks(self.worker.task_ids(name))
            self.task_cfgs[name] = new
            self._start_tasks(name)

    def _start_tasks(self, name: str) -> None:
        for i, tcfg in enumerate(self.task_cfgs.get(name, [])):
            self.worker.start_task(ConnectorTaskId(name, i), self.configs[name], tcfg,
                                   self.targets[name])

    def _stop_connector_and_tasks(self, name: str) -> None:
        self.worker.stop_tasks(self.worker.task_ids(name))
        self.worker.stop_connector(name)

    # ---- WorkerListener -----------------------------------------------------------------------
    def request_task_reconfiguration(self, connector: str) -> None:
        self._reconfigure.add(connector)

    def _reconfig_loop(self) -> None:
        while not self._stop.wait(0.2):
            while self._reconfigure:
                name = self._reconfigure.pop()
                with self._lock:
                    if name in self.configs and self.targets.get(name) is TargetState.STARTED:
                        self._update_tasks(name)

    # ---- Herder --------------------------------------------------------------------------------
    def connectors(self) -> list[str]:
        with self._lock:
            return sorted(self.configs)

    def connector_info(self, name: str) -> ConnectorInfo:
        with self._lock:
            return self.info(name, self._config(name), self._tasks(name))

    def connector_config(self, name: str) -> dict[str, str]:
        with self._lock:
            return dict(self._config(name))

    def put_connector_config(self, name: str, config: dict[str, str], allow_replace: bool,
                             initial_state: TargetState | None = None) -> PutResult:
        config = self.check_config(name, config)
        with self._lock:
            exists = name in self.configs
            if exists and not allow_replace:
                raise AlreadyExistsException(f"Connector {name} already exists")
            if exists:
                self._stop_connector_and_tasks(name)
                self.task_cfgs.pop(name, None)
            else:
                self.targets[name] = initial_state or TargetState.STARTED
            self.configs[name] = config
            self._start_connector(name)
            return PutResult(not exists, self.info(name, config, self._tasks(name)))

    def delete_connector(self, name: str) -> None:
        with self._lock:
            self._config(name)
            self._stop_connector_and_tasks(name)
            for tid in self._tasks(name):
                self.statuses.put(Status(name, tid.task, State.DESTROYED, self.worker_id))
            del self.configs[name]
            self.targets.pop(name, None)
            self.task_cfgs.pop(name, None)
            self.statuses.delete(name)

    def connector_status(self, name: str) -> ConnectorStateInfo:
        with self._lock:
            return self.state_info(name, self._config(name), self._tasks(name))

    def task_configs(self, name: str) -> list[TaskInfo]:
        with self._lock:
            self._config(name)
            return self.task_infos({ConnectorTaskId(name, i): c
                                    for i, c in enumerate(self.task_cfgs.get(name, []))})

    def task_status(self, task: ConnectorTaskId) -> Status:
        with self._lock:
            self._config(task.connector)
            if task.task >= len(self.task_cfgs.get(task.connector, [])) or task.task < 0:
                raise NotFoundException(f"Task {task} not found")
            return self.statuses.get_task(task) or Status(task.connector, task.task,
                                                          State.UNASSIGNED, self.worker_id)

    # ---- life cycle ------------------------------------------------------------------------
    def restart_connector(self, name: str) -> None:
        with self._lock:
            self._config(name)
            self.worker.stop_connector(name)
            self.connector_state(name, State.RESTARTING)
            self._start_connector(name)

    def restart_connector_and_tasks(self, request: RestartRequest) -> ConnectorStateInfo:
        with self._lock:
            name = request.connector
            config = self._config(name)
            before = self.state_info(name, config, self._tasks(name))
            restart_conn = not request.only_failed or before.connector.state is State.FAILED
            restart_tasks = [t for t in self._tasks(name) if request.include_tasks and
                             (not request.only_failed or
                              (self.statuses.get_task(t) or before.connector).state is State.FAILED)]
            if restart_conn:
                self.connector_state(name, State.RESTARTING)
            for t in restart_tasks:
                self.task_state(t, State.RESTARTING)
            answer = self.state_info(name, config, self._tasks(name))
            if restart_tasks:
                self.worker.stop_tasks(restart_tasks)
            if restart_conn:
                self.worker.stop_connector(name)
                self.worker.start_connector(name, config, self.targets[name])
            for t in restart_tasks:
                self.worker.start_task(t, config, self.task_cfgs[name][t.task], self.targets[name])
            return answer

    def restart_task(self, task: ConnectorTaskId) -> None:
        with self._lock:
            config = self._config(task.connector)
            cfgs = self.task_cfgs.get(task.connector, [])
            if not 0 <= task.task < len(cfgs):
                raise NotFoundException(f"Task {task} not found")
            self.worker.stop_tasks([task])
            self.worker.start_task(task, config, cfgs[task.task], self.targets[task.connector])

    def pause_connector(self, name: str) -> None:
        with self._lock:
            self._config(name)
            if self.targets[name] is TargetState.STOPPED:
                self.targets[name] = TargetState.PAUSED
                self._restart_from_stopped(name)
                return
            self.targets[name] = TargetState.PAUSED
            self.worker.set_target_state(name, TargetState.PAUSED)

    def resume_connector(self, name: str) -> None:
        with self._lock:
            self._config(name)
            was = self.targets[name]
            self.targets[name] = TargetState.STARTED
            if was is TargetState.STOPPED:
                self._restart_from_stopped(name)
            else:
                self.worker.set_target_state(name, TargetState.STARTED)

    def _restart_from_stopped(self, name: str) -> None:
        self.worker.stop_connector(name)
        self._start_connector(name)

    def stop_connector(self, name: str) -> None:
        with self._lock:
            self._config(name)
            self.targets[name] = TargetState.STOPPED
            self._stop_connector_and_tasks(name)
            self.task_cfgs[name] = []
            self.worker.start_connector(name, self.configs[name], TargetState.STOPPED)

    # ---- offsets --------------------------------------------------------------------------------
    def connector_offsets(self, name: str) -> ConnectorOffsets:
        with self._lock:
            config = dict(self._config(name))
        if self.kind(config) == "sink":
            return self.sink_offsets(name, config)
        return ConnectorOffsets(self.offsets.all_offsets(name))

    def alter_connector_offsets(self, name: str, offsets: list[dict[str, Any]]) -> str:
        return self._modify_offsets(name, offsets)

    def reset_connector_offsets(self, name: str) -> str:
        return self._modify_offsets(name, None)

    def _modify_offsets(self, name: str, offsets: list[dict[str, Any]] | None) -> str:
        with self._lock:
            config = dict(self._config(name))
            self.require_stopped(name, self.targets[name])
        if self.kind(config) == "sink":
            return self.alter_sink_offsets(name, config, offsets)
        return alter_source_offsets(self.offsets, self.plugins, name, config, offsets)


def alter_source_offsets(offsets_access: Any, plugins: Plugins, name: str, config: dict[str, str],
                         offsets: list[dict[str, Any]] | None) -> str:
    """PATCH/DELETE of a source connector's offsets: checked with the connector's alter_offsets
    (KIP-875), then written (None values are tombstones)."""
    entries: list[tuple[dict[str, Any], dict[str, Any] | None]]
    if offsets is None:
        entries = [(e["partition"], None) for e in offsets_access.all_offsets(name)]
    else:
        entries = []
        for e in offsets:
            part = e.get("partition")
            if not isinstance(part, dict):
                raise BadRequestException("Source partitions must be JSON objects")
            off = e.get("offset")
            if off is not None and not isinstance(off, dict):
                raise BadRequestException("Source offsets must be JSON objects or null")
            entries.append((part, off))
    connector = plugins.new(config["connector.class"])
    frozen = {tuple(sorted(p.items())): o for p, o in entries}
    try:
        connector.alter_offsets(config, frozen)
    except Exception as e:
        raise BadRequestException(f"Failed to alter offsets for connector {name}: {e}") from None
    offsets_access.write(name, entries)
    return ("The offsets for this connector have been reset successfully" if offsets is None else
            "The offsets for this connector have been altered successfully")
