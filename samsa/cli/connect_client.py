"""`samsa connect connectors ...`: manage connectors through a Connect worker's REST API (Samsa's
or Kafka Connect's): list, create, status, pause, resume, restart, stop, delete, offsets, config,
validate and plugins. Errors print the worker's own message on one line (exit 1); usage errors
exit 2."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from ._common import CliError, UsageError, guarded, key_value

CONNECT_URL_ENV = "SAMSA_CONNECT_URL"
DEFAULT_URL = "http://localhost:8083"
TIMEOUT_S = 100.0  # the worker itself gives up after 90 s


# ---- HTTP --------------------------------------------------------------------------------------
def request(args: argparse.Namespace, method: str, path: str, body: Any = None,
            params: list[tuple[str, str]] | None = None) -> tuple[int, Any]:
    """(status, JSON body or None). An error status raises CliError with the worker's message."""
    base = str(args.url).rstrip("/")
    try:
        with httpx.Client(timeout=TIMEOUT_S, verify=_tls(args)) as client:
            resp = client.request(method, base + path, params=tuple(params or ()),
                                  json=body if body is not None else None,
                                  headers={"accept": "application/json"})
    except httpx.HTTPError as e:
        raise CliError(f"cannot reach the Connect worker at {base} ({e})") from None
    data: Any = None
    if resp.content.strip():
        try:
            data = resp.json()
        except ValueError:
            data = resp.text
    if resp.status_code >= 400:
        message = data.get("message") if isinstance(data, dict) else None
        raise CliError(str(message) if message else f"HTTP {resp.status_code}: {str(data)[:200]}")
    return resp.status_code, data


def _tls(args: argparse.Namespace) -> Any:
    """What an https:// worker is checked with: --command-config's ssl.truststore.* (and
    ssl.keystore.* as the client certificate, for listeners.https.ssl.client.auth=required),
    else the system's CAs."""
    path = getattr(args, "command_config", None)
    if not path:
        return True
    from samsa.client_security import ClientSecurity, SecurityConfigError

    from ._common import load_client_properties

    settings = {k: v for k, v in load_client_properties(path).items() if k.startswith("ssl.")}
    try:
        return ClientSecurity.from_config(settings).ssl_context()
    except SecurityConfigError as e:
        raise UsageError(f"bad --command-config {path}: {e}") from None


def _c(name: str) -> str:
    return "/connectors/" + quote(name, safe="")


def _print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, sort_keys=False))


# ---- reading connector configs -----------------------------------------------------------------
def read_config_file(path: str) -> dict[str, Any]:
    """A connector config from a file: JSON ({"name", "config"} as POST /connectors takes, or a
    flat config map) or Java properties (as `connect-standalone` takes). `-` reads stdin."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}") from None
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except ValueError as e:
            raise UsageError(f"{path} is not valid JSON: {e}") from None
        if not isinstance(data, dict):
            raise UsageError(f"{path}: expected a JSON object")
        return data
    return _properties(text, path)


def _properties(text: str, path: str) -> dict[str, Any]:
    out: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        seps = [i for i in (line.find("="), line.find(":")) if i >= 0]
        if not seps:
            raise UsageError(f"{path}: cannot parse line {raw!r} (expected key=value)")
        sep = min(seps)
        out[line[:sep].strip()] = line[sep + 1:].strip()
    return out


def create_request(data: dict[str, Any], name: str | None) -> dict[str, Any]:
    """POST /connectors's body from a config file's content and an optional --name."""
    if isinstance(data.get("config"), dict):
        body = dict(data)
        config = dict(data["config"])
    else:
        config = dict(data)
        body = {}
    conn_name = name or body.get("name") or config.get("name")
    if not conn_name:
        raise UsageError("the connector has no name: give --name, or `name` in the file")
    body["name"] = conn_name
    body["config"] = config
    return body


# ---- commands ----------------------------------------------------------------------------------
def _list(args: argparse.Namespace) -> int:
    params = [("expand", e) for e in args.expand or []]
    _, data = request(args, "GET", "/connectors", params=params)
    if args.json or params:
        _print_json(data)
    else:
        for name in data:
            print(name)
    return 0


def _create(args: argparse.Namespace) -> int:
    body = create_request(read_config_file(args.file), args.name)
    if args.initial_state:
        body["initial_state"] = args.initial_state
    _, data = request(args, "POST", "/connectors", body)
    if args.json:
        _print_json(data)
    else:
        print(f"Created connector {data['name']} ({data.get('type', 'unknown')})")
    return 0


def _status(args: argparse.Namespace) -> int:
    _, data = request(args, "GET", _c(args.name) + "/status")
    if args.json:
        _print_json(data)
        return 0
    conn = data["connector"]
    print(f"connector {data['name']} ({data.get('type', 'unknown')}): {conn['state']} "
          f"on {conn['worker_id']}")
    for task in data.get("tasks", []):
        print(f"  task {task['id']}: {task['state']} on {task['worker_id']}")
    for item in [conn, *data.get("tasks", [])]:
        if item.get("trace"):
            which = "connector" if "id" not in item else f"task {item['id']}"
            print(f"\n{which} trace:\n{item['trace']}")
    return 0


def _simple(method: str, suffix: str, done: str) -> Any:
    def run(args: argparse.Namespace) -> int:
        request(args, method, _c(args.name) + suffix)
        print(f"{done} connector {args.name}")
        return 0
    return run


def _restart(args: argparse.Namespace) -> int:
    if args.task is not None:
        if args.include_tasks or args.only_failed:
            raise UsageError("--task restarts one task: it takes no --include-tasks/--only-failed")
        request(args, "POST", f"{_c(args.name)}/tasks/{args.task}/restart")
        print(f"Restarted task {args.task} of connector {args.name}")
        return 0
    params = [("includeTasks", str(args.include_tasks).lower()),
              ("onlyFailed", str(args.only_failed).lower())]
    status, data = request(args, "POST", _c(args.name) + "/restart", params=params)
    if status == 202 and isinstance(data, dict):
        restarting = [f"task {t['id']}" for t in data.get("tasks", []) if t["state"] == "RESTARTING"]
        if data.get("connector", {}).get("state") == "RESTARTING":
            restarting.insert(0, "connector")
        print(f"Restarting connector {args.name}: " + (", ".join(restarting) or "nothing to restart"))
    else:
        print(f"Restarted connector {args.name}")
    return 0


def _offsets(args: argparse.Namespace) -> int:
    if args.reset and args.alter:
        raise UsageError("give either --reset or --alter, not both")
    if args.reset:
        _, data = request(args, "DELETE", _c(args.name) + "/offsets")
        print(data.get("message", "") if isinstance(data, dict) else data)
        return 0
    if args.alter:
        body = read_config_file(args.alter)
        if "offsets" not in body:
            raise UsageError(f'{args.alter}: expected {{"offsets": [{{"partition": ..., "offset": ...}}]}}')
        _, data = request(args, "PATCH", _c(args.name) + "/offsets", body)
        print(data.get("message", "") if isinstance(data, dict) else data)
        return 0
    _, data = request(args, "GET", _c(args.name) + "/offsets")
    _print_json(data)
    return 0


def _config(args: argparse.Namespace) -> int:
    if args.file and (args.set or args.unset):
        raise UsageError("give either a config file (replace) or --set/--unset (patch), not both")
    if args.file:
        data = read_config_file(args.file)
        config = data["config"] if isinstance(data.get("config"), dict) else data
        status, info = request(args, "PUT", _c(args.name) + "/config", config)
        print(f"{'Created' if status == 201 else 'Updated'} connector {info['name']}")
        return 0
    if args.set or args.unset:
        patch: dict[str, str | None] = {k: v for k, v in args.set}
        patch.update({k: None for k in args.unset})
        _, info = request(args, "PATCH", _c(args.name) + "/config", patch)
        print(f"Updated connector {info['name']}")
        return 0
    _, data = request(args, "GET", _c(args.name) + "/config")
    if args.json:
        _print_json(data)
    else:
        for key in sorted(data):
            print(f"{key}={data[key]}")
    return 0


def _validate(args: argparse.Namespace) -> int:
    data = read_config_file(args.file)
    config = data["config"] if isinstance(data.get("config"), dict) else data
    plugin = args.plugin or config.get("connector.class")
    if not plugin:
        raise UsageError("no connector.class in the config: give --plugin")
    _, answer = request(args, "PUT", f"/connector-plugins/{quote(str(plugin), safe='')}/config/validate",
                        config)
    if args.json:
        _print_json(answer)
    else:
        for item in answer.get("configs", []):
            for err in item["value"].get("errors", []):
                print(f"{item['value']['name']}: {err}")
        count = answer.get("error_count", 0)
        print(f"{answer.get('name', plugin)}: {count} error{'s' if count != 1 else ''}")
    return 1 if answer.get("error_count") else 0


def _plugins(args: argparse.Namespace) -> int:
    if args.config:
        _, keys = request(args, "GET", f"/connector-plugins/{quote(args.config, safe='')}/config")
        if args.json:
            _print_json(keys)
        else:
            for key in keys:
                default = "(required)" if key.get("required") else f"default {key.get('default_value')!r}"
                print(f"{key['name']}  {key['type']}  {key['importance']}  {default}")
                if key.get("documentation"):
                    print(f"    {key['documentation']}")
        return 0
    params = [("connectorsOnly", "false")] if args.all else None
    _, data = request(args, "GET", "/connector-plugins", params=params)
    if args.json:
        _print_json(data)
    else:
        for p in data:
            print(f"{p['class']}  {p['type']}  {p.get('version', '')}")
    return 0


# ---- parser ------------------------------------------------------------------------------------
def _url_option(p: argparse.ArgumentParser, default: Any) -> None:
    p.add_argument("--url", default=default,
                   help=f"the Connect worker's REST URL (default: ${CONNECT_URL_ENV} or {DEFAULT_URL})")
    p.add_argument("--command-config", metavar="FILE",
                   default=None if default is not argparse.SUPPRESS else argparse.SUPPRESS,
                   help="client properties for an https:// worker: ssl.truststore.location "
                        "(and ssl.keystore.location for a client certificate), PEM")


def add_connectors_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """`connectors` and its commands, under the `samsa connect` subparsers."""
    p = sub.add_parser("connectors", help="manage connectors through a Connect worker's REST API",
                       description="Talk to a Connect worker's REST API (Samsa's or Kafka Connect's).")
    _url_option(p, os.environ.get(CONNECT_URL_ENV) or DEFAULT_URL)
    cmds = p.add_subparsers(dest="connectors_command", required=True)

    def cmd(name: str, help: str, fn: Any, *, positional_name: bool = True,
            json_flag: bool = True) -> argparse.ArgumentParser:
        c = cmds.add_parser(name, help=help, description=help)
        _url_option(c, argparse.SUPPRESS)  # also accepted after the command
        if positional_name:
            c.add_argument("name", help="connector name")
        if json_flag:
            c.add_argument("--json", action="store_true", help="print the worker's JSON answer")
        c.set_defaults(func=guarded(f"samsa connect connectors {name}", fn))
        return c

    ls = cmd("list", "list connectors", _list, positional_name=False)
    ls.add_argument("--expand", action="append", choices=("status", "info"),
                    help="include each connector's status and/or info (repeatable; prints JSON)")

    cr = cmd("create", "create a connector from a JSON or properties file", _create,
             positional_name=False)
    cr.add_argument("file", help='JSON ({"name", "config"} or a config map) or .properties; - for stdin')
    cr.add_argument("--name", help="connector name (default: `name` in the file)")
    cr.add_argument("--initial-state", choices=("RUNNING", "PAUSED", "STOPPED"),
                    type=str.upper, help="state to create it in (KIP-980)")

    cmd("status", "show a connector's and its tasks' states", _status)
    cmd("pause", "pause a connector and its tasks", _simple("PUT", "/pause", "Pausing"),
        json_flag=False)
    cmd("resume", "resume a paused or stopped connector", _simple("PUT", "/resume", "Resuming"),
        json_flag=False)
    cmd("stop", "stop a connector: no tasks, offsets can be changed", _simple("PUT", "/stop", "Stopped"),
        json_flag=False)
    cmd("delete", "delete a connector", _simple("DELETE", "", "Deleted"), json_flag=False)

    rs = cmd("restart", "restart a connector (and tasks), or one task", _restart, json_flag=False)
    rs.add_argument("--task", type=int, metavar="ID", help="restart only this task")
    rs.add_argument("--include-tasks", action="store_true", help="restart the tasks too")
    rs.add_argument("--only-failed", action="store_true", help="restart only failed instances")

    of = cmd("offsets", "show, alter or reset a connector's offsets (KIP-875)", _offsets,
             json_flag=False)
    of.add_argument("--alter", metavar="FILE", help='JSON file {"offsets": [{"partition", "offset"}]}')
    of.add_argument("--reset", action="store_true", help="delete all of its offsets")

    cf = cmd("config", "show a connector's config, replace it (FILE) or patch it (--set/--unset)",
             _config)
    cf.add_argument("file", nargs="?", help="a full config to replace the current one")
    cf.add_argument("--set", action="append", type=key_value, default=[], metavar="KEY=VALUE",
                    help="patch one key (repeatable)")
    cf.add_argument("--unset", action="append", default=[], metavar="KEY",
                    help="remove one key (repeatable)")

    va = cmd("validate", "validate a connector config (exit 1 when it has errors)", _validate,
             positional_name=False)
    va.add_argument("file", help="JSON or properties file; - for stdin")
    va.add_argument("--plugin", help="connector class (default: connector.class in the file)")

    pl = cmd("plugins", "list installed plugins, or show one plugin's config keys", _plugins,
             positional_name=False)
    pl.add_argument("--all", action="store_true", help="include converters, transforms, predicates")
    pl.add_argument("--config", metavar="PLUGIN", help="show this plugin's config definition")
