"""The admin HTTP listener (metrics, health, console) against hostile HTTP: a form post announcing
a body far larger than any form (to /login, or to a console page) is answered 413 at once instead
of the broker's process buffering whatever the client sends; on a loopback listener, a request
whose Host is another site's name (DNS rebinding: to the browser that site's own origin, so the
Origin check passes) is refused, reads and forms alike."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import pytest

from samsa.testing import SamsaBroker

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def admin_url() -> Iterator[str]:
    with SamsaBroker() as b:
        assert b.admin_url
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(b.admin_url + "/health/ready", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        yield b.admin_url


def _post_head(url: str, path: str, declared: int, sent: bytes) -> bytes:
    """Send a POST's head announcing `declared` body bytes and only `sent` of them; return what
    the server answers (b"" if it answers nothing within the socket timeout)."""
    u = urlsplit(url)
    with socket.create_connection((u.hostname, u.port), timeout=15) as s:
        s.sendall(f"POST {path} HTTP/1.1\r\nHost: {u.netloc}\r\n"
                  f"Content-Type: application/x-www-form-urlencoded\r\n"
                  f"Content-Length: {declared}\r\n\r\n".encode() + sent)
        try:
            return s.recv(4096)
        except TimeoutError:
            return b""


@pytest.mark.parametrize("path", ["/login", "/topics"])
def test_oversized_form_is_refused_without_reading_it(admin_url: str, path: str) -> None:
    answer = _post_head(admin_url, path, 10 * 1024**3, b"username=a&password=b")
    # answered at once without reading the body: 413, or (a console without SASL has no
    # sign-in) the redirect home
    ok = (b"HTTP/1.1 413", b"HTTP/1.1 303") if path == "/login" else (b"HTTP/1.1 413",)
    assert answer.startswith(ok), answer[:200]
    assert b"Traceback" not in answer
    # the listener still serves
    assert httpx.get(admin_url + "/health/live", timeout=10).status_code == 200


def test_form_within_the_limit_still_works(admin_url: str) -> None:
    r = httpx.post(admin_url + "/topics", data={"name": "", "partitions": "1"}, timeout=30)
    assert r.status_code in (303, 400) and "Traceback" not in r.text


def test_dns_rebinding_host_is_refused(admin_url: str) -> None:
    port = urlsplit(admin_url).port
    evil = f"rebind.example:{port}"
    headers = {"Host": evil, "Origin": f"http://{evil}"}
    r = httpx.get(admin_url + "/topics", headers={"Host": evil}, timeout=30)
    assert r.status_code == 403 and "Traceback" not in r.text
    r = httpx.post(admin_url + "/topics", headers=headers, timeout=30,
                   data={"name": "rebound", "partitions": "1", "replication_factor": "1"})
    assert r.status_code == 403
    # nothing was created; the console still answers its own host names
    page = httpx.get(admin_url + "/topics", timeout=30)
    assert page.status_code == 200 and "rebound" not in page.text
    for host in (f"localhost:{port}", f"127.0.0.1:{port}"):
        assert httpx.get(admin_url + "/topics", headers={"Host": host}, timeout=30).status_code == 200
    assert httpx.get(admin_url + "/health/live", timeout=10).status_code == 200


def test_sign_in_without_sasl_makes_no_session(admin_url: str) -> None:
    """Without SASL every visitor shares the console's clients: a posted sign-in creates no
    session (each held its own Kafka clients, up to 200, for anyone who posted)."""
    for i in range(3):
        r = httpx.post(admin_url + "/login", data={"username": f"u{i}", "password": "p",
                                                   "next": "/topics"}, timeout=30)
        assert r.status_code == 303 and r.headers["location"] == "/"
        assert "samsa_console" not in r.headers.get("set-cookie", "")


def test_oversized_sign_in_on_a_sasl_console() -> None:
    """A console that asks for a sign-in (SASL client settings) refuses an oversized sign-in
    form at once too (no cluster is needed to get that far)."""
    from samsa.console.context import ConsoleContext
    from tests.browser.consoleserver import ConsoleServer

    ctx = ConsoleContext("127.0.0.1:9", {"security.protocol": "SASL_PLAINTEXT",
                                         "sasl.mechanism": "PLAIN"})
    with ConsoleServer(ctx) as c:
        answer = _post_head(c.url, "/login", 10 * 1024**3, b"username=a&password=b")
        assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
