"""`samsa schemas`: register, list, get, check, delete and configure schemas through the schema
registry's REST API (any Confluent-compatible registry)."""

from __future__ import annotations

import argparse
import json
import os
import ssl
import sys
import urllib.error
import urllib.parse
from typing import TYPE_CHECKING, Any

from ._common import CliError, UsageError, guarded, key_value

if TYPE_CHECKING:
    from samsa.registry.client_config import RegistryClientSettings

REGISTRY_ENV = "SAMSA_REGISTRY_URL"
DEFAULT_URL = "http://127.0.0.1:8081"
CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
_EXT_TYPES = {".avsc": "AVRO", ".avro": "AVRO", ".proto": "PROTOBUF", ".json": "JSON"}


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("schemas", help="manage schemas in the schema registry",
                       description="Talk to a schema registry (Samsa's or any Confluent-compatible one).")
    p.add_argument("--registry-url", default=None,
                   help=f"registry URL (default: schema.registry.url of --command-config, "
                        f"${REGISTRY_ENV} or {DEFAULT_URL})")
    p.add_argument("--command-config", metavar="FILE",
                   help="registry client properties, Confluent's names: schema.registry.url, "
                        "basic.auth.credentials.source, basic.auth.user.info, "
                        "schema.registry.ssl.truststore.location, ...")
    p.add_argument("--property", action="append", default=[], type=key_value, metavar="KEY=VALUE",
                   help="a registry client property (as --command-config), repeatable")
    cmds = p.add_subparsers(dest="schemas_command", required=True)

    r = cmds.add_parser("register", help="register a schema under a subject; prints its id")
    _schema_args(r)
    r.add_argument("--normalize", action="store_true", help="normalize before registering")
    r.set_defaults(func=guarded("samsa schemas register", _register))

    ls = cmds.add_parser("list", help="list subjects, or the versions of one subject")
    ls.add_argument("subject", nargs="?")
    ls.add_argument("--deleted", action="store_true", help="include soft-deleted ones")
    ls.set_defaults(func=guarded("samsa schemas list", _list))

    g = cmds.add_parser("get", help="print a schema by subject and version, or by id")
    g.add_argument("subject", nargs="?")
    g.add_argument("--version", default="latest")
    g.add_argument("--id", type=int, help="schema id (instead of a subject)")
    g.add_argument("--json", action="store_true", help="print the registry's whole answer")
    g.set_defaults(func=guarded("samsa schemas get", _get))

    c = cmds.add_parser("check", help="test a schema's compatibility with a subject (exit 1 if not)")
    _schema_args(c)
    c.add_argument("--version", help="check against this version only (default: as the level says)")
    c.set_defaults(func=guarded("samsa schemas check", _check))

    d = cmds.add_parser("delete", help="delete a subject or one version (soft unless --permanent)")
    d.add_argument("subject")
    d.add_argument("--version")
    d.add_argument("--permanent", action="store_true", help="hard delete (after a soft delete)")
    d.set_defaults(func=guarded("samsa schemas delete", _delete))

    cf = cmds.add_parser("config", help="show or set the compatibility level (global or a subject's)")
    cf.add_argument("subject", nargs="?")
    cf.add_argument("--set", metavar="LEVEL", help="NONE, BACKWARD[_TRANSITIVE], FORWARD[_TRANSITIVE], "
                                                   "FULL[_TRANSITIVE]")
    cf.add_argument("--delete", action="store_true", help="remove the subject's (or global) setting")
    cf.set_defaults(func=guarded("samsa schemas config", _config))


def _schema_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("subject")
    p.add_argument("file", help="schema file, or - for standard input")
    p.add_argument("--type", choices=("AVRO", "JSON", "PROTOBUF"),
                   help="schema type (default: from the file extension, else AVRO)")
    p.add_argument("--reference", action="append", default=[], metavar="NAME=SUBJECT:VERSION",
                   help="a schema reference, repeatable")


def _settings(args: argparse.Namespace) -> RegistryClientSettings:
    from samsa.config import ConfigError, read_properties
    from samsa.registry.client_config import RegistryClientSettings

    try:
        props = read_properties(args.command_config) if args.command_config else {}
    except (OSError, ConfigError) as e:
        raise UsageError(f"cannot read --command-config: {e}") from None
    props.update(dict(args.property))
    url = (args.registry_url or props.get("schema.registry.url") or os.environ.get(REGISTRY_ENV)
           or DEFAULT_URL)
    try:
        return RegistryClientSettings.parse(url, props)
    except (ConfigError, ValueError) as e:
        raise UsageError(f"bad registry client configuration: {e}") from None


def _request(args: argparse.Namespace, method: str, path: str, body: Any = None) -> Any:
    settings = _settings(args)
    data = json.dumps(body).encode() if body is not None else None
    try:
        with settings.open(method, path, data, {"Content-Type": CONTENT_TYPE,
                                                "Accept": CONTENT_TYPE}) as resp:
            raw = resp.read()
    except urllib.error.HTTPError as e:
        text = e.read().decode(errors="replace")
        try:
            err = json.loads(text)
            raise CliError(f"{err.get('message')} (error {err.get('error_code')})") from None
        except (ValueError, AttributeError):
            raise CliError(f"HTTP {e.code}: {text[:200]}") from None
    except urllib.error.URLError as e:
        raise CliError(f"cannot reach the schema registry at {settings.url} ({e.reason})") from None
    except (OSError, ssl.SSLError) as e:
        raise CliError(f"cannot reach the schema registry at {settings.url} ({e})") from None
    return json.loads(raw) if raw.strip() else None


def _q(subject: str) -> str:
    return urllib.parse.quote(subject, safe="")


def _schema_body(args: argparse.Namespace) -> dict[str, Any]:
    try:
        text = sys.stdin.read() if args.file == "-" else open(args.file, encoding="utf-8").read()
    except OSError as e:
        raise UsageError(f"cannot read {args.file}: {e.strerror}") from None
    stype = args.type or _EXT_TYPES.get(os.path.splitext(args.file)[1].lower(), "AVRO")
    body: dict[str, Any] = {"schema": text}
    if stype != "AVRO":
        body["schemaType"] = stype
    refs = []
    for item in args.reference:
        name, sep, rest = item.partition("=")
        subject, sep2, version = rest.rpartition(":")
        if not sep or not sep2 or not version.lstrip("-").isdigit():
            raise UsageError(f"--reference expects NAME=SUBJECT:VERSION, got {item!r}")
        refs.append({"name": name, "subject": subject, "version": int(version)})
    if refs:
        body["references"] = refs
    return body


def _register(args: argparse.Namespace) -> int:
    out = _request(args, "POST", f"/subjects/{_q(args.subject)}/versions"
                                 f"{'?normalize=true' if args.normalize else ''}", _schema_body(args))
    print(out["id"])
    return 0


def _list(args: argparse.Namespace) -> int:
    flag = "?deleted=true" if args.deleted else ""
    items = _request(args, "GET", f"/subjects/{_q(args.subject)}/versions{flag}" if args.subject
                     else f"/subjects{flag}")
    for item in items:
        print(item)
    return 0


def _get(args: argparse.Namespace) -> int:
    if args.id is not None:
        out = _request(args, "GET", f"/schemas/ids/{args.id}")
    elif args.subject:
        out = _request(args, "GET", f"/subjects/{_q(args.subject)}/versions/{args.version}")
    else:
        raise UsageError("give a subject or --id")
    print(json.dumps(out, indent=2) if args.json else out["schema"])
    return 0


def _check(args: argparse.Namespace) -> int:
    path = f"/compatibility/subjects/{_q(args.subject)}/versions"
    if args.version:
        path += f"/{args.version}"
    out = _request(args, "POST", path + "?verbose=true", _schema_body(args))
    if out.get("is_compatible"):
        print("compatible")
        return 0
    print("incompatible")
    for m in out.get("messages") or []:
        print(f"  {m}")
    return 1


def _delete(args: argparse.Namespace) -> int:
    flag = "?permanent=true" if args.permanent else ""
    if args.version:
        out = _request(args, "DELETE", f"/subjects/{_q(args.subject)}/versions/{args.version}{flag}")
        print(f"deleted {args.subject} version {out}")
    else:
        out = _request(args, "DELETE", f"/subjects/{_q(args.subject)}{flag}")
        print(f"deleted {args.subject} versions {', '.join(str(v) for v in out)}")
    return 0


def _config(args: argparse.Namespace) -> int:
    path = f"/config/{_q(args.subject)}" if args.subject else "/config"
    if args.set and args.delete:
        raise UsageError("--set and --delete exclude each other")
    if args.set:
        out = _request(args, "PUT", path, {"compatibility": args.set.upper()})
        print(out["compatibility"])
    elif args.delete:
        _request(args, "DELETE", path)
        print("deleted")
    else:
        out = _request(args, "GET", path + ("?defaultToGlobal=true" if args.subject else ""))
        print(out["compatibilityLevel"])
    return 0
