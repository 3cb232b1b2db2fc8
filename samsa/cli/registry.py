"""`samsa registry`: a standalone schema registry on an existing Samsa (or Kafka) cluster."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from ._common import add_bootstrap


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("registry", help="run a schema registry (Confluent-compatible REST API)",
                       description="Run a schema registry whose state is the _schemas topic of the "
                                   "cluster. Run several on one cluster by giving all but one of "
                                   "them --leader-url (the single writer's URL).")
    add_bootstrap(p)
    p.add_argument("--listen", default="127.0.0.1:8081", metavar="HOST:PORT",
                   help="HTTP address (default 127.0.0.1:8081)")
    p.add_argument("--leader-url", metavar="URL",
                   help="forward writes to this registry (omit on the single writer)")
    p.add_argument("--topic", default="_schemas", help="storage topic (default _schemas)")
    p.add_argument("--compatibility", default="BACKWARD",
                   help="default compatibility level (default BACKWARD)")
    p.set_defaults(func=run)


async def _run(args: argparse.Namespace) -> None:
    from samsa.registry.server import RegistryConfig, RegistryServer

    cfg = RegistryConfig(bootstrap=args.bootstrap_server, listener=args.listen, topic=args.topic,
                         leader_url=args.leader_url, compatibility=args.compatibility.upper())
    server = RegistryServer(cfg)
    await server.start()
    host, _ = cfg.host_port
    print(f"samsa: schema registry listening on http://{host}:{server.port} "
          f"(cluster {args.bootstrap_server})", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.stop()


def run(args: argparse.Namespace) -> int:
    from samsa.registry.compat import LEVELS
    from samsa.registry.errors import RegistryError

    if args.compatibility.upper() not in LEVELS:
        print(f"samsa registry: error: unknown compatibility level {args.compatibility!r}",
              file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        asyncio.run(_run(args))
    except RegistryError as e:
        print(f"samsa registry: error: {e.message}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"samsa registry: cannot start: {e}", file=sys.stderr)
        return 1
    return 0
