"""Metrics of the services `samsa serve` embeds next to the broker (schema registry, Connect) and
their URLs in the console's context. Names follow the JMX exporter's rules for Confluent's
`kafka.schema.registry` and Kafka Connect's `kafka.connect` MBeans (docs/operations.md)."""

from __future__ import annotations

import logging
from typing import Any

from samsa.metrics.snapshot import Family

from .service import AdminService

log = logging.getLogger("samsa.admin")


def attach(admin: AdminService, registry: Any, registry_url: str | None, connect: Any) -> None:
    if admin.ctx is not None:
        admin.ctx.registry_url = registry_url
        admin.ctx.connect_url = connect.url if connect is not None else None
    if registry is not None:
        admin.extra.append(lambda: registry_families(registry))
    if connect is not None:
        admin.extra.append(lambda: connect_families(connect))


def registry_families(server: Any) -> list[Family]:
    state = server.state
    with state.lock:
        n_schemas = len(state.schemas)
        by_type: dict[str, int] = {}
        for s in state.schemas.values():
            by_type[s.schema_type or "AVRO"] = by_type.get(s.schema_type or "AVRO", 0) + 1
        n_subjects = len(state.subjects)
    count = Family("kafka_schema_registry_registered_count", "gauge",
                   "Schemas registered (kafka.schema.registry registered-count).")
    count.add(n_schemas)
    typed = Family("kafka_schema_registry_schemas_created", "gauge",
                   "Schemas registered per schema type (kafka.schema.registry <type>-schemas-created).")
    for t, n in sorted(by_type.items()):
        typed.add(n, schema_type=t.lower())
    subjects = Family("kafka_schema_registry_subject_count", "gauge", "Subjects (Samsa).")
    subjects.add(n_subjects)
    role = Family("kafka_schema_registry_master_slave_role", "gauge",
                  "1 when this registry instance is the writer (leader), 0 when it forwards.")
    role.add(0 if server.config.leader_url else 1)
    return [count, typed, subjects, role]


def connect_families(worker: Any) -> list[Family]:
    """Reads the herder's snapshot (thread-safe: its config store and status backing store)."""
    herder = getattr(worker, "herder", None)
    connectors = Family("kafka_connect_worker_connector_count", "gauge",
                        "Connectors of this Connect cluster (connect-worker-metrics).")
    tasks = Family("kafka_connect_worker_task_count", "gauge",
                   "Tasks of this Connect cluster's connectors (connect-worker-metrics).")
    status = Family("kafka_connect_connector_status", "gauge",
                    "1 per connector task and its state (connector-task-metrics status).")
    n_conn = n_tasks = 0
    if herder is not None:
        for name in herder.connectors():
            try:
                info = herder.connector_status(name)
            except Exception:  # deleted meanwhile
                continue
            n_conn += 1
            for t in info.tasks:
                n_tasks += 1
                state = getattr(t.state, "value", t.state)
                status.add(1, connector=name, task=str(t.task), status=str(state).lower())
    connectors.add(n_conn)
    tasks.add(n_tasks)
    return [connectors, tasks, status]
