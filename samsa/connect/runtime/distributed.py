"""Distributed mode (connect-distributed.sh), as Kafka's DistributedHerder: workers sharing a
`group.id` form a group with protocol type `connect`; the leader assigns connectors and tasks
(incremental cooperative, KIP-415); configs, offsets and statuses live in the three internal
topics, so any worker's restart or a new worker picks everything up.

Who writes what: connector configs, task configs, offsets changes and restart requests are
written by the leader (other workers answer NotLeader and the REST layer forwards); target states
(pause/resume/stop) by any worker. The worker running a connector computes its task configs and
hands them to the leader (`PUT /connectors/{name}/tasks`, forwarded)."""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import httpx

from ..errors import (
    AlreadyExistsException,
    ConflictException,
    ConnectException,
    NotFoundException,
    NotLeaderException,
)
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
from .standalone import alter_source_offsets
from .status import ConnectorTaskId, State, Status, TargetState
from .stores.config_store import ClusterConfigState, ConfigUpdateListener, KafkaConfigBackingStore
from .worker import OffsetAccess, Worker
from .worker_config import WorkerConfig

log = logging.getLogger("samsa.connect.distributed")
TICK_S = 0.1
FORWARD_TIMEOUT_S = 10.0


class _Listener(ConfigUpdateListener):
    """Config topic events, handed to the herder thread (called on the store's reader thread)."""

    def __init__(self, herder: DistributedHerder) -> None:
        self.h = herder

    def on_connector_config_remove(self, connector: str) -> None:
        self.h.enqueue(lambda: self.h._config_removed(connector))

    def on_connector_config_update(self, connector: str) -> None:
        self.h.enqueue(lambda: self.h._config_updated(connector))

    def on_task_config_update(self, tasks: list[ConnectorTaskId]) -> None:
        names = sorted({t.connector for t in tasks})
        self.h.enqueue(lambda: self.h._task_configs_updated(names))

    def on_connector_target_state_change(self, connector: str) -> None:
        self.h.enqueue(lambda: self.h._target_state_changed(connector))

    def on_restart_request(self, request: RestartRequest) -> None:
        self.h.enqueue(lambda: self.h._restart_requested(request))


class DistributedHerder(AbstractHerder):
    def __init__(self, config: WorkerConfig, plugins: Plugins, worker_id: str,
                 offsets: OffsetAccess, kafka_cluster_id: str, url: str) -> None:
        from .stores.status_store import KafkaStatusBackingStore

        props = {k: str(v) for k, v in config.originals.items()}
        client = config.admin_client()
        self.kafka_status = KafkaStatusBackingStore.from_worker_config(props, client, worker_id)
        super().__init__(config, plugins, worker_id, self.kafka_status,
                         kafka_cluster_id)
        self.url = url
        self.offsets = offsets
        self.group_id = str(config.get("group.id"))
        self.config_store = KafkaConfigBackingStore.from_worker_config(props, client)
        self.config_store.set_update_listener(_Listener(self))
        self.worker = Worker(worker_id, config, plugins, offsets, self, group_id=self.group_id)
        self.snapshot = ClusterConfigState()
        self._events: queue.Queue[Callable[[], None]] = queue.Queue()
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="herder", daemon=True)
        self.member: Any = None
        # what the group gave this worker (the sum over cooperative rounds)
        self.owned_connectors: set[str] = set()
        self.owned_tasks: set[ConnectorTaskId] = set()
        self.leader_url: str | None = None
        self._reconfigure: set[str] = set()
        self._rejoin_at: float | None = None
        from ..rest.tls import rest_tls
        tls = rest_tls(f"{config.rest_scheme()}://", config.originals)
        self.http = httpx.Client(timeout=FORWARD_TIMEOUT_S,
                                 verify=tls.client_context() if tls is not None else True)

    # ---- life cycle --------------------------------------------------------------------------
    def start(self) -> None:
        self.config_store.start()
        self.kafka_status.start()
        start_offsets = getattr(self.offsets, "start", None)
        if start_offsets is not None:
            start_offsets()
        self.snapshot = self.config_store.snapshot()
        from .group.member import WorkerGroupMember
        self.member = WorkerGroupMember.from_worker_config(self.config, self.group_id, self)
        self.member.start()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        with self._lock:
            self.worker.stop()
        if self.member is not None:
            self.member.stop()
        for closer in (self.config_store.stop, self.kafka_status.stop,
                       getattr(self.offsets, "stop", lambda: None)):
            try:
                closer()
            except Exception:
                log.exception("stopping a store")
        self.http.close()

    def enqueue(self, action: Callable[[], None]) -> None:
        self._events.put(action)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                action = self._events.get(timeout=TICK_S)
            except queue.Empty:
                action = None
            sends: list[tuple[str, list[dict[str, str]]]] = []
            try:
                with self._lock:
                    if action is not None:
                        action()
                    sends = self._tick()
            except Exception:  # the herder thread must survive anything a connector does
                log.exception("herder action failed")
            # handing task configs to the leader is an HTTP call: made without the lock, so
            # the group member (on_revoked) is never held up behind it
            for name, configs in sends:
                try:
                    self._write_task_configs(name, configs)
                except Exception as e:  # retried: the leader may be moving
                    log.warning("could not hand task configs of %s to the leader: %s", name, e)
                    self._reconfigure.add(name)
                    self._stop.wait(0.25)

    def _tick(self) -> list[tuple[str, list[dict[str, str]]]]:
        sends = []
        if self._reconfigure:
            for name in sorted(self._reconfigure):
                self._reconfigure.discard(name)
                configs = self._reconfigure_connector(name)
                if configs is not None:
                    sends.append((name, configs))
        if self._rejoin_at is not None and time.monotonic() >= self._rejoin_at:
            self._rejoin_at = None
            self.member.request_rejoin()
        return sends

    # ---- group callbacks (called by the member) ------------------------------------------
    def metadata(self) -> tuple[str, int]:
        return self.url, self.config_store.snapshot().offset

    def config_snapshot(self) -> tuple[int, dict[str, int]]:
        """The leader's view for the assignor: connectors and their committed task counts."""
        self.config_store.refresh(int(self.config.get("worker.sync.timeout.ms")) / 1000)
        snap = self.config_store.snapshot()
        return snap.offset, {c: len(snap.tasks(c)) for c in snap.connectors()}

    def on_revoked(self, connectors: Sequence[str], tasks: Sequence[ConnectorTaskId]) -> None:
        """Stop what the leader took away; runs before this worker rejoins (cooperative)."""
        with self._lock:
            self.worker.stop_tasks([t for t in tasks if t in self.owned_tasks])
            for t in tasks:
                self.owned_tasks.discard(t)
            for c in connectors:
                if c in self.owned_connectors:
                    self.worker.stop_connector(c)
                    self.owned_connectors.discard(c)

    def on_assigned(self, assignment: Any, generation: int) -> None:
        self.enqueue(lambda: self._assigned(assignment, generation))

    def _assigned(self, assignment: Any, generation: int) -> None:
        """Reconcile what runs here with the member's current assignment (the sum of the
        cooperative rounds; a later round may have changed it since this was queued)."""
        current = getattr(self.member, "assignment", None) or assignment
        self.generation = generation
        self.leader_url = current.leader_url or None
        if current.failed:
            # CONFIG_MISMATCH: the leader has read further; catch up (the member rejoins)
            self._catch_up()
            return
        if current.config_offset > self.snapshot.offset:
            self._catch_up()
            if self.snapshot.offset < current.config_offset:
                log.warning("could not read the config topic up to offset %d; rejoining later",
                            current.config_offset)
                self._rejoin_at = time.monotonic() + \
                    int(self.config.get("worker.unsync.backoff.ms")) / 1000
                return
        want_c, want_t = set(current.connectors), set(current.tasks)
        gone_t = sorted(self.owned_tasks - want_t)
        if gone_t:
            self.worker.stop_tasks(gone_t)
            self.owned_tasks -= set(gone_t)
        for c in sorted(self.owned_connectors - want_c):
            self.worker.stop_connector(c)
            self.owned_connectors.discard(c)
        for c in sorted(want_c - self.owned_connectors):
            self.owned_connectors.add(c)
            self._start_connector(c)
        for t in sorted(want_t - self.owned_tasks):
            self.owned_tasks.add(t)
            self._start_task(t)
        if self.is_leader:
            self.config_store.claim_write_privileges()
        else:
            self.config_store.relinquish_write_privileges()

    @property
    def is_leader(self) -> bool:
        return self.member is not None and bool(self.member.is_leader)

    def _catch_up(self) -> None:
        try:
            self.config_store.refresh(int(self.config.get("worker.sync.timeout.ms")) / 1000)
        except ConnectException as e:
            log.warning("reading the config topic: %s", e)
        self.snapshot = self.config_store.snapshot()

    # ---- running what we own ---------------------------------------------------------------
    def _target(self, name: str) -> TargetState:
        return self.snapshot.target_state(name) or TargetState.STARTED

    def _start_connector(self, name: str) -> None:
        cfg = self.snapshot.connector_config(name)
        if cfg is None:
            return
        ok = self.worker.start_connector(name, cfg, self._target(name))
        if ok and self._target(name) is not TargetState.STOPPED:
            self._reconfigure.add(name)

    def _start_task(self, tid: ConnectorTaskId) -> None:
        ccfg = self.snapshot.connector_config(tid.connector)
        tcfg = self.snapshot.task_config(tid)
        if ccfg is None or tcfg is None:
            log.warning("task %s assigned but its config is not known (yet)", tid)
            return
        self.worker.start_task(tid, ccfg, tcfg, self._target(tid.connector))

    def _reconfigure_connector(self, name: str) -> list[dict[str, str]] | None:
        """The owner of a connector computes its task configs: the ones to hand to the leader
        when they changed (Kafka's reconfigureConnectorTasksWithRetry), else None."""
        if name not in self.owned_connectors or not self.worker.is_running(name):
            return None
        cfg = self.snapshot.connector_config(name) or {}
        try:
            new = self.worker.connector_task_configs(name, int(cfg.get("tasks.max", "1")))
        except Exception as e:
            self.connector_state(name, State.FAILED, repr(e))
            return None
        old = [self.snapshot.task_config(t) for t in self.snapshot.tasks(name)]
        return None if new == old else new

    def _write_task_configs(self, name: str, configs: list[dict[str, str]]) -> None:
        if self.is_leader:
            self._require_leader("Only the leader can write task configs")
            self.config_store.put_task_configs(name, configs)
            return
        if not self.leader_url:
            raise ConflictException("no leader known yet")
        resp = self.http.post(f"{self.leader_url.rstrip('/')}/connectors/{name}/tasks",
                             params={"forward": "false"}, json=configs)
        if resp.status_code >= 400:
            raise ConnectException(f"leader answered {resp.status_code}: {resp.text[:200]}")

    def put_task_configs(self, name: str, configs: list[dict[str, str]]) -> None:
        """Internal endpoint: task configs a connector's owner computed (leader only)."""
        self._require_leader("Only the leader can write task configs")
        if not self.config_store.contains(name):
            raise NotFoundException(f"Connector {name} not found")
        self.config_store.put_task_configs(name, configs)

    # ---- config topic events ---------------------------------------------------------------
    def _config_updated(self, name: str) -> None:
        self.snapshot = self.config_store.snapshot()
        if name in self.owned_connectors:
            self.worker.stop_connector(name)
            self._start_connector(name)
        if self.is_leader:
            self.member.request_rejoin()

    def _config_removed(self, name: str) -> None:
        """A deleted connector: whoever runs it stops it at once (not waiting for the rebalance)
        and then writes its status tombstones, so nothing reports on it afterwards."""
        self.snapshot = self.config_store.snapshot()
        mine = [t for t in self.owned_tasks if t.connector == name]
        if mine or name in self.owned_connectors:
            self.worker.stop_tasks(mine)
            self.owned_tasks -= set(mine)
            self.worker.stop_connector(name)
            self.owned_connectors.discard(name)
            self.statuses.delete(name)
        self.member.request_rejoin()

    def _task_configs_updated(self, names: list[str]) -> None:
        self.snapshot = self.config_store.snapshot()
        for name in names:
            mine = [t for t in self.owned_tasks if t.connector == name]
            if mine:
                self.worker.stop_tasks(mine)
                for t in mine:
                    if t in self.snapshot.tasks(name):
                        self._start_task(t)
                    else:
                        self.owned_tasks.discard(t)
        self.member.request_rejoin()

    def _target_state_changed(self, name: str) -> None:
        self.snapshot = self.config_store.snapshot()
        target = self._target(name)
        if name in self.owned_connectors:
            running = self.worker.connectors.get(name)
            if target is TargetState.STOPPED:
                self.worker.stop_connector(name)
                # (the leader wrote the empty task set with the STOPPED state: stop_connector)
                self.worker.start_connector(name, self.snapshot.connector_config(name) or {},
                                            TargetState.STOPPED)
            elif running is not None and running.target is TargetState.STOPPED:
                self.worker.stop_connector(name)
                self._start_connector(name)
            else:
                self.worker.set_target_state(name, target)
        if target is not TargetState.STOPPED:
            self.worker.set_target_state(name, target)

    def _restart_requested(self, request: RestartRequest) -> None:
        """KIP-745: every worker restarts what it owns of the request's plan."""
        self.snapshot = self.config_store.snapshot()
        name = request.connector
        if not self.snapshot.contains(name):
            return
        conn_status = self.statuses.get(name)
        if name in self.owned_connectors and (not request.only_failed or
                                              (conn_status and conn_status.state is State.FAILED)):
            self.worker.stop_connector(name)
            self._start_connector(name)
        if request.include_tasks:
            todo = []
            for t in sorted(self.owned_tasks):
                if t.connector != name:
                    continue
                st = self.statuses.get_task(t)
                if not request.only_failed or (st is not None and st.state is State.FAILED):
                    todo.append(t)
            self.worker.stop_tasks(todo)
            for t in todo:
                self._start_task(t)

    def health_check(self) -> None:
        """KIP-1017's /health: healthy once this worker has joined the group and its herder
        thread answers."""
        if self.member is None or getattr(self.member, "assignment", None) is None:
            raise ConflictException("Worker is still joining the group")
        done = threading.Event()
        self.enqueue(done.set)
        if not done.wait(10):
            raise ConflictException("The herder thread is busy")

    # ---- REST operations -----------------------------------------------------------------------
    def _require_leader(self, what: str) -> None:
        """NotLeader unless this worker leads; the leader then holds the config topic's fencable
        writer (exactly-once source support; claiming twice is a no-op)."""
        if not self.is_leader:
            raise NotLeaderException(f"{what}; this worker is not the leader",
                                     self.leader_url)
        self.config_store.claim_write_privileges()

    def _config(self, name: str) -> dict[str, str]:
        cfg = self.config_store.snapshot().connector_config(name)
        if cfg is None:
            raise NotFoundException(f"Connector {name} not found")
        return cfg

    def connectors(self) -> list[str]:
        return self.config_store.snapshot().connectors()

    def connector_info(self, name: str) -> ConnectorInfo:
        snap = self.config_store.snapshot()
        cfg = self._config(name)
        return self.info(name, cfg, snap.tasks(name))

    def connector_config(self, name: str) -> dict[str, str]:
        return dict(self._config(name))

    def put_connector_config(self, name: str, config: dict[str, str], allow_replace: bool,
                             initial_state: TargetState | None = None) -> PutResult:
        self._require_leader("Request to create or update a connector")
        config = self.check_config(name, config)
        with self._lock:
            exists = self.config_store.contains(name)
            if exists and not allow_replace:
                raise AlreadyExistsException(f"Connector {name} already exists")
            self.config_store.put_connector_config(
                name, config, None if exists else (initial_state or TargetState.STARTED))
            snap = self.config_store.snapshot()
            return PutResult(not exists, self.info(name, config, snap.tasks(name)))

    def delete_connector(self, name: str) -> None:
        self._require_leader("Request to delete a connector")
        self._config(name)
        self.config_store.remove_connector_config(name)

    def connector_status(self, name: str) -> ConnectorStateInfo:
        snap = self.config_store.snapshot()
        return self.state_info(name, self._config(name), snap.tasks(name))

    def task_configs(self, name: str) -> list[TaskInfo]:
        snap = self.config_store.snapshot()
        self._config(name)
        return self.task_infos(snap.tasks_config(name))

    def task_status(self, task: ConnectorTaskId) -> Status:
        snap = self.config_store.snapshot()
        self._config(task.connector)
        if task not in snap.tasks(task.connector):
            raise NotFoundException(f"Task {task} not found")
        return self.statuses.get_task(task) or Status(task.connector, task.task, State.UNASSIGNED,
                                                      self.worker_id)

    def restart_connector(self, name: str) -> None:
        self._config(name)
        self._require_leader("Cannot restart connector")
        self.config_store.put_restart_request(RestartRequest(name, False, False))

    def restart_connector_and_tasks(self, request: RestartRequest) -> ConnectorStateInfo:
        self._config(request.connector)
        self._require_leader("Cannot process restart request")
        before = self.connector_status(request.connector)
        self.config_store.put_restart_request(request)
        marked = []
        conn = before.connector
        if not request.only_failed or conn.state is State.FAILED:
            conn = Status(conn.connector, None, State.RESTARTING, conn.worker_id, None,
                          conn.generation)
        for t in before.tasks:
            if request.include_tasks and (not request.only_failed or t.state is State.FAILED):
                t = Status(t.connector, t.task, State.RESTARTING, t.worker_id, None, t.generation)
            marked.append(t)
        return ConnectorStateInfo(before.name, conn, marked, before.type)

    def restart_task(self, task: ConnectorTaskId) -> None:
        snap = self.config_store.snapshot()
        self._config(task.connector)
        if task not in snap.tasks(task.connector):
            raise NotFoundException(f"Task {task} not found")
        with self._lock:
            if task in self.owned_tasks:
                self.worker.stop_tasks([task])
                self._start_task(task)
                return
        # the owner restarts it: its worker id is its REST address
        st = self.statuses.get_task(task)
        if st is None or st.worker_id == self.worker_id:
            raise ConflictException(f"Task {task} is not running on any worker right now")
        resp = self.http.post(f"http://{st.worker_id}/connectors/{task.connector}/tasks/"
                              f"{task.task}/restart", params={"forward": "false"})
        if resp.status_code >= 400:
            raise ConflictException(f"the worker running {task} answered {resp.status_code}")

    def pause_connector(self, name: str) -> None:
        self._config(name)
        self.config_store.put_target_state(name, TargetState.PAUSED)

    def resume_connector(self, name: str) -> None:
        self._config(name)
        self.config_store.put_target_state(name, TargetState.STARTED)

    def stop_connector(self, name: str) -> None:
        self._config(name)
        self._require_leader("Cannot stop the connector")
        self.config_store.put_target_state(name, TargetState.STOPPED)
        self.config_store.put_task_configs(name, [])

    # ---- offsets -----------------------------------------------------------------------------
    def connector_offsets(self, name: str) -> ConnectorOffsets:
        config = self.connector_config(name)
        if self.kind(config) == "sink":
            return self.sink_offsets(name, config)
        refresh = getattr(self.offsets, "refresh", None)
        if refresh is not None:
            refresh()
        return ConnectorOffsets(self.offsets.all_offsets(name))

    def alter_connector_offsets(self, name: str, offsets: list[dict[str, Any]]) -> str:
        return self._modify_offsets(name, offsets)

    def reset_connector_offsets(self, name: str) -> str:
        return self._modify_offsets(name, None)

    def _modify_offsets(self, name: str, offsets: list[dict[str, Any]] | None) -> str:
        config = self.connector_config(name)
        self._require_leader("Cannot modify the offsets of a connector")
        snap = self.config_store.snapshot()
        self.require_stopped(name, snap.target_state(name) or TargetState.STARTED)
        if snap.tasks(name):
            raise ConflictException(f"Connector {name} still has tasks; wait until it is "
                                    f"fully stopped")
        if self.kind(config) == "sink":
            return self.alter_sink_offsets(name, config, offsets)
        return alter_source_offsets(self.offsets, self.plugins, name, config, offsets)

    # ---- WorkerListener ------------------------------------------------------------------------
    def request_task_reconfiguration(self, connector: str) -> None:
        self.enqueue(lambda: self._reconfigure.add(connector))
