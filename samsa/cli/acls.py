"""`samsa acls add|list|remove`: ACL management with kafka-acls.sh's options (--allow-principal,
--deny-principal, --allow-host, --deny-host, --operation, --topic, --group, --cluster,
--transactional-id, --resource-pattern-type, --principal, --producer, --consumer), through
CreateAcls / DescribeAcls / DeleteAcls. `--command-config FILE` adds client properties (e.g.
security.protocol and credentials of an admin principal), as Kafka's tools do."""

from __future__ import annotations

import argparse
from typing import Any

from confluent_kafka import KafkaException

from ._common import (
    UsageError,
    add_bootstrap,
    admin_result,
    base_config,
    describe_error,
    guarded,
)

PROG = "samsa acls"
_OPERATIONS = ("ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "CLUSTER_ACTION",
               "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE")
_PATTERNS = ("LITERAL", "PREFIXED", "ANY", "MATCH")


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("acls", help="add, list or remove ACLs (like kafka-acls.sh)",
                       description="Manage ACLs (like Kafka's kafka-acls.sh).")
    asub = p.add_subparsers(dest="acls_command", required=True, metavar="ACTION")
    for name, fn, what in (("add", add, "add ACLs"), ("list", list_acls, "list ACLs"),
                           ("remove", remove, "remove ACLs")):
        a = asub.add_parser(name, help=what)
        _options(a, name)
        add_bootstrap(a, command_config=True)
        a.set_defaults(func=guarded(f"{PROG} {name}", fn))


def _options(a: argparse.ArgumentParser, action: str) -> None:
    a.add_argument("--topic", action="append", default=[], help="topic resource (or *)")
    a.add_argument("--group", action="append", default=[], help="consumer group resource (or *)")
    a.add_argument("--cluster", action="store_true", help="the cluster resource")
    a.add_argument("--transactional-id", action="append", default=[],
                   help="transactional id resource (or *)")
    a.add_argument("--resource-pattern-type", default=None, type=str.upper,
                   choices=_PATTERNS, help="LITERAL (default for add/remove), PREFIXED, or for "
                   "list/remove filters ANY and MATCH (default for list: ANY)")
    if action == "list":
        a.add_argument("--principal", action="append", default=[],
                       help="only ACLs of this principal")
        return
    a.add_argument("--allow-principal", action="append", default=[], metavar="PRINCIPAL",
                   help="principal (Type:name) the ALLOW ACLs are for")
    a.add_argument("--deny-principal", action="append", default=[], metavar="PRINCIPAL",
                   help="principal (Type:name) the DENY ACLs are for")
    a.add_argument("--allow-host", action="append", default=[], help="host of the ALLOW ACLs")
    a.add_argument("--deny-host", action="append", default=[], help="host of the DENY ACLs")
    a.add_argument("--operation", action="append", default=[], type=str.upper,
                   choices=_OPERATIONS, help="operation (repeatable; default ALL)")
    a.add_argument("--producer", action="store_true",
                   help="convenience: WRITE, DESCRIBE, CREATE on the topics (and WRITE, DESCRIBE "
                   "on the transactional ids)")
    a.add_argument("--consumer", action="store_true",
                   help="convenience: READ, DESCRIBE on the topics, READ on the groups")
    if action == "remove":
        a.add_argument("--force", action="store_true",
                       help="accepted for kafka-acls.sh compatibility (no prompt is shown)")


def _admin(args: argparse.Namespace) -> Any:
    from confluent_kafka.admin import AdminClient

    from ._common import fetch_metadata

    try:
        admin = AdminClient(base_config(args.bootstrap_server))
    except KafkaException as e:
        raise UsageError(f"bad client configuration: {describe_error(e)}") from None
    fetch_metadata(admin, args.bootstrap_server)  # fails fast: unreachable, TLS or SASL refused
    return admin


def _resources(args: argparse.Namespace) -> list[tuple[str, str]]:
    out = [("TOPIC", t) for t in args.topic] + [("GROUP", g) for g in args.group]
    out += [("TRANSACTIONAL_ID", t) for t in args.transactional_id]
    if args.cluster:
        out.append(("BROKER", "kafka-cluster"))
    return out


def _entries(args: argparse.Namespace) -> list[tuple[str, str, str]]:
    """(principal, host, ALLOW/DENY) of the ACLs to add or remove."""
    out = []
    for perm, principals, hosts in (("ALLOW", args.allow_principal, args.allow_host),
                                    ("DENY", args.deny_principal, args.deny_host)):
        for pr in principals:
            if ":" not in pr:
                raise UsageError(f"principal {pr!r}: expected Type:name, e.g. User:alice")
            for h in hosts or ["*"]:
                out.append((pr, h, perm))
    return out


def _ops_per_resource(args: argparse.Namespace, rtype: str) -> list[str]:
    if args.producer or args.consumer:
        ops: list[str] = []
        if args.producer and rtype == "TOPIC":
            ops += ["WRITE", "DESCRIBE", "CREATE"]
        if args.producer and rtype == "TRANSACTIONAL_ID":
            ops += ["WRITE", "DESCRIBE"]
        if args.consumer and rtype == "TOPIC":
            ops += ["READ", "DESCRIBE"]
        if args.consumer and rtype == "GROUP":
            ops += ["READ"]
        return ops + [o for o in args.operation if o not in ops]
    return args.operation or ["ALL"]


def _new(cls: Any, *args: Any) -> Any:
    """confluent-kafka's filters take None for "any" (its type stubs say str)."""
    return cls(*args)


def _pattern_name(b: Any) -> str:
    return str(b.resource_pattern_type.name)


def _show_resource(rtype: str, name: str, pattern: str) -> str:
    kind = "CLUSTER" if rtype == "BROKER" else rtype
    return f"ResourcePattern(resourceType={kind}, name={name}, patternType={pattern})"


def _show_entry(b: Any) -> str:
    return (f"(principal={b.principal}, host={b.host}, operation={b.operation.name}, "
            f"permissionType={b.permission_type.name})")


def _bindings(args: argparse.Namespace) -> list[Any]:
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    pattern = args.resource_pattern_type or "LITERAL"
    if pattern not in ("LITERAL", "PREFIXED"):
        raise UsageError("A '--resource-pattern-type' value of 'ANY' or 'MATCH' is not valid "
                         "when adding acls.")
    resources = _resources(args)
    if not resources:
        raise UsageError("You must specify one of: --topic, --cluster, --group, "
                         "--transactional-id")
    entries = _entries(args)
    if not entries:
        raise UsageError("You must specify one of: --allow-principal, --deny-principal when "
                         "trying to add ACLs.")
    out = []
    for rtype, name in resources:
        for op in _ops_per_resource(args, rtype):
            for pr, host, perm in entries:
                out.append(AclBinding(ResourceType[rtype], name, ResourcePatternType[pattern],
                                      pr, host, AclOperation[op], AclPermissionType[perm]))
    return out


def _print_current(admin: Any, resources: list[tuple[str, str]], pattern: str) -> None:
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    for rtype, name in resources:
        flt = _new(AclBindingFilter, ResourceType[rtype], name, ResourcePatternType[pattern],
                   None, None, AclOperation.ANY, AclPermissionType.ANY)
        found = admin_result(admin.describe_acls(flt, request_timeout=30))
        print(f"Current ACLs for resource `{_show_resource(rtype, name, pattern)}`: ")
        for b in found:
            print(f" \t{_show_entry(b)} ")
        print()


def add(args: argparse.Namespace) -> int:
    admin = _admin(args)
    bindings = _bindings(args)
    by_resource: dict[tuple[str, str, str], list[Any]] = {}
    for b in bindings:
        by_resource.setdefault((b.restype.name, b.name, _pattern_name(b)), []).append(b)
    for (rtype, name, pattern), group in by_resource.items():
        print(f"Adding ACLs for resource `{_show_resource(rtype, name, pattern)}`: ")
        for b in group:
            print(f" \t{_show_entry(b)} ")
        print()
    futures = admin.create_acls(bindings, request_timeout=30)
    for f in futures.values():
        admin_result(f)
    _print_current(admin, _resources(args), args.resource_pattern_type or "LITERAL")
    return 0


def _filters(args: argparse.Namespace, default_pattern: str) -> list[Any]:
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    pattern = ResourcePatternType[args.resource_pattern_type or default_pattern]
    resources: list[tuple[Any, str | None]] = \
        [(ResourceType[t], n) for t, n in _resources(args)] or [(ResourceType.ANY, None)]
    principals: list[tuple[str | None, str | None, str]] = []
    if getattr(args, "principal", None):
        principals = [(p, None, "ANY") for p in args.principal]
    elif hasattr(args, "allow_principal") and (args.allow_principal or args.deny_principal):
        principals = [(p, h, perm) for p, h, perm in _entries(args)]
    ops = ["ANY"]
    if hasattr(args, "operation") and (args.operation or args.producer or args.consumer):
        ops = []
    out = []
    for rtype, name in resources:
        rops = ops or _ops_per_resource(args, rtype.name)
        for pr, host, perm in principals or [(None, None, "ANY")]:
            for op in rops:
                out.append(_new(AclBindingFilter, rtype, name, pattern, pr, host,
                                AclOperation[op], AclPermissionType[perm]))
    return out


def list_acls(args: argparse.Namespace) -> int:
    admin = _admin(args)
    found: dict[tuple[str, str, str], list[Any]] = {}
    for flt in _filters(args, "ANY"):
        for b in admin_result(admin.describe_acls(flt, request_timeout=30)):
            key = (b.restype.name, b.name, _pattern_name(b))
            if b not in found.setdefault(key, []):
                found[key].append(b)
    for (rtype, name, pattern), group in sorted(found.items()):
        print(f"Current ACLs for resource `{_show_resource(rtype, name, pattern)}`: ")
        for b in group:
            print(f" \t{_show_entry(b)} ")
        print()
    return 0


def remove(args: argparse.Namespace) -> int:
    admin = _admin(args)
    if not _resources(args):
        raise UsageError("You must specify one of: --topic, --cluster, --group, "
                         "--transactional-id")
    filters = _filters(args, "LITERAL")
    removed = 0
    for f in admin.delete_acls(filters, request_timeout=30).values():
        removed += len(admin_result(f))
    print(f"Removed {removed} ACL(s).")
    pattern = args.resource_pattern_type or "LITERAL"
    if pattern in ("LITERAL", "PREFIXED"):
        _print_current(admin, _resources(args), pattern)
    return 0
