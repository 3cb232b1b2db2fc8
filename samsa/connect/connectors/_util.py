"""Small pieces the built-in connectors share: the usual connector life cycle, a stop-aware wait,
Java-like text of Connect values (what Kafka's tools print), and a JSON-lines reporter writing to
stdout or a file."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Mapping
from typing import Any, ClassVar, TextIO

from ..config_def import AbstractConfig, ConfigDef
from ..data import Struct


class ConfiguredConnector:
    """The life cycle most connectors share (mix in before SourceConnector/SinkConnector):
    start() checks the config, so a bad one fails the connector rather than each task, and keeps
    it; every task gets a copy (numbered under TASK_ID_KEY when set; at most MAX_TASKS tasks);
    stop() has nothing to release. Subclasses set CONFIG_DEF and override `check` for rules the
    ConfigDef cannot express."""

    CONFIG_DEF: ClassVar[ConfigDef]
    TASK_ID_KEY: ClassVar[str | None] = None
    MAX_TASKS: ClassVar[int | None] = None

    def __init__(self) -> None:
        self._props: dict[str, str] = {}

    def check(self, props: dict[str, str]) -> None:
        AbstractConfig(self.CONFIG_DEF, props)

    def start(self, props: dict[str, str]) -> None:
        self.check(props)
        self._props = dict(props)

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        n = max_tasks if self.MAX_TASKS is None else min(max_tasks, self.MAX_TASKS)
        key = self.TASK_ID_KEY
        return [dict(self._props) if key is None else {**self._props, key: str(i)} for i in range(n)]

    def stop(self) -> None:
        pass

    def config(self) -> ConfigDef:
        return self.CONFIG_DEF


class Stopper:
    """A task's stop signal: `wait` sleeps until the timeout or `stop()`, whichever comes first,
    so a task blocked in poll() ends promptly when the runtime stops it from another thread."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def stop(self) -> None:
        self._event.set()

    @property
    def stopped(self) -> bool:
        return self._event.is_set()

    def wait(self, seconds: float) -> bool:
        """Sleep up to `seconds`; True when stopped meanwhile (or before)."""
        if seconds <= 0:
            return self._event.is_set()
        return self._event.wait(seconds)


def java_text(value: Any) -> str:
    """A value as Java's String.valueOf would print the Connect object: null, true/false,
    Struct{a=1,b=x}, [1, 2], {k=v}. Used by FileStreamSinkTask, whose output Kafka defines as the
    value's toString()."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, Struct):
        inner = ",".join(f"{k}={java_text(v)}" for k, v in value.as_dict().items() if v is not None)
        return f"Struct{{{inner}}}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(java_text(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{java_text(k)}={java_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", errors="replace")
    return str(value)


def json_default(value: Any) -> Any:
    """json.dumps fallback for Connect values inside a report line."""
    if isinstance(value, Struct):
        return value.as_dict()
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", errors="replace")
    return str(value)


_file_locks: dict[str, threading.Lock] = {}
_file_locks_guard = threading.Lock()


def _lock_for(path: str | None) -> threading.Lock:
    key = path or "<stdout>"
    with _file_locks_guard:
        lock = _file_locks.get(key)
        if lock is None:
            lock = _file_locks[key] = threading.Lock()
        return lock


class JsonLines:
    """Writes one JSON object per line to `path` (appended, flushed per line) or to stdout.
    Several tasks in one process may share a path: lines never interleave."""

    def __init__(self, path: str | None) -> None:
        self.path = path or None
        self._lock = _lock_for(self.path)
        self._out: TextIO | None = None

    def write(self, data: Mapping[str, Any]) -> None:
        line = json.dumps(dict(data), default=json_default, separators=(",", ":")) + "\n"
        with self._lock:
            if self.path is None:
                sys.stdout.write(line)
                sys.stdout.flush()
                return
            if self._out is None or self._out.closed:
                self._out = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - kept open
            self._out.write(line)
            self._out.flush()

    def close(self) -> None:
        with self._lock:
            if self._out is not None:
                self._out.close()
                self._out = None


def now_ms() -> int:
    return time.time_ns() // 1_000_000
