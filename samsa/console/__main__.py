"""`python -m samsa.console`: the console alone, in its own process (the broker's admin listener
serves the same app at `/` when it is on)."""

from __future__ import annotations

import argparse
import logging

from .context import ConsoleContext


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m samsa.console", description="Samsa's web console")
    p.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    p.add_argument("--listen", default="127.0.0.1:9644", metavar="HOST:PORT")
    p.add_argument("--schema-registry", metavar="URL")
    p.add_argument("--connect", metavar="URL")
    p.add_argument("--command-config", metavar="FILE",
                   help="client properties (security.protocol, sasl.mechanism, ssl.*) for the cluster")
    args = p.parse_args(argv)
    client: dict[str, str] = {}
    if args.command_config:
        from samsa.config import read_properties

        client = dict(read_properties(args.command_config))
    import uvicorn

    from .app import build_console

    logging.basicConfig(level=logging.INFO)
    host, _, port = args.listen.rpartition(":")
    app = build_console(ConsoleContext(args.bootstrap_server, client, args.schema_registry,
                                       connect_url=args.connect))
    print(f"samsa console on http://{host}:{port}", flush=True)
    uvicorn.run(app, host=host, port=int(port), log_level="warning")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
