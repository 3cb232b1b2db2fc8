"""The schema registry: subjects, their versions with a diff between any two, the compatibility
level, registering a schema and checking one against the latest version. A refusal (an
incompatible schema, a bad one) is shown with the registry's own message."""

from __future__ import annotations

import difflib
import json
from typing import Any

from starlette.responses import Response
from starlette.routing import Route

from . import html as h
from .cluster import ConsoleError
from .registry import RegistryClient, RegistryError
from .state import ConsoleState
from .web import Req, redirect, view

TYPES = [("AVRO", "Avro"), ("PROTOBUF", "Protobuf"), ("JSON", "JSON Schema")]
LEVELS = ["BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL",
          "FULL_TRANSITIVE", "NONE"]


def _registry(req: Req) -> RegistryClient:
    if req.state.registry is None:
        raise ConsoleError("no schema registry is configured for this console", 404)
    return req.state.registry


def _register_form(subject: str = "", schema: str = "", kind: str = "AVRO", fixed: bool = False) -> str:
    subj = (f'<input type="hidden" name="subject" value="{h.e(subject)}">' if fixed
            else h.field("Subject", "subject", subject, attrs="required"))
    return h.form("/schemas/register",
                  subj + h.select("Type", "schemaType", TYPES, kind)
                  + f'<label>Schema<textarea name="schema" required>{h.e(schema)}</textarea></label>'
                  + '<button name="action" value="register">Register</button>'
                  + '<button name="action" value="check">Check compatibility</button>', cls="stack register")


def schemas(req: Req) -> Response:
    reg = _registry(req)
    rows = []
    for s in reg.subjects():
        try:
            v = reg.version(s, "latest")
            rows.append([f'<a href="/schemas/{h.u(s)}">{h.e(s)}</a>', v["version"], v["id"],
                         h.e(v.get("schemaType") or "AVRO")])
        except RegistryError as e:
            rows.append([h.e(s), "", "", h.e(str(e))])
    body = (f"<p>Global compatibility level: <b>{h.e(reg.compatibility())}</b></p>"
            + h.table(["subject", "latest version", "id", "type"], rows, raw=True, empty="no subjects")
            + "<h2>Register a schema</h2>" + _register_form())
    return req.page("Schema registry", body, "/schemas")


def _diff(a: str, b: str, la: str, lb: str) -> str:
    def pretty(t: str) -> list[str]:
        try:
            return json.dumps(json.loads(t), indent=2).splitlines()
        except ValueError:
            return t.splitlines()
    lines = []
    for line in difflib.unified_diff(pretty(a), pretty(b), la, lb, lineterm=""):
        cls = "add" if line.startswith("+") and not line.startswith("+++") else \
            "del" if line.startswith("-") and not line.startswith("---") else ""
        lines.append(f'<div class="{cls}">{h.e(line)}</div>')
    return '<pre class="diff">' + ("".join(lines) or "(no difference)") + "</pre>"


def subject(req: Req, error: str | None = None, notice: str | None = None, extra: str = "",
            status: int = 200, draft: str | None = None) -> Response:
    reg = _registry(req)
    s = req.path["subject"]
    versions = reg.versions(s)
    latest = reg.version(s, "latest")
    level = reg.compatibility(s)
    opts = [(str(v), f"version {v}") for v in versions]
    a = req.query.get("a") or str(versions[-2] if len(versions) > 1 else versions[-1])
    b = req.query.get("b") or str(versions[-1])
    diff = ""
    if len(versions) > 1:
        va, vb = reg.version(s, a), reg.version(s, b)
        diff = _diff(va["schema"], vb["schema"], f"version {a}", f"version {b}")
    kind = latest.get("schemaType") or "AVRO"
    body = (f"<p>Type {h.e(kind)} · versions {', '.join(map(str, versions))} · latest id {latest['id']}</p>"
            + h.form(f"/schemas/{h.u(s)}/compatibility",
                     h.select("Compatibility", "level", [(x, x) for x in LEVELS], level)
                     + "<button>Set level</button>")
            + f"<h2>Latest schema (version {latest['version']})</h2><pre>{h.e(latest['schema'])}</pre>"
            + "<h2>Diff</h2>" + h.form(f"/schemas/{h.u(s)}", h.select("From", "a", opts, a)
                                       + h.select("To", "b", opts, b) + "<button>Compare</button>", get=True)
            + diff + extra + "<h2>New version</h2>"
            + _register_form(s, draft if draft is not None else latest["schema"], kind, fixed=True))
    return req.page(f"Subject {s}", body, "/schemas", error=error, notice=notice, status=status)


def register(req: Req) -> Response:
    reg = _registry(req)
    s = req.form.get("subject", "").strip()
    schema = req.form.get("schema", "")
    kind = req.form.get("schemaType", "AVRO").upper()
    if not s or not schema.strip():
        raise ConsoleError("a subject and a schema are needed")
    exists = s in reg.subjects()
    if req.form.get("action") == "check":
        if not exists:
            raise ConsoleError(f"subject {s!r} has no versions to check against", 404)
        req.request.path_params["subject"] = s
        res = reg.check(s, schema, kind)
        ok = bool(res.get("is_compatible"))
        msgs = "".join(f"<li>{h.e(m)}</li>" for m in res.get("messages") or [])
        extra = (f'<h2 id="check-result">Compatibility check: {"compatible" if ok else "NOT compatible"}'
                 f"</h2><ul>{msgs}</ul>")
        return subject(req, extra=extra, draft=schema)
    try:
        sid = reg.register(s, schema, kind)
    except RegistryError as e:
        if not exists:
            raise
        req.request.path_params["subject"] = s
        return subject(req, error=f"Refused by the schema registry: {e} (error {e.code})",
                       status=e.status if 400 <= e.status < 500 else 502, draft=schema)
    return redirect(f"/schemas/{h.u(s)}", f"registered under {s} with id {sid}")


def compatibility(req: Req) -> Response:
    reg = _registry(req)
    s = req.path["subject"]
    level = req.form.get("level", "").upper()
    if level not in LEVELS:
        raise ConsoleError(f"unknown compatibility level {level!r}")
    reg.set_compatibility(s, level)
    return redirect(f"/schemas/{h.u(s)}", f"compatibility of {s} set to {level}")


def routes(state: ConsoleState) -> list[Any]:
    return [
        Route("/schemas", view(state, schemas)),
        Route("/schemas/register", view(state, register), methods=["POST"]),
        Route("/schemas/{subject}", view(state, subject)),
        Route("/schemas/{subject}/compatibility", view(state, compatibility), methods=["POST"]),
    ]
