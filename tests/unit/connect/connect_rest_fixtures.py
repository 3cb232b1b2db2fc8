"""A small in-memory Herder that keeps the Herder contract (samsa.connect.runtime.herder), real
plugins found through `plugin.path`, and a helper that serves apps on real uvicorn listeners in a
background event loop: what the REST and CLI tests run against before a real worker exists."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from samsa.connect.errors import (
    AlreadyExistsException,
    BadRequestException,
    NotFoundException,
    NotLeaderException,
)
from samsa.connect.plugins import Plugins, PluginType
from samsa.connect.rest import ConnectRestApp, ConnectRestServer
from samsa.connect.runtime.herder import (
    ConnectorInfo,
    ConnectorOffsets,
    ConnectorStateInfo,
    Herder,
    PutResult,
    RestartRequest,
    TaskInfo,
)
from samsa.connect.runtime.status import ConnectorTaskId, State, Status, TargetState

PLUGIN_MODULE = '''
from samsa.connect.api import SinkConnector, SourceConnector, SourceTask, SinkTask, Converter, Transformation
from samsa.connect.config_def import ConfigDef, ConfigType, Importance, at_least

class _T(SourceTask):
    def start(self, props): pass
    def stop(self): pass
    def poll(self): return None

class _K(SinkTask):
    def start(self, props): pass
    def stop(self): pass
    def put(self, records): pass

class RestTestSourceConnector(SourceConnector):
    def version(self): return "1.2.3"
    def start(self, props): pass
    def task_class(self): return _T
    def task_configs(self, max_tasks): return [{} for _ in range(max_tasks)]
    def stop(self): pass
    def config(self):
        return (ConfigDef()
                .define("topic", ConfigType.STRING, importance=Importance.HIGH,
                        documentation="The topic to write to", group="Source")
                .define("batch.size", ConfigType.INT, 100, at_least(1), Importance.LOW,
                        "Records per poll"))

class RestTestSinkConnector(SinkConnector):
    def start(self, props): pass
    def task_class(self): return _K
    def task_configs(self, max_tasks): return [{} for _ in range(max_tasks)]
    def stop(self): pass
    def config(self):
        return ConfigDef().define("file", ConfigType.STRING, "", importance=Importance.HIGH,
                                  documentation="The file")

class RestTestConverter(Converter):
    def configure(self, configs, is_key): pass
    def from_connect_data(self, topic, schema, value, headers=None): return None
    def to_connect_data(self, topic, value, headers=None): return None

class RestTestTransform(Transformation):
    def config(self): return ConfigDef()
    def configure(self, props): pass
    def apply(self, record): return record
'''

SOURCE = "resttestplugins.RestTestSourceConnector"
SINK = "resttestplugins.RestTestSinkConnector"


def make_plugins(directory: Path) -> Plugins:
    (directory / "resttestplugins.py").write_text(PLUGIN_MODULE)
    return Plugins([str(directory)])


@dataclass
class _Connector:
    config: dict[str, str]
    type: str
    target: TargetState = TargetState.STARTED
    tasks: int = 1
    failed_tasks: set[int] = field(default_factory=set)
    offsets: list[dict[str, Any]] = field(default_factory=list)
    topics: list[str] = field(default_factory=list)


class MemoryHerder(Herder):
    """The herder contract in memory. `not_leader` set (to a URL or None) makes every write raise
    NotLeaderException as a follower does."""

    _NOT_SET: Any = object()

    def __init__(self, plugins: Plugins, worker_id: str = "127.0.0.1:8083") -> None:
        self.plugins = plugins
        self.worker_id = worker_id
        self.kafka_cluster_id = "samsa-test-cluster"
        self.lock = threading.Lock()
        self.conns: dict[str, _Connector] = {}
        self.not_leader: Any = self._NOT_SET
        self.restarts: list[Any] = []

    # ---- helpers ---------------------------------------------------------------------------
    def _get(self, name: str) -> _Connector:
        conn = self.conns.get(name)
        if conn is None:
            raise NotFoundException(f"Connector {name} not found")
        return conn

    def _leader_only(self) -> None:
        if self.not_leader is not self._NOT_SET:
            raise NotLeaderException("This worker is not able to communicate with the leader",
                                     self.not_leader)

    def _info(self, name: str, conn: _Connector) -> ConnectorInfo:
        tasks = [] if conn.target is TargetState.STOPPED else \
            [ConnectorTaskId(name, i) for i in range(conn.tasks)]
        return ConnectorInfo(name, dict(conn.config), tasks, conn.type)

    def _state(self, conn: _Connector, task: int | None) -> State:
        if conn.target is TargetState.PAUSED:
            return State.PAUSED
        if conn.target is TargetState.STOPPED:
            return State.STOPPED
        return State.FAILED if task in conn.failed_tasks else State.RUNNING

    # ---- connectors ------------------------------------------------------------------------
    def connectors(self) -> list[str]:
        return sorted(self.conns)

    def connector_info(self, name: str) -> ConnectorInfo:
        return self._info(name, self._get(name))

    def connector_config(self, name: str) -> dict[str, str]:
        return dict(self._get(name).config)

    def _validated_type(self, config: dict[str, str]) -> str:
        answer = self.validate_connector_config(config)
        if answer["error_count"]:
            errors = [f"{c['value']['name']}: {e}" for c in answer["configs"]
                      for e in c["value"]["errors"]]
            raise BadRequestException(
                f"Connector configuration is invalid and contains the following "
                f"{answer['error_count']} error(s):\n" + "\n".join(errors))
        return self.plugins.connector_type(config["connector.class"]).value

    def put_connector_config(self, name: str, config: dict[str, str], allow_replace: bool,
                             initial_state: TargetState | None = None) -> PutResult:
        self._leader_only()
        with self.lock:
            exists = name in self.conns
            if exists and not allow_replace:
                raise AlreadyExistsException(f"Connector {name} already exists")
            ctype = self._validated_type(config)
            conn = _Connector(dict(config), ctype, initial_state or TargetState.STARTED,
                              int(config.get("tasks.max", "1")))
            if exists:
                conn.target = self.conns[name].target
            self.conns[name] = conn
            return PutResult(not exists, self._info(name, conn))

    def patch_connector_config(self, name: str, patch: dict[str, str | None]) -> PutResult:
        self._leader_only()
        with self.lock:
            conn = self._get(name)
            merged = dict(conn.config)
            for k, v in patch.items():
                if v is None:
                    merged.pop(k, None)
                else:
                    merged[k] = v
            self._validated_type(merged)
            conn.config = merged
            conn.tasks = int(merged.get("tasks.max", "1"))
            return PutResult(False, self._info(name, conn))

    def delete_connector(self, name: str) -> None:
        self._leader_only()
        with self.lock:
            self._get(name)
            del self.conns[name]

    def connector_status(self, name: str) -> ConnectorStateInfo:
        conn = self._get(name)
        tasks = [Status(name, i, self._state(conn, i), self.worker_id,
                        "Traceback: boom" if i in conn.failed_tasks else None)
                 for i in range(0 if conn.target is TargetState.STOPPED else conn.tasks)]
        return ConnectorStateInfo(name, Status(name, None, self._state(conn, None), self.worker_id),
                                  tasks, conn.type)

    def task_configs(self, name: str) -> list[TaskInfo]:
        conn = self._get(name)
        return [TaskInfo(ConnectorTaskId(name, i), {"task.index": str(i)}) for i in range(conn.tasks)]

    def task_status(self, task: ConnectorTaskId) -> Status:
        conn = self._get(task.connector)
        if not 0 <= task.task < conn.tasks:
            raise NotFoundException(f"No status found for task {task}")
        return Status(task.connector, task.task, self._state(conn, task.task), self.worker_id)

    # ---- life cycle ------------------------------------------------------------------------
    def restart_connector(self, name: str) -> None:
        self._leader_only()
        self._get(name)
        self.restarts.append(name)

    def restart_connector_and_tasks(self, request: RestartRequest) -> ConnectorStateInfo:
        self._leader_only()
        conn = self._get(request.connector)
        self.restarts.append(request)
        state = self.connector_status(request.connector)
        restarting = Status(request.connector, None, State.RESTARTING, self.worker_id)
        tasks = [Status(t.connector, t.task, State.RESTARTING, t.worker_id)
                 if request.include_tasks and (not request.only_failed or t.task in conn.failed_tasks)
                 else t for t in state.tasks]
        return ConnectorStateInfo(state.name, restarting if not request.only_failed else state.connector,
                                  tasks, state.type)

    def restart_task(self, task: ConnectorTaskId) -> None:
        self._leader_only()
        self.task_status(task)
        self.restarts.append(task)

    def pause_connector(self, name: str) -> None:
        self._get(name).target = TargetState.PAUSED

    def resume_connector(self, name: str) -> None:
        self._get(name).target = TargetState.STARTED

    def stop_connector(self, name: str) -> None:
        self._leader_only()
        self._get(name).target = TargetState.STOPPED

    # ---- offsets and topics ----------------------------------------------------------------
    def connector_offsets(self, name: str) -> ConnectorOffsets:
        return ConnectorOffsets(list(self._get(name).offsets))

    def alter_connector_offsets(self, name: str, offsets: list[dict[str, Any]]) -> str:
        self._leader_only()
        conn = self._get(name)
        if conn.target is not TargetState.STOPPED:
            raise BadRequestException(f"Connectors must be in the STOPPED state before their offsets "
                                      f"can be modified. This can be done for the specified connector "
                                      f"by issuing a 'PUT' request to the '/connectors/{name}/stop' "
                                      f"endpoint")
        kept = {repr(o["partition"]): o for o in conn.offsets}
        for o in offsets:
            if o["offset"] is None:
                kept.pop(repr(o["partition"]), None)
            else:
                kept[repr(o["partition"])] = o
        conn.offsets = list(kept.values())
        return "The offsets for this connector have been altered successfully"

    def reset_connector_offsets(self, name: str) -> str:
        self._leader_only()
        conn = self._get(name)
        if conn.target is not TargetState.STOPPED:
            raise BadRequestException("Connectors must be in the STOPPED state before their offsets "
                                      "can be modified.")
        conn.offsets = []
        return "The offsets for this connector have been reset successfully"

    def connector_active_topics(self, name: str) -> list[str]:
        return list(self._get(name).topics)

    def reset_connector_active_topics(self, name: str) -> None:
        self._get(name).topics = []

    # ---- plugins ---------------------------------------------------------------------------
    def validate_connector_config(self, config: dict[str, str]) -> dict[str, Any]:
        cls_name = config.get("connector.class")
        if not cls_name:
            raise BadRequestException("Connector config {} contains no connector type")
        try:
            desc = self.plugins.find(cls_name, PluginType.SOURCE, PluginType.SINK)
        except NotFoundException as e:
            raise BadRequestException(str(e)) from None
        definition = desc.load()().config()
        values = definition.validate(config)
        configs = [{"definition": definition.keys[n].definition(),
                    "value": values[n].info(definition.keys[n].type)} for n in definition.keys]
        return {"name": desc.name, "error_count": sum(len(v.errors) for v in values.values()),
                "groups": definition.groups(), "configs": configs}


@contextmanager
def serving(*apps: ConnectRestApp) -> Iterator[list[ConnectRestServer]]:
    """Each app on a real listener (127.0.0.1, a free port) in a background event loop."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    servers = [ConnectRestServer(app.herder, "http://127.0.0.1:0", app) for app in apps]
    try:
        for s in servers:
            asyncio.run_coroutine_threadsafe(s.start(), loop).result(15)
        yield servers
    finally:
        for s in servers:
            asyncio.run_coroutine_threadsafe(s.stop(), loop).result(15)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
