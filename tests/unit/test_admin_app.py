"""The admin app's routing: /metrics and /health/* take precedence over the console mounted at
"/"; the listener runs in its own thread and event loop."""

from __future__ import annotations

import sys
import threading
import types
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry, Counter
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from samsa.admin.context import ConsoleContext
from samsa.admin.http import AdminHttpServer, build_app, parse_listener


@pytest.fixture
def fake_console(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[ConsoleContext]]:
    """A stand-in samsa.console.app answering every path (the real console is another
    package); records the context it was built with."""
    seen: list[ConsoleContext] = []

    async def page(request: Request) -> PlainTextResponse:
        return PlainTextResponse(f"console {request.url.path}")

    def build_console(ctx: ConsoleContext) -> Starlette:
        seen.append(ctx)
        return Starlette(routes=[Route("/{path:path}", page, methods=["GET", "POST"])])

    pkg = types.ModuleType("samsa.console")
    pkg.__path__ = []
    mod = types.ModuleType("samsa.console.app")
    mod.build_console = build_console  # type: ignore[attr-defined]
    mod.__spec__ = types.SimpleNamespace(name="samsa.console.app")  # type: ignore[assignment]
    monkeypatch.setitem(sys.modules, "samsa.console", pkg)
    monkeypatch.setitem(sys.modules, "samsa.console.app", mod)
    yield seen


def _serve(app: Starlette) -> AdminHttpServer:
    server = AdminHttpServer(app, "127.0.0.1", 0)
    server.start()
    return server


def test_console_is_mounted_behind_metrics_and_health(fake_console: list[ConsoleContext]) -> None:
    registry = CollectorRegistry()
    Counter("probe", "a test counter", registry=registry).inc(7)
    ctx = ConsoleContext("127.0.0.1:9092", registry_url="http://r:8081")
    server = _serve(build_app(registry, lambda: (True, ""), ctx))
    try:
        assert fake_console == [ctx]
        assert "probe_total 7.0" in httpx.get(server.url + "/metrics").text
        assert httpx.get(server.url + "/health/live").json() == {"status": "UP"}
        assert httpx.get(server.url + "/topics/x").text == "console /topics/x"
        assert httpx.post(server.url + "/metrics").status_code == 405
    finally:
        server.stop()


def test_without_console_unknown_paths_are_404_and_not_ready_is_503() -> None:
    server = _serve(build_app(CollectorRegistry(), lambda: (False, "recovering"), None))
    try:
        assert httpx.get(server.url + "/").status_code == 404
        r = httpx.get(server.url + "/health/ready")
        assert r.status_code == 503 and r.json() == {"status": "DOWN", "reason": "recovering"}
    finally:
        server.stop()


def test_runs_in_its_own_thread_and_stops() -> None:
    before = {t.name for t in threading.enumerate()}
    server = _serve(build_app(CollectorRegistry(), lambda: (True, ""), None))
    assert "samsa-admin-http" in {t.name for t in threading.enumerate()} - before
    server.stop()
    assert "samsa-admin-http" not in {t.name for t in threading.enumerate()}


def test_parse_listener() -> None:
    assert parse_listener("http://0.0.0.0:9644") == ("0.0.0.0", 9644)
    assert parse_listener("127.0.0.1:0") == ("127.0.0.1", 0)
    for bad in ("https://h:1", "http://h"):
        with pytest.raises(ValueError):
            parse_listener(bad)


def test_a_busy_port_is_an_error() -> None:
    server = _serve(build_app(CollectorRegistry(), lambda: (True, ""), None))
    try:
        host, port = parse_listener(server.url)
        with pytest.raises(OSError, match="admin HTTP listener could not listen"):
            AdminHttpServer(build_app(CollectorRegistry(), lambda: (True, ""), None),
                            host, port).start()
    finally:
        server.stop()


def _service(values: dict[str, str], embedded: bool) -> Any:
    from samsa.admin.service import AdminService
    from samsa.config import BrokerConfig

    broker = types.SimpleNamespace(config=BrokerConfig(values),
                                   node=types.SimpleNamespace(embedded=embedded))
    return AdminService(broker)  # type: ignore[arg-type]


def test_default_address_embedded_on_cluster_off_empty_off() -> None:
    assert _service({}, embedded=True)._address() == ("127.0.0.1", 9644, False)
    assert _service({}, embedded=False)._address() is None
    assert _service({"admin.http.listeners": ""}, embedded=True)._address() is None
    assert _service({"admin.http.listeners": "http://0.0.0.0:0"},
                    embedded=False)._address() == ("0.0.0.0", 0, True)
