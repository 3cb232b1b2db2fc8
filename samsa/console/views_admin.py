"""Connectors (through a Connect worker's REST API, when one is configured) and security (ACLs
and SCRAM users, when the cluster has an authorizer / SASL)."""

from __future__ import annotations

import json
from typing import Any

import httpx
from starlette.responses import Response
from starlette.routing import Route

from . import html as h
from .cluster import (
    MAX_PASSWORD_CHARS,
    MAX_USER_CHARS,
    SCRAM_MAX_ITERATIONS,
    SCRAM_MECHANISMS,
    SCRAM_MIN_ITERATIONS,
    ConsoleError,
)
from .registry import q
from .state import ConsoleState
from .web import Req, redirect, view


def _connect(req: Req, method: str, path: str, body: Any = None) -> Any:
    url = req.state.ctx.connect_url
    if not url:
        raise ConsoleError("no Kafka Connect worker is configured for this console", 404)
    try:
        r = httpx.request(method, url.rstrip("/") + path, json=body, timeout=15)
    except httpx.HTTPError as e:
        raise ConsoleError(f"Connect worker at {url} unreachable: {e}", 503) from None
    try:
        doc = r.json() if r.content else None
    except ValueError:
        doc = None
    if r.status_code // 100 != 2:
        msg = doc.get("message") if isinstance(doc, dict) else r.text[:300]
        raise ConsoleError(f"Connect refused: {msg} (HTTP {r.status_code})",
                           r.status_code if 400 <= r.status_code < 500 else 502)
    return doc


def connectors(req: Req) -> Response:
    if not req.state.ctx.connect_url:
        return req.page("Connectors", "<p>No Kafka Connect worker is configured "
                        "(start one with <code>samsa serve --connect</code>).</p>", "/connect")
    data = _connect(req, "GET", "/connectors?expand=status") or {}
    rows = []
    for name, info in sorted(data.items()):
        st = info.get("status", {})
        tasks = ", ".join(f"{t.get('id')}: {t.get('state')}" for t in st.get("tasks", []))
        rows.append([f'<a href="/connect/{h.u(name)}">{h.e(name)}</a>',
                     h.e(st.get("type")), h.e(st.get("connector", {}).get("state")), h.e(tasks)])
    create = h.form("/connect", '<label>Connector JSON ({"name": …, "config": {…}})'
                    '<textarea name="json" required></textarea></label><button>Create</button>',
                    cls="stack")
    body = (h.table(["connector", "type", "state", "tasks"], rows, raw=True, empty="no connectors")
            + "<h2>Create a connector</h2>" + create)
    return req.page("Connectors", body, "/connect")


def create_connector(req: Req) -> Response:
    try:
        doc = json.loads(req.form.get("json", ""))
    except ValueError as e:
        raise ConsoleError(f"not valid JSON: {e}") from None
    if not isinstance(doc, dict) or "name" not in doc or not isinstance(doc.get("config"), dict):
        raise ConsoleError('expected {"name": "...", "config": {...}}')
    _connect(req, "POST", "/connectors", doc)
    return redirect(f"/connect/{h.u(doc['name'])}", f"created connector {doc['name']}")


def connector(req: Req) -> Response:
    name = req.path["name"]
    status = _connect(req, "GET", f"/connectors/{q(name)}/status") or {}
    config = _connect(req, "GET", f"/connectors/{q(name)}/config") or {}
    try:
        offsets = _connect(req, "GET", f"/connectors/{q(name)}/offsets")
    except ConsoleError as e:
        offsets = {"error": str(e)}
    tasks = h.table(["task", "state", "worker", "trace"],
                    [[t.get("id"), t.get("state"), t.get("worker_id"), (t.get("trace") or "")[:200]]
                     for t in status.get("tasks", [])])
    actions = "".join(h.form(f"/connect/{h.u(name)}/{a}", f"<button>{a.capitalize()}</button>")
                      for a in ("pause", "resume", "restart"))
    delete = h.form(f"/connect/{h.u(name)}/delete", '<button class="danger">Delete</button>',
                    confirm=f"Delete connector {name}?")
    body = (f"<p>State <b>{h.e(status.get('connector', {}).get('state'))}</b></p><div class=cards>"
            f"{actions}{delete}</div><h2>Tasks</h2>{tasks}<h2>Config</h2>"
            f"<pre>{h.e(json.dumps(config, indent=2))}</pre><h2>Offsets</h2>"
            f"<pre>{h.e(json.dumps(offsets, indent=2))}</pre>")
    return req.page(f"Connector {name}", body, "/connect")


def connector_action(req: Req) -> Response:
    name, action = req.path["name"], req.path["action"]
    paths = {"pause": ("PUT", "/pause"), "resume": ("PUT", "/resume"),
             "restart": ("POST", "/restart?includeTasks=true"), "delete": ("DELETE", "")}
    if action not in paths:
        raise ConsoleError(f"unknown action {action!r}", 404)
    method, suffix = paths[action]
    _connect(req, method, f"/connectors/{q(name)}{suffix}")
    if action == "delete":
        return redirect("/connect", f"deleted connector {name}")
    return redirect(f"/connect/{h.u(name)}", f"{action} sent to {name}")


def security(req: Req) -> Response:
    c = req.session.cluster
    signed = f"<p>Signed in as <b>{h.e(req.user)}</b>.</p>" if req.user else \
        "<p>The console connects with its configured client settings (no sign-in).</p>"
    acls = c.acls()
    if acls is None:
        acl_html = "<p>The cluster has no authorizer configured: ACLs are off.</p>"
    elif not c.may_describe_cluster():
        raise ConsoleError("cannot list ACLs and users: this principal lacks DESCRIBE on the cluster",
                           403)
    else:
        header = ["principal", "host", "operation", "permission", "resource", "name", "pattern", ""]
        acl_html = h.table(header,
                           [[h.e(a["principal"]), h.e(a["host"]), h.e(a["operation"]), h.e(a["permission"]),
                             h.e(a["resourceType"]), h.e(a["name"]), h.e(a["pattern"]), _remove_form(a)]
                            for a in acls], raw=True, empty="no ACLs") + _add_acl_form()
    try:
        user_html = _users_html(c.users())
    except ConsoleError as e:
        user_html = f'<p class="note">{h.e(e)}</p>'
    return req.page("Security", signed + "<h2>ACLs</h2>" + acl_html + "<h2>Users</h2>" + user_html,
                    "/security")


def _users_html(users: list[dict[str, Any]]) -> str:
    """SCRAM credentials, one row each with its delete form, and the form that sets one."""
    rows = [[h.e(x["user"]), h.e(mech), h.e(iters), _delete_scram_form(x["user"], mech)]
            for x in users for mech, iters in x["credentials"]]
    table = h.table(["user", "mechanism", "iterations", ""], rows, raw=True, empty="no SCRAM users")
    return table + _set_scram_form()


def _delete_scram_form(user: str, mech: str) -> str:
    hidden = (f'<input type="hidden" name="user" value="{h.e(user)}">'
              f'<input type="hidden" name="mechanism" value="{h.e(mech)}">')
    return h.form("/security/users/delete", hidden + '<button class="danger">Delete</button>',
                  confirm=f"Delete the {mech} credential of {user}? They can no longer sign in "
                          f"with {mech}.")


def _set_scram_form() -> str:
    return ("<h3>Set a SCRAM credential</h3><p>Creates the user's credential for that mechanism, "
            "or replaces it (a new password or iteration count).</p>" + h.form(
                "/security/users",
                h.field("User", "user", attrs=f'required maxlength="{MAX_USER_CHARS}" '
                                              'autocomplete="off"')
                + h.select("Mechanism", "mechanism", [(m, m) for m in SCRAM_MECHANISMS],
                           SCRAM_MECHANISMS[0])
                + h.field("Password", "password", kind="password",
                          attrs=f'required maxlength="{MAX_PASSWORD_CHARS}" autocomplete="new-password"')
                + h.field("Iterations", "iterations", SCRAM_MIN_ITERATIONS, kind="number",
                          attrs=f'min="{SCRAM_MIN_ITERATIONS}" max="{SCRAM_MAX_ITERATIONS}" required')
                + "<button>Set credential</button>", cls="set-scram"))


def _iterations(text: str) -> int:
    text = text.strip()
    if not text:
        return SCRAM_MIN_ITERATIONS
    if len(text) > 12 or not text.lstrip("-").isdigit():
        raise ConsoleError(f"iterations must be a whole number between {SCRAM_MIN_ITERATIONS} and "
                           f"{SCRAM_MAX_ITERATIONS} (Kafka's bounds; the default is "
                           f"{SCRAM_MIN_ITERATIONS})")
    return int(text)


def set_scram(req: Req) -> Response:
    """Create or change a credential as the signed-in principal (the broker checks ALTER on the
    cluster). The password goes only to the client: never into a page, notice or message."""
    f = req.form
    user, mech = f.get("user", "").strip(), f.get("mechanism", "")
    req.session.cluster.set_scram(user, mech, f.get("password", ""), _iterations(f.get("iterations", "")))
    return redirect("/security", f"{mech} credential set for {user}")


def delete_scram(req: Req) -> Response:
    user, mech = req.form.get("user", ""), req.form.get("mechanism", "")
    req.session.cluster.delete_scram(user, mech)
    return redirect("/security", f"{mech} credential of {user} deleted")


ACL_FIELDS = ("principal", "host", "operation", "permission", "resourceType", "name", "pattern")


def _remove_form(a: dict[str, str]) -> str:
    hidden = "".join(f'<input type="hidden" name="{k}" value="{h.e(a[k])}">' for k in ACL_FIELDS)
    return h.form("/security/acls/delete", hidden + '<button class="danger">Remove</button>',
                  confirm=f"Remove this ACL of {a['principal']}?")


def _add_acl_form() -> str:
    ops = ["READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS",
           "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "ALL"]
    return ("<h3>Add an ACL</h3>" + h.form(
        "/security/acls",
        h.field("Principal", "principal", "User:", attrs="required")
        + h.field("Host", "host", "*")
        + h.select("Operation", "operation", [(o, o) for o in ops], "READ")
        + h.select("Permission", "permission", [("ALLOW", "ALLOW"), ("DENY", "DENY")], "ALLOW")
        + h.select("Resource", "resourceType", [(r, r.lower()) for r in
                                                ("TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID")], "TOPIC")
        + h.field("Name", "name", attrs="required")
        + h.select("Pattern", "pattern", [("LITERAL", "literal"), ("PREFIXED", "prefixed")], "LITERAL")
        + "<button>Add ACL</button>", cls="add-acl"))


def add_acl(req: Req) -> Response:
    req.session.cluster.change_acl(True, req.form)
    return redirect("/security", f"ACL added for {req.form.get('principal')}")


def remove_acl(req: Req) -> Response:
    req.session.cluster.change_acl(False, req.form)
    return redirect("/security", f"ACL removed for {req.form.get('principal')}")


def routes(state: ConsoleState) -> list[Any]:
    return [
        Route("/connect", view(state, connectors)),
        Route("/connect", view(state, create_connector), methods=["POST"]),
        Route("/connect/{name}", view(state, connector)),
        Route("/connect/{name}/{action}", view(state, connector_action), methods=["POST"]),
        Route("/security", view(state, security)),
        Route("/security/acls", view(state, add_acl), methods=["POST"]),
        Route("/security/acls/delete", view(state, remove_acl), methods=["POST"]),
        Route("/security/users", view(state, set_scram), methods=["POST"]),
        Route("/security/users/delete", view(state, delete_scram), methods=["POST"]),
    ]
