"""The worker: runs the connectors and tasks a herder gives it, each task in its own thread,
with the clients, converters, transforms and error handling its configuration asks for. It keeps
no cluster state of its own: herders decide what runs where and keep configs and statuses."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Protocol

from samsa.client_security import librdkafka_config

from ..api import Connector, SinkConnector, SinkTask, SourceConnector, SourceTask
from ..errors import ConfigException, ConnectException
from ..plugins import Plugins, PluginType
from .connector_config import sink_def, source_def
from .sink_task import SinkTaskSettings, WorkerSinkTask
from .source_task import SourceTaskSettings, TransactionalOffsets, WorkerSourceTask
from .status import ConnectorTaskId, State, TargetState
from .tolerance import DeadLetterQueueReporter, ErrorReporter, LogReporter, RetryWithToleranceOperator
from .worker_config import WorkerConfig
from .worker_task import WorkerTask, build_converters, trace_of

log = logging.getLogger("samsa.connect.worker")
TASK_CLASS = "task.class"
PRINCIPAL_ALLOWED = {"sasl.jaas.config", "sasl.mechanism", "security.protocol"}


class WorkerListener(Protocol):
    """Where the worker reports states (the herder, which writes the status store)."""

    def connector_state(self, connector: str, state: State, trace: str | None = None) -> None: ...

    def task_state(self, task: ConnectorTaskId, state: State, trace: str | None = None) -> None: ...

    def request_task_reconfiguration(self, connector: str) -> None: ...

    def topic_used(self, connector: str, task: int, topic: str) -> None: ...


class OffsetAccess(Protocol):
    """What the worker needs of the offsets store: a reader and a writer per connector, and
    (exactly-once) how to write offsets inside a task's transaction."""

    def reader(self, connector: str) -> Any: ...

    def writer(self, connector: str) -> Any: ...

    def transactional(self) -> TransactionalOffsets | None: ...

    def all_offsets(self, connector: str) -> list[dict[str, Any]]: ...

    def write(self, connector: str,
              entries: list[tuple[dict[str, Any], dict[str, Any] | None]]) -> None: ...


class _ConnectorContext:
    def __init__(self, worker: Worker, name: str) -> None:
        self.worker = worker
        self.name = name

    def request_task_reconfiguration(self) -> None:
        self.worker.listener.request_task_reconfiguration(self.name)

    def raise_error(self, error: Exception) -> None:
        self.worker.listener.connector_state(self.name, State.FAILED, trace_of(error))


class WorkerConnector:
    def __init__(self, name: str, connector: Connector, props: dict[str, str],
                 target: TargetState) -> None:
        self.name = name
        self.connector = connector
        self.props = props
        self.target = target
        self.started = False
        self.failed: BaseException | None = None

    @property
    def is_sink(self) -> bool:
        return isinstance(self.connector, SinkConnector)


def policy_errors(policy: str, props: dict[str, str]) -> list[tuple[str, str]]:
    """connector.client.config.override.policy: (key, message) for each override it forbids."""
    out = []
    for k in props:
        if not k.startswith(("producer.override.", "consumer.override.", "admin.override.")):
            continue
        client_key = k.split(".override.", 1)[1]
        if policy == "None" or (policy == "Principal" and client_key not in PRINCIPAL_ALLOWED):
            out.append((k, f"The '{policy}' policy does not allow '{client_key}' to be "
                           f"overridden in the connector configuration."))
    return out


class Worker:
    def __init__(self, worker_id: str, config: WorkerConfig, plugins: Plugins,
                 offsets: OffsetAccess, listener: WorkerListener, group_id: str | None = None) -> None:
        self.worker_id = worker_id
        self.config = config
        self.plugins = plugins
        self.offsets = offsets
        self.listener = listener
        self.group_id = group_id
        self.connectors: dict[str, WorkerConnector] = {}
        self.tasks: dict[ConnectorTaskId, WorkerTask] = {}
        self._lock = threading.RLock()

    # ---- connectors ------------------------------------------------------------------------
    def start_connector(self, name: str, props: dict[str, str], target: TargetState) -> bool:
        """Instantiate and (unless STOPPED/PAUSED... paused connectors still run, as Kafka's)
        start the connector; False and a FAILED status when it cannot start."""
        with self._lock:
            if name in self.connectors:
                raise ConnectException(f"Connector {name} already running on this worker")
            try:
                connector = self.plugins.new(props.get("connector.class", ""), PluginType.SOURCE,
                                             PluginType.SINK)
            except Exception as e:
                self.listener.connector_state(name, State.FAILED, trace_of(e))
                return False
            wc = WorkerConnector(name, connector, dict(props), target)
            self.connectors[name] = wc
            connector.initialize(_ConnectorContext(self, name))
            if target is TargetState.STOPPED:
                self.listener.connector_state(name, State.STOPPED)
                return True
            try:
                connector.start(dict(props))
                wc.started = True
            except Exception as e:
                wc.failed = e
                log.error("connector %s failed to start: %s", name, e, exc_info=e)
                self.listener.connector_state(name, State.FAILED, trace_of(e))
                return False
            self.listener.connector_state(name, State.PAUSED if target is TargetState.PAUSED
                                          else State.RUNNING)
            return True

    def is_running(self, name: str) -> bool:
        wc = self.connectors.get(name)
        return wc is not None and wc.started and wc.failed is None

    def connector_task_configs(self, name: str, max_tasks: int) -> list[dict[str, str]]:
        wc = self.connectors.get(name)
        if wc is None or not wc.started:
            raise ConnectException(f"Connector {name} not running on this worker")
        configs = wc.connector.task_configs(max_tasks)
        enforce = wc.props.get("tasks.max.enforce", "true").lower() != "false"
        if enforce and len(configs) > max_tasks:
            raise ConnectException(f"Connector {name} generated {len(configs)} task configs, "
                                   f"more than tasks.max ({max_tasks})")
        task_cls = wc.connector.task_class()
        name_of = f"{task_cls.__module__}.{task_cls.__qualname__}"
        return [{**{k: str(v) for k, v in c.items()}, TASK_CLASS: name_of} for c in configs]

    def stop_connector(self, name: str) -> None:
        with self._lock:
            wc = self.connectors.pop(name, None)
        if wc is None:
            return
        if wc.started:
            try:
                wc.connector.stop()
            except Exception:
                log.exception("connector %s: stop() failed", name)
        if wc.failed is None:
            self.listener.connector_state(name, State.UNASSIGNED)

    def set_target_state(self, name: str, target: TargetState) -> None:
        """Pause/resume the connector's tasks here; STOPPED is handled by the herder (it stops
        the tasks and writes an empty task set)."""
        wc = self.connectors.get(name)
        if wc is not None and wc.target != target:
            wc.target = target
            if wc.started and wc.failed is None:
                self.listener.connector_state(name, State.PAUSED if target is TargetState.PAUSED
                                              else State.STOPPED if target is TargetState.STOPPED
                                              else State.RUNNING)
        for tid, task in list(self.tasks.items()):
            if tid.connector == name and target is not TargetState.STOPPED:
                task.transition_to(target)

    # ---- tasks -----------------------------------------------------------------------------------
    def start_task(self, tid: ConnectorTaskId, connector_props: dict[str, str],
                   task_props: dict[str, str], target: TargetState) -> bool:
        with self._lock:
            if tid in self.tasks and self.tasks[tid].is_alive():
                raise ConnectException(f"Task {tid} already running on this worker")
            try:
                runner = self._build_task(tid, connector_props, task_props, target)
            except Exception as e:
                log.error("task %s could not be created: %s", tid, e, exc_info=e)
                self.listener.task_state(tid, State.FAILED, trace_of(e))
                return False
            self.tasks[tid] = runner
            runner.start()
            return True

    def _build_task(self, tid: ConnectorTaskId, cprops: dict[str, str], tprops: dict[str, str],
                    target: TargetState) -> WorkerTask:
        conn_cls = self.plugins.load(cprops.get("connector.class", ""), PluginType.SOURCE,
                                     PluginType.SINK)
        task_cls_name = tprops.get(TASK_CLASS)
        task_cls: type
        if task_cls_name:
            module, _, attr = task_cls_name.rpartition(".")
            import importlib
            task_cls = getattr(importlib.import_module(module), attr)
        else:
            task_cls = conn_cls().task_class()
        task = task_cls()
        wprops = self.config.originals
        converters = build_converters(self.plugins, cprops, wprops,
                                      {"key.converter": str(self.config.get("key.converter")),
                                       "value.converter": str(self.config.get("value.converter")),
                                       "header.converter": str(self.config.get("header.converter"))})
        chain = self._chain(cprops)
        policy = str(self.config.get("connector.client.config.override.policy"))
        bad = policy_errors(policy, cprops)
        if bad:
            raise ConfigException(bad[0][0], cprops[bad[0][0]], bad[0][1])
        stopping = threading.Event()
        is_sink = issubclass(conn_cls, SinkConnector)
        runtime_def = sink_def() if is_sink else source_def()
        cfg = runtime_def.parse({k: v for k, v in cprops.items() if k in runtime_def.keys})
        reporters: list[ErrorReporter] = []
        if cfg.get("errors.log.enable"):
            reporters.append(LogReporter(str(tid), bool(cfg.get("errors.log.include.messages"))))
        if is_sink:
            dlq = str(cfg.get("errors.deadletterqueue.topic.name") or "")
            if dlq:
                self._ensure_topic(dlq, int(cfg["errors.deadletterqueue.topic.replication.factor"]))
                from confluent_kafka import Producer
                reporters.append(DeadLetterQueueReporter(
                    Producer(self.producer_config(tid, cprops)), dlq, tid.connector, tid.task,
                    bool(cfg.get("errors.deadletterqueue.context.headers.enable"))))
        operator = RetryWithToleranceOperator.from_config(cfg, reporters, stopping)
        flush_s = int(self.config.get("offset.flush.interval.ms")) / 1000
        if is_sink:
            assert issubclass(task_cls, SinkTask)
            topics = [t for t in cfg.get("topics") or [] if t]
            settings = SinkTaskSettings(tid.connector, self.consumer_config(tid, cprops), topics,
                                        str(cfg.get("topics.regex") or ""), flush_s)
            reporter_enabled = bool(reporters) or cfg.get("errors.tolerance") == "all"
            return WorkerSinkTask(tid, task, tprops, target, self.listener, converters, chain,
                                  operator, settings, reporter_enabled)
        assert issubclass(task_cls, SourceTask)
        eos = self.config.distributed and self.config.exactly_once_source
        boundary = str(cfg.get("transaction.boundary") or "poll").lower()
        interval = cfg.get("transaction.boundary.interval.ms")
        src = SourceTaskSettings(
            tid.connector, self.producer_config(tid, cprops, transactional=eos), flush_s,
            int(self.config.get("offset.flush.timeout.ms")) / 1000, exactly_once=eos,
            transaction_boundary=boundary,
            transaction_interval_s=(int(interval) if interval is not None else flush_s * 1000) / 1000,
            transactional_offsets=self.offsets.transactional() if eos else None)
        if eos and self.group_id:
            src.producer_config["transactional.id"] = f"{self.group_id}-{tid.connector}-{tid.task}"
        return WorkerSourceTask(tid, task, tprops, target, self.listener, converters, chain,
                                operator, self.offsets.writer(tid.connector),
                                self.offsets.reader(tid.connector), src)

    def _chain(self, cprops: dict[str, str]) -> Any:
        if not cprops.get("transforms", "").strip():
            return None
        from ..transforms.chain import TransformationChain
        return TransformationChain.from_config(cprops, self.plugins)

    # ---- client configs ----------------------------------------------------------------------
    def _overrides(self, cprops: dict[str, str], kind: str) -> dict[str, str]:
        prefix = f"{kind}.override."
        return {k[len(prefix):]: v for k, v in cprops.items() if k.startswith(prefix)}

    def producer_config(self, tid: ConnectorTaskId, cprops: dict[str, str],
                        transactional: bool = False) -> dict[str, Any]:
        cfg: dict[str, Any] = {"bootstrap.servers": self.config.bootstrap,
                               "client.id": f"connector-producer-{tid}", "acks": "all",
                               "enable.idempotence": True, "partitioner": "murmur2_random",
                               "linger.ms": 5, "log_level": 3}
        cfg.update(self.config.client_props("producer."))
        cfg.update(self._overrides(cprops, "producer"))
        if transactional:
            cfg["enable.idempotence"] = True
        return librdkafka_config(cfg)

    def consumer_config(self, tid: ConnectorTaskId, cprops: dict[str, str]) -> dict[str, Any]:
        cfg: dict[str, Any] = {"bootstrap.servers": self.config.bootstrap,
                               "group.id": f"connect-{tid.connector}",
                               "client.id": f"connector-consumer-{tid}",
                               "enable.auto.commit": False, "auto.offset.reset": "earliest",
                               "enable.partition.eof": False, "log_level": 3,
                               "partition.assignment.strategy": "cooperative-sticky"}
        cfg.update(self.config.client_props("consumer."))
        cfg.update(self._overrides(cprops, "consumer"))
        return librdkafka_config(cfg)

    def _ensure_topic(self, topic: str, replication: int) -> None:
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient(self.config.admin_client())
        try:
            brokers = max(1, len(admin.list_topics(timeout=10).brokers))
            rf = brokers if replication < 0 else max(1, min(replication, brokers))
            admin.create_topics([NewTopic(topic, 1, rf)])[topic].result(15)
        except KafkaException as e:
            if "TOPIC_ALREADY_EXISTS" not in str(e) and "already exists" not in str(e):
                raise

    def stop_tasks(self, tids: list[ConnectorTaskId], timeout_s: float | None = None) -> None:
        """Signal all, then wait for all (Kafka's stopAndAwaitTasks)."""
        timeout = timeout_s if timeout_s is not None else \
            int(self.config.get("task.shutdown.graceful.timeout.ms")) / 1000
        with self._lock:
            runners = [(t, self.tasks.pop(t)) for t in tids if t in self.tasks]
        for _, r in runners:
            r.stop()
        deadline = time.monotonic() + timeout
        for tid, r in runners:
            r.join(max(0.0, deadline - time.monotonic()))
            if r.is_alive():
                r.cancelled = True
                log.error("task %s did not stop within task.shutdown.graceful.timeout.ms; "
                          "abandoned", tid)

    def task_ids(self, connector: str | None = None) -> list[ConnectorTaskId]:
        return sorted(t for t in self.tasks if connector is None or t.connector == connector)

    def stop(self) -> None:
        self.stop_tasks(self.task_ids())
        for name in list(self.connectors):
            self.stop_connector(name)


def connector_kind(plugins: Plugins, props: dict[str, str]) -> str:
    try:
        cls = plugins.load(props.get("connector.class", ""), PluginType.SOURCE, PluginType.SINK)
    except Exception:
        return "unknown"
    return "sink" if issubclass(cls, SinkConnector) else \
        "source" if issubclass(cls, SourceConnector) else "unknown"

