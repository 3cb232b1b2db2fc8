"""org.apache.iceberg.connect.IcebergSinkConnector (and Tabular's io.tabular.iceberg.connect
name): `tasks.max` tasks share the topics' partitions through the consumer group; each commits
its own snapshots (no control topic or coordinator: see docs/compatibility.md)."""

from __future__ import annotations

from ...api import SinkConnector, Task, TopicPartition
from ...config_def import ConfigDef, ConfigValue
from ...errors import ConfigException, ConnectException
from .config import CONFIG_DEF, TABLES, parse
from .task import TASK_ID, IcebergSinkTask


class IcebergSinkConnector(SinkConnector):
    def __init__(self) -> None:
        self._props: dict[str, str] = {}

    def start(self, props: dict[str, str]) -> None:
        parse(props)  # fail the connector on a bad config, not each task
        self._props = dict(props)

    def task_class(self) -> type[Task]:
        return IcebergSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [{**self._props, TASK_ID: str(i)} for i in range(max_tasks)]

    def stop(self) -> None:
        pass

    def config(self) -> ConfigDef:
        return CONFIG_DEF

    def validate(self, props: dict[str, str]) -> dict[str, ConfigValue]:
        values = super().validate(props)
        if not any(v.errors for v in values.values()):
            try:
                parse(props)
            except ConfigException as e:
                values[getattr(e, "name", TABLES) if getattr(e, "name", None) in values
                       else TABLES].errors.append(str(e))
        return values

    def alter_offsets(self, props: dict[str, str], offsets: dict[TopicPartition, int | None]) -> bool:
        """KIP-875: the offsets that count are in the tables' snapshot summaries (they win on the
        next assignment); rewriting table history is not offered, so an edit is refused rather
        than silently ignored."""
        raise ConnectException("The Iceberg sink keeps its offsets in the tables' snapshot "
                               "summaries (kafka.connect.offsets.*); they cannot be altered here")
