"""Shared pieces of the client commands: the --bootstrap-server option, error handling that turns
Kafka errors into one-line messages and exit codes, and librdkafka configuration defaults."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar

from confluent_kafka import KafkaError, KafkaException, Message
from confluent_kafka.admin import AdminClient, ClusterMetadata

T = TypeVar("T")

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
BOOTSTRAP_ENV = "SAMSA_BOOTSTRAP_SERVER"
CONNECT_TIMEOUT_S = 5.0  # how long to wait for the first metadata before "cannot reach broker"
REQUEST_TIMEOUT_S = 30.0  # admin operations once connected

EXIT_ERROR = 1
EXIT_USAGE = 2

Command = Callable[[argparse.Namespace], int]

# librdkafka error codes meaning "we never got an answer from the broker"
_UNREACHABLE = {KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN,
                KafkaError._RESOLVE, KafkaError._TIMED_OUT_QUEUE}


class CliError(Exception):
    """A failure to report as `samsa <command>: error: <message>` with an exit code."""

    def __init__(self, message: str, code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.code = code


class UsageError(CliError):
    def __init__(self, message: str) -> None:
        super().__init__(message, EXIT_USAGE)


def add_bootstrap(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap-server", metavar="HOST:PORT",
                   default=os.environ.get(BOOTSTRAP_ENV) or DEFAULT_BOOTSTRAP,
                   help=f"broker to connect to (default: ${BOOTSTRAP_ENV} or {DEFAULT_BOOTSTRAP})")


def key_value(text: str) -> tuple[str, str]:
    """argparse type for KEY=VALUE options."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value


def comma_names(text: str, by_name: Mapping[str, T], what: str, choices: str) -> list[T]:
    """Comma-separated names (any case) looked up in `by_name` (lower-case keys), for argparse
    types; an unknown name is an ArgumentTypeError listing `choices`."""
    out: list[T] = []
    for part in text.split(","):
        value = by_name.get(part.strip().lower())
        if value is None:
            raise argparse.ArgumentTypeError(
                f"unknown {what} {part.strip()!r} (choose from {choices})")
        out.append(value)
    return out


def admin_result(future: Future[Any]) -> Any:
    """An admin future's result, waiting a little longer than the request's own timeout."""
    return future.result(timeout=REQUEST_TIMEOUT_S + 5)


def base_config(bootstrap: str) -> dict[str, Any]:
    """librdkafka settings every client command uses: quiet logs (errors are reported by the
    command itself) and a short connection timeout so an unreachable broker fails fast."""
    return {
        "bootstrap.servers": bootstrap,
        "log_level": 0,
        "socket.connection.setup.timeout.ms": int(CONNECT_TIMEOUT_S * 1000),
        "client.id": "samsa-cli",
    }


def error_of(e: BaseException) -> KafkaError | None:
    if isinstance(e, KafkaException) and e.args and isinstance(e.args[0], KafkaError):
        return e.args[0]
    return None


def describe_error(e: BaseException) -> str:
    """The broker's (or librdkafka's) message for an error, with the Kafka error name."""
    err = error_of(e)
    if err is None:
        return str(e)
    text = err.str() or err.name()
    name = err.name()
    return text if name in text or name.startswith("_") else f"{text} ({name})"


def is_unreachable(e: BaseException) -> bool:
    err = error_of(e)
    return err is not None and err.code() in _UNREACHABLE


def unreachable(bootstrap: str, e: BaseException | None = None) -> CliError:
    detail = f" ({describe_error(e)})" if e is not None else ""
    return CliError(f"cannot reach broker at {bootstrap}{detail}")


def fetch_metadata(client: Any, bootstrap: str, topic: str | None = None) -> ClusterMetadata:
    """Metadata for all topics (or one), turning a timeout into "cannot reach broker"."""
    try:
        if topic is None:
            return client.list_topics(timeout=CONNECT_TIMEOUT_S)
        return client.list_topics(topic, timeout=CONNECT_TIMEOUT_S)
    except KafkaException as e:
        if is_unreachable(e):
            raise unreachable(bootstrap, e) from None
        raise


def connect_admin(bootstrap: str) -> tuple[AdminClient, ClusterMetadata]:
    """An admin client known to reach the broker, and the cluster's current metadata."""
    try:
        admin = AdminClient(base_config(bootstrap))
    except KafkaException as e:
        raise UsageError(f"bad client configuration: {describe_error(e)}") from None
    return admin, fetch_metadata(admin, bootstrap)


def unknown_topic(topic: str) -> CliError:
    return CliError(f"unknown topic {topic!r} (see `samsa topics list`)")


def position(msg: Message) -> tuple[int, int]:
    """(partition, offset) of a delivered or consumed message."""
    return int(msg.partition() or 0), int(msg.offset() or 0)


def header_list(msg: Message) -> list[tuple[str, bytes | None]]:
    raw: Any = msg.headers() or []
    return [(str(k), v if v is None or isinstance(v, bytes) else str(v).encode())
            for k, v in raw]


def guarded(prog: str, fn: Command) -> Command:
    """Run a command, printing errors as one clear line instead of a traceback."""

    def run(args: argparse.Namespace) -> int:
        try:
            return fn(args)
        except CliError as e:
            print(f"{prog}: error: {e}", file=sys.stderr)
            return e.code
        except KafkaException as e:
            if is_unreachable(e):
                e2 = unreachable(getattr(args, "bootstrap_server", "?"), e)
                print(f"{prog}: error: {e2}", file=sys.stderr)
            else:
                print(f"{prog}: error: {describe_error(e)}", file=sys.stderr)
            return EXIT_ERROR
        except KeyboardInterrupt:
            print(f"{prog}: interrupted", file=sys.stderr)
            return 130
        except BrokenPipeError:
            # stdout closed early (e.g. `| head`): stop quietly, like other Unix tools
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            return EXIT_ERROR

    return run


def _cell(v: Any) -> str:
    return "-" if v is None or v == "" else str(v)


def print_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Left-aligned columns, at least two spaces apart, '-' for empty cells (Kafka's tools' look)."""
    cells = [list(header)] + [[_cell(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    for r in cells:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
