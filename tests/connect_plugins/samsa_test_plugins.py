"""Connectors for tests only, found through the worker's plugin.path: a source whose task fails
after some records, and a sink whose put fails — to check statuses, traces and that the worker
keeps running."""

from __future__ import annotations

from samsa.connect.api import SinkConnector, SinkTask, SourceConnector, SourceTask, Task
from samsa.connect.config_def import ConfigDef, ConfigType, Importance
from samsa.connect.data import STRING_SCHEMA, SinkRecord, SourceRecord


class FailingSourceConnector(SourceConnector):
    def start(self, props: dict[str, str]) -> None:
        self.props = props

    def task_class(self) -> type[Task]:
        return FailingSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props)]

    def stop(self) -> None:
        pass

    def config(self) -> ConfigDef:
        return (ConfigDef()
                .define("topic", ConfigType.STRING, importance=Importance.HIGH,
                        documentation="where records go")
                .define("fail.after", ConfigType.INT, 3, None, Importance.LOW,
                        "records before the task raises"))


class FailingSourceTask(SourceTask):
    def start(self, props: dict[str, str]) -> None:
        self.topic = props["topic"]
        self.left = int(props.get("fail.after", "3"))

    def poll(self) -> list[SourceRecord] | None:
        if self.left <= 0:
            raise RuntimeError("the source system is on fire")
        self.left -= 1
        return [SourceRecord(self.topic, None, None, None, STRING_SCHEMA, f"r{self.left}",
                             source_partition={"p": 0}, source_offset={"left": self.left})]

    def stop(self) -> None:
        pass


class FailingSinkConnector(SinkConnector):
    def start(self, props: dict[str, str]) -> None:
        self.props = props

    def task_class(self) -> type[Task]:
        return FailingSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props)]

    def stop(self) -> None:
        pass

    def config(self) -> ConfigDef:
        return ConfigDef()


class FailingSinkTask(SinkTask):
    def start(self, props: dict[str, str]) -> None:
        pass

    def put(self, records: list[SinkRecord]) -> None:
        if records:
            raise ValueError(f"cannot write {len(records)} records: the sink is read-only")

    def stop(self) -> None:
        pass
