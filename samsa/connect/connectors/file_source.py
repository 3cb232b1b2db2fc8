"""org.apache.kafka.connect.file.FileStreamSourceConnector: each line of a file (or of standard
input) becomes a record with a STRING value.

Offsets are Kafka's: source partition {"filename": <file>}, offset {"position": <bytes read
through the end of the line>}, so a restarted task resumes after the last committed line. Only
complete lines (ended by \\n, \\r or \\r\\n) are emitted: a partial last line waits for its end.
Positions count bytes (Kafka's task counts decoded characters, which differ for non-ASCII text;
byte positions are what it seeks by, so resuming is exact here)."""

from __future__ import annotations

import logging
import os
import select
import sys
import threading
from typing import Any, BinaryIO

from ..api import ExactlyOnceSupport, SourceConnector, SourceTask, Task
from ..config_def import AbstractConfig, ConfigDef, ConfigType, Importance, non_empty_string
from ..data import STRING_SCHEMA, SourceRecord
from ..errors import ConnectException
from ._util import Stopper, now_ms

log = logging.getLogger("samsa.connect.connectors.file")

FILE_CONFIG = "file"
TOPIC_CONFIG = "topic"
TASK_BATCH_SIZE_CONFIG = "batch.size"
DEFAULT_TASK_BATCH_SIZE = 2000
FILENAME_FIELD = "filename"
POSITION_FIELD = "position"

CONFIG_DEF = (
    ConfigDef()
    .define(FILE_CONFIG, ConfigType.STRING, None, None, Importance.HIGH,
            "Source filename. If not specified, the standard input will be used")
    .define(TOPIC_CONFIG, ConfigType.STRING, validator=non_empty_string, importance=Importance.HIGH,
            documentation="The topic to publish data to")
    .define(TASK_BATCH_SIZE_CONFIG, ConfigType.INT, DEFAULT_TASK_BATCH_SIZE, None, Importance.LOW,
            "The maximum number of records the source task can read from the file each time it "
            "is polled")
)


def _filename(props: dict[str, Any]) -> str | None:
    name = AbstractConfig(CONFIG_DEF, props).get(FILE_CONFIG)
    return name or None


class FileStreamSourceConnector(SourceConnector):
    """One task: a file has one reader."""

    def __init__(self) -> None:
        self._props: dict[str, str] = {}

    def start(self, props: dict[str, str]) -> None:
        AbstractConfig(CONFIG_DEF, props)  # fail fast on a bad config, as Kafka's does
        self._props = dict(props)
        log.info("Starting file source connector reading from %s",
                 self._props.get(FILE_CONFIG) or "standard input")

    def task_class(self) -> type[Task]:
        return FileStreamSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self._props)]

    def stop(self) -> None:
        pass

    def config(self) -> ConfigDef:
        return CONFIG_DEF

    def exactly_once_support(self, props: dict[str, str]) -> ExactlyOnceSupport | None:
        # A real, append-only file has replayable offsets; stdin has none.
        return ExactlyOnceSupport.SUPPORTED if _filename(props) else ExactlyOnceSupport.UNSUPPORTED

    def alter_offsets(self, props: dict[str, str],
                      offsets: dict[tuple[tuple[str, Any], ...], dict[str, Any] | None]) -> bool:
        """KIP-875 checks, as Kafka's connector makes them: offsets only for a file (stdin has none);
        each offset null (a reset) or {"position": <non-negative integer>}, each partition with a
        "filename" key. Whether the position fits the file is the task's business at start."""
        if not _filename(props):
            raise ConnectException(
                f"Offsets cannot be modified if the '{FILE_CONFIG}' configuration is unspecified. "
                "This is because stdin is used for input and offsets are not tracked.")
        for partition_key, offset in offsets.items():
            if offset is None:
                continue  # tombstones are always allowed, so stale partitions can be cleaned up
            if POSITION_FIELD not in offset:
                raise ConnectException(
                    f"Offset objects should either be null or contain the key '{POSITION_FIELD}'")
            position = offset[POSITION_FIELD]
            if not isinstance(position, int) or isinstance(position, bool):
                raise ConnectException(f"The value for the '{POSITION_FIELD}' key in the offset is "
                                       "expected to be a Long value")
            if position < 0:
                raise ConnectException(f"The value for the '{POSITION_FIELD}' key in the offset "
                                       "should be a non-negative value")
            if partition_key is None:
                raise ConnectException("Partition objects cannot be null")
            if FILENAME_FIELD not in dict(partition_key):
                raise ConnectException(
                    f"Partition objects should contain the key '{FILENAME_FIELD}'")
        return True


class FileStreamSourceTask(SourceTask):
    """Tails the file: reads what is there, returns up to batch.size complete lines per poll, and
    when there is nothing new waits `poll_wait_s` (ended early by stop) before returning None."""

    CHUNK = 64 * 1024
    poll_wait_s = 0.5  # pause when the file has nothing new
    missing_wait_s = 1.0  # pause while the file does not exist yet

    def __init__(self) -> None:
        self.filename: str | None = None
        self.topic = ""
        self.batch_size = DEFAULT_TASK_BATCH_SIZE
        self._stream: BinaryIO | None = None
        self._stdin_fd: int | None = None
        self._buffer = bytearray()
        self._position: int | None = None  # file position of _buffer[0]; None for stdin
        self._lock = threading.Lock()
        self._stopper = Stopper()

    def start(self, props: dict[str, str]) -> None:
        try:
            config = AbstractConfig(CONFIG_DEF, props)
        except ConnectException as e:
            raise ConnectException(f"Invalid FileStreamSourceTask configuration: {e}") from e
        self.filename = config.get(FILE_CONFIG) or None
        self.topic = config.get(TOPIC_CONFIG)
        self.batch_size = max(1, int(config.get(TASK_BATCH_SIZE_CONFIG)))
        if self.filename is None:
            try:
                self._stdin_fd = sys.stdin.fileno()
            except (AttributeError, OSError, ValueError) as e:  # None, closed or not a real file
                raise ConnectException(f"FileStreamSourceTask has no '{FILE_CONFIG}' and standard "
                                       f"input cannot be read: {e}") from e

    # ---- opening ----------------------------------------------------------------------------
    def _open(self) -> bool:
        """Open the file at the stored offset; False when it does not exist yet."""
        assert self.filename is not None
        try:
            stream = open(self.filename, "rb")  # noqa: SIM115 - lives as long as the task
        except FileNotFoundError:
            log.warning("Couldn't find file %s for FileStreamSourceTask, sleeping to wait for it "
                        "to be created", self.filename)
            return False
        position = 0
        stored = self.context.offset_storage_reader.offset({FILENAME_FIELD: self.filename})
        if stored is not None:
            last = stored.get(POSITION_FIELD)
            if last is not None and (not isinstance(last, int) or isinstance(last, bool)):
                stream.close()
                raise ConnectException("Offset position is the incorrect type")
            if last is not None:
                if last < 0:
                    stream.close()
                    raise ConnectException(f"Offset position {last} is negative")
                log.debug("Found previous offset, skipping to file offset %d", last)
                stream.seek(last)
                position = last
        self._stream = stream
        self._position = position
        log.debug("Opened %s for reading at %d", self.filename, position)
        return True

    # ---- reading ----------------------------------------------------------------------------
    def _read_chunk(self) -> bytes:
        """What is available now, without blocking; b"" when nothing is."""
        if self._stream is not None:
            return self._stream.read(self.CHUNK)
        if self._stdin_fd is not None:
            ready, _, _ = select.select([self._stdin_fd], [], [], 0)
            if ready:
                data = os.read(self._stdin_fd, self.CHUNK)
                if not data:  # end of input: nothing more will come
                    self._stdin_fd = None
                return data
        return b""

    def _extract_line(self) -> str | None:
        buf = self._buffer
        nl = buf.find(b"\n")
        cr = buf.find(b"\r", 0, nl if nl >= 0 else len(buf))
        if cr >= 0:
            if cr + 1 >= len(buf):
                return None  # a \r at the end may be the start of \r\n: wait for the next byte
            until, start = cr, cr + 2 if buf[cr + 1] == 0x0A else cr + 1
        elif nl >= 0:
            until, start = nl, nl + 1
        else:
            return None
        line = bytes(buf[:until]).decode("utf-8", errors="replace")
        del buf[:start]
        if self._position is not None:
            self._position += start
        return line

    def _record(self, line: str) -> SourceRecord:
        return SourceRecord(self.topic, None, None, None, STRING_SCHEMA, line, now_ms(),
                            source_partition={FILENAME_FIELD: self.filename},
                            source_offset={POSITION_FIELD: self._position})

    def poll(self) -> list[SourceRecord] | None:
        if self._stopper.stopped:
            return None
        with self._lock:
            if self._stream is None and self.filename is not None and not self._open():
                opened = False
            else:
                opened = True
        if not opened:
            self._stopper.wait(self.missing_wait_s)
            return None
        records: list[SourceRecord] = []
        read_any = False
        with self._lock:
            try:
                while not self._stopper.stopped:
                    line = self._extract_line()
                    if line is not None:
                        records.append(self._record(line))
                        if len(records) >= self.batch_size:
                            return records
                        continue
                    chunk = self._read_chunk()
                    if not chunk:
                        break
                    read_any = True
                    self._buffer += chunk
            except (OSError, ValueError):  # the stream was closed by stop()
                return records or None
        if not records and not read_any:
            self._stopper.wait(self.poll_wait_s)
        return records or None

    def stop(self) -> None:
        self._stopper.stop()
        with self._lock:
            if self._stream is not None:
                self._stream.close()
                self._stream = None
