"""`samsa connect`: run a Connect worker (standalone / distributed, like connect-standalone.sh and
connect-distributed.sh) or manage connectors on a running one over its REST API."""

from __future__ import annotations

import argparse
import logging
import sys


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("connect", help="Kafka Connect: run a worker, manage connectors",
                       description="Kafka Connect compatible workers with connectors in Python.")
    csub = p.add_subparsers(dest="connect_command", required=True)
    st = csub.add_parser("standalone", help="run a standalone worker (connect-standalone.sh)",
                         description="Run one worker with the connectors given as .properties or "
                                     ".json files; offsets in offset.storage.file.filename.")
    st.add_argument("worker_properties")
    st.add_argument("connector_files", nargs="*")
    st.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                    help="any worker config, repeatable")
    st.set_defaults(func=run_standalone)
    di = csub.add_parser("distributed", help="run a distributed worker (connect-distributed.sh)",
                         description="Join the Connect cluster named by group.id; configs, "
                                     "offsets and statuses live in the three internal topics.")
    di.add_argument("worker_properties")
    di.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                    help="any worker config, repeatable")
    di.set_defaults(func=run_distributed)
    try:
        from .connect_client import add_connectors_parser
    except ImportError:
        return
    add_connectors_parser(csub)


def _props(args: argparse.Namespace) -> dict[str, str]:
    from samsa.config import ConfigError, read_properties
    props = read_properties(args.worker_properties)
    for item in args.override:
        k, sep, v = item.partition("=")
        if not sep:
            raise ConfigError(f"--override expects KEY=VALUE, got {item!r}")
        props[k.strip()] = v.strip()
    return props


def _run(args: argparse.Namespace, distributed: bool) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from samsa.config import ConfigError
    from samsa.connect.errors import ConnectException
    name = "distributed" if distributed else "standalone"
    try:
        props = _props(args)
        import uvloop

        from samsa.connect.runtime.process import run_worker
        uvloop.run(run_worker(props, distributed, list(getattr(args, "connector_files", []))))
    except (ConfigError, ConnectException) as e:
        print(f"samsa connect {name}: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"samsa connect {name}: cannot start: {e}", file=sys.stderr)
        return 1
    return 0


def run_standalone(args: argparse.Namespace) -> int:
    return _run(args, False)


def run_distributed(args: argparse.Namespace) -> int:
    return _run(args, True)
