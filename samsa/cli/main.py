"""Entry point of the `samsa` command."""

from __future__ import annotations

import argparse
import sys

from . import serve, storage


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="samsa", description="Samsa: Kafka-compatible streaming")
    sub = parser.add_subparsers(dest="command", required=True)
    serve.add_parser(sub)
    storage.add_parser(sub)
    from . import clients
    clients.add_parsers(sub)
    from . import cluster, log_dirs, metadata_quorum, partitions
    cluster.add_parser(sub)
    metadata_quorum.add_parser(sub)
    partitions.add_parser(sub)
    log_dirs.add_parser(sub)
    from . import quotas  # client quotas (helper "quotas")
    quotas.add_parser(sub)
    from . import connect
    connect.add_parser(sub)
    from . import acls  # issue 17
    acls.add_parser(sub)
    from . import users
    users.add_parser(sub)
    args = parser.parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
