"""HTML building blocks: the page layout, escaping, tables and small inline SVG charts. Pages are
rendered on the server; the one script (static/console.js) only adds the live tail, auto-refresh
and confirmation prompts, so every page works without it."""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import quote, urlencode

NAV = [("/", "Overview"), ("/topics", "Topics"), ("/groups", "Consumer groups"),
       ("/schemas", "Schemas"), ("/connect", "Connectors"), ("/security", "Security")]


def e(v: Any) -> str:
    return "" if v is None else html.escape(str(v), quote=True)


def u(v: Any) -> str:
    """A path segment."""
    return quote(str(v), safe="")


def qs(**params: Any) -> str:
    return urlencode({k: v for k, v in params.items() if v not in (None, "")})


def page(title: str, body: str, *, active: str = "", user: str | None = None,
         notice: str | None = None, error: str | None = None, refresh: str | None = None,
         refresh_src: str | None = None) -> str:
    links = "".join(f'<a href="{href}"{" aria-current=page" if href == active else ""}>{e(name)}</a>'
                    for href, name in NAV)
    who = (f'<span class="who">{e(user)} · <a href="/logout">sign out</a></span>' if user else "")
    flash = (f'<p class="notice" role="status">{e(notice)}</p>' if notice else "") + \
            (f'<p class="error" role="alert">{e(error)}</p>' if error else "")
    auto = f' data-refresh="{e(refresh)}"' if refresh else ""
    if refresh and refresh_src:
        auto += f' data-src="{e(refresh_src)}"'
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>{e(title)} · Samsa console</title><link rel="stylesheet" href="/static/console.css">
<script src="/static/console.js" defer></script></head>
<body><header><a class="brand" href="/">Samsa</a><nav aria-label="main">{links}</nav>{who}</header>
<main id="main"{auto}><h1>{e(title)}</h1>{flash}{body}</main></body></html>"""


def table(header: Sequence[str], rows: Iterable[Sequence[Any]], *, cls: str = "",
          raw: bool = False, empty: str = "nothing here") -> str:
    """A table; cells are escaped unless raw (the caller built them from escaped parts)."""
    head = "".join(f"<th scope=col>{e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c if raw else e(c)}</td>" for c in r) + "</tr>"
                   for r in rows)
    if not body:
        body = f'<tr><td colspan="{len(header)}" class="empty">{e(empty)}</td></tr>'
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def sparkline(values: Sequence[float], width: int = 240, height: int = 40, label: str = "") -> str:
    if len(values) < 2:
        return f'<svg class="spark" width="{width}" height="{height}" role="img" ' \
               f'aria-label="{e(label)}: not enough samples yet"></svg>'
    top = max(max(values), 1e-9)
    step = width / (len(values) - 1)
    pts = " ".join(f"{i * step:.1f},{height - 2 - (v / top) * (height - 4):.1f}"
                   for i, v in enumerate(values))
    return (f'<svg class="spark" width="{width}" height="{height}" role="img" aria-label="{e(label)}">'
            f'<polyline fill="none" stroke="currentColor" stroke-width="1.5" points="{pts}"/></svg>')


def bars(items: Sequence[tuple[str, float]], label: str, width: int = 480) -> str:
    """A horizontal bar chart (lag per partition)."""
    if not items:
        return ""
    top = max(max(v for _, v in items), 1)
    row_h = 22
    parts = []
    for i, (name, v) in enumerate(items):
        w = (v / top) * (width - 160)
        y = i * row_h
        parts.append(f'<text x="0" y="{y + 15}">{e(name)}</text>'
                     f'<rect x="110" y="{y + 4}" width="{w:.1f}" height="14" class="bar"/>'
                     f'<text x="{116 + w:.1f}" y="{y + 15}" class="val">{int(v)}</text>')
    h = row_h * len(items)
    return (f'<svg class="bars" width="{width}" height="{h}" role="img" aria-label="{e(label)}">'
            + "".join(parts) + "</svg>")


def form(action: str, inner: str, *, method: str = "post", cls: str = "", confirm: str | None = None,
         get: bool = False) -> str:
    c = f' data-confirm="{e(confirm)}"' if confirm else ""
    return f'<form method="{"get" if get else method}" action="{e(action)}" class="{cls}"{c}>{inner}</form>'


def field(label: str, name: str, value: Any = "", *, kind: str = "text", attrs: str = "") -> str:
    return (f'<label>{e(label)} <input type="{kind}" name="{e(name)}" value="{e(value)}" {attrs}>'
            f'</label>')


def select(label: str, name: str, options: Iterable[tuple[str, str]], selected: str = "") -> str:
    opts = "".join(f'<option value="{e(v)}"{" selected" if v == selected else ""}>{e(t)}</option>'
                   for v, t in options)
    return f'<label>{e(label)} <select name="{e(name)}">{opts}</select></label>'


def human_bytes(n: int | None) -> str:
    if n is None:
        return "–"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"
