"""Shared pieces of the client commands: the --bootstrap-server and --command-config options, error
handling that turns Kafka errors into one-line messages and exit codes, and librdkafka
configuration defaults.

`--command-config FILE` holds client properties as Kafka's tools take them (security.protocol,
sasl.*, ssl.*; Java or librdkafka names, see samsa.client_security). `guarded()` loads it for the
command it runs; `base_config()` and the raw-protocol clients then apply it to every connection,
and a failed TLS handshake or SASL login becomes a one-line error."""

from __future__ import annotations

import argparse
import contextvars
import os
import sys
import time
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


class _Security:
    """The running command's client security: librdkafka settings from --command-config (and
    --producer.config / --consumer.config) and the TLS/SASL failures clients reported."""

    def __init__(self, settings: dict[str, Any] | None = None) -> None:
        self.settings: dict[str, Any] = dict(settings or {})
        self.failures: list[str] = []

    def on_error(self, err: KafkaError) -> None:
        if err.code() in _SECURITY_ERRORS:
            self.failures.append(err.str() or err.name())


_SECURITY_ERRORS = {KafkaError._AUTHENTICATION, KafkaError._SSL}
_security: contextvars.ContextVar[_Security] = contextvars.ContextVar("samsa_cli_security")


def current_security() -> _Security:
    s = _security.get(None)
    if s is None:
        s = _Security()
        _security.set(s)
    return s


def add_bootstrap(p: argparse.ArgumentParser, command_config: bool = False) -> None:
    p.add_argument("--bootstrap-server", metavar="HOST:PORT",
                   default=os.environ.get(BOOTSTRAP_ENV) or DEFAULT_BOOTSTRAP,
                   help=f"broker to connect to (default: ${BOOTSTRAP_ENV} or {DEFAULT_BOOTSTRAP})")
    if command_config:
        add_command_config(p)


def add_command_config(p: argparse.ArgumentParser) -> None:
    p.add_argument("--command-config", metavar="FILE",
                   help="client properties file, as Kafka's tools take (security.protocol, "
                        "sasl.mechanism, sasl.jaas.config, ssl.truststore.location, ...)")


def load_client_properties(path: str, option: str = "--command-config") -> dict[str, Any]:
    """A client properties file as librdkafka settings; UsageError naming the file if it cannot
    be read or used."""
    from samsa.client_security import SecurityConfigError, librdkafka_config, read_client_properties

    try:
        return librdkafka_config(read_client_properties(path))
    except OSError as e:
        raise UsageError(f"cannot read {option} {path}: {e.strerror or e}") from None
    except (SecurityConfigError, UnicodeDecodeError) as e:
        raise UsageError(f"bad {option} {path}: {e}") from None


def security_failure() -> CliError | None:
    """A CliError for the first TLS/SASL failure a client reported, if any."""
    s = current_security()
    if not s.failures:
        return None
    return CliError(f"authentication failed: {s.failures[0]}")


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
    command itself), a short connection timeout so an unreachable broker fails fast, and the
    command's security settings (--command-config) with an error callback that notes TLS and
    SASL failures."""
    sec = current_security()
    return {
        "bootstrap.servers": bootstrap,
        "log_level": 0,
        "socket.connection.setup.timeout.ms": int(CONNECT_TIMEOUT_S * 1000),
        "client.id": "samsa-cli",
        "error_cb": sec.on_error,
        **sec.settings,
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
    return CliError(f"cannot reach broker at {bootstrap}{detail}{tls_hint()}")


def tls_hint() -> str:
    """What to check when a TLS listener drops the connection without saying why (a TLS 1.3
    server refusing a missing client certificate looks like a closed connection)."""
    proto = str(current_security().settings.get("security.protocol", "")).upper()
    if proto not in ("SSL", "SASL_SSL"):
        return ""
    return ("; with security.protocol=" + proto + " check that the address is a TLS listener "
            "and, if it requires client certificates, that ssl.keystore.* (or "
            "ssl.certificate.location/ssl.key.location) name one the broker trusts")


def fetch_metadata(client: Any, bootstrap: str, topic: str | None = None) -> ClusterMetadata:
    """Metadata for all topics (or one), turning a timeout into "cannot reach broker", or into
    "authentication failed" as soon as the client reports a failed TLS handshake or SASL login
    (librdkafka would otherwise keep retrying until the timeout)."""
    deadline = time.monotonic() + CONNECT_TIMEOUT_S
    while True:
        left = deadline - time.monotonic()
        try:
            if topic is None:
                return client.list_topics(timeout=max(0.05, min(0.5, left)))
            return client.list_topics(topic, timeout=max(0.05, min(0.5, left)))
        except KafkaException as e:
            if not is_unreachable(e):
                raise
            _serve_errors(client)
            failed = security_failure()
            if failed is not None:
                raise failed from None
            if time.monotonic() >= deadline:
                raise unreachable(bootstrap, e) from None


def _serve_errors(client: Any) -> None:
    """Let a client run its error callback (list_topics does not)."""
    poll = getattr(client, "poll", None)
    if poll is None or not hasattr(client, "list_topics"):
        return
    try:
        poll(0)  # a Consumer has no assignment yet: no message comes back
    except (KafkaException, RuntimeError):
        pass


def open_socket(host: str, port: int, timeout_s: float, client_id: str = "samsa-cli") -> Any:
    """A blocking socket to a broker for the raw-protocol clients, with the command's TLS and
    SASL settings applied. OSError when unreachable; CliError when TLS or SASL fails."""
    import socket

    from samsa.client_security import (
        AuthenticationError,
        ClientSecurity,
        SecurityConfigError,
        secure_socket,
    )

    settings = current_security().settings
    if not settings:
        return socket.create_connection((host, port), timeout=timeout_s)
    try:
        sec = ClientSecurity.from_config(settings)
        return secure_socket(host, port, sec, timeout_s, client_id)
    except SecurityConfigError as e:
        raise UsageError(f"bad client security settings: {e}") from None
    except AuthenticationError as e:
        raise CliError(f"authentication failed: {e}") from None


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
        token = _security.set(_Security())
        try:
            path = getattr(args, "command_config", None)
            if path:
                current_security().settings.update(load_client_properties(path))
            return fn(args)
        except CliError as e:
            print(f"{prog}: error: {e}", file=sys.stderr)
            return e.code
        except KafkaException as e:
            failed = security_failure()
            if failed is not None:
                print(f"{prog}: error: {failed}", file=sys.stderr)
            elif is_unreachable(e):
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
        finally:
            _security.reset(token)

    return run


def _cell(v: Any) -> str:
    return "-" if v is None or v == "" else str(v)


def print_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Left-aligned columns, at least two spaces apart, '-' for empty cells (Kafka's tools' look)."""
    cells = [list(header)] + [[_cell(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    for r in cells:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
