"""org.apache.iceberg.connect.IcebergSinkConnector (and Tabular's io.tabular.iceberg.connect
name): `tasks.max` tasks share the topics' partitions through the consumer group; each commits
its own snapshots (no control topic or coordinator: see docs/compatibility.md)."""

from __future__ import annotations

from ...api import SinkConnector, Task, TopicPartition
from ...config_def import ConfigValue
from ...errors import ConfigException, ConnectException
from .._util import ConfiguredConnector
from .config import CONFIG_DEF, TABLES, parse
from .task import TASK_ID, IcebergSinkTask


class IcebergSinkConnector(ConfiguredConnector, SinkConnector):
    CONFIG_DEF = CONFIG_DEF
    TASK_ID_KEY = TASK_ID

    def check(self, props: dict[str, str]) -> None:
        parse(props)  # fail the connector on a bad config, not each task

    def task_class(self) -> type[Task]:
        return IcebergSinkTask

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
