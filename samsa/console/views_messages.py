"""The message browser (a page of records from a chosen place, with a partition filter and a
search over keys, values and headers), the live tail (server-sent events) and the schema-aware
produce form."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from . import html as h
from .browse import MAX_LIMIT, Query, read_page, tail
from .cluster import ConsoleError
from .codec import EncodeError
from .registry import RegistryError
from .state import COOKIE, ConsoleState
from .web import Req, error_page, redirect, view

TAIL_MAX_S = 3600.0  # a tail ends after an hour; the page offers to start it again


def _shown(v: dict[str, Any]) -> str:
    note = f'<div class="note">{h.e(v["note"])}</div>' if v.get("note") else ""
    sid = f' title="schema id {v["schemaId"]}"' if v.get("schemaId") is not None else ""
    kind = h.e(v["kind"])
    return f'<span class="kind {kind}"{sid}>{kind}</span><pre>{h.e(v["text"])}</pre>{note}'


def record_rows(records: list[dict[str, Any]]) -> list[list[str]]:
    return [[str(r["partition"]), str(r["offset"]), h.e(r["time"]), _shown(r["key"]), _shown(r["value"]),
             "<br>".join(f"{h.e(k)}={h.e(v)}" for k, v in r["headers"])] for r in records]


def messages(req: Req) -> Response:
    name = req.path["name"]
    q = Query.parse(name, req.query)
    tm = req.session.cluster.topic(name)
    page = read_page(req.session.cluster, req.state.codec, q)
    parts = [("all", "all partitions")] + [(str(p), str(p)) for p in sorted(tm.partitions)]
    modes = [("newest", "newest"), ("beginning", "from the beginning"), ("offset", "from offset"),
             ("timestamp", "from time")]
    qform = h.form(f"/topics/{h.u(name)}/messages",
                   h.select("Start", "mode", modes, q.mode)
                   + h.field("Offset or time", "value", q.value, attrs='placeholder="42 or 2026-01-31T12:00"')
                   + h.select("Partition", "partition", parts,
                              "all" if q.partition is None else str(q.partition))
                   + h.field("Search key/value/headers", "search", q.search)
                   + h.field("Limit", "limit", q.limit, kind="number", attrs=f'min="1" max="{MAX_LIMIT}"')
                   + "<button>Show</button>", get=True)
    notes = "".join(f'<p class="note">{h.e(n)}</p>' for n in page.notes)
    nxt = ""
    if not page.exhausted:
        pos = ",".join(f"{p}:{o}" for p, o in sorted(page.next_positions.items()))
        nxt = (f'<p><a id="next" href="/topics/{h.u(name)}/messages?'
               f'{h.qs(mode=q.mode, partition=q.partition, search=q.search, limit=q.limit, positions=pos)}'
               f'">Next page →</a></p>')
    tail_url = f"/topics/{h.u(name)}/tail?" + h.qs(partition=q.partition, search=q.search)
    summary = (f"<p>{len(page.records)} records shown, {page.scanned} examined. "
               f'<button type="button" id="tail" data-tail="{h.e(tail_url)}">Live tail</button> '
               f'<span id="tail-status"></span></p>')
    table = h.table(["partition", "offset", "timestamp", "key", "value", "headers"],
                    record_rows(page.records), raw=True, cls="records", empty="no records")
    table = table.replace('<table class="records">', '<table class="records" id="records">', 1)
    body = (f'<p><a href="/topics/{h.u(name)}">Topic {h.e(name)}</a> · '
            f'<a href="/topics/{h.u(name)}/produce">Produce a message</a></p>'
            + qform + notes + summary + table + nxt)
    return req.page(f"Messages in {name}", body, "/topics")


def tail_endpoint(state: ConsoleState) -> Any:
    """Server-sent events: `records` events with JSON arrays of new records."""

    async def endpoint(request: Request) -> Response:
        session = state.session(request.cookies.get(COOKIE))
        if session is None:
            return error_page("Not signed in", "sign in first", 401)
        name = request.path_params["name"]
        part = request.query_params.get("partition") or ""
        try:
            partition = int(part) if part not in ("", "all") else None
        except ValueError:
            return error_page("Bad partition", f"partition must be a number, got {part[:40]!r}", 400)
        search = request.query_params.get("search") or ""
        if not state.open_tail():
            return error_page("Too many live tails", "the console already streams its maximum of "
                              "live tails; stop one and start again", 503, session.user)

        def counted() -> Any:
            """The tail, giving its slot back however it ends (closed, failed or collected)."""
            try:
                yield from tail(session.cluster, state.codec, name, partition, search)
            finally:
                state.close_tail()
        try:
            gen = await anyio.to_thread.run_sync(lambda: _started(counted()))
        except ConsoleError as e:
            return error_page("Cannot tail", str(e), e.status, session.user)

        async def events() -> AsyncIterator[str]:
            started = anyio.current_time()
            try:
                yield ": tail started\n\n"
                while anyio.current_time() - started < TAIL_MAX_S:
                    if await request.is_disconnected():
                        break
                    batch, skipped = await anyio.to_thread.run_sync(next, gen)
                    if batch:
                        yield f"event: records\ndata: {json.dumps(batch)}\n\n"
                    if skipped:
                        yield f"event: skipped\ndata: {skipped}\n\n"
                    if not batch and not skipped:
                        yield ": idle\n\n"
                yield "event: problem\ndata: the tail ended after an hour; start it again\n\n"
            finally:
                # shielded: on a disconnect this task is being cancelled, and an unshielded await
                # would be cancelled too, leaving the consumer open
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(gen.close)

        return StreamingResponse(events(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})
    return endpoint


def _started(gen: Any) -> Any:
    """Run a generator's set-up (topic checks, assignment) now, so its errors surface here."""
    first = next(gen)

    def chain() -> Any:
        try:
            yield first
            yield from gen
        finally:
            gen.close()
    return chain()


# -- produce -----------------------------------------------------------------------------------------

def _schema_fields(req: Req, doc: dict[str, Any], message: str | None) -> list[dict[str, Any]]:
    kind = str(doc.get("schemaType") or "AVRO").upper()
    if kind == "PROTOBUF":
        return req.state.codec.proto_fields(int(doc["id"]), message)
    schema = json.loads(doc["schema"])
    out = []
    if kind == "AVRO" and isinstance(schema, dict) and schema.get("type") == "record":
        for f in schema.get("fields", []):
            t = f["type"]
            base = next((x for x in t if x != "null"), "string") if isinstance(t, list) else t
            k = {"int": "integer", "long": "integer", "float": "number", "double": "number",
                 "boolean": "boolean", "string": "string"}.get(base if isinstance(base, str) else "", "json")
            enum = base.get("symbols", []) if isinstance(base, dict) and base.get("type") == "enum" else []
            out.append({"name": f["name"], "kind": "enum" if enum else k, "enum": enum})
    elif kind == "JSON" and isinstance(schema, dict):
        for fname, spec in (schema.get("properties") or {}).items():
            t = spec.get("type") if isinstance(spec, dict) else None
            enum = spec.get("enum", []) if isinstance(spec, dict) else []
            k = {"integer": "integer", "number": "number", "boolean": "boolean",
                 "string": "string"}.get(t if isinstance(t, str) else "", "json")
            out.append({"name": fname, "kind": "enum" if enum else k, "enum": [str(x) for x in enum]})
    return out


def _input(f: dict[str, Any]) -> str:
    n = f"f.{f['name']}"
    if f["kind"] == "enum":
        return h.select(f["name"], n, [("", "(unset)")] + [(v, v) for v in f["enum"]])
    if f["kind"] == "boolean":
        return f'<label>{h.e(f["name"])} <input type="checkbox" name="{h.e(n)}"></label>'
    if f["kind"] in ("integer", "number"):
        step = "1" if f["kind"] == "integer" else "any"
        return h.field(f"{f['name']} ({f['kind']})", n, kind="number", attrs=f'step="{step}"')
    if f["kind"] == "json":
        return h.field(f"{f['name']} (JSON)", n)
    return h.field(f["name"], n)


def produce_form(req: Req, error: str | None = None, status: int = 200) -> Response:
    name = req.path["name"]
    req.session.cluster.topic(name)
    subjects: list[str] = []
    registry = req.state.registry
    if registry is not None:
        try:
            subjects = registry.subjects()
        except RegistryError as e:
            error = error or f"schema registry: {e}"
    chosen = req.query.get("subject")
    if chosen is None:
        chosen = f"{name}-value" if f"{name}-value" in subjects else ""
    message = req.query.get("message") or None
    fields_html = ""
    schema_html = ""
    msg_select = ""
    if chosen and registry is not None:
        doc = registry.version(chosen, "latest")
        kind = str(doc.get("schemaType") or "AVRO").upper()
        if kind == "PROTOBUF":
            names = req.state.codec.proto_messages(int(doc["id"]))
            message = message if message in names else names[0]
            msg_select = ('<label>Message type <select name="message" data-fill>'
                          + "".join(f'<option{" selected" if n == message else ""}>{h.e(n)}</option>'
                                    for n in names) + "</select></label>")
        fields = _schema_fields(req, doc, message)
        fields_html = ("<fieldset><legend>Value fields</legend>" + "".join(_input(f) for f in fields)
                       + f'<input type="hidden" name="kinds" value="{h.e(json.dumps(fields))}"></fieldset>')
        schema_html = (f"<details><summary>{h.e(kind)} schema, {h.e(chosen)} version {doc['version']} "
                       f"(id {doc['id']})</summary><pre>{h.e(doc['schema'])}</pre></details>")
    subject_select = ('<label>Value schema <select name="subject" data-fill>'
                      + "".join(f'<option value="{h.e(s)}"{" selected" if s == chosen else ""}>'
                                f'{h.e(s or "none: plain text/bytes")}</option>' for s in [""] + subjects)
                      + "</select></label>")
    inner = (subject_select + msg_select + schema_html
             + h.field("Key", "key") + h.field("Partition (empty: by key)", "partition", kind="number")
             + fields_html
             + '<label>Value as JSON (overrides the fields; without a schema: the raw value)'
               '<textarea name="raw"></textarea></label>'
             + '<label>Headers (one key=value a line)<textarea name="headers" rows="3" '
               'style="min-height:4em"></textarea></label><button>Produce</button>')
    body = (f'<p><a href="/topics/{h.u(name)}">Topic {h.e(name)}</a> · '
            f'<a href="/topics/{h.u(name)}/messages">Browse messages</a></p>'
            + h.form(f"/topics/{h.u(name)}/produce?{h.qs(subject=chosen, message=message)}", inner,
                     cls="stack produce"))
    return req.page(f"Produce to {name}", body, "/topics", status=status, error=error)


def _value_from_fields(form: dict[str, str]) -> dict[str, Any]:
    kinds = json.loads(form.get("kinds") or "[]")
    out: dict[str, Any] = {}
    for f in kinds:
        raw = form.get(f"f.{f['name']}")
        if f["kind"] == "boolean":
            out[f["name"]] = raw == "on"
            continue
        if raw is None or raw == "":
            continue
        try:
            if f["kind"] == "integer":
                out[f["name"]] = int(raw)
            elif f["kind"] == "number":
                out[f["name"]] = float(raw)
            elif f["kind"] == "json":
                out[f["name"]] = json.loads(raw)
            else:
                out[f["name"]] = raw
        except ValueError:
            raise EncodeError(f"field {f['name']}: {raw[:40]!r} is not a valid {f['kind']}") from None
    return out


def produce(req: Req) -> Response:
    name = req.path["name"]
    subject = req.query.get("subject") or ""
    try:
        return _produce(req, name, subject)
    except (EncodeError, ConsoleError, RegistryError) as e:
        return produce_form(req, error=str(e), status=400)


def _produce(req: Req, name: str, subject: str) -> Response:
    req.session.cluster.topic(name)
    raw = req.form.get("raw", "")
    if subject:
        if req.state.registry is None:
            raise ConsoleError("no schema registry is configured")
        doc = req.state.registry.version(subject, "latest")
        try:
            value_obj = json.loads(raw) if raw.strip() else _value_from_fields(req.form)
        except ValueError as e:
            raise EncodeError(f"the value is not valid JSON: {e}") from None
        value: bytes | None = req.state.codec.encode(doc, value_obj, req.query.get("message"))
    else:
        value = raw.encode() if raw else None
    key = req.form.get("key") or None
    headers: list[tuple[str, str | bytes | None]] = []
    for line in req.form.get("headers", "").splitlines():
        if line.strip():
            k, _, v = line.partition("=")
            headers.append((k.strip(), v.encode()))
    part_text = req.form.get("partition", "").strip()
    kw: dict[str, Any] = {}
    if part_text:
        try:
            kw["partition"] = int(part_text)
        except ValueError:
            raise ConsoleError(f"partition must be a number, got {part_text[:40]!r}") from None
    producer = req.state.producer(req.session)
    result: dict[str, Any] = {}

    def done(err: Any, msg: Any) -> None:
        result["err"], result["msg"] = err, msg
    producer.produce(name, value=value, key=key.encode() if key else None, headers=headers or None,
                     on_delivery=done, **kw)
    producer.flush(15)
    if "msg" not in result:
        raise ConsoleError("the broker did not acknowledge the record in 15 s", 504)
    if result["err"] is not None:
        raise ConsoleError(f"not produced: {result['err'].str()}")
    m = result["msg"]
    return redirect(f"/topics/{h.u(name)}/messages?" + h.qs(mode="offset", value=m.offset(),
                                                          partition=m.partition()),
                    f"produced to partition {m.partition()} at offset {m.offset()}")


def routes(state: ConsoleState) -> list[Any]:
    return [
        Route("/topics/{name}/messages", view(state, messages)),
        Route("/topics/{name}/tail", tail_endpoint(state)),
        Route("/topics/{name}/produce", view(state, produce_form)),
        Route("/topics/{name}/produce", view(state, produce), methods=["POST"]),
    ]
