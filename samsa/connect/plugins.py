"""Finding plugins by name: built-ins, Python entry points and `plugin.path` directories.

A plugin is named by its class name. Built-ins carry Kafka's (Java) class names, so configs
written for Kafka Connect work unchanged (`org.apache.kafka.connect.file.FileStreamSourceConnector`,
`org.apache.kafka.connect.transforms.InsertField$Value`); any plugin can also be named by its
simple name, by the simple name without its `Connector` suffix (Kafka's aliases), or by its
Python path `module:Class` / `module.Class`.

Third-party plugins register entry points in the groups of ENTRY_POINT_GROUPS; `plugin.path`
lists directories whose `*.py` modules and packages are imported and scanned for subclasses of
the plugin base classes."""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import inspect
import logging
import sys
import threading
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from .api import (
    Connector,
    Converter,
    HeaderConverter,
    Predicate,
    SinkConnector,
    SourceConnector,
    Transformation,
)
from .errors import NotFoundException

log = logging.getLogger("samsa.connect.plugins")


class PluginType(StrEnum):
    SOURCE = "source"
    SINK = "sink"
    CONVERTER = "converter"
    HEADER_CONVERTER = "header_converter"
    TRANSFORMATION = "transformation"
    PREDICATE = "predicate"


ENTRY_POINT_GROUPS = {
    "samsa.connect.connectors": (PluginType.SOURCE, PluginType.SINK),
    "samsa.connect.converters": (PluginType.CONVERTER,),
    "samsa.connect.header_converters": (PluginType.HEADER_CONVERTER,),
    "samsa.connect.transforms": (PluginType.TRANSFORMATION,),
    "samsa.connect.predicates": (PluginType.PREDICATE,),
}
_BASES: list[tuple[type, PluginType]] = [
    (SourceConnector, PluginType.SOURCE), (SinkConnector, PluginType.SINK),
    (HeaderConverter, PluginType.HEADER_CONVERTER), (Converter, PluginType.CONVERTER),
    (Transformation, PluginType.TRANSFORMATION), (Predicate, PluginType.PREDICATE),
]


def plugin_type(cls: type) -> PluginType | None:
    for base, kind in _BASES:
        if isinstance(cls, type) and issubclass(cls, base):
            return kind
    return None


@dataclass(frozen=True)
class PluginDesc:
    name: str  # the canonical class name shown by /connector-plugins
    target: str  # "module:attr"
    kind: PluginType

    def load(self) -> type:
        module, _, attr = self.target.partition(":")
        obj: Any = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
        return obj  # type: ignore[no-any-return]

    def version(self) -> str:
        cls = self.load()
        if issubclass(cls, Connector):
            try:
                return str(cls().version())
            except Exception:  # a plugin whose constructor fails still lists
                return "unknown"
        return str(getattr(cls, "VERSION", "") or _samsa_version())


def _samsa_version() -> str:
    from .api import SAMSA_VERSION
    return SAMSA_VERSION


def _builtin_tables() -> list[tuple[dict[str, str], PluginType | None]]:
    """(name -> "module:attr") tables the built-in packages export."""
    tables: list[tuple[dict[str, str], PluginType | None]] = []
    for module in ("samsa.connect.connectors", "samsa.connect.converters",
                   "samsa.connect.transforms"):
        try:
            mod = importlib.import_module(module)
        except ImportError as e:  # a package not built yet must not break the others
            log.debug("no built-in plugins from %s: %s", module, e)
            continue
        tables.append((dict(getattr(mod, "PLUGINS", {})), None))
    return tables


def _aliases(name: str) -> list[str]:
    simple = name.rsplit(".", 1)[-1].rsplit(":", 1)[-1]
    out = [simple]
    base = simple.split("$", 1)[0]
    for suffix in ("Connector", "Converter", "Transformation", "Predicate"):
        if base.endswith(suffix) and len(base) > len(suffix):
            out.append(base[: -len(suffix)] + simple[len(base):])
    return out


class Plugins:
    """The plugins this worker can run, found once at start (and on `scan`)."""

    def __init__(self, plugin_path: list[str] | None = None) -> None:
        self._lock = threading.Lock()
        self.by_name: dict[str, PluginDesc] = {}
        self.aliases: dict[str, PluginDesc | None] = {}  # None: ambiguous
        self.scan(plugin_path or [])

    # ---- discovery --------------------------------------------------------------------------
    def scan(self, plugin_path: list[str]) -> None:
        with self._lock:
            for table, kind in _builtin_tables():
                for name, target in table.items():
                    self._add(name, target, kind)
            for group in ENTRY_POINT_GROUPS:
                for ep in importlib.metadata.entry_points(group=group):
                    self._add(ep.name, ep.value, None)
            for directory in plugin_path:
                self._scan_dir(Path(directory))

    def _add(self, name: str, target: str, kind: PluginType | None) -> None:
        if kind is None:
            try:
                module, _, attr = target.partition(":")
                obj: Any = importlib.import_module(module)
                for part in attr.split("."):
                    obj = getattr(obj, part)
                kind = plugin_type(obj)
            except Exception as e:  # a broken plugin is logged and skipped, never fatal
                log.warning("cannot load plugin %s (%s): %s", name, target, e)
                return
            if kind is None:
                log.warning("%s (%s) is not a connector, converter, transform or predicate",
                            name, target)
                return
        desc = PluginDesc(name, target, kind)
        self.by_name[name] = desc
        for alias in [target.replace(":", "."), target, *_aliases(name)]:
            if alias == name:
                continue
            known = self.aliases.get(alias, desc)
            self.aliases[alias] = desc if known is None or known.name == desc.name else None

    def _scan_dir(self, directory: Path) -> None:
        if not directory.is_dir():
            log.warning("plugin.path entry %s is not a directory", directory)
            return
        if str(directory) not in sys.path:
            sys.path.insert(0, str(directory))
        for entry in sorted(directory.iterdir()):
            if entry.name.startswith(("_", ".")):
                continue
            if entry.suffix == ".py":
                module_name = entry.stem
            elif entry.is_dir() and (entry / "__init__.py").exists():
                module_name = entry.name
            else:
                continue
            try:
                module = importlib.import_module(module_name)
            except Exception as e:
                log.warning("cannot import plugin module %s: %s", entry, e)
                continue
            for attr, obj in vars(module).items():
                if inspect.isclass(obj) and not inspect.isabstract(obj) and \
                        obj.__module__ == module.__name__ and plugin_type(obj) is not None:
                    self._add(f"{module.__name__}.{attr}", f"{module.__name__}:{attr}", None)

    # ---- lookup -----------------------------------------------------------------------------
    def find(self, name: str, *kinds: PluginType) -> PluginDesc:
        """The plugin a config names; NotFoundException says what is known when none fits."""
        name = name.strip()
        desc = self.by_name.get(name) or self.aliases.get(name)
        if desc is None and (":" in name or "." in name):
            desc = self._load_path(name)
        if desc is None or (kinds and desc.kind not in kinds):
            if name in self.aliases and self.aliases[name] is None:
                raise NotFoundException(f"Plugin alias {name} is ambiguous: use the full class name")
            wanted = "/".join(k.value for k in kinds) or "plugin"
            raise NotFoundException(f"Failed to find any class that implements {wanted} and "
                                    f"which name matches {name}")
        return desc

    def _load_path(self, name: str) -> PluginDesc | None:
        module, sep, attr = name.partition(":")
        if not sep:
            module, _, attr = name.rpartition(".")
        try:
            obj: Any = importlib.import_module(module)
            for part in attr.split("."):
                obj = getattr(obj, part)
        except (ImportError, AttributeError, ValueError):
            return None
        kind = plugin_type(obj)
        if kind is None:
            return None
        desc = PluginDesc(f"{module}.{attr}", f"{module}:{attr}", kind)
        with self._lock:
            self.by_name.setdefault(desc.name, desc)
        return desc

    def load(self, name: str, *kinds: PluginType) -> type:
        return self.find(name, *kinds).load()

    def connector_type(self, name: str) -> PluginType:
        return self.find(name, PluginType.SOURCE, PluginType.SINK).kind

    def listing(self, kinds: tuple[PluginType, ...] | None = None) -> list[PluginDesc]:
        wanted = kinds or (PluginType.SOURCE, PluginType.SINK)
        return sorted((d for d in self.by_name.values() if d.kind in wanted), key=lambda d: d.name)

    def new(self, name: str, *kinds: PluginType) -> Any:
        return self.load(name, *kinds)()
