"""org.apache.kafka.connect.tools.VerifiableSourceConnector / VerifiableSinkConnector: Kafka's
system-test connectors. The source's tasks emit increasing sequence numbers (key: the task id as
INT32; value: the seqno as INT64, or with `complete.record.data=true` a struct {name, task,
topic, time_ms, seqno}) and resume after the last committed seqno; source partition {"id": task},
offset {"seqno": n}. Both print one JSON line per record (and per commit / flush) so a test can
check that nothing was lost or duplicated.

Samsa addition: an optional `file` config sends those JSON lines to that file (appended) instead
of standard output, so tests of a worker need not capture its stdout."""

from __future__ import annotations

import logging
import time
from typing import Any

from ..api import RecordMetadata, SinkConnector, SinkTask, SourceConnector, SourceTask, Task, TopicPartition
from ..config_def import AbstractConfig, ConfigDef, ConfigType, Importance, non_empty_string
from ..data import INT32_SCHEMA, INT64_SCHEMA, STRING_SCHEMA, SinkRecord, SourceRecord, Struct, struct_schema
from ..errors import ConnectException
from ._util import JsonLines, Stopper, now_ms

log = logging.getLogger("samsa.connect.connectors.verifiable")

NAME_CONFIG = "name"
ID_CONFIG = "id"
TOPIC_CONFIG = "topic"
THROUGHPUT_CONFIG = "throughput"
COMPLETE_RECORD_DATA_CONFIG = "complete.record.data"
FILE_CONFIG = "file"
ID_FIELD = "id"
SEQNO_FIELD = "seqno"

FILE_DOC = ("Samsa: append the JSON report lines to this file instead of printing them to standard "
            "output")

SOURCE_CONFIG_DEF = (
    ConfigDef()
    .define(TOPIC_CONFIG, ConfigType.STRING, validator=non_empty_string, importance=Importance.HIGH,
            documentation="The topic to produce the sequence numbers to")
    .define(THROUGHPUT_CONFIG, ConfigType.LONG, importance=Importance.HIGH,
            documentation="Records per second each task produces; negative for no limit, 0 to "
                          "produce nothing")
    .define(COMPLETE_RECORD_DATA_CONFIG, ConfigType.BOOLEAN, False, None, Importance.LOW,
            "Whether the value is a struct of name, task, topic, time_ms and seqno instead of the "
            "bare seqno")
    .define(FILE_CONFIG, ConfigType.STRING, None, None, Importance.LOW, FILE_DOC)
)
SINK_CONFIG_DEF = ConfigDef().define(FILE_CONFIG, ConfigType.STRING, None, None, Importance.LOW,
                                     FILE_DOC)

COMPLETE_VALUE_SCHEMA = struct_schema([
    ("name", STRING_SCHEMA), ("task", INT32_SCHEMA), ("topic", STRING_SCHEMA),
    ("time_ms", INT64_SCHEMA), ("seqno", INT64_SCHEMA)])


def _task_configs(props: dict[str, str], max_tasks: int) -> list[dict[str, str]]:
    return [{**props, ID_CONFIG: str(i)} for i in range(max_tasks)]


def _task_id(props: dict[str, str], task: str) -> int:
    try:
        return int(props[ID_CONFIG])
    except (KeyError, ValueError) as e:
        raise ConnectException(f"Invalid {task} configuration: {ID_CONFIG} is "
                               f"{props.get(ID_CONFIG)!r}") from e


class Throttle:
    """Keeps a task at `per_second` records per second since its start (negative: unlimited;
    0: nothing at all). `wait(sent)` sleeps, stop-aware, until record number `sent` is due."""

    def __init__(self, per_second: int, stopper: Stopper) -> None:
        self.per_second = per_second
        self.stopper = stopper
        self.started = time.monotonic()

    def wait(self, sent: int) -> bool:
        """False when stopped before the record is due."""
        if self.per_second < 0:
            return not self.stopper.stopped
        if self.per_second == 0:
            while not self.stopper.wait(1.0):
                pass
            return False
        due = self.started + sent / self.per_second
        delay = due - time.monotonic()
        return not self.stopper.wait(delay) if delay > 0 else not self.stopper.stopped


class VerifiableSourceConnector(SourceConnector):
    def __init__(self) -> None:
        self._props: dict[str, str] = {}

    def start(self, props: dict[str, str]) -> None:
        AbstractConfig(SOURCE_CONFIG_DEF, props)
        self._props = dict(props)

    def task_class(self) -> type[Task]:
        return VerifiableSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return _task_configs(self._props, max_tasks)

    def stop(self) -> None:
        pass

    def config(self) -> ConfigDef:
        return SOURCE_CONFIG_DEF


class VerifiableSourceTask(SourceTask):
    """One record per poll, seqno + 1 each time, starting after the stored offset."""

    def __init__(self) -> None:
        self.name = ""
        self.id = 0
        self.topic = ""
        self.seqno = 0
        self.starting_seqno = 0
        self.complete_record_data = False
        self._stopper = Stopper()
        self._throttle: Throttle | None = None
        self._report: JsonLines | None = None
        self._partition: dict[str, Any] = {}

    def start(self, props: dict[str, str]) -> None:
        config = AbstractConfig(SOURCE_CONFIG_DEF, props)
        self.name = props.get(NAME_CONFIG, "")
        self.id = _task_id(props, "VerifiableSourceTask")
        self.topic = config.get(TOPIC_CONFIG)
        self.complete_record_data = bool(config.get(COMPLETE_RECORD_DATA_CONFIG))
        self._partition = {ID_FIELD: self.id}
        previous = self.context.offset_storage_reader.offset(self._partition)
        last = previous.get(SEQNO_FIELD) if previous else None
        if last is not None and (not isinstance(last, int) or isinstance(last, bool)):
            raise ConnectException(f"Stored seqno {last!r} is not an integer")
        self.seqno = 0 if last is None else last + 1
        self.starting_seqno = self.seqno
        self._throttle = Throttle(int(config.get(THROUGHPUT_CONFIG)), self._stopper)
        self._report = JsonLines(config.get(FILE_CONFIG))
        log.info("Started VerifiableSourceTask %s-%d producing to topic %s resuming from seqno %d",
                 self.name, self.id, self.topic, self.starting_seqno)

    def poll(self) -> list[SourceRecord] | None:
        assert self._throttle is not None and self._report is not None
        if not self._throttle.wait(self.seqno - self.starting_seqno):
            return None
        data = {"name": self.name, "task": self.id, "topic": self.topic, "time_ms": now_ms(),
                "seqno": self.seqno}
        self._report.write(data)
        value: Any
        if self.complete_record_data:
            value_schema, value = COMPLETE_VALUE_SCHEMA, Struct(COMPLETE_VALUE_SCHEMA, data)
        else:
            value_schema, value = INT64_SCHEMA, self.seqno
        record = SourceRecord(self.topic, None, INT32_SCHEMA, self.id, value_schema, value,
                              source_partition=dict(self._partition),
                              source_offset={SEQNO_FIELD: self.seqno})
        self.seqno += 1
        return [record]

    def commit_record(self, record: SourceRecord, metadata: RecordMetadata | None) -> None:
        if self._report is None:
            return
        seqno = (record.source_offset or {}).get(SEQNO_FIELD)
        self._report.write({"name": self.name, "task": self.id, "topic": self.topic,
                            "time_ms": now_ms(), "seqno": seqno, "committed": True})

    def stop(self) -> None:
        self._stopper.stop()
        if self._report is not None:
            self._report.close()


class VerifiableSinkConnector(SinkConnector):
    def __init__(self) -> None:
        self._props: dict[str, str] = {}

    def start(self, props: dict[str, str]) -> None:
        AbstractConfig(SINK_CONFIG_DEF, props)
        self._props = dict(props)

    def task_class(self) -> type[Task]:
        return VerifiableSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return _task_configs(self._props, max_tasks)

    def stop(self) -> None:
        pass

    def config(self) -> ConfigDef:
        return SINK_CONFIG_DEF

    def alter_offsets(self, props: dict[str, str], offsets: dict[TopicPartition, int | None]) -> bool:
        return True


class VerifiableSinkTask(SinkTask):
    """Reports every record it gets (task = the record key, i.e. the source task; seqno = the
    value; offset = its Kafka offset), then reports them again as flushed on flush."""

    def __init__(self) -> None:
        self.name = ""
        self.id = 0
        self.count = 0
        self._unflushed: list[dict[str, Any]] = []
        self._report: JsonLines | None = None

    def start(self, props: dict[str, str]) -> None:
        config = AbstractConfig(SINK_CONFIG_DEF, props)
        self.name = props.get(NAME_CONFIG, "")
        self.id = _task_id(props, "VerifiableSinkTask")
        self._report = JsonLines(config.get(FILE_CONFIG))

    def put(self, records: list[SinkRecord]) -> None:
        assert self._report is not None
        now = now_ms()
        for record in records:
            data = {"name": self.name, "task": record.key, "sinkTask": self.id,
                    "topic": record.topic, "time_ms": now, "seqno": record.value,
                    "offset": record.kafka_offset}
            self._report.write(data)
            self.count += 1
            self._unflushed.append(data)

    def flush(self, current_offsets: dict[TopicPartition, int]) -> None:
        if self._report is None:
            return
        now = now_ms()
        for data in self._unflushed:
            self._report.write({**data, "time_ms": now, "flushed": True})
        self._unflushed.clear()

    def stop(self) -> None:
        if self._report is not None:
            self._report.close()
