"""What standalone and distributed herders share (Kafka's AbstractHerder): statuses as the worker
reports them, validation, the status and info answers, and offsets of sink connectors (their
consumer group) — the parts that do not depend on where configs live."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException
from confluent_kafka import TopicPartition as KafkaTP
from confluent_kafka.admin import AdminClient

from ..api import TopicPartition
from ..errors import BadRequestException, ConnectException, NotFoundException
from ..plugins import Plugins
from .herder import (
    ConnectorInfo,
    ConnectorOffsets,
    ConnectorStateInfo,
    Herder,
    PutResult,
    TaskInfo,
)
from .status import ConnectorTaskId, State, Status, TargetState
from .stores.status_store import StatusBackingStore
from .validation import raise_if_invalid, validate_connector_config
from .worker import Worker, connector_kind
from .worker_config import WorkerConfig

log = logging.getLogger("samsa.connect.herder")
AUTO_RESTART_FIRST_S = 1.0
AUTO_RESTART_RESET_S = 60.0


class AbstractHerder(Herder):
    def __init__(self, config: WorkerConfig, plugins: Plugins, worker_id: str,
                 statuses: StatusBackingStore, kafka_cluster_id: str) -> None:
        self.config = config
        self.plugins = plugins
        self.worker_id = worker_id
        self.statuses = statuses
        self.kafka_cluster_id = kafka_cluster_id
        self.generation = 0
        self._failures: dict[ConnectorTaskId, int] = {}
        self._running_since: dict[ConnectorTaskId, float] = {}
        self.worker: Worker
        self._admin: AdminClient | None = None

    # ---- WorkerListener ---------------------------------------------------------------------
    def _put_status(self, status: Status) -> None:
        """Failures and shutdowns are written with put_safe (Kafka's rule): a worker that lost
        its work to a newer generation — a zombie — does not overwrite the new owner's report."""
        if status.state in (State.FAILED, State.UNASSIGNED):
            self.statuses.put_safe(status)
        else:
            self.statuses.put(status)

    def connector_state(self, connector: str, state: State, trace: str | None = None) -> None:
        self._put_status(Status(connector, None, state, self.worker_id, trace, self.generation))

    def task_state(self, task: ConnectorTaskId, state: State, trace: str | None = None) -> None:
        self._put_status(Status(task.connector, task.task, state, self.worker_id, trace,
                                self.generation))
        if state is State.FAILED:
            self._maybe_auto_restart(task)
        elif state is State.RUNNING:
            self._running_since[task] = time.monotonic()

    # ---- automatic restarts of failed tasks (a Samsa extension, off by default) ----------
    def _restart_policy(self, connector: str) -> tuple[bool, float]:
        """(enabled, max back-off s): the connector's errors.restart.* or the worker's."""
        try:
            cfg = self.connector_config(connector)
        except ConnectException:
            return False, 0.0
        enabled = cfg.get("errors.restart.enable",
                          str(self.config.get("errors.restart.enable")).lower()).lower() == "true"
        max_ms = int(cfg.get("errors.restart.max.backoff.ms",
                             self.config.get("errors.restart.max.backoff.ms")))
        return enabled, max(0.1, max_ms / 1000)

    def _maybe_auto_restart(self, task: ConnectorTaskId) -> None:
        enabled, max_s = self._restart_policy(task.connector)
        if not enabled:
            return
        # back-off doubles from 1 s per failure in a row, reset by a run of over a minute
        since = self._running_since.get(task)
        if since is not None and time.monotonic() - since > AUTO_RESTART_RESET_S:
            self._failures[task] = 0
        n = self._failures.get(task, 0)
        self._failures[task] = n + 1
        delay = min(max_s, AUTO_RESTART_FIRST_S * (2 ** n))
        log.info("task %s failed; restarting it in %.1fs (errors.restart.enable)", task, delay)
        timer = threading.Timer(delay, self._auto_restart, args=(task,))
        timer.daemon = True
        timer.start()

    def _auto_restart(self, task: ConnectorTaskId) -> None:
        st = self.statuses.get_task(task)
        if st is None or st.state is not State.FAILED or st.worker_id != self.worker_id:
            return  # restarted by hand, moved or deleted meanwhile
        try:
            self.restart_task(task)
        except ConnectException as e:
            log.warning("automatic restart of %s: %s", task, e)

    def topic_used(self, connector: str, task: int, topic: str) -> None:
        if self.config.get("topic.tracking.enable"):
            self.statuses.put_topic(connector, task, topic)

    # ---- shared answers ---------------------------------------------------------------------
    def validate_connector_config(self, config: dict[str, str]) -> dict[str, Any]:
        return validate_connector_config(
            self.plugins, config,
            override_policy=str(self.config.get("connector.client.config.override.policy")),
            exactly_once_source=self.config.distributed and self.config.exactly_once_source)

    def check_config(self, name: str, config: dict[str, str]) -> dict[str, str]:
        """Validated config (with its name) or BadRequest, as Kafka's create/update."""
        if not name or any(ord(c) < 32 for c in name):
            raise BadRequestException("Connector name is empty or contains control characters")
        config = {str(k): str(v) for k, v in config.items()}
        if config.get("name", name) != name:
            raise BadRequestException("Connector name configuration (" + config["name"] +
                                      ") doesn't match connector name in the URL (" + name + ")")
        config["name"] = name
        raise_if_invalid(self.validate_connector_config(config))
        return config

    def patch_connector_config(self, name: str, patch: dict[str, str | None]) -> PutResult:
        """KIP-477: the current config with the patch merged in (None removes a key)."""
        merged = dict(self.connector_config(name))
        for k, v in patch.items():
            if v is None:
                merged.pop(k, None)
            else:
                merged[k] = str(v)
        return self.put_connector_config(name, merged, True)

    def kind(self, config: dict[str, str]) -> str:
        return connector_kind(self.plugins, config)

    def state_info(self, name: str, config: dict[str, str], tasks: list[ConnectorTaskId]) -> \
            ConnectorStateInfo:
        conn = self.statuses.get(name) or Status(name, None, State.UNASSIGNED, self.worker_id)
        task_statuses = []
        for tid in tasks:
            st = self.statuses.get_task(tid) or Status(name, tid.task, State.UNASSIGNED,
                                                       self.worker_id)
            task_statuses.append(st)
        return ConnectorStateInfo(name, conn, task_statuses, self.kind(config))

    def info(self, name: str, config: dict[str, str], tasks: list[ConnectorTaskId]) -> ConnectorInfo:
        return ConnectorInfo(name, dict(config), list(tasks), self.kind(config))

    def task_infos(self, task_configs: dict[ConnectorTaskId, dict[str, str]]) -> list[TaskInfo]:
        return [TaskInfo(t, dict(c)) for t, c in sorted(task_configs.items())]

    def connector_active_topics(self, name: str) -> list[str]:
        self.connector_config(name)
        return self.statuses.topics(name)

    def reset_connector_active_topics(self, name: str) -> None:
        self.connector_config(name)
        self.statuses.delete_topics(name)

    def task_status(self, task: ConnectorTaskId) -> Status:
        config = self.connector_config(task.connector)
        del config
        st = self.statuses.get_task(task)
        if st is None:
            raise NotFoundException(f"No status found for task {task}")
        return st

    # ---- sink offsets: the connector's consumer group ---------------------------------------
    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient(self.config.admin_client())
        return self._admin

    def sink_group(self, name: str, config: dict[str, str]) -> str:
        return config.get("consumer.override.group.id") or f"connect-{name}"

    def sink_offsets(self, name: str, config: dict[str, str]) -> ConnectorOffsets:
        group = self.sink_group(name, config)
        fut = self.admin().list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
        try:
            res = fut[group].result(timeout=30)
        except KafkaException as e:
            raise ConnectException(f"Failed to retrieve consumer group offsets for sink "
                                   f"connector {name}: {e}") from None
        out = []
        for tp in sorted(res.topic_partitions or [], key=lambda t: (t.topic, t.partition)):
            if tp.offset is None or tp.offset < 0:
                continue
            out.append({"partition": {"kafka_topic": tp.topic, "kafka_partition": tp.partition},
                        "offset": {"kafka_offset": tp.offset}})
        return ConnectorOffsets(out)

    def alter_sink_offsets(self, name: str, config: dict[str, str],
                           offsets: list[dict[str, Any]] | None) -> str:
        """PATCH (offsets) or DELETE (None) of a sink connector's committed offsets. As in Kafka
        (KIP-875), the connector's alter_offsets sees the change first: a sink that keeps its
        offsets in the target system updates them there, or raises to refuse the change."""
        group = self.sink_group(name, config)
        if offsets is None:
            current = self.sink_offsets(name, config).offsets
            self._connector_alters(name, config, {
                TopicPartition(o["partition"]["kafka_topic"], o["partition"]["kafka_partition"]): None
                for o in current})
            fut = self.admin().delete_consumer_groups([group], request_timeout=30)
            try:
                fut[group].result(timeout=30)
            except KafkaException as e:
                if "GROUP_ID_NOT_FOUND" not in str(e):
                    raise ConnectException(f"Failed to reset offsets of sink connector {name}: "
                                           f"{e}") from None
            return "The offsets for this connector have been reset successfully"
        tps = []
        deletes = []
        for entry in offsets:
            part = entry.get("partition") or {}
            topic, partition = part.get("kafka_topic"), part.get("kafka_partition")
            if not isinstance(topic, str) or not isinstance(partition, int) or \
                    isinstance(partition, bool):
                raise BadRequestException("Partitions for sink connectors must contain the keys "
                                          "'kafka_topic' (a string) and 'kafka_partition' (an "
                                          "integer)")
            off = entry.get("offset")
            if off is None:
                deletes.append(KafkaTP(topic, partition))
                continue
            value = off.get("kafka_offset") if isinstance(off, dict) else None
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise BadRequestException("Offsets for sink connectors must contain the key "
                                          "'kafka_offset' with a non-negative integer")
            tps.append(KafkaTP(topic, partition, value))
        self._connector_alters(name, config, {
            **{TopicPartition(tp.topic, tp.partition): tp.offset for tp in tps},
            **{TopicPartition(tp.topic, tp.partition): None for tp in deletes}})
        if tps:
            fut = self.admin().alter_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group, tps)])
            try:
                fut[group].result(timeout=30)
            except KafkaException as e:
                raise ConnectException(f"Failed to alter consumer group offsets for sink "
                                       f"connector {name}: {e}") from None
        if deletes:
            from .offset_delete import delete_group_offsets
            delete_group_offsets(self.config.bootstrap, group, deletes)
        return "The offsets for this connector have been altered successfully"

    def _connector_alters(self, name: str, config: dict[str, str],
                          offsets: dict[TopicPartition, int | None]) -> None:
        connector = self.plugins.new(config["connector.class"])
        try:
            connector.alter_offsets({**config, "name": name}, offsets)
        except Exception as e:
            raise BadRequestException(f"Failed to alter offsets for connector {name}: {e}") from None

    def require_stopped(self, name: str, target: TargetState) -> None:
        if target is not TargetState.STOPPED:
            raise BadRequestException(f"Connectors must be in the STOPPED state before their "
                                      f"offsets can be modified. This can be done for the "
                                      f"specified connector by issuing a 'PUT' request to the "
                                      f"'/connectors/{name}/stop' endpoint")


def wait_for(predicate: Any, timeout_s: float, interval_s: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval_s)
    return bool(predicate())
