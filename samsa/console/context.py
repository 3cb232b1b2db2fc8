"""What the console needs to know about its cluster: the admin listener's `ConsoleContext`
(filled in place once the embedded registry and Connect worker are up; `python -m samsa.console`
and the tests build one too), re-exported here. `Live` reads whichever it is given at each use, so
a URL that appears after start-up is picked up."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from samsa.admin.context import ConsoleContext

__all__ = ["ConsoleContext", "Live"]


class Live:
    """A read-through view of any context object (attributes or a mapping)."""

    def __init__(self, source: Any) -> None:
        self.source = source
        if not self.bootstrap:
            raise ValueError("console context without bootstrap servers")

    def _get(self, name: str) -> Any:
        if isinstance(self.source, Mapping):
            return self.source.get(name)
        return getattr(self.source, name, None)

    @property
    def bootstrap(self) -> str:
        value = self._get("bootstrap_servers") or self._get("bootstrap") or ""
        return ",".join(value) if isinstance(value, list | tuple) else str(value)

    @property
    def client_config(self) -> dict[str, str]:
        return dict(self._get("client_config") or {})

    @property
    def registry_url(self) -> str | None:
        return self._get("registry_url") or None

    @property
    def registry_config(self) -> dict[str, str]:
        return dict(self._get("registry_config") or {})

    @property
    def connect_url(self) -> str | None:
        return self._get("connect_url") or None

    def metrics(self) -> dict[str, list[tuple[dict[str, str], float]]]:
        """The broker's metric samples ({name: [(labels, value)]}), {} when there are none."""
        fn = self._get("metrics_snapshot")
        if fn is None:
            return {}
        try:
            snap = fn()
        except Exception:  # noqa: BLE001 - metrics are a nicety on the overview
            return {}
        return dict(snap) if isinstance(snap, Mapping) else {}
