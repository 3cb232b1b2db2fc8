"""Consumer groups: the list, one group's members, assignments and lag per partition (a table
and a bar chart that refresh every 2 s), and offset resets with a dry-run preview."""

from __future__ import annotations

from typing import Any

from starlette.responses import Response
from starlette.routing import Route

from . import html as h
from .cluster import ConsoleError
from .state import ConsoleState
from .web import Req, view

STRATEGIES = [("earliest", "to earliest"), ("latest", "to latest"), ("offset", "to offset"),
              ("timestamp", "to time"), ("shift", "shift by")]


def groups(req: Req) -> Response:
    rows = [[f'<a href="/groups/{h.u(g["id"])}">{h.e(g["id"])}</a>', h.e(g["state"]), h.e(g["type"]),
             "simple" if g["simple"] else "consumer"] for g in req.session.cluster.groups()]
    body = h.table(["group", "state", "type", "kind"], rows, raw=True, empty="no consumer groups")
    return req.page("Consumer groups", body, "/groups")


def _group_body(req: Req, g: dict[str, Any], preview: str = "") -> str:
    members = h.table(["member", "client id", "host", "assigned partitions"],
                      [[m["id"], m["client"], m["host"],
                        ", ".join(f"{t}/{p}" for t, p in m["assignment"])] for m in g["members"]],
                      empty="no active members")
    offsets = h.table(["topic", "partition", "committed", "end offset", "lag", "consumer"],
                      [[r["topic"], r["partition"], r["committed"] if r["committed"] is not None else "–",
                        r["end"] if r["end"] is not None else "–",
                        r["lag"] if r["lag"] is not None else "–", r["owner"] or "–"]
                       for r in g["offsets"]], cls="lag", empty="no committed offsets")
    chart = h.bars([(f"{r['topic']}/{r['partition']}", float(r["lag"] or 0)) for r in g["offsets"]],
                   "lag per partition")
    topics = sorted({r["topic"] for r in g["offsets"]})
    reset = h.form(f"/groups/{h.u(g['id'])}/reset",
                   h.select("Topic", "topic", [(t, t) for t in topics], req.form.get("topic", ""))
                   + h.select("Reset", "strategy", STRATEGIES, req.form.get("strategy", "earliest"))
                   + h.field("Offset / time / shift", "value", req.form.get("value", ""))
                   + '<button name="action" value="dry-run">Preview (dry run)</button>'
                   + '<button name="action" value="execute" class="danger">Reset offsets</button>',
                   confirm=None, cls="reset")
    facts = (f'<p>State <b id="group-state">{h.e(g["state"])}</b> · coordinator {h.e(g["coordinator"])} · '
             f'assignor {h.e(g["protocol"] or "–")} · total lag <b id="total-lag">{g["totalLag"]}</b></p>')
    return (f'<div id="group-live" data-live>{facts}<h2>Lag per partition</h2>{chart}{offsets}'
            f"<h2>Members</h2>{members}</div>"
            f"<h2>Reset offsets</h2><p>The group must have no active members. "
            f"Preview first: nothing is committed by a dry run.</p>{reset}{preview}")


def group(req: Req) -> Response:
    g = req.session.cluster.group(req.path["group"])
    return req.page(f"Group {g['id']}", _group_body(req, g), "/groups", refresh="2",
                    refresh_src=f"/groups/{h.u(g['id'])}")


def reset(req: Req) -> Response:
    gid = req.path["group"]
    c = req.session.cluster
    topic = req.form.get("topic", "")
    if not topic:
        raise ConsoleError("choose a topic whose offsets to reset")
    plan = c.reset_plan(gid, topic, req.form.get("strategy", ""), req.form.get("value", ""))
    execute = req.form.get("action") == "execute"
    notice = error = None
    if execute:
        try:
            c.reset_execute(gid, plan)
            notice = f"offsets of {gid} on {topic} reset"
        except ConsoleError as e:
            error = str(e)
    rows = [[r["topic"], r["partition"], "–" if r["current"] is None else r["current"],
             f'{r["new"]}{" (clamped to the log)" if r["clamped"] else ""}'] for r in plan]
    title = "New offsets (committed)" if execute and error is None else "Preview (dry run: nothing committed)"
    preview = f'<h2 id="preview-title">{title}</h2>' + h.table(
        ["topic", "partition", "current offset", "new offset"], rows, cls="preview")
    g = c.group(gid)
    return req.page(f"Group {gid}", _group_body(req, g, preview), "/groups", notice=notice, error=error,
                    status=409 if error else 200, refresh="2", refresh_src=f"/groups/{h.u(gid)}")


def routes(state: ConsoleState) -> list[Any]:
    return [
        Route("/groups", view(state, groups)),
        Route("/groups/{group}", view(state, group)),
        Route("/groups/{group}/reset", view(state, reset), methods=["POST"]),
    ]
