"""`samsa quotas set|describe`: client quotas the way kafka-configs.sh sets and shows them
(--entity-type users|clients, each followed by --entity-name NAME or --entity-default;
--add-config k=v,... and --delete-config k,...), over AlterClientQuotas / DescribeClientQuotas."""

from __future__ import annotations

import argparse
from typing import Any

from ._common import CliError, UsageError, add_bootstrap, guarded

PROG = "samsa quotas"
DESCRIBE_CLIENT_QUOTAS, ALTER_CLIENT_QUOTAS = 48, 49
_TYPES = {"users": "user", "clients": "client-id"}
_SHOWN = {"user": "user-principal", "client-id": "client-id"}


class _Entity(argparse.Action):
    """Keeps --entity-type / --entity-name / --entity-default in the order given."""

    def __call__(self, parser: argparse.ArgumentParser, ns: argparse.Namespace, values: Any,
                 option: str | None = None) -> None:
        seq = list(getattr(ns, "entity", None) or [])
        seq.append((option, values))
        ns.entity = seq


def _add_entity_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--entity-type", action=_Entity, choices=sorted(_TYPES),
                   help="users or clients (repeat for a user and client-id pair)")
    p.add_argument("--entity-name", action=_Entity, metavar="NAME",
                   help="the user principal or client id of the preceding --entity-type")
    p.add_argument("--entity-default", action=_Entity, nargs=0,
                   help="the default of the preceding --entity-type")
    add_bootstrap(p, command_config=True)


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("quotas", help="set and describe client quotas",
                       description="Client quotas per user and/or client id (like Kafka's "
                                   "kafka-configs.sh --entity-type users|clients).")
    qsub = p.add_subparsers(dest="quotas_command", required=True, metavar="ACTION")
    s = qsub.add_parser("set", help="add or delete quotas of one entity")
    _add_entity_args(s)
    s.add_argument("--add-config", default="", metavar="K=V,...",
                   help="quotas to set, e.g. producer_byte_rate=1048576,request_percentage=50")
    s.add_argument("--delete-config", default="", metavar="K,...", help="quotas to remove")
    s.set_defaults(func=guarded(f"{PROG} set", set_quotas), entity=[])
    d = qsub.add_parser("describe", help="show quotas")
    _add_entity_args(d)
    d.set_defaults(func=guarded(f"{PROG} describe", describe), entity=[])


def _entity(seq: list[tuple[str, Any]], need_names: bool) -> list[tuple[str, str | None, bool]]:
    """(entity type, name or None for the default, named or defaulted) per --entity-type."""
    out: list[list[Any]] = []
    for opt, value in seq:
        if opt == "--entity-type":
            if any(t == _TYPES[value] for t, *_ in out):
                raise UsageError(f"--entity-type {value} given twice")
            out.append([_TYPES[value], None, False])
        elif not out:
            raise UsageError(f"{opt} must follow an --entity-type")
        elif out[-1][2]:
            raise UsageError(f"{opt}: the --entity-type {out[-1][0]} already has a name")
        else:
            out[-1][1] = value if opt == "--entity-name" else None
            out[-1][2] = True
    if not out:
        raise UsageError("--entity-type users|clients is required")
    if need_names and not all(given for *_, given in out):
        raise UsageError("each --entity-type needs --entity-name or --entity-default")
    return [(t, n, given) for t, n, given in out]


def _describe_entity(entity: Any) -> str:
    parts = []
    for e in sorted(entity, key=lambda e: e.entity_type != "user"):
        shown = _SHOWN.get(e.entity_type, e.entity_type)
        parts.append(f"the default {shown}" if e.entity_name is None
                     else f"{shown} '{e.entity_name}'")
    return " and ".join(parts)


def _ops(add: str, delete: str) -> list[dict[str, Any]]:
    ops: list[dict[str, Any]] = []
    for item in (x for x in add.split(",") if x.strip()):
        key, sep, value = item.partition("=")
        if not sep:
            raise UsageError(f"--add-config expects k=v pairs, got {item!r}")
        try:
            ops.append({"key": key.strip(), "value": float(value), "remove": False})
        except ValueError:
            raise UsageError(f"--add-config {key.strip()}: {value!r} is not a number") from None
    ops += [{"key": k.strip(), "value": 0.0, "remove": True}
            for k in delete.split(",") if k.strip()]
    if not ops:
        raise UsageError("nothing to do: give --add-config and/or --delete-config")
    return ops


def set_quotas(args: argparse.Namespace) -> int:
    from ._wire import WireClient, error_name

    entity = _entity(args.entity, need_names=True)
    body = {"entries": [{"entity": [{"entity_type": t, "entity_name": n} for t, n, _ in entity],
                         "ops": _ops(args.add_config, args.delete_config)}],
            "validate_only": False}
    with WireClient(args.bootstrap_server, client_id="quotas-tool") as client:
        resp = client.call(ALTER_CLIENT_QUOTAS, body, version=1)
    e = resp.entries[0]
    if e.error_code != 0:
        raise CliError(f"{e.error_message or error_name(e.error_code)} "
                       f"({error_name(e.error_code)})")
    print(f"Completed updating quotas for {_describe_entity(e.entity)}.")
    return 0


def describe(args: argparse.Namespace) -> int:
    from ._wire import WireClient, error_name

    comps = []
    for t, n, given in _entity(args.entity, need_names=False):
        if not given:
            comps.append({"entity_type": t, "match_type": 2, "match": None})
        elif n is None:
            comps.append({"entity_type": t, "match_type": 1, "match": None})
        else:
            comps.append({"entity_type": t, "match_type": 0, "match": n})
    with WireClient(args.bootstrap_server, client_id="quotas-tool") as client:
        resp = client.call(DESCRIBE_CLIENT_QUOTAS, {"components": comps, "strict": True},
                           version=1)
    if resp.error_code != 0:
        raise CliError(f"{resp.error_message or error_name(resp.error_code)} "
                       f"({error_name(resp.error_code)})")
    for entry in sorted(resp.entries or (), key=lambda e: _describe_entity(e.entity)):
        values = ", ".join(f"{v.key}={float(v.value)}" for v in entry.values)
        print(f"Quota configs for {_describe_entity(entry.entity)} are {values}")
    return 0
