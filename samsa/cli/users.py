"""`samsa users scram set|describe|delete`: SASL/SCRAM credentials (KIP-554), what Kafka's
`kafka-configs.sh --entity-type users --alter --add-config 'SCRAM-SHA-256=[...]'` and
`--describe` do, through AlterUserScramCredentials / DescribeUserScramCredentials.
`--command-config` takes the client properties (e.g. security.protocol, sasl.*) like Kafka's tools."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from confluent_kafka import KafkaException

from ._common import (
    REQUEST_TIMEOUT_S,
    UsageError,
    add_bootstrap,
    admin_result,
    base_config,
    describe_error,
    guarded,
    print_table,
    security_failure,
)

PROG = "samsa users scram"
MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("users", help="manage SASL user credentials",
                       description="SASL/SCRAM credentials stored in the cluster metadata (like "
                                   "kafka-configs.sh --entity-type users).")
    usub = p.add_subparsers(dest="users_command", required=True, metavar="KIND")
    sp = usub.add_parser("scram", help="SCRAM-SHA-256 / SCRAM-SHA-512 credentials")
    ssub = sp.add_subparsers(dest="scram_command", required=True, metavar="ACTION")

    def common(q: argparse.ArgumentParser) -> None:
        add_bootstrap(q, command_config=True)

    s = ssub.add_parser("set", help="create or replace a user's credential")
    s.add_argument("--user", required=True)
    s.add_argument("--mechanism", choices=MECHANISMS, default="SCRAM-SHA-256")
    s.add_argument("--iterations", type=int, default=4096,
                   help="PBKDF2 iterations (Kafka accepts 4096..16384; default 4096)")
    g = s.add_mutually_exclusive_group(required=True)
    g.add_argument("--password")
    g.add_argument("--password-stdin", action="store_true", help="read the password from stdin")
    common(s)
    s.set_defaults(func=guarded(f"{PROG} set", _set))
    d = ssub.add_parser("describe", help="list users and their mechanisms/iterations")
    d.add_argument("--user", action="append", default=[], help="user (repeatable; default: all)")
    common(d)
    d.set_defaults(func=guarded(f"{PROG} describe", _describe))
    x = ssub.add_parser("delete", help="delete a user's credential for one mechanism")
    x.add_argument("--user", required=True)
    x.add_argument("--mechanism", choices=MECHANISMS, default="SCRAM-SHA-256")
    common(x)
    x.set_defaults(func=guarded(f"{PROG} delete", _delete))


def _admin(args: argparse.Namespace) -> Any:
    from confluent_kafka.admin import AdminClient

    try:
        return AdminClient(base_config(args.bootstrap_server))
    except KafkaException as e:
        raise UsageError(f"bad client configuration: {describe_error(e)}") from None


def _wait(admin: Any, fut: Any) -> Any:
    """The future's result; CliError as soon as the client reports a failed TLS handshake or
    SASL login (librdkafka would otherwise retry until the request times out)."""
    deadline = time.monotonic() + REQUEST_TIMEOUT_S + 5
    while not fut.done() and time.monotonic() < deadline:
        admin.poll(0.1)
        failed = security_failure()
        if failed is not None:
            raise failed
    return admin_result(fut)


def _mech(name: str) -> Any:
    from confluent_kafka.admin import ScramMechanism

    return ScramMechanism.SCRAM_SHA_256 if name == "SCRAM-SHA-256" else ScramMechanism.SCRAM_SHA_512


def _set(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import ScramCredentialInfo, UserScramCredentialUpsertion

    password = sys.stdin.readline().rstrip("\n") if args.password_stdin else args.password
    if not password:
        raise UsageError("the password must not be empty")
    admin = _admin(args)
    up = UserScramCredentialUpsertion(args.user, ScramCredentialInfo(_mech(args.mechanism),
                                                                     args.iterations),
                                      password.encode())
    for user, fut in admin.alter_user_scram_credentials([up]).items():
        _wait(admin, fut)
        print(f"Completed updating config for user {user}.")
    return 0


def _delete(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import UserScramCredentialDeletion

    admin = _admin(args)
    d = UserScramCredentialDeletion(args.user, _mech(args.mechanism))
    for user, fut in admin.alter_user_scram_credentials([d]).items():
        _wait(admin, fut)
        print(f"Completed updating config for user {user}.")
    return 0


def _describe(args: argparse.Namespace) -> int:
    admin = _admin(args)
    rows = []
    if args.user:
        results = {}
        for user, fut in admin.describe_user_scram_credentials(args.user).items():
            try:
                results[user] = _wait(admin, fut)
            except KafkaException as e:
                print(f"{PROG} describe: {user}: {describe_error(e)}", file=sys.stderr)
    else:
        results = _wait(admin, admin.describe_user_scram_credentials())
    for user, desc in sorted(results.items()):
        for info in desc.scram_credential_infos:
            name = "SCRAM-SHA-256" if info.mechanism == _mech("SCRAM-SHA-256") else "SCRAM-SHA-512"
            rows.append((user, name, info.iterations))
    print_table(("USER", "MECHANISM", "ITERATIONS"), rows)
    return 0 if len(results) == len(args.user) or not args.user else 1
