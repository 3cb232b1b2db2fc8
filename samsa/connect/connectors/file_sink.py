"""org.apache.kafka.connect.file.FileStreamSinkConnector: appends each record's value, as text,
one per line, to a file (or standard output). Data is flushed when the runtime commits offsets,
so committed offsets never run ahead of what reached the file."""

from __future__ import annotations

import logging
import sys
from typing import TextIO

from ..api import SinkConnector, SinkTask, Task, TopicPartition
from ..config_def import AbstractConfig, ConfigDef, ConfigType, Importance
from ..data import SinkRecord
from ..errors import ConnectException
from ._util import java_text

log = logging.getLogger("samsa.connect.connectors.file")

FILE_CONFIG = "file"

CONFIG_DEF = ConfigDef().define(
    FILE_CONFIG, ConfigType.STRING, None, None, Importance.HIGH,
    "Destination filename. If not specified, the standard output will be used")


class FileStreamSinkConnector(SinkConnector):
    """`tasks.max` identical tasks (Kafka's choice): they all append to the same file."""

    def __init__(self) -> None:
        self._filename: str | None = None

    def start(self, props: dict[str, str]) -> None:
        self._filename = AbstractConfig(CONFIG_DEF, props).get(FILE_CONFIG)

    def task_class(self) -> type[Task]:
        return FileStreamSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        config = {FILE_CONFIG: self._filename} if self._filename is not None else {}
        return [dict(config) for _ in range(max_tasks)]

    def stop(self) -> None:
        pass

    def config(self) -> ConfigDef:
        return CONFIG_DEF

    def alter_offsets(self, props: dict[str, str], offsets: dict[TopicPartition, int | None]) -> bool:
        # Sink offsets are the consumer group's; nothing of the connector's own to check.
        return True


class FileStreamSinkTask(SinkTask):
    """Writes `value` as Java's toString would print it (null for a tombstone) plus a newline."""

    def __init__(self, output: TextIO | None = None) -> None:
        self.filename: str | None = None
        self._out: TextIO | None = output
        self._owned = False

    def start(self, props: dict[str, str]) -> None:
        self.filename = AbstractConfig(CONFIG_DEF, props).get(FILE_CONFIG) or None
        if self._out is not None:
            return
        if self.filename is None:
            self._out = sys.stdout
            return
        try:
            self._out = open(self.filename, "a", encoding="utf-8")  # noqa: SIM115 - task-long
        except OSError as e:
            raise ConnectException(f"Couldn't find or create file '{self.filename}' for "
                                   f"FileStreamSinkTask: {e}") from e
        self._owned = True

    def put(self, records: list[SinkRecord]) -> None:
        if self._out is None:
            raise ConnectException("FileStreamSinkTask is not started")
        out = self._out
        for record in records:
            out.write(java_text(record.value) + "\n")

    def flush(self, current_offsets: dict[TopicPartition, int]) -> None:
        if self._out is not None:
            self._out.flush()

    def stop(self) -> None:
        out, self._out = self._out, None
        if out is not None:
            if self._owned:
                out.close()
            else:
                out.flush()
