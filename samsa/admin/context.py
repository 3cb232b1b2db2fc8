"""What the admin listener hands to the web console (samsa.console.app.build_console(ctx)).

The console talks to the cluster as a client does (Kafka clients, the registry's and Connect's
REST APIs), never by calling broker internals; this context says where those are and how to
authenticate. It is built by the broker before its listeners start and updated in place once the
embedded registry / Connect worker are up, so read the URL fields at request time, not at build.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ConsoleContext:
    # bootstrap.servers of this broker's first client listener (host:port)
    bootstrap_servers: str
    # Kafka client properties for that listener (security.protocol, sasl.*, ssl.*), Kafka's names,
    # taken from the broker's `admin.http.client.<name>` settings; empty for PLAINTEXT
    client_config: dict[str, str] = field(default_factory=dict)
    # the schema registry's URL (None: none configured/started yet) and its client properties in
    # Confluent's names (basic.auth.credentials.source, basic.auth.user.info, schema.registry.ssl.*),
    # from the broker's `admin.http.registry.<name>` settings
    registry_url: str | None = None
    registry_config: dict[str, str] = field(default_factory=dict)
    # the Connect worker's REST URL (None: no worker)
    connect_url: str | None = None
    # a thread-safe call (answers within ~5 s, raises TimeoutError otherwise) returning the
    # broker's current metrics as {family name: [(labels dict, value), ...]}, the same numbers
    # /metrics serves (e.g. "kafka_server_brokertopicmetrics_bytesin_total")
    metrics_snapshot: Callable[[], dict[str, list[tuple[dict[str, str], float]]]] = (
        lambda: {})
    node_id: int = 1
    # anything else the broker wants to pass along later (read-only for the console)
    extra: dict[str, Any] = field(default_factory=dict)


# The console's hook: if this module is importable, the admin app mounts
# `build_console(ctx) -> ASGI app` at "/" (after /metrics and /health/*, which take precedence).
CONSOLE_MODULE = "samsa.console.app"
CONSOLE_FACTORY = "build_console"
