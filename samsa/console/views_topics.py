"""Overview and topics: brokers, controller, partition health, disk use and the message-rate
sparkline; the topic list with sizes and rates; create, configs, partitions and delete."""

from __future__ import annotations

import time
from typing import Any

from starlette.responses import Response
from starlette.routing import Route

from . import html as h
from .cluster import ConsoleError
from .state import ConsoleState
from .web import Req, redirect, view

LOG_DIRS_TTL_S = 10.0


def log_dir_sizes(req: Req) -> dict[tuple[str, int], int] | None:
    """Partition sizes on disk (DescribeLogDirs, largest replica), cached briefly; None when the
    cluster is reached over a secured listener (the wire client speaks PLAINTEXT only)."""
    st = req.state
    at, cached = st.log_dirs_cache
    if time.monotonic() - at < LOG_DIRS_TTL_S:
        return cached
    sizes: dict[tuple[str, int], int] | None = None
    if st.ctx.client_config.get("security.protocol", "PLAINTEXT").upper() == "PLAINTEXT":
        try:
            from samsa.cli._wire import DESCRIBE_LOG_DIRS, WireClient

            sizes = {}
            with WireClient(st.ctx.bootstrap, client_id="samsa-console") as client:
                for node in client.brokers():
                    resp = client.call(DESCRIBE_LOG_DIRS, {"topics": None}, node=node)
                    for r in resp.results:
                        for t in r.topics:
                            for p in t.partitions:
                                key = (t.name, int(p.partition_index))
                                sizes[key] = max(sizes.get(key, 0), int(p.partition_size))
        except Exception:  # noqa: BLE001 - sizes are optional on these pages
            sizes = None
    st.log_dirs_cache = (time.monotonic(), sizes)
    return sizes


def overview(req: Req) -> Response:
    c = req.session.cluster
    md = c.metadata()
    tps = c.partitions_of(md)
    ends = c.latest(tps)
    req.state.samples.add(ends)
    parts = [p for t in md.topics.values() if t.error is None for p in t.partitions.values()]
    under = sum(1 for p in parts if len(p.isrs) < len(p.replicas))
    offline = sum(1 for p in parts if p.leader < 0)
    sizes = log_dir_sizes(req)
    disk = sum(sizes.values()) if sizes is not None else None
    rates = req.state.samples.total_rates()
    cards = [("Brokers", len(md.brokers)), ("Controller", md.controller_id),
             ("Topics", len(md.topics)), ("Partitions", len(parts)),
             ("Under-replicated", under), ("Offline", offline), ("Disk used", h.human_bytes(disk)),
             ("Messages/s", f"{rates[-1]:.1f}" if rates else "–")]
    card_html = "".join(f'<div class="card"><span>{h.e(k)}</span><b data-card="{h.e(k)}">{h.e(v)}</b></div>'
                        for k, v in cards)
    brokers = h.table(["id", "host", "port", "role"],
                      [[b.id, b.host, b.port, "controller" if b.id == md.controller_id else "broker"]
                       for b in sorted(md.brokers.values(), key=lambda b: b.id)])
    metrics = _metrics_table(req.state.ctx.metrics())
    body = (f'<div id="ov" data-live><div class="cards">{card_html}</div>'
            f'<h2>Messages per second (all topics)</h2>{h.sparkline(rates, label="messages per second")}'
            f"<h2>Brokers</h2>{brokers}{metrics}</div>")
    return req.page("Cluster overview", body, "/", refresh="5")


METRIC_PREFIXES = ("kafka_server_brokertopicmetrics_", "kafka_server_replicamanager_",
                   "kafka_controller_kafkacontroller_", "kafka_server_kafkaserver_")


def _metrics_table(snap: dict[str, list[tuple[dict[str, str], float]]]) -> str:
    """The broker-wide values of the main families (per-topic samples left out)."""
    rows = []
    for name in sorted(snap):
        if not name.startswith(METRIC_PREFIXES) or name.endswith("_created"):
            continue
        overall = [v for labels, v in snap[name] if "topic" not in labels]
        if overall:
            rows.append([name, f"{sum(overall):g}"])
    if not rows:
        return ""
    return "<h2>Broker metrics</h2>" + h.table(["metric (as /metrics names it)", "value"], rows[:40])


def topics(req: Req) -> Response:
    c = req.session.cluster
    md = c.metadata()
    show_internal = req.query.get("internal") == "1"
    tps = c.partitions_of(md)
    lo, hi = c.earliest(tps), c.latest(tps)
    req.state.samples.add(hi)
    sizes = log_dir_sizes(req)
    rows: list[list[Any]] = []
    for name in sorted(md.topics):
        tm = md.topics[name]
        if (name.startswith("__") or name == "_schemas") and not show_internal:
            continue
        if tm.error is not None:
            rows.append([h.e(name), "", "", "", "", h.e(tm.error.str())])
            continue
        ps = sorted(tm.partitions)
        msgs = sum(hi.get((name, p), 0) - lo.get((name, p), 0) for p in ps)
        size = sum(sizes.get((name, p), 0) for p in ps) if sizes is not None else None
        rf = len(tm.partitions[ps[0]].replicas) if ps else 0
        rate = req.state.samples.topic_rate(name)
        rows.append([f'<a href="/topics/{h.u(name)}">{h.e(name)}</a>', len(ps), rf, msgs,
                     h.e(h.human_bytes(size)), "–" if rate is None else f"{rate:.1f}/s"])
    create = h.form("/topics", h.field("Name", "name", attrs='required maxlength="249"')
                    + h.field("Partitions", "partitions", 1, kind="number", attrs='min="1"')
                    + h.field("Replication factor", "replication", -1, kind="number")
                    + h.field("Configs (k=v, comma-separated)", "configs")
                    + "<button>Create topic</button>")
    toggle = (f'<a href="/topics?internal={"0" if show_internal else "1"}">'
              f'{"hide" if show_internal else "show"} internal topics</a>')
    body = (f"<h2>Create a topic</h2>{create}<h2>Topics</h2><p>{toggle}</p>"
            + h.table(["topic", "partitions", "replicas", "messages", "size", "rate"], rows, raw=True,
                      empty="no topics yet"))
    return req.page("Topics", body, "/topics")


def _configs(text: str) -> dict[str, str]:
    out = {}
    for item in text.replace("\n", ",").split(","):
        if not item.strip():
            continue
        k, sep, v = item.partition("=")
        if not sep or not k.strip():
            raise ConsoleError(f"configs must be key=value pairs, got {item.strip()!r}")
        out[k.strip()] = v.strip()
    return out


def _int_field(form: dict[str, str], name: str, default: int) -> int:
    text = form.get(name, "").strip()
    if not text:
        return default
    try:
        return int(text)
    except ValueError:
        raise ConsoleError(f"{name} must be a whole number, got {text[:40]!r}") from None


def create_topic(req: Req) -> Response:
    name = req.form.get("name", "").strip()
    if not name:
        raise ConsoleError("a topic needs a name")
    req.session.cluster.create_topic(name, _int_field(req.form, "partitions", 1),
                                     _int_field(req.form, "replication", -1),
                                     _configs(req.form.get("configs", "")))
    return redirect(f"/topics/{h.u(name)}", f"created topic {name}")


def topic(req: Req) -> Response:
    name = req.path["name"]
    c = req.session.cluster
    tm = c.topic(name)
    tps = [(name, p) for p in sorted(tm.partitions)]
    lo, hi = c.earliest(tps), c.latest(tps)
    sizes = log_dir_sizes(req) or {}
    prows = []
    for _, p in tps:
        pm = tm.partitions[p]
        prows.append([p, pm.leader, ",".join(map(str, pm.replicas)), ",".join(map(str, pm.isrs)),
                      lo.get((name, p), "?"), hi.get((name, p), "?"),
                      h.human_bytes(sizes.get((name, p))),
                      "under-replicated" if len(pm.isrs) < len(pm.replicas) else "ok"])
    configs = c.topic_configs(name)
    crow = [[h.e(x["name"]), h.e("(sensitive)" if x["value"] is None else x["value"]),
             "default" if x["default"] else f"<b>{h.e(x['source'])}</b>"] for x in configs]
    names = [("", "choose…")] + [(x["name"], x["name"]) for x in configs if not x["readOnly"]]
    edit = h.form(f"/topics/{h.u(name)}/config",
                  h.select("Config", "key", names, req.query.get("key", ""))
                  + h.field("or another name", "other")
                  + h.field("New value (empty: back to default)", "value")
                  + "<button>Save config</button>", cls="edit-config")
    grow = h.form(f"/topics/{h.u(name)}/partitions",
                  h.field("Total partitions", "total", len(tps), kind="number", attrs='min="1"')
                  + "<button>Add partitions</button>")
    delete = h.form(f"/topics/{h.u(name)}/delete",
                    h.field(f"Type {name} to confirm", "confirm", attrs='autocomplete="off"')
                    + '<button class="danger">Delete topic</button>',
                    confirm=f"Delete topic {name} and all its records?")
    links = (f'<p><a href="/topics/{h.u(name)}/messages">Browse messages</a> · '
             f'<a href="/topics/{h.u(name)}/produce">Produce a message</a></p>')
    body = (links + "<h2>Partitions</h2>"
            + h.table(["partition", "leader", "replicas", "ISR", "start offset", "end offset", "size",
                       "status"], prows)
            + grow + "<h2>Configs</h2>" + edit + h.table(["name", "value", "source"], crow, raw=True)
            + "<h2>Delete</h2>" + delete)
    return req.page(f"Topic {name}", body, "/topics")


def topic_config(req: Req) -> Response:
    name = req.path["name"]
    key = (req.form.get("other") or req.form.get("key") or "").strip()
    if not key:
        raise ConsoleError("choose a config to change")
    value: str | None = req.form.get("value", "")
    if value == "":
        value = None
    req.session.cluster.alter_topic_config(name, key, value)
    msg = f"{key} reset to its default" if value is None else f"{key} set to {value}"
    return redirect(f"/topics/{h.u(name)}", msg)


def topic_partitions(req: Req) -> Response:
    name = req.path["name"]
    total = _int_field(req.form, "total", 0)
    req.session.cluster.add_partitions(name, total)
    return redirect(f"/topics/{h.u(name)}", f"{name} now has {total} partitions")


def topic_delete(req: Req) -> Response:
    name = req.path["name"]
    if req.form.get("confirm", "") != name:
        raise ConsoleError(f"not deleted: type the topic's name ({name}) to confirm")
    req.session.cluster.delete_topic(name)
    return redirect("/topics", f"deleted topic {name}")


def routes(state: ConsoleState) -> list[Any]:
    return [
        Route("/", view(state, overview)),
        Route("/topics", view(state, topics)),
        Route("/topics", view(state, create_topic), methods=["POST"]),
        Route("/topics/{name}", view(state, topic)),
        Route("/topics/{name}/config", view(state, topic_config), methods=["POST"]),
        Route("/topics/{name}/partitions", view(state, topic_partitions), methods=["POST"]),
        Route("/topics/{name}/delete", view(state, topic_delete), methods=["POST"]),
    ]
