"""`samsa registry`: a standalone schema registry on an existing Samsa (or Kafka) cluster."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from typing import TYPE_CHECKING

from ._common import BOOTSTRAP_ENV, DEFAULT_BOOTSTRAP, key_value

if TYPE_CHECKING:
    from samsa.registry.server import RegistryConfig


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("registry", help="run a schema registry (Confluent-compatible REST API)",
                       description="Run a schema registry whose state is the _schemas topic of the "
                                   "cluster. Run several on one cluster by giving all but one of "
                                   "them --leader-url (the single writer's URL).")
    p.add_argument("config_file", nargs="?",
                   help="schema-registry.properties (Confluent's settings: listeners, "
                        "authentication.*, ssl.*, kafkastore.*; docs/security.md)")
    p.add_argument("--bootstrap-server", metavar="HOST:PORT",
                   help=f"cluster to store schemas in (default: kafkastore.bootstrap.servers, "
                        f"${BOOTSTRAP_ENV} or {DEFAULT_BOOTSTRAP})")
    p.add_argument("--listen", metavar="URL",
                   help="listener(s), http:// or https:// (default: listeners, else "
                        "http://127.0.0.1:8081)")
    p.add_argument("--leader-url", metavar="URL",
                   help="forward writes to this registry (omit on the single writer)")
    p.add_argument("--topic", help="storage topic (default: kafkastore.topic, else _schemas)")
    p.add_argument("--compatibility",
                   help="default compatibility level (default: schema.compatibility.level, "
                        "else BACKWARD)")
    p.add_argument("--override", action="append", default=[], type=key_value, metavar="KEY=VALUE",
                   help="any registry setting, repeatable (wins over the file)")
    p.set_defaults(func=run)


def registry_config(args: argparse.Namespace) -> RegistryConfig:
    """Settings: the properties file < --override < the dedicated flags."""
    from samsa.config import read_properties
    from samsa.registry.server import RegistryConfig

    props: dict[str, str] = read_properties(args.config_file) if args.config_file else {}
    props.update(dict(args.override))
    bootstrap = (args.bootstrap_server or os.environ.get(BOOTSTRAP_ENV)
                 or ("" if props.get("kafkastore.bootstrap.servers") else DEFAULT_BOOTSTRAP))
    if args.bootstrap_server:  # the flag wins over the file
        props.pop("kafkastore.bootstrap.servers", None)
    return RegistryConfig(
        bootstrap=bootstrap, listener=args.listen or props.get("listeners") or "http://127.0.0.1:8081",
        topic=args.topic or props.get("kafkastore.topic") or "_schemas",
        leader_url=args.leader_url,
        compatibility=(args.compatibility or props.get("schema.compatibility.level")
                       or props.get("avro.compatibility.level") or "BACKWARD").upper(),
        timeout_s=int(props.get("kafkastore.timeout.ms") or 30000) / 1000,
        props=props)


async def _run(cfg: RegistryConfig) -> None:
    from samsa.registry.server import RegistryServer

    server = RegistryServer(cfg)
    await server.start()
    print(f"samsa: schema registry listening on {', '.join(server.urls)} "
          f"(cluster {server.store.bootstrap})", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.stop()


def run(args: argparse.Namespace) -> int:
    from samsa.config import ConfigError
    from samsa.registry.compat import LEVELS
    from samsa.registry.errors import RegistryError

    try:
        cfg = registry_config(args)
    except (ConfigError, OSError, ValueError) as e:
        print(f"samsa registry: error: {e}", file=sys.stderr)
        return 2
    if cfg.compatibility not in LEVELS:
        print(f"samsa registry: error: unknown compatibility level {cfg.compatibility!r}",
              file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        asyncio.run(_run(cfg))
    except ConfigError as e:
        print(f"samsa registry: error: {e}", file=sys.stderr)
        return 1
    except RegistryError as e:
        print(f"samsa registry: error: {e.message}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"samsa registry: cannot start: {e}", file=sys.stderr)
        return 1
    return 0
