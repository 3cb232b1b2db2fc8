"""What the console needs to know about its cluster. The admin HTTP listener builds one from the
broker's config; `python -m samsa.console` from its flags. Any object with these attributes works
(the console reads them with getattr), so the listener's own context type can be passed as is."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ConsoleContext:
    bootstrap: str
    client_config: dict[str, str] = field(default_factory=dict)
    registry_url: str | None = None
    registry_config: dict[str, str] = field(default_factory=dict)
    connect_url: str | None = None
    metrics_snapshot: Callable[[], Mapping[str, float]] | None = None


def adapt(ctx: Any) -> ConsoleContext:
    """A ConsoleContext from any object carrying the same fields (names tolerated: `bootstrap` or
    `bootstrap_servers`, `client_config` or `security_config`)."""
    if isinstance(ctx, ConsoleContext):
        return ctx
    if isinstance(ctx, Mapping):
        get: Callable[[str], Any] = ctx.get
    else:
        def get(name: str) -> Any:
            return getattr(ctx, name, None)
    bootstrap = get("bootstrap") or get("bootstrap_servers")
    if not bootstrap:
        raise ValueError("console context without bootstrap servers")
    if isinstance(bootstrap, list | tuple):
        bootstrap = ",".join(bootstrap)
    return ConsoleContext(
        bootstrap=str(bootstrap),
        client_config=dict(get("client_config") or get("security_config") or {}),
        registry_url=get("registry_url") or None,
        registry_config=dict(get("registry_config") or {}),
        connect_url=get("connect_url") or None,
        metrics_snapshot=get("metrics_snapshot") or get("metrics") or None,
    )
