"""`/admin/loggers` over Python's logging: Kafka Connect's Loggers (KIP-495) with log4j's level
names. Levels are reported as log4j names (WARN, FATAL, TRACE, OFF) so Kafka tooling reads them;
setting a level on a logger sets it on every known logger below it in the dotted hierarchy, as
log4j's Configurator.setAllLevels does, and answers the loggers whose level changed."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

TRACE = 5  # below DEBUG, as log4j's TRACE is
OFF = logging.CRITICAL + 10
ALL = 1  # 0 (NOTSET) means "inherit" in Python, so ALL is the lowest real level

_TO_PY = {"ALL": ALL, "TRACE": TRACE, "DEBUG": logging.DEBUG, "INFO": logging.INFO,
          "WARN": logging.WARNING, "WARNING": logging.WARNING, "ERROR": logging.ERROR,
          "FATAL": logging.CRITICAL, "CRITICAL": logging.CRITICAL, "OFF": OFF}
_TO_LOG4J = [(OFF, "OFF"), (logging.CRITICAL, "FATAL"), (logging.ERROR, "ERROR"),
             (logging.WARNING, "WARN"), (logging.INFO, "INFO"), (logging.DEBUG, "DEBUG"),
             (TRACE, "TRACE")]
ROOT_NAMES = ("root", "")


def parse_level(text: str) -> int | None:
    """A log4j level name (case-insensitive) as a Python level, None when not a level."""
    return _TO_PY.get(text.strip().upper())


def level_name(level: int) -> str:
    for threshold, name in _TO_LOG4J:
        if level >= threshold:
            return name
    return "ALL"


class Loggers:
    """The worker's logging levels, with the time (ms) each logger's level was last set here."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self.last_modified: dict[str, int] = {}

    @staticmethod
    def _known() -> dict[str, logging.Logger]:
        out: dict[str, logging.Logger] = {"root": logging.getLogger()}
        for name, obj in list(logging.Logger.manager.loggerDict.items()):
            if isinstance(obj, logging.Logger):
                out[name] = obj
        return out

    def _info(self, name: str, logger: logging.Logger) -> dict[str, Any]:
        return {"level": level_name(logger.getEffectiveLevel()),
                "last_modified": self.last_modified.get(name)}

    def level(self, name: str) -> dict[str, Any] | None:
        """{"level", "last_modified"} of an existing logger (effective level), else None."""
        key = "root" if name.lower() in ROOT_NAMES else name
        logger = self._known().get(key)
        return None if logger is None else self._info(key, logger)

    def all_levels(self) -> dict[str, dict[str, Any]]:
        """Every known logger that is not OFF, sorted by name."""
        known = self._known()
        return {name: self._info(name, known[name]) for name in sorted(known)
                if known[name].getEffectiveLevel() < OFF}

    def set_level(self, namespace: str, level: int) -> list[str]:
        """Set `namespace` and every known logger below it; the names whose level changed."""
        with self._lock:
            before = {n: lg.getEffectiveLevel() for n, lg in self._known().items()}
            is_root = namespace.lower() in ROOT_NAMES
            if is_root:
                targets = self._known()
            else:
                targets = {n: lg for n, lg in self._known().items()
                           if n == namespace or n.startswith(namespace + ".")}
                if namespace not in targets:
                    targets[namespace] = logging.getLogger(namespace)
            for logger in targets.values():
                logger.setLevel(level)
            now = int(self._clock() * 1000)
            changed = sorted(n for n, lg in targets.items()
                             if level_name(before.get(n, -1)) != level_name(lg.getEffectiveLevel())
                             or n not in before)
            for name in changed:
                self.last_modified[name] = now
            return changed
