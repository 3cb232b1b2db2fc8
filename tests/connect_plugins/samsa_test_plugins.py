"""Connectors for tests only, found through the worker's plugin.path: a source whose task fails
after some records, and a sink whose put fails — to check statuses, traces and that the worker
keeps running."""

from __future__ import annotations

from samsa.connect.api import SinkConnector, SinkTask, SourceConnector, SourceTask, Task, TopicPartition
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


class FlakySinkConnector(SinkConnector):
    """Appends values to `file`; every other put raises RetriableException first (asking for a
    redelivery after 100 ms), so nothing may be lost or written twice."""

    def start(self, props: dict[str, str]) -> None:
        self.props = props

    def task_class(self) -> type[Task]:
        return FlakySinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props)]

    def stop(self) -> None:
        pass

    def config(self) -> ConfigDef:
        return ConfigDef().define("file", ConfigType.STRING, importance=Importance.HIGH,
                                  documentation="output file")


class FlakySinkTask(SinkTask):
    def start(self, props: dict[str, str]) -> None:
        self.path = props["file"]
        self.calls = 0
        self.retries = 0

    def put(self, records: list[SinkRecord]) -> None:
        from samsa.connect.errors import RetriableException
        self.calls += 1
        if records and self.calls % 2 == 1:
            self.retries += 1
            self.context.timeout(100)
            raise RetriableException("the target is busy, try again")
        with open(self.path, "a") as f:
            f.writelines(f"{r.value}\n" for r in records)

    def stop(self) -> None:
        pass


class BoundarySourceConnector(SourceConnector):
    """Emits batches of 3 records `b<batch>-<i>`; with transaction.boundary=connector it commits
    the transaction after even batches and aborts it after odd ones."""

    def start(self, props: dict[str, str]) -> None:
        self.props = props

    def task_class(self) -> type[Task]:
        return BoundarySourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props)]

    def stop(self) -> None:
        pass

    def config(self) -> ConfigDef:
        return (ConfigDef()
                .define("topic", ConfigType.STRING, importance=Importance.HIGH, documentation="t")
                .define("batches", ConfigType.INT, 20, None, Importance.LOW, "how many"))

    def exactly_once_support(self, props: dict[str, str]) -> object:
        from samsa.connect.api import ExactlyOnceSupport
        return ExactlyOnceSupport.SUPPORTED

    def can_define_transaction_boundaries(self, props: dict[str, str]) -> object:
        from samsa.connect.api import ConnectorTransactionBoundaries
        return ConnectorTransactionBoundaries.SUPPORTED


class BoundarySourceTask(SourceTask):
    def start(self, props: dict[str, str]) -> None:
        self.topic = props["topic"]
        self.batches = int(props.get("batches", "20"))
        last = self.context.offset_storage_reader.offset({"src": "boundary"})
        self.batch = int(last["batch"]) + 1 if last else 0

    def poll(self) -> list[SourceRecord] | None:
        import time
        if self.batch >= self.batches:
            time.sleep(0.1)
            return None
        b = self.batch
        self.batch += 1
        records = [SourceRecord(self.topic, 0, None, None, STRING_SCHEMA, f"b{b}-{i}",
                                source_partition={"src": "boundary"}, source_offset={"batch": b})
                   for i in range(3)]
        ctx = self.context.transaction_context()
        if ctx is not None:
            if b % 2 == 0:
                ctx.commit_transaction(records[-1])
            else:
                ctx.abort_transaction(records[-1])
        return records

    def stop(self) -> None:
        pass


class RewindingSinkConnector(SinkConnector):
    """open() asks the runtime to start every assigned partition at `start.offset` (as sinks that
    keep offsets in their target do); put() appends `partition offset` lines to `file`."""

    def start(self, props: dict[str, str]) -> None:
        self.props = props

    def task_class(self) -> type[Task]:
        return RewindingSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props)]

    def stop(self) -> None:
        pass

    def config(self) -> ConfigDef:
        return (ConfigDef()
                .define("file", ConfigType.STRING, importance=Importance.HIGH, documentation="output")
                .define("start.offset", ConfigType.INT, importance=Importance.HIGH,
                        documentation="where open() seeks every partition"))


class RewindingSinkTask(SinkTask):
    def start(self, props: dict[str, str]) -> None:
        self.path = props["file"]
        self.start_offset = int(props["start.offset"])

    def open(self, partitions: list[TopicPartition]) -> None:
        self.context.offset({tp: self.start_offset for tp in partitions})

    def put(self, records: list[SinkRecord]) -> None:
        with open(self.path, "a") as f:
            f.writelines(f"{r.kafka_partition} {r.kafka_offset}\n" for r in records)

    def stop(self) -> None:
        pass
